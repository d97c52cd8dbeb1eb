//! The shell examples run as a user runs them (`bash examples/NAME.sh`), with the `graph` this
//! build made, and leave nothing behind.

use std::path::Path;
use std::process::Command;

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn pause_kill_resume_removes_its_temporary_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pause_kill_resume.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .env("GRAPH_BIN", env!("CARGO_BIN_EXE_graph"))
        .env("TMPDIR", tmp.path());
    for var in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "GRAPH_PROVIDER",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("approved; exit code: 0"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The owner sockets' folder (`stategraph-<uid>`) is the user's, shared by every process:
    // it stays, empty.
    let uid = unsafe { libc::getuid() };
    let sockets = format!("stategraph-{uid}");
    let left: Vec<String> = leftovers(tmp.path())
        .into_iter()
        .filter(|n| *n != sockets)
        .collect();
    assert_eq!(left, Vec::<String>::new(), "{stdout}");
    if tmp.path().join(&sockets).exists() {
        assert_eq!(leftovers(&tmp.path().join(&sockets)), Vec::<String>::new());
    }
}
