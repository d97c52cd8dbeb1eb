//! What a step's model calls spent when the step failed, for agents that keep a usage ledger
//! (the built-in research, tree and memo agents use it; so can one's own). A failed task writes no state, so the
//! requests it paid for would be in no usage ledger: they are kept in the task's journal
//! instead ([`Context::journal`], which survives the failure), summed over the task's failed
//! attempts and runs, and the call's next success (a retry, or the resumed run) adds them to
//! the node's ledger update. That update is saved once, with the step (a finished task is
//! never run again at its checkpoint); an update lost to a crash is made again, from the same
//! journal, by the node's next run, so the requests are counted once.
//!
//! A thread can also move past a failed step without it succeeding: an edit (`graph update`, a
//! plan edit) or a rerun of that step starts from a new checkpoint, whose tasks have a journal
//! of their own. Those requests are in no ledger; [`off_ledger`] finds them on the thread's
//! branch for `graph state` and the run's summary, which show them beside the ledger.

use crate::checkpoint::{CheckpointError, CheckpointId, Checkpointer, PendingKind, Source};
use crate::llm::{usd, LlmError, Pricing, Usage, UsageLedger};
use crate::runtime::{task_journal_key, Context, NodeError};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The task's journal entry: what its model calls spent in attempts that failed, by call key.
const FAILED_SPEND: &str = "usage/failed";

/// What a task's failed attempts spent, by call key.
type FailedSpend = BTreeMap<String, Usage>;

/// The node error for a failed model call (journaled under `key`), as `to_error` makes it,
/// after keeping what its answered requests used ([`LlmError::usage`]) in the task's journal.
/// The error then says what the task's failed attempts have spent so far (priced when
/// `pricing` is given), so a failed run shows what it cost.
pub async fn failed_call(
    ctx: &Context,
    key: &str,
    e: LlmError,
    pricing: Option<&Pricing>,
    to_error: impl FnOnce(LlmError) -> NodeError,
) -> NodeError {
    let spent = e.usage().filter(|u| !u.is_empty());
    let error = to_error(e);
    let Some(spent) = spent else {
        return error;
    };
    let total = match keep(ctx, key, spent).await {
        Ok(total) => total,
        Err(why) => {
            // The model's error is the one to report; the lost record only costs accuracy.
            tracing::warn!(%why, key, "what a failed model call used could not be journaled");
            spent
        }
    };
    let message = format!("{} ({})", error.message(), note(total, pricing));
    if error.is_transient() {
        NodeError::transient(message)
    } else {
        NodeError::new(message)
    }
}

/// Adds to `ledger`, as calls of `node`, what the failed attempts of the call under `key` spent
/// in earlier attempts or runs of this task: for the node's update once that call succeeded.
pub async fn add_failed(
    ctx: &Context,
    key: &str,
    node: &str,
    ledger: &mut UsageLedger,
    pricing: Option<&Pricing>,
) -> Result<(), NodeError> {
    let failed: FailedSpend = ctx.journaled(FAILED_SPEND).await?.unwrap_or_default();
    if let Some(spent) = failed.get(key).filter(|u| !u.is_empty()) {
        ledger.record(node, *spent, pricing);
    }
    Ok(())
}

/// What the branch of `thread` that ends at `head` (its newest checkpoint when `None`) paid
/// for that no step's ledger holds, by node, as a ledger of its own: the model requests a
/// user who reads the thread's usage would otherwise never see. Every request is billed to
/// exactly one step of a branch:
///
/// - a task whose attempts failed at checkpoint C and that later succeeded there added them
///   to its own update ([`add_failed`]), so the step that left C (the branch's next `loop`
///   checkpoint) holds them;
/// - when the branch left C otherwise (an edit, `graph update`, a plan edit, or a rerun from
///   C, which starts a branch at a `fork` checkpoint) and no step ever finished at C, the
///   failed attempts of C's tasks, and the results its finished tasks saved there that the
///   edit or rerun set aside, are this branch's: they are returned, under `NODE (failed)`
///   and `NODE (set aside)`. A step that did finish at C (on another branch, before a rerun
///   of C) holds them instead, so a rerun never counts them again;
/// - at `head` itself, what its tasks that have not finished spent so far (a failed step),
///   and, for a checkpoint older than the newest, its finished tasks' saved results.
///
/// A fork into another thread (`graph fork`) starts with its source's ledger; the failed
/// attempts at the forked checkpoint stay with the source thread, where they were made.
///
/// Failed attempts are priced with `pricing` (the thread's [`pricing_of`] its settings).
pub async fn off_ledger(
    store: &dyn Checkpointer,
    thread: &str,
    head: Option<CheckpointId>,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let links = branch_links(store, thread).await?;
    let mut ledger = UsageLedger::default();
    let Some(mut at) = head.or(links.newest) else {
        return Ok(ledger);
    };
    if !links.finished.contains(&at) {
        if let Some(link) = links.by_id.get(&at) {
            // The newest state shows its finished tasks' results applied: only the open ones'
            // spend is missing. An older one does not apply them.
            let set_aside = Some(at) != links.newest;
            add_left_at(
                store,
                thread,
                (at, &link.tasks),
                (set_aside, pricing),
                &mut ledger,
            )
            .await?;
        }
    }
    // Up the branch: a checkpoint left by an edit or a rerun, where no step ever finished.
    while let Some(link) = links.by_id.get(&at) {
        let Some(parent) = link.parent else { break };
        let left_unfinished = link.source != Source::Loop && !links.finished.contains(&parent);
        if let (true, Some(from)) = (left_unfinished, links.by_id.get(&parent)) {
            add_left_at(
                store,
                thread,
                (parent, &from.tasks),
                (true, pricing),
                &mut ledger,
            )
            .await?;
        }
        at = parent;
    }
    Ok(ledger)
}

/// The prices a graph's settings give (`pricing`, the built-in agents' setting), if any.
pub fn pricing_of(settings: &serde_json::Map<String, serde_json::Value>) -> Option<Pricing> {
    serde_json::from_value(settings.get("pricing")?.clone()).ok()
}

/// A ledger's total as one usage, its calls as requests (for `failed_usage`).
pub fn as_usage(ledger: &UsageLedger) -> Usage {
    let total = ledger.total();
    Usage {
        requests: total.calls,
        ..total.usage
    }
}

/// The thread's checkpoints as links of its branches.
struct Links {
    newest: Option<CheckpointId>,
    by_id: HashMap<CheckpointId, Link>,
    /// Checkpoints a step finished at: the parents of `loop` checkpoints.
    finished: HashSet<CheckpointId>,
}

struct Link {
    parent: Option<CheckpointId>,
    source: Source,
    /// The nodes of the checkpoint's tasks, in task order.
    tasks: Vec<String>,
}

async fn branch_links(store: &dyn Checkpointer, thread: &str) -> Result<Links, CheckpointError> {
    let mut links = Links {
        newest: None,
        by_id: HashMap::new(),
        finished: HashSet::new(),
    };
    let mut before = None;
    loop {
        let page = store.list_checkpoints(thread, before, 200).await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        for record in page {
            links.newest.get_or_insert(record.id);
            if let (Source::Loop, Some(parent)) = (record.metadata.source, record.parent_id) {
                links.finished.insert(parent);
            }
            let tasks = record.frontier.tasks.into_iter().map(|t| t.node).collect();
            let link = Link {
                parent: record.parent_id,
                source: record.metadata.source,
                tasks,
            };
            links.by_id.insert(record.id, link);
        }
    }
    Ok(links)
}

/// Adds what the tasks (`nodes`, in task order) at `checkpoint` paid for and left there: the
/// failed attempts of those that did not finish (a finished task's update holds its own), and
/// with `set_aside` the usage in the results of those that did.
async fn add_left_at(
    store: &dyn Checkpointer,
    thread: &str,
    (checkpoint, nodes): (CheckpointId, &[String]),
    (set_aside, pricing): (bool, Option<&Pricing>),
    ledger: &mut UsageLedger,
) -> Result<(), CheckpointError> {
    let mut finished = HashSet::new();
    for write in store.get_writes(thread, checkpoint).await? {
        if let PendingKind::Update { update, .. } = &write.kind {
            finished.insert(write.task);
            if set_aside {
                add_set_aside(update.get(), &write.node, ledger);
            }
        }
    }
    for (task, node) in nodes.iter().enumerate() {
        if finished.contains(&task) {
            continue;
        }
        let key = task_journal_key(checkpoint, task, FAILED_SPEND);
        if let Some(value) = store.get_journal(thread, &key).await? {
            // An entry that does not read is left out: this is a readout, not the ledger.
            let failed: FailedSpend = serde_json::from_value(value).unwrap_or_default();
            let spent = failed.into_values().fold(Usage::default(), |a, b| a + b);
            if !spent.is_empty() {
                ledger.record(&format!("{node} (failed)"), spent, pricing);
            }
        }
    }
    Ok(())
}

/// Adds the usage ledger a finished task saved in its update (`usage`, the built-in agents'
/// convention), when an edit or a rerun set that result aside.
fn add_set_aside(update: &str, node: &str, ledger: &mut UsageLedger) {
    let usage = serde_json::from_str::<serde_json::Value>(update)
        .ok()
        .and_then(|mut v| v.get_mut("usage").map(serde_json::Value::take))
        .and_then(|u| serde_json::from_value::<UsageLedger>(u).ok());
    if let Some(usage) = usage.filter(|u| !u.is_empty()) {
        let total = usage.total();
        let mut entry = UsageLedger::default();
        entry.nodes.insert(format!("{node} (set aside)"), total);
        ledger.merge(&entry);
    }
}

/// Adds `spent` to the task's failed spend of `key`; returns the task's failed spend in all.
async fn keep(ctx: &Context, key: &str, spent: Usage) -> Result<Usage, NodeError> {
    let mut failed: FailedSpend = ctx.journaled(FAILED_SPEND).await?.unwrap_or_default();
    *failed.entry(key.to_string()).or_default() += spent;
    ctx.journal(FAILED_SPEND, &failed).await?;
    Ok(failed.into_values().fold(Usage::default(), |a, b| a + b))
}

/// What a task's failed attempts spent, in words, for its error.
fn note(spent: Usage, pricing: Option<&Pricing>) -> String {
    let requests = spent.requests.max(1);
    let cost = pricing
        .map(|p| format!(" ({})", usd(p.cost(spent))))
        .unwrap_or_default();
    format!(
        "this task's failed attempts have used {requests} model request{} so far, {} tokens in \
         and {} out{cost}; they are added to the thread's usage ledger when the task succeeds \
         (until then, `graph state` shows them off-ledger)",
        if requests == 1 { "" } else { "s" },
        spent.input_tokens,
        spent.output_tokens
    )
}
