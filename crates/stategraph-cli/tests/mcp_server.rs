//! `graph mcp` driven by the official Python MCP client (`mcp` from PyPI), unchanged:
//! `tests/mcp_client.py` lists the tools, sends an input that does not fit (a tool error naming
//! the field), starts a pipeline run that pauses for review (its question, its thread, progress
//! notifications on the way), answers it, reads the result and lists the threads; over stdio
//! (the client starts `graph mcp` itself) and over streamable HTTP (`--addr`). The threads are
//! the CLI's: `graph threads` and `graph state` read them, `graph resume` answers a thread the
//! client left paused, and a thread `graph run` left paused is answered through MCP.
//!
//! The client lives in the virtualenv `.ci/run` makes (`target/pyvenv`, or the folder
//! `STATEGRAPH_PYVENV` names); without it these tests fail, saying to run `.ci/run`.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Project};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long the client script may take.
const PATIENCE: Duration = Duration::from_secs(120);

fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("STATEGRAPH_PYVENV") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyvenv"),
    };
    let python = venv.join("bin").join("python");
    assert!(
        python.exists(),
        "no Python venv with the `mcp` client at {}: run .ci/run, which makes it \
         (python3 -m venv target/pyvenv && target/pyvenv/bin/pip install mcp)",
        python.display()
    );
    python
}

/// A folder whose `graphs/pipeline.toml` makes each of the pipeline's steps take `step_ms`.
fn pipeline_taking(step_ms: u64) -> Project {
    let project = Project::new();
    project.graph_file("pipeline", |text| {
        text.replace("step_ms = 1500", &format!("step_ms = {step_ms}"))
    });
    project
}

fn quick_pipeline() -> Project {
    pipeline_taking(20)
}

/// Runs the client script with `args`; returns its stdout, failing the test with both of its
/// streams when it fails or hangs.
fn client(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let mut child = Command::new(venv_python())
        .arg(&script)
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GRAPH_DB")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the venv's python starts");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "mcp_client.py did not finish in {PATIENCE:?}\n--- stdout\n{}\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "mcp_client.py {args:?} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

/// The thread the script reports on its last line (`mcp client: ok THREAD`).
fn thread_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("mcp client: ok "))
        .unwrap_or_else(|| panic!("no `mcp client: ok` line: {stdout}"))
        .trim()
        .to_string()
}

#[test]
fn python_client_runs_pauses_and_answers_over_stdio() {
    let db = Db::new();
    let project = quick_pipeline();
    // A thread of the command line, paused for review, for the client to answer.
    let theirs = db
        .graph(&["run", "pipeline", "--input", "kv stores"])
        .current_dir(project.path())
        .without_model()
        .expect(3)
        .thread();
    let bin = env!("CARGO_BIN_EXE_graph");
    let db_path = db.path().to_str().expect("a UTF-8 temp path");
    let project_path = project.path().to_str().expect("a UTF-8 temp path");
    let out = client(&["stdio", bin, db_path, project_path, &theirs]);
    let ours = thread_of(&out);

    // The threads are the command line's: listed, read, and each one's origin kept.
    assert_eq!(db.row(&ours)["status"], "done");
    assert_eq!(db.row(&theirs)["status"], "done");
    let left = out
        .lines()
        .find_map(|l| l.strip_prefix("left paused: "))
        .unwrap_or_else(|| panic!("no `left paused` line: {out}"))
        .trim();
    assert_eq!(db.row(left)["status"], "paused");
    db.graph(&["resume", left, "--resume", "yes"])
        .current_dir(project.path())
        .without_model()
        .expect(0);
    assert_eq!(db.row(left)["status"], "done");
    let state = db.graph(&["state", &ours, "--json"]).expect(0).json();
    assert_eq!(state["values"]["topic"], "sled", "{state:#}");
    assert!(
        state["values"]["document"]
            .as_str()
            .is_some_and(|d| d.contains("sled")),
        "{state:#}"
    );
}

#[test]
fn python_client_runs_pauses_and_answers_over_streamable_http() {
    let db = Db::new();
    let project = quick_pipeline();
    let mut server = db
        .graph(&["mcp", "--addr", "127.0.0.1:0"])
        .current_dir(project.path())
        .without_model()
        .spawn();
    server.wait_for("/mcp\n");
    let said = server.stderr();
    let url = said
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && w.ends_with("/mcp"))
        .unwrap_or_else(|| panic!("no endpoint URL on stderr:\n{said}"))
        .to_string();
    let out = client(&["http", &url]);
    let ours = thread_of(&out);

    server.signal(libc::SIGTERM);
    let ended = server.finish();
    assert_eq!(ended.code, Some(0), "{ended}");
    assert_eq!(db.row(&ours)["status"], "done");
}

#[test]
fn a_call_given_up_stops_its_run_and_resume_goes_on_from_its_checkpoint() {
    let db = Db::new();
    let project = pipeline_taking(600);
    let bin = env!("CARGO_BIN_EXE_graph");
    let db_path = db.path().to_str().expect("a UTF-8 temp path");
    let project_path = project.path().to_str().expect("a UTF-8 temp path");
    let out = client(&["cancel", bin, db_path, project_path]);
    assert_eq!(db.row(&thread_of(&out))["status"], "done");
}

#[test]
fn beyond_loopback_is_refused() {
    let db = Db::new();
    let out = db.graph(&["mcp", "--addr", "0.0.0.0:0"]).expect(2);
    out.stderr_has(&["refusing to serve MCP on 0.0.0.0", "127.0.0.1"]);
}
