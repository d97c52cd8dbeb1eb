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

#[path = "../benches/support/workload_factories.rs"]
mod workload_factories;
#[path = "../benches/support/workload_graphs.rs"]
mod workload_graphs;

use stategraph_cli::App;
use workload_factories::{Chain, Fanout};

fn main() -> std::process::ExitCode {
    // What the `graph` binary does first thing in its `main`, from the same function, so this
    // binary's memory is `graph serve`'s (stategraph-cli/src/process.rs says what it sets).
    stategraph_cli::tune_process();
    App::new()
        .register(Chain {
            name: "chain10",
            nodes: 10,
            graph_file: "graph = \"chain10\"\ndurability = \"sync\"\n",
        })
        .register(Fanout)
        .run()
}
