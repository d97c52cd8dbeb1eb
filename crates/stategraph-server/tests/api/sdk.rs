//! LangGraph's own Python client (`langgraph-sdk` from PyPI) drives the server unchanged:
//! `tests/sdk_compat.py` creates threads, streams a run in two modes, answers a pause with
//! `Command(resume=...)`, resumes with `Command(update=..., goto=...)`, reads the history,
//! searches threads, and puts, gets, searches and deletes long-term store items.
//!
//! The client lives in a virtualenv that `.ci/run` makes (`target/pyvenv`, or the folder
//! `STATEGRAPH_PYVENV` names). Without it the test is skipped with a message saying how to
//! make it, except in CI (`CI` set), where a missing venv is a failure.

use super::support::TestServer;
use std::path::PathBuf;
use std::time::Duration;

fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("STATEGRAPH_PYVENV") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyvenv"),
    };
    venv.join("bin").join("python")
}

#[tokio::test]
async fn langgraph_sdk_drives_the_server() {
    let python = venv_python();
    if !python.exists() {
        let how = "make it with: python3 -m venv target/pyvenv && target/pyvenv/bin/pip install langgraph-sdk (as .ci/run does)";
        if std::env::var_os("CI").is_some() {
            panic!("no langgraph-sdk venv at {}: {how}", python.display());
        }
        eprintln!(
            "SKIPPED langgraph_sdk_drives_the_server: no venv at {}; {how}",
            python.display()
        );
        return;
    }
    let s = TestServer::start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk_compat.py");
    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&s.url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("the SDK script did not finish in 120 s")
        .expect("the venv's python did not start");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "sdk_compat.py failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(stdout.contains("sdk compatibility: ok"), "{stdout}");
}
