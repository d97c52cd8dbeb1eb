//! A real, small filesystem for tests of a full disk: a size-limited tmpfs, mounted in a private
//! mount namespace (so nothing is left mounted, and nothing else on the machine sees it).
//!
//! A test calls [`with_small_fs`] first thing. Outside the namespace, that runs the same test
//! again inside one (`unshare --mount`, plus `--user --map-root-user` when not root) with the
//! tmpfs mounted, and passes or fails with it; inside, it runs the body. A machine where neither
//! works fails the test, saying why: a full-disk test that cannot get a full disk must not pass.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

const INSIDE: &str = "STATEGRAPH_SMALL_FS_DIR";

/// Runs `body` with a directory on a tmpfs of `size` (`"2m"`, `"512k"`). `test` is the test
/// function's name, to run it again inside the namespace.
pub fn with_small_fs(test: &str, size: &str, body: impl FnOnce(&Path)) {
    if let Ok(dir) = std::env::var(INSIDE) {
        return body(Path::new(&dir));
    }
    let mount_point = tempfile::tempdir().expect("a directory to mount on");
    let exe = std::env::current_exe().expect("the test binary");
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    let mut unshare = Command::new("unshare");
    if !root {
        unshare.args(["--user", "--map-root-user"]);
    }
    unshare
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o "size=$1" tmpfs "$2" || exit 97; shift 2; exec "$@""#)
        .arg("sh")
        .arg(size)
        .arg(mount_point.path())
        .arg(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, mount_point.path());
    let out = match unshare.output() {
        Ok(out) => out,
        Err(e) => panic!(
            "this test needs a real full disk and could not get one: cannot run `unshare` \
             (util-linux) to mount a small tmpfs: {e}"
        ),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(97) || !stdout.contains("running 1 test") {
        panic!(
            "this test needs a real full disk and could not get one: mounting a {size} tmpfs in \
             a private mount namespace failed (root, or unprivileged user namespaces, are \
             needed)\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
    }
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the test failed on the small filesystem\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// Fills the filesystem holding `dir` until at most `leave` bytes are free, with one file.
pub fn fill(dir: &Path, leave: u64) -> std::path::PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0xA5u8; 4096];
    while free_bytes(dir) > leave + chunk.len() as u64 {
        if file.write_all(&chunk).is_err() {
            break;
        }
    }
    file.sync_all().ok();
    filler
}

/// Bytes free on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> u64 {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs writes into the struct we own; the path is NUL-terminated.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut stat) };
    assert_eq!(rc, 0, "statvfs {}", dir.display());
    stat.f_bavail as u64 * stat.f_frsize as u64
}
