//! Per-step cost and bytes stored for 1,000 loop steps, plaintext and sealed, on the same
//! backend in the same run (interleaved rounds, medians), for BENCHMARKS.md:
//!
//!     cargo bench -p stategraph-crypt --bench sealed_steps
//!
//! The loop appends a 100-byte message per step (a chat's growth), `Durability::Sync`.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{Checkpointer, MemoryCheckpointer};
use stategraph::runtime::{Context, Durability, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
use stategraph_sled::SledCheckpointer;
use std::sync::Arc;
use std::time::Instant;

/// What a backend occupies for a thread.
type StoredBytes = Box<dyn Fn(&str) -> u64>;

const STEPS: usize = 1000;
const ROUNDS: usize = 5;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    #[state(append)]
    steps: Vec<String>,
}

async fn one(store: Arc<dyn Checkpointer>, thread: &str) -> f64 {
    let mut g = StateGraph::<Chat>::new();
    g.add_node("agent", |s: Arc<Chat>, _c: Context| async move {
        let text = format!("message {} {}", s.steps.len(), "lorem ipsum ".repeat(9));
        Ok::<_, NodeError>(ChatUpdate::default().steps(vec![text[..100].to_string()]))
    });
    g.add_edge(START, "agent");
    g.add_conditional_edges(
        "agent",
        |s: &Chat| if s.steps.len() < STEPS { "agent" } else { END },
        ["agent", END],
    );
    let graph = g.compile().unwrap().with_checkpointer(store);
    let config = RunConfig::new()
        .thread(thread)
        .durability(Durability::Sync)
        .recursion_limit(10 * STEPS as u64);
    let start = Instant::now();
    graph.invoke(ChatUpdate::default(), config).await.unwrap();
    start.elapsed().as_secs_f64() * 1e6 / STEPS as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn keys() -> Keyring {
    Keyring::new(vec![Key::new("k1", [9; 32]).unwrap()]).unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for backend in ["memory", "sled"] {
        let (mut plain_us, mut sealed_us) = (Vec::new(), Vec::new());
        let (mut plain_bytes, mut sealed_bytes) = (0, 0);
        for round in 0..ROUNDS {
            for sealed in [false, true] {
                let thread = format!("t{round}");
                let (inner, bytes): (Arc<dyn Checkpointer>, StoredBytes) = match backend {
                    "memory" => {
                        let m = Arc::new(MemoryCheckpointer::new());
                        let m2 = m.clone();
                        (m, Box::new(move |t| m2.stored_bytes(t)))
                    }
                    _ => {
                        let path = dir.path().join(format!("{backend}-{round}-{sealed}"));
                        let s = Arc::new(SledCheckpointer::open(path).unwrap());
                        let s2 = s.clone();
                        (s, Box::new(move |t| s2.stored_bytes(t).unwrap()))
                    }
                };
                let store: Arc<dyn Checkpointer> = if sealed {
                    Arc::new(EncryptedCheckpointer::new(inner, keys()))
                } else {
                    inner
                };
                let us = one(store, &thread).await;
                if sealed {
                    sealed_us.push(us);
                    sealed_bytes = bytes(&thread);
                } else {
                    plain_us.push(us);
                    plain_bytes = bytes(&thread);
                }
            }
        }
        rows.push((
            backend,
            median(plain_us),
            median(sealed_us),
            plain_bytes,
            sealed_bytes,
        ));
    }
    println!("| backend | per step, plaintext | per step, sealed | bytes / 1,000 steps, plaintext | sealed |");
    println!("|---|---|---|---|---|");
    for (b, pu, su, pb, sb) in rows {
        println!(
            "| {b} | {pu:.0} µs | {su:.0} µs ({:+.0}%) | {pb} | {sb} ({:.2}x) |",
            (su / pu - 1.0) * 100.0,
            sb as f64 / pb as f64
        );
    }
}
