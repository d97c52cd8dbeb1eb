//! The usage ledger counts every model request: the real `graph` binary runs the research graph
//! against a stand-in OpenAI-compatible server on 127.0.0.1 that counts the requests it answers,
//! and the ledger's total calls (in `graph state --json` and in the run's usage summary) must
//! equal that count: for a plain run, a run whose structured replies are retried after failing
//! validation, a run whose escalation split fails on every attempt, and a run that fails
//! because its plan never fits, then is resumed: the failed attempts are counted once, by the
//! resumed run's ledger, and the failed run says what they used. When the thread moves past a
//! failed step without it succeeding (an edit, a rerun of it), `graph state` (`failed_usage`,
//! the `off-ledger` line) and the run's summary (rows marked `(failed)`) count the failed
//! attempts beside the ledger, once per branch: a rerun of a step that finished on another
//! branch does not count them again. A fork into a new thread shows what its shared history
//! paid, as its source does, and counts it once. (Inside subgraphs: app/cli_usage_subgraphs.rs.)
//! No network, no key.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;
#[path = "../../../tests/support/task_plans.rs"]
mod task_plans;

use fake_openai::{kinds, Call, FakeOpenAi};
use harness::{Db, Output};
use research::{done, three_todos, Research, T1};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The ledger's total calls as `graph state --json` shows the thread's state.
fn ledger_calls(r: &Research, thread: &str) -> u64 {
    let state = r.graph(&["state", thread, "--json"]).expect(0).json();
    let nodes = state["values"]["usage"]["nodes"]
        .as_object()
        .unwrap_or_else(|| panic!("no usage ledger in the state: {state:#}"));
    nodes.values().map(|n| n["calls"].as_u64().unwrap()).sum()
}

/// The total calls of the usage summary a run prints (`total   N calls ...`).
fn summary_calls(out: &Output) -> u64 {
    out.usage_total("model usage of this thread:")
}

/// The total calls of the usage summary a failed run prints (its saved steps' ledger).
fn failed_summary_calls(out: &Output) -> u64 {
    out.usage_total("model usage of this thread's saved steps")
}

/// Runs the research graph to its end and checks that both readouts of the ledger count what
/// the server answered; returns the thread and the count.
fn run_and_compare(r: &Research) -> (String, u64) {
    let out = r.run(&["--yes"]).expect(0);
    let thread = out.thread();
    let answered = r.server.calls().len() as u64;
    assert_eq!(
        ledger_calls(r, &thread),
        answered,
        "the ledger in the state counts every request the server answered: {:?}",
        kinds(&r.server.calls())
    );
    assert_eq!(
        summary_calls(&out),
        answered,
        "the run's usage summary counts every request: {out}"
    );
    (thread, answered)
}

/// The first `n` requests of `kind` get `reply`, later ones the script's.
fn first_n(kind: &'static str, n: usize, reply: Value) -> impl Fn(&Call) -> Option<String> {
    let seen = AtomicUsize::new(0);
    move |call: &Call| {
        (call.kind == kind && seen.fetch_add(1, Ordering::SeqCst) < n).then(|| reply.to_string())
    }
}

#[test]
fn a_plain_run_records_one_call_per_request() {
    let r = Research::new();
    let (_, answered) = run_and_compare(&r);
    // Plan, then per todo a summary and a review, then the answer.
    assert_eq!(answered, 8, "{:?}", kinds(&r.server.calls()));
}

#[test]
fn structured_replies_that_fail_validation_are_counted_with_their_retries() {
    let bad_plan = first_n("Plan", 1, json!({"todos": []}));
    // A review naming a todo that is not the one reviewed fails the schema's enum.
    let bad_review = first_n(
        "PlanUpdate",
        2,
        json!({"completed_task_id": "t9", "task_outcome": "?", "status": "done", "new_tasks": []}),
    );
    let server = FakeOpenAi::start_overriding(
        three_todos(),
        |_| done(),
        move |call| bad_plan(call).or_else(|| bad_review(call)),
    );
    let r = Research::with_server(server);
    let (thread, answered) = run_and_compare(&r);
    let s = &r.server;
    assert_eq!(s.count("Plan", ""), 2, "the empty plan was asked again");
    assert_eq!(
        s.keys("PlanUpdate").len(),
        5,
        "two reviews were asked again"
    );
    assert_eq!(answered, 11);
    assert_eq!(r.todo(&thread, "t3")["status"], "done");
}

#[test]
fn an_escalation_whose_split_fails_counts_every_split_request() {
    // t1 fails at every review, so it is escalated; each split gives one sub-task, which is
    // not a split: all attempts fail and t1 is zoomed out (blocked) instead.
    let one_part = json!({"sub_tasks": [{"task": "all of it again", "kind": "research"}]});
    let server = FakeOpenAi::start_overriding(
        three_todos(),
        |id| {
            if id == "t1" {
                json!({"task_outcome": "the sources do not answer it", "status": "failed", "new_tasks": []})
            } else {
                done()
            }
        },
        first_n("Split", usize::MAX, one_part),
    );
    let r = Research::with_server(server);
    let (thread, _) = run_and_compare(&r);
    let s = &r.server;
    assert_eq!(
        s.count("Split", T1),
        3,
        "the split was asked for, then corrected twice"
    );
    let t1 = r.todo(&thread, "t1");
    assert_eq!(t1["status"], "blocked", "{t1}");
    assert!(
        t1["failure_reason"]
            .as_str()
            .unwrap()
            .contains("splitting failed"),
        "{t1}"
    );
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(
        state["values"]["usage"]["nodes"]["escalate"]["calls"], 3,
        "the failed split's requests are the escalate node's: {state:#}"
    );
}

#[test]
fn a_stuck_tool_todo_counts_its_rounds_and_every_escalation_request() {
    // The `agent` graph: one tool todo whose command never passes; after two rounds it is
    // escalated, and the first escalation reply is not JSON, so it is asked for again.
    let plan = json!({"todos": [{"id": "t1", "task": "make exit 1 pass", "kind": "tool", "dependencies": []}]});
    let escalations = AtomicUsize::new(0);
    let server = FakeOpenAi::answering(move |call| match call.kind.as_str() {
        "Plan" => plan.to_string(),
        "Escalation" if escalations.fetch_add(1, Ordering::SeqCst) == 0 => {
            "let me think about it".to_string()
        }
        "Escalation" => {
            json!({"action": "give_up", "reason": "nothing works", "subtasks": []}).to_string()
        }
        _ => fake_openai::tool_calls(&[("run_command", json!({"command": "exit 1"}))]),
    });
    let r = Research::with_server(server);
    let ws = tempfile::tempdir().unwrap();
    let workspace = format!("workspace={}", ws.path().display());
    let out = r
        .graph(&[
            "run",
            "agent",
            "--input",
            "the impossible",
            "--set",
            &workspace,
            "--set",
            "limits.max_rounds=2",
        ])
        .expect(1);
    assert!(out.stderr.contains("gave up on the goal"), "{out}");
    let thread = out.thread();
    let calls = r.server.calls();
    assert_eq!(
        calls.iter().filter(|c| c.kind == "Escalation").count(),
        2,
        "{:?}",
        kinds(&calls)
    );
    // The run failed at `give_up`, after the escalation's step was saved with its ledger; the
    // failed run shows that ledger too.
    assert_eq!(
        ledger_calls(&r, &thread),
        calls.len() as u64,
        "{:?}",
        kinds(&calls)
    );
    assert_eq!(
        failed_summary_calls(&out),
        calls.len() as u64,
        "a failed run says what its saved steps used: {out}"
    );
}

#[test]
fn a_run_that_fails_says_what_it_spent_and_its_resume_counts_it_once() {
    // The plan is empty (so unusable) until the test says otherwise: the first run asks three
    // times (two corrections), then fails.
    let refuse = Arc::new(AtomicBool::new(true));
    let refusing = refuse.clone();
    let server = FakeOpenAi::start_overriding(
        three_todos(),
        |_| done(),
        move |call| {
            (call.kind == "Plan" && refusing.load(Ordering::SeqCst))
                .then(|| json!({"todos": []}).to_string())
        },
    );
    let r = Research::with_server(server);
    let priced = [
        "--yes",
        "--set",
        "pricing.input_per_million=1000",
        "--set",
        "pricing.output_per_million=1000",
    ];
    let out = r.run(&priced).expect(1);
    let thread = out.thread();
    assert_eq!(
        r.server.count("Plan", ""),
        3,
        "{:?}",
        kinds(&r.server.calls())
    );
    let spent = "this task's failed attempts have used 3 model requests so far";
    assert!(
        out.stderr.contains(spent),
        "the failure names what it spent: {out}"
    );
    assert!(
        out.stderr.contains(" out (USD 0."),
        "and what it cost: {out}"
    );

    assert_eq!(
        failed_summary_calls(&out),
        3,
        "the failed run's summary counts the failed attempts: {out}"
    );
    assert!(
        out.stderr.contains("generate_plan (failed)"),
        "and says they failed: {out}"
    );

    // Where the thread stands: the failed task says what it spent; no ledger holds it yet.
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    let errors = state["errors"]
        .as_array()
        .expect("the failed task is listed");
    assert!(
        errors
            .iter()
            .any(|e| e["message"].as_str().unwrap_or("").contains(spent)),
        "{state:#}"
    );
    assert_eq!(
        state["values"]["usage"]["nodes"]["generate_plan"],
        Value::Null,
        "{state:#}"
    );
    assert_eq!(
        state["failed_usage"]["requests"], 3,
        "graph state --json counts what the failed task paid for: {state:#}"
    );

    // A second failed run adds its requests to the first's.
    let out = r.graph(&["resume", &thread]).expect(1);
    assert!(
        out.stderr.contains("have used 6 model requests so far"),
        "the failed attempts add up over runs: {out}"
    );

    // Fixed: the resumed run's ledger holds every request, the failed ones included, once.
    refuse.store(false, Ordering::SeqCst);
    let out = r.graph(&["resume", &thread]).expect(0);
    let answered = r.server.calls().len() as u64;
    assert_eq!(answered, 6 + 8, "{:?}", kinds(&r.server.calls()));
    assert_eq!(
        ledger_calls(&r, &thread),
        answered,
        "the ledger counts the failed runs' requests: {:?}",
        kinds(&r.server.calls())
    );
    assert_eq!(summary_calls(&out), answered, "{out}");
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(
        state["failed_usage"],
        Value::Null,
        "all of it is in the ledger: {state:#}"
    );
    assert_eq!(
        state["values"]["usage"]["nodes"]["generate_plan"]["calls"], 7,
        "six failed requests and the one that fitted: {state:#}"
    );
}

#[test]
fn a_decomposition_that_fails_is_counted_when_the_resumed_run_decomposes() {
    // `graph decompose`: the task-tree agent's decomposition is not JSON until the test says
    // otherwise, so the first run fails after three requests; the task file is edited, and the
    // resume decomposes the task into two simple children and pauses for review.
    let refuse = Arc::new(AtomicBool::new(true));
    let refusing = refuse.clone();
    let server = FakeOpenAi::answering(move |call| match call.kind.as_str() {
        "TaskPlan" if refusing.load(Ordering::SeqCst) => "let me think about it".to_string(),
        "TaskPlan" => task_plans::task_plan(
            &call.key,
            &[("fetch", "simple", &[]), ("parse", "simple", &["fetch.md"])],
        )
        .to_string(),
        other => panic!("unexpected request {other}"),
    });
    let db = Db::new();
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("web_scraper.md");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tasks/web_scraper.md");
    std::fs::copy(example, &task).unwrap();
    let task = task.display().to_string();
    let graph = |args: &[&str]| db.graph(args).with_model_at(&server.base_url());

    let out = graph(&["decompose", &task]).expect(1);
    assert_eq!(server.calls().len(), 3, "{:?}", kinds(&server.calls()));
    assert!(
        out.stderr
            .contains("this task's failed attempts have used 3 model requests so far"),
        "{out}"
    );
    let thread = out.thread();
    // The person edits the task file before resuming: the decomposition is asked about the
    // edited file (a new journal key), and still holds what the failed attempts paid for.
    let mut text = std::fs::read_to_string(&task).unwrap();
    text.push_str("\nKeep the scraper polite: one request per second.\n");
    std::fs::write(&task, text).unwrap();
    refuse.store(false, Ordering::SeqCst);
    graph(&["resume", &thread]).expect(3);
    let state = graph(&["state", &thread, "--json"]).expect(0).json();
    let calls: u64 = state["values"]["usage"]["nodes"]
        .as_object()
        .unwrap_or_else(|| panic!("no usage ledger: {state:#}"))
        .values()
        .map(|n| n["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(
        calls,
        server.calls().len() as u64,
        "the three failed requests and the one that fitted: {:?}",
        kinds(&server.calls())
    );
}

/// What `graph state --json` says the thread's branch paid for that no step's ledger holds
/// (`failed_usage`: failed attempts, results an edit or a rerun set aside), in requests.
fn off_ledger_calls(r: &Research, thread: &str) -> u64 {
    let state = r.graph(&["state", thread, "--json"]).expect(0).json();
    state["failed_usage"]["requests"].as_u64().unwrap_or(0)
}

/// A research run whose plan is unusable (empty) until `refuse` is cleared: the first run asks
/// three times (two corrections), then fails.
fn refusing_plans() -> (Research, Arc<AtomicBool>) {
    let refuse = Arc::new(AtomicBool::new(true));
    let refusing = refuse.clone();
    let server = FakeOpenAi::start_overriding(
        three_todos(),
        |_| done(),
        move |call| {
            (call.kind == "Plan" && refusing.load(Ordering::SeqCst))
                .then(|| json!({"todos": []}).to_string())
        },
    );
    (Research::with_server(server), refuse)
}

/// Checks that the thread's readouts (the ledger plus what it shows beside it, in `graph state`
/// and in the run's summary) count `paid` requests.
fn assert_counted(r: &Research, thread: &str, out: &Output, paid: u64, why: &str) {
    let calls = r.server.calls();
    assert_eq!(
        ledger_calls(r, thread) + off_ledger_calls(r, thread),
        paid,
        "graph state: {why}: {:?}",
        kinds(&calls)
    );
    assert_eq!(summary_calls(out), paid, "the run's summary: {why}: {out}");
}

#[test]
fn failed_spend_is_counted_when_an_edit_moves_the_thread_past_it() {
    let (r, refuse) = refusing_plans();
    let thread = r.run(&["--yes"]).expect(1).thread();
    assert_eq!(r.server.count("Plan", ""), 3);
    // The person edits the thread instead of resuming the failed step: the plan is asked for
    // again at the edit's checkpoint, where the failed attempts' journal is not read.
    r.graph(&[
        "update",
        &thread,
        "--set-json",
        r#"{"log": ["asking for the plan again"]}"#,
    ])
    .expect(0);
    let state = r.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(
        state["failed_usage"]["requests"], 3,
        "the edited thread still shows what the failed attempts paid for: {state:#}"
    );
    let text = r.graph(&["state", &thread]).expect(0);
    assert!(
        text.stdout.contains("off-ledger  3 model requests"),
        "{text}"
    );
    refuse.store(false, Ordering::SeqCst);
    let out = r.graph(&["resume", &thread]).expect(0);
    let paid = r.server.calls().len() as u64;
    assert_eq!(paid, 3 + 8, "{:?}", kinds(&r.server.calls()));
    assert_counted(
        &r,
        &thread,
        &out,
        paid,
        "the failed plan requests are counted once",
    );
    assert!(
        out.stderr.contains("generate_plan (failed)"),
        "the summary says which requests failed: {out}"
    );
}

#[test]
fn failed_spend_is_counted_when_the_failed_step_is_rerun_on_a_branch() {
    let (r, refuse) = refusing_plans();
    let thread = r.run(&["--yes"]).expect(1).thread();
    refuse.store(false, Ordering::SeqCst);
    // A rerun starts a branch at a fork checkpoint: its tasks do not read the failed
    // attempts' journal, so before, their requests were in no readout.
    let out = r
        .graph(&["rerun", &thread, "--from", "generate_plan"])
        .expect(0);
    let paid = r.server.calls().len() as u64;
    assert_eq!(paid, 3 + 8, "{:?}", kinds(&r.server.calls()));
    assert_counted(
        &r,
        &thread,
        &out,
        paid,
        "the failed plan requests are counted once",
    );
    // `--json` says it as `graph state --json` does: the ledger in the state, the rest beside
    // it. The second rerun starts at the first one's fork, on a branch through the failed plan.
    let rerun = r
        .graph(&["rerun", &thread, "--from", "generate_plan", "--json"])
        .expect(0)
        .json();
    let ledger: u64 = rerun["state"]["usage"]["nodes"]
        .as_object()
        .unwrap_or_else(|| panic!("no ledger: {rerun:#}"))
        .values()
        .map(|n| n["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(
        (ledger, rerun["failed_usage"]["requests"].as_u64()),
        (8, Some(3)),
        "{rerun:#}"
    );
}

#[test]
fn a_rerun_of_a_checkpoint_whose_step_finished_does_not_count_its_failed_spend_again() {
    let (r, refuse) = refusing_plans();
    let thread = r.run(&["--yes"]).expect(1).thread();
    refuse.store(false, Ordering::SeqCst);
    let out = r.graph(&["resume", &thread]).expect(0);
    let first = r.server.calls().len() as u64;
    assert_eq!(first, 3 + 8);
    assert_counted(
        &r,
        &thread,
        &out,
        first,
        "the resumed plan holds its failed attempts",
    );
    // Run again from the plan: a new branch from the checkpoint where the plan failed. That
    // checkpoint's step finished on the first branch, whose ledger holds the failed attempts:
    // the new branch pays for its own requests only.
    let out = r
        .graph(&["rerun", &thread, "--from", "generate_plan"])
        .expect(0);
    let again = r.server.calls().len() as u64 - first;
    assert_eq!(again, 8, "{:?}", kinds(&r.server.calls()));
    assert_counted(
        &r,
        &thread,
        &out,
        again,
        "the new branch counts its own requests",
    );
}

#[test]
fn failed_spend_is_counted_when_a_plan_edit_moves_the_thread_past_it() {
    // t1's review never names t1 (the schema's enum refuses it), so the review fails after
    // three requests; the person marks t1 done in the plan (an edit) and resumes.
    let bad_review = first_n(
        "PlanUpdate",
        3,
        json!({"completed_task_id": "t9", "task_outcome": "?", "status": "done", "new_tasks": []}),
    );
    let server = FakeOpenAi::start_overriding(three_todos(), |_| done(), bad_review);
    let r = Research::with_server(server);
    let thread = r.run(&["--yes"]).expect(1).thread();
    assert_eq!(
        r.server.keys("PlanUpdate").len(),
        3,
        "{:?}",
        kinds(&r.server.calls())
    );
    r.graph(&["plan", &thread, "status", "t1", "done"])
        .expect(0);
    let out = r.graph(&["resume", &thread]).expect(0);
    let paid = r.server.calls().len() as u64;
    assert_counted(
        &r,
        &thread,
        &out,
        paid,
        "the failed review requests are counted once",
    );
    assert!(
        out.stderr.contains("reflect (failed)"),
        "the summary says which requests failed: {out}"
    );
}

#[test]
fn a_fork_shows_what_its_shared_history_paid_and_counts_it_once() {
    let (r, refuse) = refusing_plans();
    let thread = r.run(&["--yes"]).expect(1).thread();
    let failed_at = r.graph(&["state", &thread, "--json"]).expect(0).json()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The source moves past the failed plan with an edit, then finishes: its readout is the
    // ledger (8) and the failed attempts beside it (3).
    r.graph(&[
        "update",
        &thread,
        "--set-json",
        r#"{"log": ["asking for the plan again"]}"#,
    ])
    .expect(0);
    refuse.store(false, Ordering::SeqCst);
    r.graph(&["resume", &thread]).expect(0);
    assert_eq!(r.server.calls().len(), 3 + 8);
    let source = (ledger_calls(&r, &thread), off_ledger_calls(&r, &thread));
    assert_eq!(source, (8, 3));

    // A fork of its newest checkpoint shares all of its history: the same readout.
    let head = r.graph(&["state", &thread, "--json"]).expect(0).json()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    r.graph(&["fork", &thread, "--checkpoint", &head, "--to", "copy"])
        .expect(0);
    assert_eq!(
        (ledger_calls(&r, "copy"), off_ledger_calls(&r, "copy")),
        source,
        "the fork shows what its history paid, as its source does"
    );

    // A fork where the plan failed shares the failed attempts; its own run asks for the plan
    // again and counts its own requests, the shared ones once, beside its ledger.
    r.graph(&["fork", &thread, "--checkpoint", &failed_at, "--to", "retry"])
        .expect(0);
    assert_eq!(off_ledger_calls(&r, "retry"), 3);
    let out = r.graph(&["resume", "retry"]).expect(0);
    assert_eq!(r.server.calls().len(), 3 + 8 + 8);
    assert_eq!(
        (ledger_calls(&r, "retry"), off_ledger_calls(&r, "retry")),
        (8, 3),
        "the fork's own requests in its ledger, the shared failed ones beside it, once"
    );
    assert_eq!(summary_calls(&out), 8 + 3, "{out}");
    assert_eq!(
        (ledger_calls(&r, &thread), off_ledger_calls(&r, &thread)),
        source,
        "the source's readout is unchanged"
    );
}
