//! `graph run agent` through the real binary against a local stand-in model server that speaks
//! tool calls: an end-to-end run with verification; a kill -9 while one of two parallel tool
//! calls has finished and the other has not (the finished command is not run again, the
//! finished model call is not paid again); the approval pause answered with no, an edited
//! command, and yes; escalation shown by `graph plan`; give up ends with exit 1.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::{tool_calls, Call, FakeOpenAi};
use harness::{Db, TestCommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

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

fn calls(list: &[(&str, &str, Value)]) -> String {
    let named: Vec<(&str, Value)> = list
        .iter()
        .map(|(_, name, args)| (*name, args.clone()))
        .collect();
    tool_calls(&named)
}

fn text(content: &str) -> String {
    content.to_string()
}

/// A stand-in server: `act` answers the loop's requests (tool calls or a final text), the
/// rest get the structured replies of `structured`.
fn server(plan: Value, act: impl Fn(&Call) -> String + Send + Sync + 'static) -> FakeOpenAi {
    let rest = structured(plan);
    FakeOpenAi::answering(move |call| if is_act(call) { act(call) } else { rest(call) })
}

/// The structured replies every run needs: the plan, reviews (done) and the report.
fn structured(plan: Value) -> impl Fn(&Call) -> String + Send + Sync + 'static {
    move |call| {
        match call.kind.as_str() {
        "Plan" => plan.to_string(),
        "PlanUpdate" => json!({"completed_task_id": call.key, "task_outcome": "it works", "status": "done", "new_tasks": []}).to_string(),
        "Escalation" => json!({"action": "give_up", "reason": "nothing works", "subtasks": []}).to_string(),
        _ => "Report: the work is done.".to_string(),
    }
    }
}

struct Setup {
    db: Db,
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

impl Setup {
    fn new(server: FakeOpenAi) -> Self {
        Setup {
            db: Db::new(),
            dir: tempfile::tempdir().unwrap(),
            server,
        }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn graph(&self, args: &[&str]) -> TestCommand {
        self.db.graph(args).with_model_at(&self.server.base_url())
    }

    fn run(&self, goal: &str, extra: &[&str]) -> TestCommand {
        let ws = format!("workspace={}", self.ws().display());
        let mut args = vec!["run", "agent", "--input", goal, "--set", &ws];
        args.extend_from_slice(extra);
        self.graph(&args)
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn one_todo(task: &str) -> Value {
    json!({"todos": [{"id": "t1", "task": task, "kind": "tool", "dependencies": []}]})
}

#[test]
fn a_goal_is_planned_worked_with_tools_verified_and_reported() {
    let s = Setup::new(server(
        one_todo("write mathx/add.py with add(a, b)"),
        |call| match tool_results(call) {
            0 => calls(&[(
                "c1",
                "write_file",
                json!({"path": "mathx/add.py", "content": "def add(a, b):\n    return a + b\n"}),
            )]),
            1 => calls(&[(
                "c2",
                "run_command",
                json!({"command": "python3 -c 'import sys; sys.path.insert(0, \"mathx\"); import add; print(add.add(2, 3))'"}),
            )]),
            _ => text("Wrote mathx/add.py; it adds."),
        },
    ));
    let out = s
        .run(
            "Create mathx with an add function",
            &["--set", "limits.verify_command=test -f mathx/add.py"],
        )
        .expect(0);
    let thread = out.thread();
    assert!(s.ws().join("mathx/add.py").is_file());
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["status"], "done");
    assert_eq!(plan[0]["kind"], "tool");
    assert_eq!(plan[0]["tools_used"], json!(["write_file", "run_command"]));
    let state = s.graph(&["state", &thread, "--json"]).expect(0).json();
    let text = state.to_string();
    assert!(
        text.contains("exit code: 0\\n5\\n"),
        "the command's output is in the conversation"
    );
    assert!(
        text.contains("goal: `test -f mathx/add.py` passed"),
        "{text}"
    );
    // The thread is the graph the user ran, wherever it is shown.
    assert_eq!(state["graph"], "agent");
    assert_eq!(s.db.row(&thread)["graph"], "agent");
    let listed = s.graph(&["threads"]).expect(0);
    let row = listed.stdout.lines().find(|l| l.starts_with(&thread));
    let columns: Vec<&str> = row.unwrap_or_default().split_whitespace().collect();
    assert_eq!(columns.get(1), Some(&"agent"), "{listed}");
}

#[test]
fn a_kill_while_parallel_tool_calls_run_repeats_neither_the_finished_call_nor_the_model_call() {
    let s = Setup::new(server(
        one_todo("run the two commands"),
        |call| match tool_results(call) {
            0 => calls(&[
                (
                    "fast",
                    "run_command",
                    json!({"command": "echo ran >> fast.log"}),
                ),
                (
                    "slow",
                    "run_command",
                    json!({"command": "while [ ! -f go ]; do sleep 0.05; done; echo ran >> slow.log"}),
                ),
            ]),
            _ => text("both ran"),
        },
    ));
    // `-v` logs each tool call once its result is recorded, which is what the kill must follow.
    let mut running = s.run("run two commands", &["-v"]).spawn();
    let thread = running.thread();
    // The fast command finished and its result is on record; the slow one waits for `go`.
    running.wait_for("tool call finished and recorded");
    assert_eq!(lines(&s.ws().join("slow.log")), 0, "{}", running.stderr());
    running.signal(libc::SIGKILL);
    let _ = running.finish();
    std::fs::write(s.ws().join("go"), "").unwrap();
    s.graph(&["resume", &thread]).expect(0);
    assert_eq!(
        lines(&s.ws().join("fast.log")),
        1,
        "the finished command ran again"
    );
    assert!(lines(&s.ws().join("slow.log")) >= 1);
    let first_round = s
        .server
        .calls()
        .iter()
        .filter(|c| is_act(c) && tool_results(c) == 0)
        .count();
    assert_eq!(first_round, 1, "the finished model call was paid again");
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["status"], "done");
}

#[test]
fn approval_pauses_before_each_command_and_resumes_with_no_an_edit_or_yes() {
    let s = Setup::new(server(one_todo("make files"), |call| {
        match tool_results(call) {
            0 => calls(&[(
                "c1",
                "run_command",
                json!({"command": "rm -rf /tmp/not-this"}),
            )]),
            1 => calls(&[(
                "c2",
                "run_command",
                json!({"command": "echo one > one.txt"}),
            )]),
            2 => calls(&[(
                "c3",
                "run_command",
                json!({"command": "echo three > three.txt"}),
            )]),
            _ => text("done"),
        }
    }));
    let out = s
        .run("make files", &["--set", "approve_commands=true"])
        .expect(3);
    let thread = out.thread();
    out.stderr_has(&["rm -rf /tmp/not-this"]);
    s.graph(&["resume", &thread, "--resume", "no"])
        .expect(3)
        .stderr_has(&["echo one > one.txt"]);
    s.graph(&["resume", &thread, "--resume", "echo edited > two.txt"])
        .expect(3)
        .stderr_has(&["echo three > three.txt"]);
    s.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
    assert!(!s.ws().join("one.txt").exists());
    assert_eq!(
        std::fs::read_to_string(s.ws().join("two.txt")).unwrap(),
        "edited\n"
    );
    assert!(s.ws().join("three.txt").is_file());
    let refused = s
        .server
        .calls()
        .into_iter()
        .find(|c| is_act(c) && tool_results(c) == 1)
        .unwrap();
    let last = refused.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: the user refused"),
        "{last}"
    );
}

#[test]
fn a_path_escape_is_refused_and_the_model_is_told() {
    let s = Setup::new(server(one_todo("escape"), |call| {
        match tool_results(call) {
            0 => calls(&[
                (
                    "c1",
                    "write_file",
                    json!({"path": "../escaped.txt", "content": "x"}),
                ),
                ("c2", "read_file", json!({"path": "/etc/hostname"})),
            ]),
            _ => text("could not"),
        }
    }));
    s.run("escape", &[]).expect(0);
    assert!(!s.dir.path().join("escaped.txt").exists());
    let second = s
        .server
        .calls()
        .into_iter()
        .find(|c| is_act(c) && tool_results(c) == 2)
        .unwrap();
    let text = second.body["messages"].to_string();
    assert!(text.contains("outside the workspace"), "{text}");
    assert!(text.contains("absolute path"), "{text}");
}

#[test]
fn a_stuck_goal_escalates_shows_it_in_the_plan_and_gives_up_with_exit_1() {
    let s = Setup::new(server(one_todo("make exit 1 pass"), |_| {
        calls(&[("c", "run_command", json!({"command": "exit 1"}))])
    }));
    let out = s
        .run("the impossible", &["--set", "limits.max_rounds=2"])
        .output();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("gave up on the goal"), "{}", out.stderr);
    let thread = out.thread();
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["status"], "failed");
    assert!(plan[0]["failure_reason"]
        .as_str()
        .unwrap()
        .starts_with("escalated (give up): nothing works"));
    let md = s.graph(&["plan", &thread]).expect(0);
    assert!(md.stdout.contains("escalated (give up)"), "{}", md.stdout);
    let history = s.graph(&["history", &thread, "--json"]).expect(0).stdout;
    assert!(
        history.contains("escalate_tool"),
        "the escalation is a step of the history"
    );
    // Two rounds, then the escalation; never a third round.
    assert_eq!(s.server.calls().iter().filter(|c| is_act(c)).count(), 2);
}

#[test]
fn round_counts_are_state_a_kill_mid_loop_resumes_with_the_same_count() {
    let s = Setup::new(server(one_todo("loop forever"), |_| {
        calls(&[(
            "c",
            "run_command",
            json!({"command": "echo r >> rounds.log"}),
        )])
    }));
    // The second round's model call never answers: the run is killed while waiting for it.
    s.server.hold(|c| is_act(c) && tool_results(c) == 1);
    let mut running = s.run("loop", &["--set", "limits.max_rounds=3"]).spawn();
    let thread = running.thread();
    s.server.wait_for(|c| is_act(c) && tool_results(c) == 1);
    running.signal(libc::SIGKILL);
    let _ = running.finish();
    s.server.release();
    let out = s.graph(&["resume", &thread]).output();
    assert_eq!(
        out.code,
        Some(1),
        "it gives up at the limit: {}",
        out.stderr
    );
    // Rounds 1, 2, 3 ran their command once each; no fourth round was asked for.
    assert_eq!(lines(&s.ws().join("rounds.log")), 3);
    let asked = |n: usize| {
        s.server
            .calls()
            .iter()
            .filter(|c| is_act(c) && tool_results(c) == n)
            .count()
    };
    assert_eq!((asked(0), asked(1), asked(2), asked(3)), (1, 2, 1, 0));
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["rounds"], 3);
    assert!(plan[0]["failure_reason"]
        .as_str()
        .unwrap()
        .contains("round limit (3 model/tool rounds)"));
}

#[test]
fn the_research_agent_sends_tool_todos_to_the_loop_when_given_a_workspace() {
    let plan = json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []},
        {"id": "t2", "task": "Write notes.md with the finding and count its lines with wc -l", "kind": "tool", "dependencies": ["t1"]}
    ]});
    let s = Setup::new(server(plan, |call| match tool_results(call) {
        0 => calls(&[(
            "c1",
            "write_file",
            json!({"path": "notes.md", "content": "sled flushes its log\n"}),
        )]),
        1 => calls(&[("c2", "run_command", json!({"command": "wc -l < notes.md"}))]),
        _ => text("notes.md written; it has 1 line"),
    }));
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("sled.md"),
        "# Sled\n\nsled makes writes durable by flushing its log to disk with fsync.",
    )
    .unwrap();
    let corpus = format!("search.corpus={}", docs.path().display());
    let ws = format!("workspace={}", s.ws().display());
    let out = s
        .graph(&[
            "run",
            "research",
            "--input",
            "How does sled make writes durable?",
            "--yes",
            "--set",
            &corpus,
            "--set",
            &ws,
        ])
        .expect(0);
    let thread = out.thread();
    assert_eq!(
        std::fs::read_to_string(s.ws().join("notes.md")).unwrap(),
        "sled flushes its log\n"
    );
    let plan = s.graph(&["plan", &thread, "--json"]).expect(0).json()["plan"].clone();
    assert_eq!(plan[0]["tools_used"], json!(["corpus"]));
    assert_eq!(plan[1]["tools_used"], json!(["write_file", "run_command"]));
    assert_eq!(plan[1]["result"], "notes.md written; it has 1 line");
    assert_eq!(plan[1]["status"], "done");
    let loop_calls: Vec<Call> = s.server.calls().into_iter().filter(is_act).collect();
    assert_eq!(loop_calls.len(), 3);
    let names: Vec<&str> = loop_calls[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"search") && names.contains(&"fetch"),
        "{names:?}"
    );
}
