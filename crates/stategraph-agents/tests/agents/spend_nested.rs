//! `prebuilt::spend::off_ledger` two subgraph levels down, through the public API: a
//! grandchild's task that paid for model requests and failed keeps them in its own namespace's
//! journal; the root thread's readout finds them, names them with the whole path
//! (`outer > inner > ask (failed)`, as errors name the node), with what the grandchild's saved
//! step paid (`(pending)`, then `(set aside)`), and still counts them, once, after an edit of
//! the root moved past the failed step and the step ran again.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_llm::{LlmError, Usage, UsageLedger};
use stategraph_spend::{failed_call, off_ledger};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Ask {
    question: String,
    answer: Option<String>,
    #[state(with = stategraph_agents::research::merge_usage)]
    usage: UsageLedger,
}

/// A model call that was answered twice and never fitted its schema.
fn unfit() -> LlmError {
    LlmError::Structured {
        name: "Answer".into(),
        attempts: 2,
        error: "not an answer".into(),
        last_reply: "{}".into(),
        usage: Usage {
            input_tokens: 40,
            output_tokens: 20,
            requests: 2,
        },
    }
}

/// A step's update that records one paid request of `node`.
fn paid(node: &str) -> AskUpdate {
    let mut ledger = UsageLedger::default();
    ledger.record(node, Usage::new(10, 5), None);
    AskUpdate::default().usage(ledger)
}

/// `note` (one paid request), then `ask`, which fails (after two paid requests) while
/// `failing` is set, else answers.
fn grandchild(failing: Arc<AtomicBool>) -> CompiledGraph<Ask> {
    let mut g = StateGraph::<Ask>::named("ask");
    g.add_node("note", |_s: Arc<Ask>, _c: Context| async move {
        Ok::<_, NodeError>(paid("note"))
    });
    g.add_node("ask", move |_s: Arc<Ask>, ctx: Context| {
        let failing = failing.clone();
        async move {
            if failing.load(Ordering::SeqCst) {
                return Err(failed_call(&ctx, "answer", unfit(), None, |e| {
                    NodeError::new(e.to_string())
                })
                .await);
            }
            Ok(AskUpdate::default().answer(Some("42".into())))
        }
    });
    g.add_edge(START, "note")
        .add_edge("note", "ask")
        .add_edge("ask", END);
    g.compile().unwrap()
}

/// `prepare` (one paid request), then `outer` (a graph whose node `inner` is the
/// grandchild's graph). All three share the state type: each child starts with its parent's
/// ledger.
fn root(failing: Arc<AtomicBool>) -> CompiledGraph<Ask> {
    let mut child = StateGraph::<Ask>::named("inner");
    child.add_node("inner", grandchild(failing));
    child.add_edge(START, "inner").add_edge("inner", END);
    let mut g = StateGraph::<Ask>::named("outer");
    g.add_node("prepare", |_s: Arc<Ask>, _c: Context| async move {
        Ok::<_, NodeError>(paid("prepare"))
    });
    g.add_node("outer", child.compile().unwrap());
    g.add_edge(START, "prepare")
        .add_edge("prepare", "outer")
        .add_edge("outer", END);
    g.compile().unwrap()
}

/// An off-ledger readout's rows, as (name, calls).
fn rows_of(off: &UsageLedger) -> Vec<(&str, u64)> {
    (off.nodes.iter())
        .map(|(name, n)| (name.as_str(), n.calls))
        .collect()
}

#[tokio::test]
async fn a_grandchilds_failed_requests_are_named_with_their_path_and_counted_once() {
    let store = Arc::new(MemoryCheckpointer::new());
    let failing = Arc::new(AtomicBool::new(true));
    let graph = root(failing.clone()).with_checkpointer(store.clone());
    let config = RunConfig::new().thread("t");
    let input = AskUpdate::default().question("why?".to_string());
    assert!(graph.invoke(input, config.clone()).await.is_err());

    // The failed attempts, and the grandchild's saved step: in no ledger of the root while
    // its parent tasks have not finished. `prepare`'s request, which the children started
    // with, is the root's own.
    let off = off_ledger(store.as_ref(), "t", None, None).await.unwrap();
    let rows = rows_of(&off);
    assert_eq!(
        rows,
        [
            ("outer > inner > ask (failed)", 2),
            ("outer > inner > note (pending)", 1)
        ],
        "{off}"
    );

    // The person edits the root instead of resuming: `outer` runs again at the edit's
    // checkpoint, in new namespaces, and succeeds there.
    graph
        .update_state(
            "t",
            AskUpdate::default().question("why not?".to_string()),
            None,
        )
        .await
        .unwrap();
    failing.store(false, Ordering::SeqCst);
    let done = graph
        .resume("t", stategraph::runtime::Resume::Continue, config)
        .await
        .unwrap();
    assert_eq!(done.state.answer.as_deref(), Some("42"));
    assert_eq!(
        done.state.usage.total().calls,
        2,
        "prepare's and the new note's: {}",
        done.state.usage
    );
    let off = off_ledger(store.as_ref(), "t", None, None).await.unwrap();
    let rows = rows_of(&off);
    assert_eq!(
        rows,
        [
            ("outer > inner > ask (failed)", 2),
            ("outer > inner > note (set aside)", 1)
        ],
        "the first children's requests, once each, beside the ledger: {off}"
    );
}
