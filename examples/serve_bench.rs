//! The two graphs of the server benchmark (`benches/server/`), served the way a user serves their
//! own graphs: a binary that registers them into the CLI's [`App`] and runs `graph serve`.
//!
//! - `chain10`: ten nodes n0..n9 in a line; state `{count}`, each node returns `count + 1`.
//! - `fanout`: `split`, ten parallel workers w0..w9 in one superstep, a `join` that waits for all
//!   ten; state `{results}` with an append reducer; wi appends i, join appends how many results
//!   it sees (10).
//!
//! The shapes are those of `../shared/bench/WORKLOADS.md` (chain cut to 10 nodes), and the same
//! graphs are defined for `langgraph dev` in `benches/server/peer/graphs.py`.
//!
//! ```text
//! cargo build --release -p stategraph-cli --example serve_bench
//! target/release/examples/serve_bench serve --addr 127.0.0.1:8123 --db /tmp/serve-bench
//! ```

use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_cli::App;
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Count {
    count: i64,
}

struct Chain10;

impl GraphFactory for Chain10 {
    type State = Count;

    fn name(&self) -> &str {
        "chain10"
    }

    fn description(&self) -> &str {
        "Ten nodes in a line, each adds one to count"
    }

    fn graph_file(&self) -> Option<&'static str> {
        // Sync durability said out loud: every step's checkpoint is on disk before the next.
        Some("graph = \"chain10\"\ndurability = \"sync\"\n")
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Count>, BuildError> {
        let mut g = StateGraph::<Count>::named("chain10");
        for i in 0..10 {
            g.add_node(format!("n{i}"), |s: Arc<Count>, _c: Context| async move {
                Ok::<_, NodeError>(CountUpdate::default().count(s.count + 1))
            });
            if i > 0 {
                g.add_edge(format!("n{}", i - 1), format!("n{i}"));
            }
        }
        g.add_edge(START, "n0").add_edge("n9", END);
        Ok(g.compile()?)
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Fan {
    #[state(append)]
    results: Vec<i64>,
}

struct Fanout;

impl GraphFactory for Fanout {
    type State = Fan;

    fn name(&self) -> &str {
        "fanout"
    }

    fn description(&self) -> &str {
        "A split, ten workers in parallel, a join that waits for all ten"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some("graph = \"fanout\"\ndurability = \"sync\"\n")
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Fan>, BuildError> {
        let mut g = StateGraph::<Fan>::named("fanout");
        g.add_node("split", |_s: Arc<Fan>, _c: Context| async {
            Ok::<_, NodeError>(FanUpdate::default())
        });
        let workers: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
        for (i, w) in workers.iter().enumerate() {
            g.add_node(w.as_str(), move |_s: Arc<Fan>, _c: Context| async move {
                Ok::<_, NodeError>(FanUpdate::default().results(vec![i as i64]))
            });
            g.add_edge("split", w.as_str());
        }
        g.add_node("join", |s: Arc<Fan>, _c: Context| async move {
            Ok::<_, NodeError>(FanUpdate::default().results(vec![s.results.len() as i64]))
        });
        g.add_edge(START, "split");
        g.add_join(workers, "join");
        g.add_edge("join", END);
        Ok(g.compile()?)
    }
}

fn main() -> std::process::ExitCode {
    return_large_blocks_to_the_system();
    App::new().register(Chain10).register(Fanout).run()
}

/// What the `graph` binary does first thing in its `main` (crates/stategraph-cli/src/main.rs),
/// so this binary's memory is `graph serve`'s: glibc's malloc serves every block of 1 MiB or
/// more with its own mapping, given back when freed. Without it, the large blocks each thread's
/// store allocates while it is open stay in malloc's arenas after it closes (peak RSS under the
/// benchmark's 20 clients: ~150 MB instead of ~32 MB).
fn return_large_blocks_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` takes no pointers; its one hazard is another thread's malloc reading the
    // allocator's parameters while they change. This runs first thing in `main`, before any
    // thread is started (the async runtime starts inside `App::run`).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
