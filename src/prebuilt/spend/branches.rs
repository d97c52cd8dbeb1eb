//! Where the requests a thread paid for that no step's ledger holds are: on its branch, in the
//! subgraph namespaces its tasks started, and, for a fork, in its source's history.

use super::{FailedSpend, FAILED_SPEND};
use crate::checkpoint::{CheckpointError, CheckpointId, Checkpointer, PendingKind, Source};
use crate::llm::{Pricing, Usage, UsageLedger};
use crate::runtime::namespace::task_id;
use crate::runtime::{task_journal_key, ThreadPath};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;

/// The journal entry of a fork's first checkpoint (`{checkpoint}/usage/inherited`): what its
/// source's history paid for that no step's ledger holds, as [`carry_into_fork`] found it.
const INHERITED: &str = "usage/inherited";

/// What the branch of `thread` that ends at `head` (its newest checkpoint when `None`) paid
/// for that no step's ledger holds, by node, as a ledger of its own: the model requests a
/// user who reads the thread's usage would otherwise never see. Every request is billed to
/// exactly one step of a branch:
///
/// - a task whose attempts failed at checkpoint C and that later succeeded there added them
///   to its own update ([`add_failed`](super::add_failed)), so the step that left C (the
///   branch's next `loop` checkpoint) holds them;
/// - when the branch left C otherwise (an edit, `graph update`, a plan edit, or a rerun from
///   C, which starts a branch at a `fork` checkpoint) and no step ever finished at C, the
///   failed attempts of C's tasks, and the results its finished tasks saved there that the
///   edit or rerun set aside, are this branch's: they are returned, under `NODE (failed)`
///   and `NODE (set aside)`. A step that did finish at C (on another branch, before a rerun
///   of C) holds them instead, so a rerun never counts them again;
/// - at `head` itself, what its tasks that have not finished spent so far (a failed step),
///   and, for a checkpoint older than the newest, its finished tasks' saved results;
/// - a subgraph a task of the branch's checkpoints ran keeps its tasks' failed attempts in
///   its own namespace: each such child's branch (to its newest checkpoint) is walked the same
///   way, once, and its rows are named with the path that ran it (`research > plan (failed)`,
///   as errors name a child's node). What a child's steps added to its own ledger reaches the
///   parent's through the parent task's update;
/// - a thread forked from another (`graph fork`) starts with what its source's history paid
///   for up to the fork that no ledger holds ([`carry_into_fork`]): its readout shows it as
///   the source's did, and never counts it twice (the fork's tasks do not fold it into their
///   ledger: their journal starts empty).
///
/// Failed attempts are priced with `pricing` (the thread's [`pricing_of`](super::pricing_of)
/// its settings).
pub async fn off_ledger(
    store: &dyn Checkpointer,
    thread: &str,
    head: Option<CheckpointId>,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let walk = Walk {
        store,
        pricing,
        keep_heads: false,
        heads: HashMap::new(),
    };
    Ok(walk.branch(thread, head).await?.unwrap_or_default())
}

/// Keeps with `new_thread`, a fork of `source` at `checkpoint` (as
/// [`CompiledGraph::fork`](crate::graph::CompiledGraph::fork) made it), what the source's
/// history up to that checkpoint paid for that no step's ledger holds ([`off_ledger`] of the
/// source at the checkpoint), so the fork's readout shows what its shared history paid, as the
/// source's does. The results the checkpoint's finished tasks saved are not counted: the fork
/// keeps them and applies them. `source` may be a subgraph namespace (a fork from inside a
/// child): the source's root branch is then read up to the step that ran the child, and the
/// child's up to `checkpoint`.
///
/// Call it right after the fork, before the fork runs; `graph fork` does. Returns what was kept.
pub async fn carry_into_fork(
    store: &dyn Checkpointer,
    source: &str,
    checkpoint: CheckpointId,
    new_thread: &str,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let path = match source.contains('/') {
        true => source
            .parse()
            .unwrap_or_else(|_| ThreadPath::root_of(source)),
        false => ThreadPath::root_of(source),
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
    };
    let ledger = walk
        .branch(path.root(), Some(first.id))
        .await?
        .unwrap_or_default();
    if !ledger.is_empty() {
        let value = serde_json::to_value(&ledger)
            .map_err(|e| CheckpointError::Storage(format!("a usage ledger as JSON: {e}")))?;
        store
            .put_journal(new_thread, &inherited_key(first.id), &value)
            .await?;
    }
    Ok(ledger)
}

fn inherited_key(checkpoint: CheckpointId) -> String {
    format!("{checkpoint}/{INHERITED}")
}

type Walked<'a> =
    Pin<Box<dyn Future<Output = Result<Option<UsageLedger>, CheckpointError>> + Send + 'a>>;

/// One readout's walk over a thread and its children.
struct Walk<'a> {
    store: &'a dyn Checkpointer,
    pricing: Option<&'a Pricing>,
    /// The results saved at a branch's head are kept (a fork copies them), never set aside.
    keep_heads: bool,
    /// A child namespace's head other than its newest checkpoint (a fork from inside it).
    heads: HashMap<String, CheckpointId>,
}

impl Walk<'_> {
    /// The off-ledger spend of `thread`'s branch that ends at `head` (its newest when `None`);
    /// `None` when the thread has no checkpoint (a child namespace never started).
    fn branch<'s>(&'s self, thread: &'s str, head: Option<CheckpointId>) -> Walked<'s> {
        Box::pin(async move {
            let links = branch_links(self.store, thread).await?;
            let Some(mut at) = head.or(links.newest) else {
                return Ok(None);
            };
            let mut ledger = UsageLedger::default();
            if let Some(link) = links.by_id.get(&at) {
                if !links.finished.contains(&at) {
                    // The newest state shows its finished tasks' results applied: only the open
                    // ones' spend is missing. An older one does not apply them.
                    let set_aside = !self.keep_heads && Some(at) != links.newest;
                    self.left_at(thread, (at, &link.tasks), set_aside, &mut ledger)
                        .await?;
                }
                self.children(thread, (at, &link.tasks), &mut ledger)
                    .await?;
            }
            // Up the branch: a checkpoint left by an edit or a rerun, where no step ever
            // finished; every checkpoint's children.
            while let Some(link) = links.by_id.get(&at) {
                let Some(parent) = link.parent else {
                    if link.source == Source::Fork && !thread.contains('/') {
                        self.inherited(thread, at, &mut ledger).await?;
                    }
                    break;
                };
                if let Some(from) = links.by_id.get(&parent) {
                    if link.source != Source::Loop && !links.finished.contains(&parent) {
                        self.left_at(thread, (parent, &from.tasks), true, &mut ledger)
                            .await?;
                    }
                    self.children(thread, (parent, &from.tasks), &mut ledger)
                        .await?;
                }
                at = parent;
            }
            Ok(Some(ledger))
        })
    }

    /// Adds the off-ledger spend of the children the tasks (`nodes`, in task order) at
    /// `checkpoint` of `thread` ran, each under its node's name (`node > row`).
    async fn children(
        &self,
        thread: &str,
        (checkpoint, nodes): (CheckpointId, &[String]),
        ledger: &mut UsageLedger,
    ) -> Result<(), CheckpointError> {
        for (task, node) in nodes.iter().enumerate() {
            // A task's n-th subgraph call has the namespace `node:{id}` (runtime/namespace.rs),
            // its calls numbered from 0 without gaps.
            for call in 0u32.. {
                let child = format!("{thread}/{node}:{}", task_id(checkpoint, task, call));
                let head = self.heads.get(&child).copied();
                let Some(spent) = self.branch(&child, head).await? else {
                    break;
                };
                let named = UsageLedger {
                    nodes: (spent.nodes.into_iter())
                        .map(|(row, usage)| (format!("{node} > {row}"), usage))
                        .collect(),
                };
                ledger.merge(&named);
            }
        }
        Ok(())
    }

    /// Adds what the tasks (`nodes`, in task order) at `checkpoint` paid for and left there:
    /// the failed attempts of those that did not finish (a finished task's update holds its
    /// own), and with `set_aside` the usage in the results of those that did.
    async fn left_at(
        &self,
        thread: &str,
        (checkpoint, nodes): (CheckpointId, &[String]),
        set_aside: bool,
        ledger: &mut UsageLedger,
    ) -> Result<(), CheckpointError> {
        let mut finished = HashSet::new();
        for write in self.store.get_writes(thread, checkpoint).await? {
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
            if let Some(value) = self.store.get_journal(thread, &key).await? {
                // An entry that does not read is left out: this is a readout, not the ledger.
                let failed: FailedSpend = serde_json::from_value(value).unwrap_or_default();
                let spent = failed.into_values().fold(Usage::default(), |a, b| a + b);
                if !spent.is_empty() {
                    ledger.record(&format!("{node} (failed)"), spent, self.pricing);
                }
            }
        }
        Ok(())
    }

    /// Adds what the fork's source had paid for off-ledger when the fork was made.
    async fn inherited(
        &self,
        thread: &str,
        first: CheckpointId,
        ledger: &mut UsageLedger,
    ) -> Result<(), CheckpointError> {
        let kept = self
            .store
            .get_journal(thread, &inherited_key(first))
            .await?;
        // An entry that does not read is left out: this is a readout, not the ledger.
        if let Some(inherited) = kept.and_then(|v| serde_json::from_value::<UsageLedger>(v).ok()) {
            ledger.merge(&inherited);
        }
        Ok(())
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
