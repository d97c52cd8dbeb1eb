//! Subgraphs through the command line: `graph state` nests each child's state under its task
//! (text and `--json`), `history` / `update` / `fork` take a child's namespace
//! (`THREAD/NODE:TASK`), and `graph draw --xray` draws the child inside its node.
//!
//! The built-in graphs have no subgraphs, so the commands run in a child process that is this
//! test binary again (`current_exe`, the hidden `cli_child` test) running the `graph` app with a
//! `batch` graph registered, as a user's own binary would.

use crate::own_binary;

use own_binary::Out;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Subgraph};
use stategraph::{Send, State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::path::Path;
use std::sync::Arc;

const CHILD_ENV: &str = "STATEGRAPH_CLI_SUBGRAPHS_ARGS";

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Batch {
    items: Vec<String>,
    #[state(append)]
    approved: Vec<String>,
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Review {
    item: String,
    draft: String,
    verdict: String,
}

fn review() -> CompiledGraph<Review> {
    let mut g = StateGraph::<Review>::named("review");
    g.add_node("draft", |s: Arc<Review>, _c: Context| async move {
        Ok::<_, NodeError>(ReviewUpdate::default().draft(format!("{} looks fine", s.item)))
    });
    g.add_node("ask", |s: Arc<Review>, ctx: Context| async move {
        let verdict: String = ctx.interrupt(json!({"approve": s.draft})).await?;
        Ok::<_, NodeError>(ReviewUpdate::default().verdict(verdict))
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "ask")
        .add_edge("ask", END);
    g.compile().unwrap()
}

struct BatchFactory;

impl GraphFactory for BatchFactory {
    type State = Batch;

    fn name(&self) -> &str {
        "batch"
    }

    fn description(&self) -> &str {
        "a child review per item"
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Batch>, BuildError> {
        let node = Subgraph::new(
            review(),
            |_b: &Batch, ctx: &Context| Ok(ReviewUpdate::default().item(ctx.arg::<String>()?)),
            |_b: &Batch, r: Review| {
                BatchUpdate::default().approved(vec![format!("{} ({})", r.draft, r.verdict)])
            },
        );
        let mut g = StateGraph::<Batch>::named("batch");
        g.add_node("review", node);
        g.add_conditional_edges(
            START,
            |b: &Batch| {
                b.items
                    .iter()
                    .map(|i| Send::new("review", i))
                    .collect::<Vec<_>>()
            },
            ["review"],
        );
        g.add_edge("review", END);
        Ok(g.compile()?)
    }
}

#[test]
#[ignore = "a child process of the cli_subgraphs tests, started by them"]
fn cli_child() {
    own_binary::run_if_child(CHILD_ENV, || {
        stategraph_cli::App::new().register(BatchFactory)
    });
}

/// `graph --db DB ARGS...` with `batch` registered.
fn graph(db: &Path, args: &[&str]) -> Out {
    own_binary::graph_at("cli_subgraphs::cli_child", CHILD_ENV, db, args)
}

fn expect(db: &Path, args: &[&str], code: i32) -> Out {
    let out = graph(db, args);
    assert_eq!(
        out.code, code,
        "graph {args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out
}

fn json_of(out: &Out) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", out.stdout, out.stderr))
}

#[test]
fn state_nests_children_and_a_childs_namespace_is_read_edited_and_forked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    expect(
        db,
        &[
            "run",
            "batch",
            "--thread",
            "t",
            "--input-json",
            r#"{"items": ["a", "b"]}"#,
        ],
        3,
    );

    let text = expect(db, &["state", "t"], 0).stdout;
    assert_eq!(text.matches("subgraph    t/review:").count(), 2, "{text}");
    assert!(text.contains("  next      ask"), "{text}");
    assert!(text.contains(r#""approve":"a looks fine""#), "{text}");
    assert!(text.contains(r#""draft":"b looks fine""#), "{text}");

    let doc = json_of(&expect(db, &["state", "t", "--json"], 0));
    let children = doc["subgraphs"].as_array().unwrap();
    assert_eq!(children.len(), 2, "{doc:#}");
    assert_eq!(children[1]["node"], "review");
    assert_eq!(children[1]["task"], 1);
    assert_eq!(children[1]["state"]["values"]["item"], "b");
    assert_eq!(children[1]["state"]["next"], json!(["ask"]));
    let child = children[0]["thread"].as_str().unwrap().to_string();

    // The child's history, and an edit of its state while it waits.
    let history = json_of(&expect(db, &["history", &child, "--json"], 0));
    let next: Vec<&Value> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["next"])
        .collect();
    assert_eq!(next, vec![&json!(["ask"]), &json!(["draft"])]);
    let at_ask = history[0]["checkpoint_id"].as_str().unwrap().to_string();
    expect(
        db,
        &["update", &child, "--set-json", r#"{"draft": "a, edited"}"#],
        0,
    );
    let edited = json_of(&expect(db, &["state", &child, "--json"], 0));
    assert_eq!(edited["values"]["draft"], "a, edited");
    let refused = expect(db, &["update", &child, "--set-json", r#"{"draft": 7}"#], 2);
    assert!(
        refused
            .stderr
            .contains("field `draft` expects a text, not the integer 7"),
        "{}",
        refused.stderr
    );
    let refused = expect(
        db,
        &["update", &child, "--set-json", r#"{"drafts": "x"}"#],
        2,
    );
    assert!(
        refused
            .stderr
            .contains("has no field `drafts`; did you mean `draft`?"),
        "{}",
        refused.stderr
    );

    // A fork from the child's checkpoint before the edit: the whole thread, that child back
    // at `ask` with its draft as it was.
    expect(
        db,
        &["fork", &child, "--checkpoint", &at_ask, "--to", "f"],
        0,
    );
    let forked = json_of(&expect(db, &["state", "f", "--json"], 0));
    let fork_children = forked["subgraphs"].as_array().unwrap();
    assert!(fork_children[0]["thread"]
        .as_str()
        .unwrap()
        .starts_with("f/review:"));
    assert_eq!(fork_children[0]["state"]["values"]["draft"], "a looks fine");

    // Both threads resume inside their children; the edit is only in `t`.
    let ids: Vec<String> = doc["interrupts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    let answers = json!({ids[0].clone(): "yes", ids[1].clone(): "no"}).to_string();
    expect(db, &["resume", "t", "--resume-json", &answers], 0);
    let done = json_of(&expect(db, &["state", "t", "--json"], 0));
    assert_eq!(
        done["values"]["approved"],
        json!(["a, edited (yes)", "b looks fine (no)"])
    );
    assert!(
        done.get("subgraphs").is_none(),
        "a finished thread has no children to show"
    );
}

#[test]
fn draw_xray_draws_the_child_inside_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let flat = expect(dir.path(), &["draw", "batch"], 0).stdout;
    assert!(flat.contains("review(\"review\")"), "{flat}");
    assert!(!flat.contains("subgraph"), "{flat}");
    let xray = expect(dir.path(), &["draw", "batch", "--xray"], 0).stdout;
    for line in [
        "subgraph review[\"review\"]",
        "review__draft(\"draft\")",
        "review__draft --> review__ask;",
        "__start__ -.->|\"route\"| review;",
    ] {
        assert!(xray.contains(line), "missing `{line}` in\n{xray}");
    }
    let dot = expect(
        dir.path(),
        &["draw", "batch", "--xray", "--format", "dot"],
        2,
    );
    assert!(dot.stderr.contains("--xray"), "{}", dot.stderr);
}
