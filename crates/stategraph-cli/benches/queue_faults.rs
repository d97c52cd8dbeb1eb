//! Issue 31's longer scenario under faults, printing its counts: 4 `graph worker` processes,
//! 200 runs of the keyless pipeline (every fourth pauses for an answer, given through the
//! queue), workers SIGKILLed at random, one SIGSTOPped past its lease then continued, Postgres
//! restarted once with `pg_ctl restart -m immediate`, runs cancelled queued and running. It is
//! the scenario of `tests/queue_faults.rs` (whose bounded version runs in CI), included here,
//! not copied: every check of that test holds at the end, or this fails saying which.
//!
//! ```text
//! cargo bench -p stategraph-cli --bench queue_faults             # release build
//! cargo test -p stategraph-cli --bench queue_faults              # the same, debug build
//! STATEGRAPH_QUEUE_RUNS=500 STATEGRAPH_QUEUE_SEED=7 cargo bench -p stategraph-cli --bench queue_faults
//! ```
//!
//! Prints the seed first (`STATEGRAPH_QUEUE_SEED` repeats its random choices), then how many
//! runs, kills, takeovers, node executions and tasks run again (each a step in flight when its
//! worker was killed, frozen or cut off, never a saved one) there were.

#[path = "../tests/queue_faults.rs"]
mod queue_faults;

fn main() {
    // `cargo bench` passes `--bench`; the scenario takes its settings from the environment.
    let runs = std::env::var("STATEGRAPH_QUEUE_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    queue_faults::scenario(runs, queue_faults::KILLS_MANY);
}
