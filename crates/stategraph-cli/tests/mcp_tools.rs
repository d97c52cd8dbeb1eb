//! `graph run agent` with MCP servers as tool sources, through the real binary, against a
//! stand-in OpenAI-compatible model on 127.0.0.1 that calls the servers' tools, and real MCP
//! servers from npm (`@modelcontextprotocol/server-filesystem` and `server-everything`,
//! installed by `.ci/run` under target/mcp-npm):
//! - a kill -9 after an MCP call finished, then a resume that does not make it again (the
//!   filesystem server's edit is applied once) nor pay for the model call again;
//! - results of every kind (text, an image as a note, structured content) and an
//!   `approve_tools` pause answered with no, then with edited arguments;
//! - a server that does not start, and a command that does not exist;
//! - a server killed between calls (restarted) and under a call (the model is told);
//! - a tool gone from its server at resume: the model is told which.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::{tool_calls, Call, FakeOpenAi};
use harness::{Db, Project, TestCommand};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An npm MCP server's launcher, or a failure naming what installs it.
fn npm_server(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("target/mcp-npm/node_modules/.bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash .ci/run` once (it installs the npm MCP servers these tests use)",
        path.display()
    );
    path.canonicalize().unwrap().display().to_string()
}

/// The tool results in a loop request so far (which round it is).
fn tool_results(call: &Call) -> usize {
    call.body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

fn is_act(call: &Call) -> bool {
    call.body["tools"].is_array() && call.body.get("response_format").is_none()
}

/// The tool messages of a request, in order.
fn tool_messages(call: &Call) -> Vec<String> {
    call.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The loop request of round `n` (after `n` tool results), the first one.
fn act_request(server: &FakeOpenAi, n: usize) -> Call {
    server
        .calls()
        .into_iter()
        .find(|c| is_act(c) && tool_results(c) == n)
        .unwrap_or_else(|| panic!("no loop request after {n} tool results"))
}

/// A stand-in model: `act` answers the loop's requests (tool calls or a final text); the
/// plan is one tool todo, reviews say done, the report is plain.
fn model(act: impl Fn(&Call) -> String + Send + Sync + 'static) -> FakeOpenAi {
    FakeOpenAi::answering(move |call| {
        if is_act(call) {
            return act(call);
        }
        match call.kind.as_str() {
            "Plan" => json!({"todos": [{"id": "t1", "task": "use the MCP tools", "kind": "tool", "dependencies": []}]}).to_string(),
            "PlanUpdate" => json!({"completed_task_id": call.key, "task_outcome": "it works", "status": "done", "new_tasks": []}).to_string(),
            "Escalation" => json!({"action": "give_up", "reason": "nothing works", "subtasks": []}).to_string(),
            _ => "Report: done.".to_string(),
        }
    })
}

fn calls(list: &[(&str, Value)]) -> String {
    tool_calls(list)
}

struct Setup {
    db: Db,
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

impl Setup {
    fn new(server: FakeOpenAi) -> Self {
        Setup::in_dir(tempfile::tempdir().unwrap(), server)
    }

    /// In `dir`, whose `ws` is the workspace.
    fn in_dir(dir: tempfile::TempDir, server: FakeOpenAi) -> Self {
        Setup {
            db: Db::new(),
            dir,
            server,
        }
    }

    /// The workspace, canonical (the filesystem server compares real paths).
    fn ws(&self) -> PathBuf {
        let ws = self.dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        ws.canonicalize().unwrap()
    }

    fn graph(&self, args: &[&str]) -> TestCommand {
        self.db.graph(args).with_model_at(&self.server.base_url())
    }

    /// `graph run agent` in the workspace with `extra` arguments.
    fn run(&self, extra: &[String]) -> TestCommand {
        let ws = format!("workspace={}", self.ws().display());
        let mut args = vec!["run", "agent", "--input", "use the MCP tools", "--set", &ws];
        args.extend(extra.iter().map(String::as_str));
        self.graph(&args)
    }
}

/// `--set` arguments naming server `name`: `command`, `args`, and a marker variable so the
/// test can find its processes.
fn server_args(name: &str, command: &str, args: &[&str], mark: &str) -> Vec<String> {
    let list: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    vec![
        "--set".into(),
        format!("mcp.servers.{name}.command={command}"),
        "--set".into(),
        format!("mcp.servers.{name}.args=[{}]", list.join(", ")),
        "--set".into(),
        format!("mcp.servers.{name}.env.STATEGRAPH_MCP_TEST={mark}"),
    ]
}

/// A unique marker for one test's server processes.
fn mark(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// The pids of live processes whose environment holds `STATEGRAPH_MCP_TEST=mark`.
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("STATEGRAPH_MCP_TEST={mark}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let alive = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if alive && environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// Kills the processes marked `mark` and waits until they are gone.
fn kill_marked(mark: &str) {
    let pids = marked(mark);
    assert!(!pids.is_empty(), "no server process marked {mark}");
    for pid in pids {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_gone(mark);
}

/// Waits until no process is marked `mark` (servers exit when their client does).
fn wait_gone(mark: &str) {
    let start = Instant::now();
    while !marked(mark).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "server processes marked {mark} outlived their client: {:?}",
            marked(mark)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A log line without its terminal colors.
fn without_colors(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn a_kill_after_an_mcp_call_finished_never_makes_the_call_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let notes = dir
        .path()
        .join("ws")
        .canonicalize()
        .unwrap()
        .join("notes.txt");
    std::fs::write(&notes, "one\n").unwrap();
    let path = notes.display().to_string();
    let s = Setup::in_dir(
        dir,
        model(move |call| match tool_results(call) {
            // An edit that a second run would apply again ("one two two").
            0 => calls(&[(
                "fs__edit_file",
                json!({"path": path, "edits": [{"oldText": "one", "newText": "one two"}]}),
            )]),
            1 => calls(&[("fs__read_text_file", json!({"path": path}))]),
            _ => "Edited notes.txt.".to_string(),
        }),
    );
    let mark = mark("kill");
    let ws = s.ws().display().to_string();
    let mut args = server_args("fs", &npm_server("mcp-server-filesystem"), &[&ws], &mark);
    // The model call after the edit waits: the run is killed with the edit on record.
    s.server.hold(|c| is_act(c) && tool_results(c) == 1);
    args.push("-v".into());
    let mut running = s.run(&args).spawn();
    let thread = running.thread();
    running.wait_for("tool call finished and recorded");
    running.signal(libc::SIGKILL);
    let killed = running.finish();
    s.server.release();
    // The server's stderr went to the log (with -v), never to the terminal as is.
    let said = killed
        .stderr
        .lines()
        .map(without_colors)
        .find(|l| l.contains("Secure MCP Filesystem Server"))
        .unwrap_or_else(|| panic!("the server's stderr is not in the log\n{killed}"));
    assert!(
        said.contains("INFO") && said.contains("server=fs"),
        "{said}"
    );
    wait_gone(&mark);

    let resumed = s.graph(&["resume", &thread]).expect(0);
    assert!(
        !resumed.stderr.contains("Secure MCP Filesystem Server"),
        "the server's stderr reached the terminal\n{resumed}"
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "one two\n",
        "the finished edit was made again"
    );
    let first_round = s
        .server
        .calls()
        .iter()
        .filter(|c| is_act(c) && tool_results(c) == 0)
        .count();
    assert_eq!(first_round, 1, "the finished model call was paid again");
    let after_read = act_request(&s.server, 2);
    let results = tool_messages(&after_read);
    assert!(results[1].contains("one two"), "{results:?}");
    // The model saw the tools by their wire names, with their schemas, beside the built-ins.
    let offered: Vec<&str> = after_read.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"fs__edit_file") && offered.contains(&"write_file"),
        "{offered:?}"
    );
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(
        plan[0]["tools_used"],
        json!(["fs.edit_file", "fs.read_text_file"])
    );
    wait_gone(&mark);
}

#[test]
fn results_of_every_kind_reach_the_model_and_approve_tools_pauses_before_a_call() {
    let s = Setup::new(model(|call| match tool_results(call) {
        0 => calls(&[
            ("ev__echo", json!({"message": "hello mcp"})),
            ("ev__get-tiny-image", json!({})),
            (
                "ev__get-structured-content",
                json!({"location": "New York"}),
            ),
        ]),
        3 | 4 => calls(&[("ev__get-sum", json!({"a": 2, "b": 3}))]),
        _ => "Added.".to_string(),
    }));
    let mark = mark("kinds");
    // The server and the approval come from the project's graph file this time.
    let project = Project::new();
    let everything = npm_server("mcp-server-everything");
    project.graph_file("agent", |built_in| {
        let with_approval = built_in.replacen(
            "[settings]\n",
            "[settings]\napprove_tools = [\"ev.get-sum\"]\n",
            1,
        );
        format!(
            "{with_approval}\n[settings.mcp.servers.ev]\ncommand = {everything:?}\nargs = [\"stdio\"]\n\
             env = {{ STATEGRAPH_MCP_TEST = {mark:?} }}\n"
        )
    });
    let paused = s.run(&[]).current_dir(project.path()).expect(3);
    paused.stderr_has(&["graphs/agent.toml"]);
    paused.stderr_has(&["ev.get-sum", r#""a":2"#]);
    let thread = paused.thread();
    let results = tool_messages(&act_request(&s.server, 3));
    assert!(results[0].contains("hello mcp"), "{results:?}");
    assert!(results[1].contains("[an image (image/png"), "{results:?}");
    assert!(results[2].contains("temperature"), "{results:?}");

    s.graph(&["resume", &thread, "--resume", "no"])
        .expect(3)
        .stderr_has(&["ev.get-sum"]);
    let refused = tool_messages(&act_request(&s.server, 4));
    assert!(
        refused[3].starts_with("Error: the user refused to run this ev.get-sum"),
        "{refused:?}"
    );
    s.graph(&["resume", &thread, "--resume", r#"{"a": 20, "b": 22}"#])
        .expect(0);
    let summed = tool_messages(&act_request(&s.server, 5));
    assert!(
        summed[4].contains("42"),
        "the edited arguments were used: {summed:?}"
    );
    wait_gone(&mark);
}

#[test]
fn a_server_that_cannot_start_ends_the_step_with_an_error_naming_it() {
    let s = Setup::new(model(|_| calls(&[("db__query", json!({}))])));
    let missing = server_args("gone", "/no/such/mcp-server", &[], "unused");
    let out = s.run(&missing).output();
    assert_ne!(out.code, Some(0), "{out}");
    out.stderr_has(&["MCP server `gone`", "/no/such/mcp-server"]);
    assert!(
        s.server.calls().is_empty(),
        "it asked the model before checking the server"
    );

    let dies = server_args(
        "db",
        "sh",
        &["-c", "echo no database here >&2; exit 3"],
        "unused",
    );
    let out = s.run(&dies).output();
    assert_ne!(out.code, Some(0), "{out}");
    out.stderr_has(&["MCP server `db` did not start", "no database here"]);
}

#[test]
fn a_server_killed_between_calls_is_restarted_and_one_killed_under_a_call_is_reported() {
    let mark = mark("crash");
    let killer = mark.clone();
    let s = Setup::new(model(move |call| match tool_results(call) {
        0 => calls(&[("ev__echo", json!({"message": "first"}))]),
        1 => {
            // Between two calls the server dies; the next call starts it again.
            kill_marked(&killer);
            std::thread::sleep(Duration::from_millis(300));
            calls(&[("ev__echo", json!({"message": "second"}))])
        }
        // Under this call the server dies (the test kills it once the call is sent).
        2 => calls(&[(
            "ev__trigger-long-running-operation",
            json!({"duration": 30, "steps": 2}),
        )]),
        _ => "The server crashed; I stop here.".to_string(),
    }));
    let mut args = server_args(
        "ev",
        &npm_server("mcp-server-everything"),
        &["stdio"],
        &mark,
    );
    args.push("-v".into());
    let mut running = s.run(&args).spawn();
    running.wait_for("calling MCP tool ev.trigger-long-running-operation");
    std::thread::sleep(Duration::from_millis(300));
    kill_marked(&mark);
    let out = running.finish();
    assert_eq!(out.code, Some(0), "{out}");
    out.stderr_has(&["restarting it"]);
    let results = tool_messages(&act_request(&s.server, 3));
    assert!(results[1].contains("second"), "{results:?}");
    assert!(
        results[2].starts_with(
            "Error: MCP server `ev` stopped while it ran `trigger-long-running-operation`"
        ),
        "{results:?}"
    );
    assert!(
        results[2].contains("may or may not have taken effect"),
        "{results:?}"
    );
    wait_gone(&mark);
}

#[test]
fn a_tool_gone_from_its_server_at_resume_is_an_error_naming_it() {
    let s = Setup::new(model(|call| match tool_results(call) {
        0 => calls(&[(
            "srv__trigger-long-running-operation",
            json!({"duration": 30, "steps": 2}),
        )]),
        _ => "It is gone.".to_string(),
    }));
    // One server name, two servers: the everything server until `switch` exists, then the
    // filesystem server, which has no such tool.
    let switch = s.dir.path().join("switch");
    let script = format!(
        "if [ -f {} ]; then exec {} {}; else exec {} stdio; fi",
        switch.display(),
        npm_server("mcp-server-filesystem"),
        s.ws().display(),
        npm_server("mcp-server-everything"),
    );
    let mark = mark("gone");
    let mut args = server_args("srv", "sh", &["-c", &script], &mark);
    args.push("-v".into());
    let mut running = s.run(&args).spawn();
    let thread = running.thread();
    // The long call is under way; the run dies with it unfinished.
    running.wait_for("calling MCP tool srv.trigger-long-running-operation");
    std::thread::sleep(Duration::from_millis(300));
    running.signal(libc::SIGKILL);
    let _ = running.finish();
    wait_gone(&mark);
    std::fs::write(&switch, "").unwrap();
    s.graph(&["resume", &thread]).expect(0);
    let results = tool_messages(&act_request(&s.server, 1));
    assert!(
        results[0].contains("no tool named `srv__trigger-long-running-operation`"),
        "{results:?}"
    );
    wait_gone(&mark);
}

#[test]
fn the_research_agents_tool_todos_use_mcp_servers_without_a_workspace() {
    let s = Setup::new(model(|call| match tool_results(call) {
        0 => calls(&[("ev__echo", json!({"message": "from research"}))]),
        _ => "Echoed.".to_string(),
    }));
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("a.md"), "# A\n\nnothing to see").unwrap();
    let corpus = format!("search.corpus={}", docs.path().display());
    let mark = mark("research");
    let mut args: Vec<String> = [
        "run", "research", "--input", "echo it", "--yes", "--set", &corpus,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(server_args(
        "ev",
        &npm_server("mcp-server-everything"),
        &["stdio"],
        &mark,
    ));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let thread = s.graph(&argv).expect(0).thread();
    let results = tool_messages(&act_request(&s.server, 1));
    assert!(results[0].contains("from research"), "{results:?}");
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["tools_used"], json!(["ev.echo"]));
    assert_eq!(plan[0]["result"], "Echoed.");
    wait_gone(&mark);
}
