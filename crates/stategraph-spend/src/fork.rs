//! What a fork into a new thread takes along from its source: the spend its shared history
//! paid for that no ledger holds, and, for each child it copied from mid-way, the ledger that
//! child started with (so the fork's readout can tell what the child's steps added).

use super::branches::{inherited_key, start_key, Walk};
use super::links::{branch_links, first_of, tasks_of, usage_at};
use stategraph::checkpoint::{CheckpointError, CheckpointId, Checkpointer, Source};
use stategraph::runtime::ThreadPath;
use stategraph_llm::{Pricing, UsageLedger};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

/// Keeps with `new_thread`, a fork of `source` at `checkpoint` (as
/// [`CompiledGraph::fork`](stategraph::graph::CompiledGraph::fork) made it), what the source's
/// history up to that checkpoint paid for that no step's ledger holds ([`off_ledger`] of the
/// source at the checkpoint), so the fork's readout shows what its shared history paid, as the
/// source's does, and counts it once: the fork's tasks never fold it into their ledger (their
/// journal starts empty). The results the checkpoint's finished tasks saved, and what the
/// unfinished children the fork copies saved, are not counted here: the fork keeps them and
/// they reach its ledger there. `source` may be a subgraph namespace (a fork from inside a
/// child): the source's root branch is then read up to the step that ran the child, and the
/// child's up to `checkpoint`.
///
/// Call it right after the fork, before the fork runs; `graph fork` does. Returns what was kept.
///
/// [`off_ledger`]: super::off_ledger
pub async fn carry_into_fork(
    store: &dyn Checkpointer,
    source: &str,
    checkpoint: CheckpointId,
    new_thread: &str,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let path = match ThreadPath::is_root_id(source) {
        false => path_of(source),
        true => ThreadPath::root_of(source),
    };
    // The fork's first checkpoint keeps its source checkpoint's id: for a fork from inside a
    // child, the id of the parent's checkpoint whose step ran it.
    let Some(first) = store.get_checkpoint(new_thread, None).await? else {
        return Ok(UsageLedger::default());
    };
    let mut heads = HashMap::new();
    if !path.is_root() {
        heads.insert(source.to_string(), checkpoint);
    }
    let walk = Walk {
        store,
        pricing,
        keep_heads: true,
        heads,
        kept: None,
    };
    let spent = walk
        .branch(path.root(), Some(first.id), (false, true))
        .await?;
    let ledger = spent.map(|s| s.off).unwrap_or_default();
    if !ledger.is_empty() {
        let value = serde_json::to_value(&ledger)
            .map_err(|e| CheckpointError::Storage(format!("a usage ledger as JSON: {e}")))?;
        store
            .put_journal(new_thread, &inherited_key(first.id), &value)
            .await?;
    }
    keep_child_starts(store, path.root(), new_thread, first.id).await?;
    Ok(ledger)
}

type Kept<'a> = Pin<Box<dyn Future<Output = Result<(), CheckpointError>> + Send + 'a>>;

/// For each child the tasks at `head` of `copy` (a fork of `source`) ran whose copy starts
/// mid-way (a fork copies a child from its newest snapshot on), keeps in its journal the usage
/// ledger its source's state started with; then the same for that child's own children.
fn keep_child_starts<'a>(
    store: &'a dyn Checkpointer,
    source: &'a str,
    copy: &'a str,
    head: CheckpointId,
) -> Kept<'a> {
    Box::pin(async move {
        let links = branch_links(store, copy, false, None).await?;
        let (source_path, copy_path) = (path_of(source), path_of(copy));
        for (task, node) in tasks_of(&links, head).iter().enumerate() {
            for call in 0u32.. {
                let (from, to) = (
                    source_path.task_child(node, head, task, call).to_string(),
                    copy_path.task_child(node, head, task, call).to_string(),
                );
                let copied = branch_links(store, &to, false, None).await?;
                let Some(child_head) = copied.newest else {
                    break;
                };
                let (first, why) = first_of(&copied, child_head);
                if why.is_some_and(|s| s != Source::Input) {
                    let original = branch_links(store, &from, true, None).await?;
                    let (start, _) = first_of(&original, child_head);
                    // Kept even when empty: without it, the copy's first state stands in.
                    let started = usage_at(&original, start);
                    let value = serde_json::to_value(&started).map_err(|e| {
                        CheckpointError::Storage(format!("a usage ledger as JSON: {e}"))
                    })?;
                    store.put_journal(&to, &start_key(first), &value).await?;
                }
                keep_child_starts(store, &from, &to, child_head).await?;
            }
        }
        Ok(())
    })
}

/// A stored thread id as a path; an id that does not parse (it was stored, so it was valid
/// when written) is taken as a root thread.
fn path_of(thread: &str) -> ThreadPath {
    thread
        .parse()
        .unwrap_or_else(|_| ThreadPath::root_of(thread))
}
