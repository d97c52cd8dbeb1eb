//! Links the `graph` binary and this package's examples with packed relative relocations
//! (`-z pack-relative-relocs`, DT_RELR) where the linker and the C library support them.
//!
//! Why: a position-independent binary carries one 24-byte relocation per pointer in its
//! read-only data (vtables, string tables), and the loader reads them all at start-up, so they
//! stay resident in every process, a long-running `graph serve` included. Packed, a run of
//! neighbouring pointers takes one word. Binutils 2.38 and glibc 2.36 brought them;
//! an older linker ignores the option with a warning and an older glibc refuses to run such a
//! binary, so a small program is linked with it and run first (on the build machine, for a
//! native build only), and the option is used only when that works. The probe links as the
//! build does: with the linker cargo was told to use (`target.<triple>.linker`, else `CC`, else
//! `cc`) and the link arguments given in `RUSTFLAGS` (`-C link-arg=-fuse-ld=mold`, say).

use std::path::Path;
use std::process::Command;

const OPTION: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let Some(out) = std::env::var_os("OUT_DIR") else {
        return;
    };
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if links_and_runs(Path::new(&out)) {
        println!("cargo:rustc-link-arg-bins={OPTION}");
        println!("cargo:rustc-link-arg-examples={OPTION}");
    }
}

/// Whether a program linked with [`OPTION`] (warnings refused) links and runs here.
fn links_and_runs(out: &Path) -> bool {
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    // A pointer in initialised data, so the program has a relative relocation to pack.
    let code =
        "static const char *greeting = \"hi\";\nint main(void) { return greeting[0] != 'h'; }\n";
    if std::fs::write(&source, code).is_err() {
        return false;
    }
    let linker = std::env::var("RUSTC_LINKER")
        .or_else(|_| std::env::var("CC"))
        .unwrap_or_else(|_| "cc".to_string());
    let linked = Command::new(linker)
        .args(link_args_of_rustflags())
        .args(["-fPIE", "-pie", OPTION, "-Wl,--fatal-warnings", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}

/// The linker arguments the build's `RUSTFLAGS` give (`-C link-arg=X`, `-C link-args=X Y`).
fn link_args_of_rustflags() -> Vec<String> {
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let mut flags = flags.split('\u{1f}').filter(|f| !f.is_empty());
    let mut args = Vec::new();
    while let Some(flag) = flags.next() {
        let codegen = match flag.strip_prefix("-C") {
            Some("") => flags.next().unwrap_or_default(),
            Some(inline) => inline,
            None => continue,
        };
        if let Some(arg) = codegen.strip_prefix("link-arg=") {
            args.push(arg.to_string());
        } else if let Some(list) = codegen.strip_prefix("link-args=") {
            args.extend(list.split_whitespace().map(str::to_string));
        }
    }
    args
}
