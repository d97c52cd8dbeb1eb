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

#[path = "../benches/support/workload_graphs.rs"]
mod workload_graphs;

use stategraph_cli::App;
use workload_graphs::{Chain, Fanout};

fn main() -> std::process::ExitCode {
    return_large_blocks_to_the_system();
    App::new()
        .register(Chain {
            name: "chain10",
            nodes: 10,
            graph_file: "graph = \"chain10\"\ndurability = \"sync\"\n",
        })
        .register(Fanout)
        .run()
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
