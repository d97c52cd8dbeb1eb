//! Failed spend inside subgraphs: a child's task that paid for model requests and failed keeps
//! them in the child namespace's journal, not in its root thread's. The readouts (`graph state`
//! `failed_usage` and its `off-ledger` line, the run's summary rows `PARENT > NODE (failed)`,
//! run `--json`) walk the child namespaces too, so when the thread moves past the failed step
//! (an edit of the parent or of the child, a rerun) the requests are still counted, once per
//! branch, and when the failed step later succeeds they are counted once, by the ledger. What
//! a failed child's saved steps paid is shown too (`PARENT > NODE (pending)`, `(set aside)`)
//! until its parent task finishes, and a fork (of the parent, or from inside the child) shows
//! what its shared history paid, once.
//!
//! The built-in graphs have no subgraphs, so the commands run in a child process that is this
//! test binary again (the hidden `nested_child` test) running the `graph` app with a `nested`
//! graph registered, as a user's own binary would: the research agent as the child of a parent
//! that keeps its own usage ledger. The model is a stand-in OpenAI-compatible server on
//! 127.0.0.1 that counts the requests it answers; each test compares that count with the
//! readouts. No network, no key.

use crate::fake_openai;
use crate::harness;
use crate::own_binary;
use crate::research;

use fake_openai::{kinds, FakeOpenAi};
use harness::{Db, Output, TestCommand};
use research::{done, three_todos, QUESTION};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Subgraph};
use stategraph::{State, StateGraph, END, START};
use stategraph_agents::research::{merge_usage, PlanState, PlanStateUpdate, Research};
use stategraph_llm::UsageLedger;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, SettingsSchema};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Where `nested_child` finds its command line (arguments joined by U+001F).
const CHILD_ENV: &str = "STATEGRAPH_CLI_USAGE_SUBGRAPHS_ARGS";

/// The parent: a question, its answer, and a ledger that the child's ledger is added to.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Nested {
    question: String,
    answer: Option<String>,
    #[state(with = merge_usage)]
    usage: UsageLedger,
}

/// `nested`: `prepare`, then `research`, which runs the research agent as a subgraph (its own state
/// type; the child's ledger becomes the parent's update).
struct NestedFactory;

impl GraphFactory for NestedFactory {
    type State = Nested;

    fn name(&self) -> &str {
        "nested"
    }

    fn description(&self) -> &str {
        "the research agent as a subgraph"
    }

    fn graph_file(&self) -> Option<&'static str> {
        static FILE: OnceLock<String> = OnceLock::new();
        let research = Research::from_env().graph_file()?;
        Some(FILE.get_or_init(|| research.replace(r#"graph = "research""#, r#"graph = "nested""#)))
    }

    fn input_field(&self) -> Option<&str> {
        Some("question")
    }

    fn output_field(&self) -> Option<&str> {
        Some("answer")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Research::from_env().settings_schema()
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        Research::from_env().preflight(file)
    }

    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<Nested>, BuildError> {
        let child = Research::from_env().build(file)?;
        let node = Subgraph::new(
            child,
            |n: &Nested, _| Ok(PlanStateUpdate::default().question(n.question.clone())),
            |_n: &Nested, r: PlanState| NestedUpdate::default().answer(r.answer).usage(r.usage),
        );
        let mut g = StateGraph::<Nested>::named("nested");
        // A step before the child's, so an edit of the thread (its last writer's) is followed
        // by the child's step again.
        g.add_node("prepare", |_s: Arc<Nested>, _c: Context| async move {
            Ok::<_, NodeError>(NestedUpdate::default())
        });
        g.add_node("research", node);
        g.add_edge(START, "prepare")
            .add_edge("prepare", "research")
            .add_edge("research", END);
        Ok(g.compile()?)
    }
}

#[test]
#[ignore = "a child process of the cli_usage_subgraphs tests, started by them"]
fn nested_child() {
    own_binary::run_if_child(CHILD_ENV, || {
        stategraph_cli::App::new().register(NestedFactory)
    });
}

/// A store, a corpus and a stand-in model server whose plan is unusable (empty) until the test
/// clears `refuse`: a run asks three times (two corrections), then fails inside the child.
struct Setup {
    db: Db,
    docs: tempfile::TempDir,
    server: FakeOpenAi,
    refuse: Arc<AtomicBool>,
}

impl Setup {
    fn new() -> Self {
        Self::refusing("Plan", json!({"todos": []}))
    }

    /// Requests of `kind` get the unusable `reply` until the test clears `refuse`.
    fn refusing(kind: &'static str, reply: Value) -> Self {
        let refuse = Arc::new(AtomicBool::new(true));
        let refusing = refuse.clone();
        let server = FakeOpenAi::start_overriding(
            three_todos(),
            |_| done(),
            move |call| {
                (call.kind == kind && refusing.load(Ordering::SeqCst)).then(|| reply.to_string())
            },
        );
        Setup {
            db: Db::new(),
            docs: research::corpus(),
            server,
            refuse,
        }
    }

    /// `graph --db DB ARGS` with `nested` registered, pointed at the stand-in server.
    fn graph(&self, args: &[&str]) -> TestCommand {
        let exe = std::env::current_exe().expect("the test binary's path");
        let child = own_binary::child_test_args("cli_usage_subgraphs::nested_child");
        let mut spec = vec!["--db".to_string(), self.db.path().display().to_string()];
        spec.extend(args.iter().map(|a| a.to_string()));
        TestCommand::program(&exe, &child, &format!("graph {}", args.join(" ")))
            .env(CHILD_ENV, own_binary::command_line(&spec))
            .env("GRAPH_OUT", self.db.out())
            .with_model_at(&self.server.base_url())
    }

    /// `graph run nested --input QUESTION --yes --set search.corpus=DIR`: fails while plans
    /// are refused.
    fn run(&self) -> TestCommand {
        let corpus = format!("search.corpus={}", self.docs.path().display());
        self.graph(&[
            "run", "nested", "--input", QUESTION, "--yes", "--set", &corpus,
        ])
    }

    fn paid(&self) -> u64 {
        self.server.calls().len() as u64
    }

    fn kinds(&self) -> Vec<String> {
        kinds(&self.server.calls())
    }

    fn state(&self, thread: &str) -> Value {
        json_of(&self.graph(&["state", thread, "--json"]).expect(0))
    }

    /// The namespace of the child that failed in `thread`, as `graph state` lists it.
    fn failed_child(&self, thread: &str) -> String {
        let state = self.state(thread);
        state["subgraphs"][0]["thread"]
            .as_str()
            .unwrap_or_else(|| panic!("the failed child is listed: {state:#}"))
            .to_string()
    }

    /// The ledger's total calls in the thread's state.
    fn ledger_calls(&self, thread: &str) -> u64 {
        let state = self.state(thread);
        let nodes = state["values"]["usage"]["nodes"]
            .as_object()
            .unwrap_or_else(|| panic!("no usage ledger in the state: {state:#}"));
        nodes.values().map(|n| n["calls"].as_u64().unwrap()).sum()
    }

    /// `graph update THREAD --set-json {"question": ...}`: a person's edit of that thread (or
    /// namespace) in place of resuming its failed step.
    fn set_question(&self, thread: &str) {
        self.graph(&[
            "update",
            thread,
            "--set-json",
            &json!({"question": QUESTION}).to_string(),
        ])
        .expect(0);
    }

    /// What `graph state --json` counts beside the ledger (`failed_usage`), in requests.
    fn off_ledger_calls(&self, thread: &str) -> u64 {
        self.state(thread)["failed_usage"]["requests"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Checks that the thread's readouts (the ledger plus what `graph state` shows beside it,
    /// and the run's summary) count every request the server answered.
    fn assert_counted(&self, thread: &str, out: &Output, why: &str) {
        let paid = self.paid();
        assert_eq!(
            self.ledger_calls(thread) + self.off_ledger_calls(thread),
            paid,
            "graph state: {why}: {:?}",
            self.kinds()
        );
        assert_eq!(summary_calls(out), paid, "the run's summary: {why}: {out}");
    }
}

/// The JSON document the command printed (after the test harness's own lines).
fn json_of(out: &Output) -> Value {
    let printed = own_binary::after_mark(&out.stdout);
    serde_json::from_str(printed).unwrap_or_else(|e| panic!("not one JSON document ({e})\n{out}"))
}

fn summary_calls(out: &Output) -> u64 {
    out.usage_total("model usage of this thread:")
}

/// The row the child's failed plan requests are shown under: named with its path.
const CHILD_ROW: &str = "research > generate_plan (failed)";

#[test]
fn a_failed_run_inside_a_child_says_what_the_child_paid() {
    let s = Setup::new();
    let out = s.run().expect(1);
    let thread = out.thread();
    assert_eq!(s.paid(), 3, "{:?}", s.kinds());
    assert!(
        out.stderr
            .contains("this task's failed attempts have used 3 model requests so far"),
        "the child's error says what it spent: {out}"
    );
    assert_eq!(
        out.usage_total("model usage of this thread's saved steps"),
        3,
        "the failed run's summary counts the child's failed attempts: {out}"
    );
    assert!(out.stderr.contains(CHILD_ROW), "named with its path: {out}");
    let state = s.state(&thread);
    assert_eq!(
        state["failed_usage"]["requests"], 3,
        "graph state --json counts what the child's failed task paid for: {state:#}"
    );
    let text = s.graph(&["state", &thread]).expect(0);
    assert!(
        text.stdout.contains("off-ledger  3 model requests"),
        "{text}"
    );
}

#[test]
fn failed_spend_inside_a_child_is_counted_when_an_edit_moves_the_thread_past_it() {
    let s = Setup::new();
    let thread = s.run().expect(1).thread();
    // The person edits the parent instead of resuming the failed step: its task runs again
    // from the edit's checkpoint, in a new child namespace.
    s.set_question(&thread);
    assert_eq!(
        s.off_ledger_calls(&thread),
        3,
        "the edited thread still shows what the child's failed attempts paid for"
    );
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", &thread]).expect(0);
    assert_eq!(s.paid(), 3 + 8, "{:?}", s.kinds());
    s.assert_counted(&thread, &out, "the child's failed plan requests, once");
    assert!(out.stderr.contains(CHILD_ROW), "{out}");
}

#[test]
fn failed_spend_inside_a_child_is_counted_when_the_parent_step_is_rerun() {
    let s = Setup::new();
    let thread = s.run().expect(1).thread();
    s.refuse.store(false, Ordering::SeqCst);
    let out = s
        .graph(&["rerun", &thread, "--from", "research", "--json"])
        .expect(0);
    assert_eq!(s.paid(), 3 + 8, "{:?}", s.kinds());
    let rerun = json_of(&out);
    assert_eq!(
        rerun["failed_usage"]["requests"], 3,
        "run --json counts the child's failed attempts beside the ledger: {rerun:#}"
    );
    assert_eq!(
        s.ledger_calls(&thread) + s.off_ledger_calls(&thread),
        s.paid(),
        "{:?}",
        s.kinds()
    );
}

#[test]
fn a_child_that_fails_then_succeeds_on_resume_is_counted_once_by_the_ledger() {
    // No moving past: the resumed parent task resumes inside the same child namespace, whose
    // plan step adds its failed attempts to its ledger; nothing is shown beside it.
    let s = Setup::new();
    let thread = s.run().expect(1).thread();
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", &thread]).expect(0);
    assert_eq!(s.paid(), 3 + 8, "{:?}", s.kinds());
    s.assert_counted(&thread, &out, "the resumed child holds its failed attempts");
    assert_eq!(s.off_ledger_calls(&thread), 0);
    assert!(!out.stderr.contains("(failed)"), "{out}");
}

#[test]
fn a_fork_from_inside_the_failed_child_shares_what_it_paid_once() {
    let s = Setup::new();
    let thread = s.run().expect(1).thread();
    let child = s.failed_child(&thread);
    let failed_at = s.state(&child)["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Namespaced time travel: a new thread, the parent as it was, the child where it failed.
    s.graph(&["fork", &child, "--checkpoint", &failed_at, "--to", "retry"])
        .expect(0);
    assert_eq!(
        s.off_ledger_calls("retry"),
        3,
        "the fork shows what the child's failed attempts paid, as its source does"
    );
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", "retry"]).expect(0);
    assert_eq!(s.paid(), 3 + 8, "{:?}", s.kinds());
    s.assert_counted(
        "retry",
        &out,
        "the shared failed requests once, beside the ledger",
    );
    assert_eq!(s.ledger_calls("retry"), 8);
    assert!(out.stderr.contains(CHILD_ROW), "{out}");
}

#[test]
fn what_a_failed_childs_saved_steps_paid_is_counted_until_its_parent_step_finishes() {
    // The child plans and reads t1 (two requests, saved in the child's steps), then t1's
    // review never fits (three requests): the parent's task fails, so neither reaches its
    // ledger. The person edits the parent and the step runs again in a new child.
    let s = Setup::refusing(
        "PlanUpdate",
        json!({"completed_task_id": "t9", "task_outcome": "?", "status": "done", "new_tasks": []}),
    );
    let out = s.run().expect(1);
    let thread = out.thread();
    assert_eq!(s.paid(), 2 + 3, "{:?}", s.kinds());
    assert_eq!(
        out.usage_total("model usage of this thread's saved steps"),
        5,
        "the failed run counts what the child's saved steps paid: {out}"
    );
    assert!(out.stderr.contains("research > reflect (failed)"), "{out}");
    assert!(
        out.stderr.contains("research > generate_plan (pending)"),
        "{out}"
    );
    assert_eq!(s.off_ledger_calls(&thread), 5);
    s.set_question(&thread);
    assert_eq!(s.off_ledger_calls(&thread), 5, "set aside by the edit");
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", &thread]).expect(0);
    assert_eq!(s.paid(), 5 + 8, "{:?}", s.kinds());
    s.assert_counted(
        &thread,
        &out,
        "the first child's requests once, beside the ledger",
    );
    assert!(
        out.stderr.contains("research > generate_plan (set aside)"),
        "{out}"
    );
}

#[test]
fn a_fork_where_the_child_failed_counts_its_saved_and_failed_requests_once() {
    // As above, the child plans and reads t1 (2 requests), then t1's review never fits (3).
    let s = Setup::refusing(
        "PlanUpdate",
        json!({"completed_task_id": "t9", "task_outcome": "?", "status": "done", "new_tasks": []}),
    );
    let thread = s.run().expect(1).thread();
    let head = s.state(&thread)["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The fork copies the open child: its saved steps are the fork's (pending, then in its
    // ledger once the child finishes there); the failed review's requests are shared history.
    s.graph(&["fork", &thread, "--checkpoint", &head, "--to", "retry"])
        .expect(0);
    assert_eq!(s.off_ledger_calls("retry"), 5, "as its source shows it");
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", "retry"]).expect(0);
    assert_eq!(
        s.paid(),
        5 + 6,
        "the fork resumed inside the child: t1's review, t2 and t3, the answer: {:?}",
        s.kinds()
    );
    s.assert_counted(
        "retry",
        &out,
        "the child's saved and failed requests once each",
    );
    assert_eq!(
        s.off_ledger_calls("retry"),
        3,
        "the failed review's, beside the ledger"
    );
}

#[test]
fn failed_spend_is_counted_when_an_edit_inside_the_child_moves_it_past() {
    let s = Setup::new();
    let thread = s.run().expect(1).thread();
    let child = s.failed_child(&thread);
    // The person edits the child's state instead: the child's plan step runs again at the
    // edit's checkpoint (in the same namespace), where the failed attempts' journal is not read.
    s.set_question(&child);
    s.refuse.store(false, Ordering::SeqCst);
    let out = s.graph(&["resume", &thread]).expect(0);
    assert_eq!(s.paid(), 3 + 8, "{:?}", s.kinds());
    s.assert_counted(&thread, &out, "the child's failed plan requests, once");
    assert_eq!(s.off_ledger_calls(&thread), 3);
    assert!(out.stderr.contains(CHILD_ROW), "{out}");
}
