//! Storage under encryption still grows with what changed, and pruning and deleting still free
//! the pieces of large snapshots: the kit's scenarios (`snapshots_stay_linear_on_long_threads`,
//! `pruning_and_deleting_free_the_pieces_of_large_snapshots`) with the bounds a sealed record
//! can keep (about 4/3 of its plaintext plus ~90 bytes; see tests/conformance.rs).

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Context, Durability, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    #[state(append)]
    steps: Vec<String>,
}

fn chat(len: usize, store: Arc<EncryptedCheckpointer>) -> stategraph::graph::CompiledGraph<Chat> {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("agent", |_s: Arc<Chat>, _c: Context| async {
        Ok::<_, NodeError>(ChatUpdate::default().steps(vec!["x".repeat(100)]))
    });
    g.add_edge(START, "agent");
    g.add_conditional_edges(
        "agent",
        move |s: &Chat| if s.steps.len() < len { "agent" } else { END },
        ["agent", END],
    );
    g.compile().unwrap().with_checkpointer(store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_sealed_thread_stays_linear_and_pruning_frees_its_pieces() {
    const STEPS: usize = 4000;
    let inner = Arc::new(MemoryCheckpointer::new());
    let keys = Keyring::new(vec![Key::new("k1", [5; 32]).unwrap()]).unwrap();
    let store = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys));
    let graph = chat(STEPS, store);
    let config = RunConfig::new().thread("big").durability(Durability::Async);
    let out = graph.invoke(ChatUpdate::default(), config).await.unwrap();
    let state = serde_json::to_vec(&out.state).unwrap().len();
    let stored = inner.stored_bytes("big") as usize;
    // Quadratic would be ~200 copies of a growing 400 KB state; sealed deltas cost ~7x.
    assert!(
        stored <= 9 * state,
        "{stored} bytes stored for a {state}-byte state"
    );

    assert_eq!(graph.prune("big", 1).await.unwrap(), STEPS);
    let after = inner.stored_bytes("big") as usize;
    // One snapshot left, sealed by pieces: 4/3 of the state and a little.
    assert!(
        after < state * 14 / 10,
        "{after} bytes left for one {state}-byte snapshot"
    );
    assert_eq!(
        graph.get_state("big", None).await.unwrap().values,
        out.state
    );
    graph.delete_thread("big").await.unwrap();
    assert_eq!(inner.stored_bytes("big"), 0);
}
