//! `prebuilt::spend::off_ledger_keeping`, through the public API on a sled store on disk: a
//! run that ends keeps what its thread's history left off-ledger, so the next readout
//! (`off_ledger`, what `graph state` shows) reads only the checkpoints written since instead of
//! the whole history, and says the same as a walk of the whole history would: after more
//! steps, after an edit, and for an older checkpoint, whose branch never passes the kept one.

use stategraph_checkpoint_conformance::faulty_store;

use faulty_store::FaultyStore;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::Checkpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_llm::{LlmError, Usage, UsageLedger};
use stategraph_sled::SledCheckpointer;
use stategraph_spend::{failed_call, off_ledger, off_ledger_keeping};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Steps of the long run.
const STEPS: u32 = 300;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Count {
    n: u32,
    #[state(with = stategraph_agents::research::merge_usage)]
    usage: UsageLedger,
}

/// A model call that was answered twice and never fitted its schema.
fn unfit() -> LlmError {
    LlmError::Structured {
        name: "Step".into(),
        attempts: 2,
        error: "not a step".into(),
        last_reply: "{}".into(),
        usage: Usage {
            input_tokens: 40,
            output_tokens: 20,
            requests: 2,
        },
    }
}

/// `work` pays one request per step and loops until `n` reaches `STEPS`; at `n == 3` it fails
/// (after two paid requests) while `failing` is set.
fn graph(failing: Arc<AtomicBool>) -> CompiledGraph<Count> {
    let mut g = StateGraph::<Count>::named("count");
    g.add_node("work", move |s: Arc<Count>, ctx: Context| {
        let failing = failing.clone();
        async move {
            if s.n == 3 && failing.load(Ordering::SeqCst) {
                return Err(failed_call(&ctx, "step", unfit(), None, |e| {
                    NodeError::new(e.to_string())
                })
                .await);
            }
            let mut ledger = UsageLedger::default();
            ledger.record("work", Usage::new(10, 5), None);
            Ok(CountUpdate::default().n(s.n + 1).usage(ledger))
        }
    });
    g.add_edge(START, "work");
    g.add_conditional_edges(
        "work",
        |s: &Count| if s.n < STEPS { "work" } else { END },
        ["work", END],
    );
    g.compile().unwrap()
}

fn failed_requests(off: &UsageLedger) -> Vec<(String, u64)> {
    (off.nodes.iter())
        .map(|(row, n)| (row.clone(), n.calls))
        .collect()
}

#[tokio::test]
async fn a_readout_after_a_run_reads_only_what_came_after_it_and_says_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let sled: Arc<dyn Checkpointer> = Arc::new(SledCheckpointer::open(dir.path()).unwrap());
    let store = Arc::new(FaultyStore::over(sled.clone()));
    let failing = Arc::new(AtomicBool::new(true));
    let graph = graph(failing.clone()).with_checkpointer(store.clone());
    let config = RunConfig::new().thread("t").recursion_limit(1000);
    assert!(graph
        .invoke(CountUpdate::default(), config.clone())
        .await
        .is_err());
    // An edit moves the thread past the failed step: its two requests are in no ledger.
    let edit = graph
        .update_state("t", CountUpdate::default().n(4), Some("work"))
        .await
        .unwrap();
    failing.store(false, Ordering::SeqCst);
    let done = graph
        .resume("t", Resume::Continue, config.clone())
        .await
        .unwrap();
    assert_eq!(done.state.n, STEPS);
    let expected = vec![("work (failed)".to_string(), 2)];

    // The whole history, walked (nothing is kept yet).
    let whole = off_ledger(store.as_ref(), "t", None, None).await.unwrap();
    assert_eq!(failed_requests(&whole), expected, "{whole}");
    let everything = store.listed();
    assert!(everything > STEPS as usize, "{everything}");

    // The run's end keeps it; a readout then reads a few checkpoints, not the history.
    let kept = off_ledger_keeping(store.as_ref(), "t", None).await.unwrap();
    assert_eq!(kept, whole);
    let before = store.listed();
    let again = off_ledger(store.as_ref(), "t", None, None).await.unwrap();
    assert_eq!(again, whole);
    let read = store.listed() - before;
    assert!(read < 20, "read {read} checkpoints of {everything}");

    // Two edits later, the same, still without the history.
    for n in [7, 9] {
        graph
            .update_state("t", CountUpdate::default().n(n), Some("work"))
            .await
            .unwrap();
    }
    let before = store.listed();
    let after_edits = off_ledger(store.as_ref(), "t", None, None).await.unwrap();
    assert_eq!(after_edits, whole);
    assert!(store.listed() - before < 20);

    // An older checkpoint's branch does not pass the kept one: walked whole, as before.
    let old = off_ledger(store.as_ref(), "t", Some(edit), None)
        .await
        .unwrap();
    assert_eq!(failed_requests(&old), expected, "{old}");
}
