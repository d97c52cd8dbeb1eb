//! The memory store runs the whole kit: once through `run_all`, as a backend's own test would,
//! and its subgraph checks through `run_subgraph_checks`.

use stategraph::checkpoint::MemoryCheckpointer;
use stategraph_checkpoint_conformance::{run_all, run_subgraph_checks, Backend, Memory};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_keeps_every_promise() {
    run_all(&|| Box::new(Memory::new()) as Box<dyn Backend>).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_keeps_every_subgraph_promise() {
    run_subgraph_checks(&|| Arc::new(MemoryCheckpointer::new())).await;
}
