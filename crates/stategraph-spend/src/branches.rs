//! Where the requests a thread paid for that no step's ledger holds are: on its branch, in the
//! subgraph namespaces its tasks started, and, for a fork, in its source's history (kept with
//! the fork by `fork.rs`).

use super::kept::{self, Kept};
use super::links::{branch_links, usage_at, usage_in, Links};
use super::{FailedSpend, FAILED_SPEND};
use stategraph::checkpoint::{
    CheckpointError, CheckpointId, Checkpointer, PendingKind, PendingWrite, Source,
};
use stategraph::runtime::task_journal_key;
use stategraph::runtime::ThreadPath;
use stategraph_llm::{NodeUsage, Pricing, Usage, UsageLedger};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

/// The journal entry of a fork's first checkpoint (`{checkpoint}/usage/inherited`): what its
/// source's history paid for that no step's ledger holds, as `carry_into_fork` found it.
const INHERITED: &str = "usage/inherited";

/// The journal entry of a copied child's first checkpoint (`{checkpoint}/usage/started_with`).
const STARTED_WITH: &str = "usage/started_with";

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
///   parent's through the parent task's result; while that task has not finished, it is
///   counted here too, as `research > plan (pending)` at the thread's newest checkpoint, and
///   `(set aside)` once the branch moved past the task (read from the child's states: its
///   ledger at its head beyond the one it started with);
/// - a thread forked from another (`graph fork`) starts with what its source's history paid
///   for up to the fork that no ledger holds ([`carry_into_fork`](super::carry_into_fork)):
///   its readout shows it as the source's did, and never counts it twice (the fork's tasks do
///   not fold it into their ledger: their journal starts empty).
///
/// Failed attempts are priced with `pricing` (the thread's [`pricing_of`](super::pricing_of)
/// its settings).
///
/// A root thread's walk stops at the checkpoint whose sum a run of the thread kept
/// ([`off_ledger_keeping`]), so it reads only the checkpoints written since.
pub async fn off_ledger(
    store: &dyn Checkpointer,
    thread: &str,
    head: Option<CheckpointId>,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let walk = Walk::of_thread(store, thread, pricing).await;
    let spent = walk.branch(thread, head, (false, true)).await?;
    Ok(spent.map(|s| s.off).unwrap_or_default())
}

/// [`off_ledger`] at the thread's newest checkpoint, for the process that holds the thread (a
/// run, when it ends): it also keeps, in the thread's journal, what the checkpoints before
/// that one left, which no later step can change (a step only ever runs at the thread's newest
/// checkpoint, and a replay of an older one starts a branch at a new checkpoint), so the next
/// readout walks only the checkpoints written since, not the whole history. Keeping it is a
/// help, not the readout: when it cannot be stored, the readout is still returned.
pub async fn off_ledger_keeping(
    store: &dyn Checkpointer,
    thread: &str,
    pricing: Option<&Pricing>,
) -> Result<UsageLedger, CheckpointError> {
    let walk = Walk::of_thread(store, thread, pricing).await;
    let Some(spent) = walk.branch(thread, None, (false, true)).await? else {
        return Ok(UsageLedger::default());
    };
    if ThreadPath::is_root_id(thread) {
        kept::write(store, thread, spent.head, pricing, &spent.before_head).await;
    }
    Ok(spent.off)
}

/// The journal key of a fork's first checkpoint that keeps what its source's history paid for
/// off-ledger ([`carry_into_fork`](super::carry_into_fork)).
pub(super) fn inherited_key(checkpoint: CheckpointId) -> String {
    format!("{checkpoint}/{INHERITED}")
}

/// The journal key of a copied child's first checkpoint (a fork copies a child from its newest
/// snapshot on) that keeps the usage ledger the child's state started with.
pub(super) fn start_key(checkpoint: CheckpointId) -> String {
    format!("{checkpoint}/{STARTED_WITH}")
}

type Walked<'a> = Pin<Box<dyn Future<Output = Result<Option<Spent>, CheckpointError>> + Send + 'a>>;

/// One readout's walk over a thread and its children.
pub(super) struct Walk<'a> {
    pub(super) store: &'a dyn Checkpointer,
    pub(super) pricing: Option<&'a Pricing>,
    /// The results saved at a branch's head are kept (a fork copies them), never set aside.
    pub(super) keep_heads: bool,
    /// A child namespace's head other than its newest checkpoint (a fork from inside it).
    pub(super) heads: HashMap<String, CheckpointId>,
    /// What the root thread's checkpoints before one of them left, as a run kept it.
    pub(super) kept: Option<Kept>,
}

impl<'a> Walk<'a> {
    /// The walk of a thread's own history (not a fork's), stopping where a run kept its sum.
    async fn of_thread(
        store: &'a dyn Checkpointer,
        thread: &str,
        pricing: Option<&'a Pricing>,
    ) -> Walk<'a> {
        Walk {
            store,
            pricing,
            keep_heads: false,
            heads: HashMap::new(),
            kept: kept::read(store, thread, pricing).await,
        }
    }
}

/// What the walk of one thread's branch found.
#[derive(Default)]
pub(super) struct Spent {
    /// Paid for and in no step's ledger of the thread.
    pub(super) off: UsageLedger,
    /// What the results of the branch's finished tasks hold (asked for a child whose parent
    /// task never finished: its steps' ledger then reaches no ledger of the parent), by node.
    saved: UsageLedger,
    /// The branch's head.
    head: CheckpointId,
    /// The part of `off` the checkpoints before the head left (what a run keeps).
    before_head: UsageLedger,
}

/// What the walk knows of a checkpoint whose children it reads.
#[derive(Clone, Copy)]
struct Seen {
    /// A step finished there (on this branch or another): its tasks' results are saved.
    step_done: bool,
    /// It is the head of the branch walked.
    at_head: bool,
    /// It is the thread's newest checkpoint, whose tasks may still finish, and so is every
    /// level's above (the tasks that run this thread have not finished either).
    pending: bool,
}

/// Where a checkpoint is on the branch walked.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Place {
    /// The branch's head.
    Head,
    /// A step finished there and the branch went on from it.
    Finished,
    /// The branch left it by an edit or a rerun.
    Left,
}

impl Walk<'_> {
    /// The off-ledger spend of `thread`'s branch that ends at `head` (its newest when `None`),
    /// and with `saved` what its finished tasks' results hold; `None` when the thread has no
    /// checkpoint (a child namespace never started). `pending`: every level above is at its
    /// newest checkpoint with the task that runs this one unfinished (true for a root thread).
    pub(super) fn branch<'s>(
        &'s self,
        thread: &'s str,
        head: Option<CheckpointId>,
        (saved, pending): (bool, bool),
    ) -> Walked<'s> {
        Box::pin(async move {
            // Only the root thread's own walk stops at what a run kept.
            let kept = self
                .kept
                .as_ref()
                .filter(|_| ThreadPath::is_root_id(thread));
            let down_to = kept.map(|k| k.checkpoint);
            let links = branch_links(self.store, thread, saved, down_to).await?;
            let Some(head) = head.or(links.newest) else {
                return Ok(None);
            };
            let mut spent = Spent {
                head,
                ..Spent::default()
            };
            // What the checkpoints before the head leave, apart.
            let mut before = UsageLedger::default();
            let (mut at, mut place) = (head, Place::Head);
            let mut reached = false;
            while let Some(link) = links.by_id.get(&at) {
                let here = self
                    .one(thread, &links, (at, place), (saved, pending))
                    .await?;
                spent.saved.merge(&here.saved);
                match place {
                    Place::Head => spent.off.merge(&here.off),
                    _ => before.merge(&here.off),
                }
                if let Some(kept) = kept.filter(|k| k.checkpoint == at) {
                    before.merge(&kept.before);
                    reached = true;
                    break;
                }
                let Some(parent) = link.parent else {
                    break;
                };
                place = match link.source {
                    Source::Loop => Place::Finished,
                    _ => Place::Left,
                };
                at = parent;
            }
            if kept.is_some() && !reached && !links.complete {
                // The branch does not pass the kept checkpoint (an older head, a branch that
                // left the history before it): walked whole.
                let whole = Walk {
                    store: self.store,
                    pricing: self.pricing,
                    keep_heads: self.keep_heads,
                    heads: self.heads.clone(),
                    kept: None,
                };
                return whole.branch(thread, Some(head), (saved, pending)).await;
            }
            spent.off.merge(&before);
            spent.before_head = before;
            if saved {
                // What the steps of the branch added to the thread's ledger: its state's
                // ledger at the head beyond the one it started with (at `at`, the branch's
                // first checkpoint, or as kept when a fork copied the child from mid-way).
                let started = self.started_with(thread, &links, at).await?;
                let added = grown(&usage_at(&links, head), &started);
                spent.saved.merge(&added);
            }
            Ok(Some(spent))
        })
    }

    /// What checkpoint `at`, at `place` of `thread`'s branch, left: its tasks' and their
    /// children's, and for a fork's first checkpoint what its source's history had left.
    async fn one(
        &self,
        thread: &str,
        links: &Links,
        (at, place): (CheckpointId, Place),
        (saved, pending): (bool, bool),
    ) -> Result<Spent, CheckpointError> {
        let mut here = Spent::default();
        let Some(link) = links.by_id.get(&at) else {
            return Ok(here);
        };
        let at_head = place == Place::Head;
        let tasks = (at, link.tasks.as_slice());
        let writes = self
            .visit(thread, links, (tasks, place), saved, &mut here)
            .await?;
        let seen = Seen {
            step_done: links.finished.contains(&at),
            at_head,
            pending: pending && at_head && Some(at) == links.newest,
        };
        self.children(thread, tasks, writes, seen, &mut here.off)
            .await?;
        if link.parent.is_none() && link.source == Source::Fork && ThreadPath::is_root_id(thread) {
            self.inherited(thread, at, &mut here.off).await?;
        }
        Ok(here)
    }

    /// Adds to `spent` what the tasks at `checkpoint` (`nodes`, in task order), at `place` of
    /// the branch, left off-ledger, and with `saved` the results its head's finished tasks
    /// saved; returns the tasks' saved results when it read them.
    async fn visit(
        &self,
        thread: &str,
        links: &Links,
        (tasks, place): ((CheckpointId, &[String]), Place),
        saved: bool,
        spent: &mut Spent,
    ) -> Result<Option<Vec<PendingWrite>>, CheckpointError> {
        let at = tasks.0;
        // A step that finished at a checkpoint on another branch holds what was paid there (a
        // rerun of it never counts it again).
        let elsewhere = place != Place::Finished && links.finished.contains(&at);
        if place == Place::Finished || (elsewhere && !(saved && place == Place::Head)) {
            return Ok(None);
        }
        let writes = self.store.get_writes(thread, at).await?;
        if !elsewhere {
            // The newest state shows its finished tasks' results applied: only the open ones'
            // spend is missing. An older one does not apply them.
            let set_aside = place == Place::Left || (!self.keep_heads && Some(at) != links.newest);
            self.left_at(thread, tasks, &writes, set_aside, &mut spent.off)
                .await?;
        }
        if saved && place == Place::Head {
            // Finished beside a task that did not: in no state of the branch yet.
            for (node, usage) in results(&writes) {
                spent.saved.merge(&one_row(node.to_string(), &usage));
            }
        }
        Ok(Some(writes))
    }

    /// Adds the off-ledger spend of the children the tasks (`nodes`, in task order) at
    /// `checkpoint` of `thread` ran, each under its node's name (`node > row`); for a task
    /// that did not finish there (no result in `writes`, read when `None`), also what its
    /// child's steps saved, which reached no ledger of `thread`: `(pending)` at the thread's
    /// newest checkpoint (the task may still finish), else `(set aside)`.
    async fn children(
        &self,
        thread: &str,
        (checkpoint, nodes): (CheckpointId, &[String]),
        mut writes: Option<Vec<PendingWrite>>,
        seen: Seen,
        off: &mut UsageLedger,
    ) -> Result<(), CheckpointError> {
        let parent: ThreadPath = thread
            .parse()
            .unwrap_or_else(|_| ThreadPath::root_of(thread));
        for (task, node) in nodes.iter().enumerate() {
            // A task's subgraph calls are numbered from 0 without gaps.
            for call in 0u32.. {
                let child = parent.task_child(node, checkpoint, task, call).to_string();
                if !exists(self.store, &child).await? {
                    break;
                }
                if writes.is_none() {
                    writes = Some(self.store.get_writes(thread, checkpoint).await?);
                }
                let writes = writes.as_deref().unwrap_or(&[]);
                // A task that finished holds what its child's steps added (its result, in the
                // step's checkpoint when the step finished, else in `writes`). A fork keeps
                // its head's unfinished children: what they saved is in the fork's copy and
                // reaches its ledger when they finish there.
                let done = seen.step_done || finished(writes, task);
                let saved = !(done || self.keep_heads && seen.at_head);
                let head = self.heads.get(&child).copied();
                let wanted = (saved, seen.pending);
                let Some(spent) = self.branch(&child, head, wanted).await? else {
                    break;
                };
                off.merge(&renamed(&spent.off, |row| format!("{node} > {row}")));
                let why = if seen.pending { "pending" } else { "set aside" };
                off.merge(&renamed(&spent.saved, |row| {
                    format!("{node} > {row} ({why})")
                }));
            }
        }
        Ok(())
    }

    /// Adds what the tasks (`nodes`, in task order) at `checkpoint` paid for and left there:
    /// the failed attempts of those that did not finish (a finished task's result in `writes`
    /// holds its own), and with `set_aside` the usage in the results of those that did.
    async fn left_at(
        &self,
        thread: &str,
        (checkpoint, nodes): (CheckpointId, &[String]),
        writes: &[PendingWrite],
        set_aside: bool,
        off: &mut UsageLedger,
    ) -> Result<(), CheckpointError> {
        if set_aside {
            for (node, usage) in results(writes) {
                off.merge(&one_row(format!("{node} (set aside)"), &usage));
            }
        }
        for (task, node) in nodes.iter().enumerate() {
            if finished(writes, task) {
                continue;
            }
            let key = task_journal_key(checkpoint, task, FAILED_SPEND);
            if let Some(value) = self.store.get_journal(thread, &key).await? {
                // An entry that does not read is left out: this is a readout, not the ledger.
                let failed: FailedSpend = serde_json::from_value(value).unwrap_or_default();
                let spent = failed.into_values().fold(Usage::default(), |a, b| a + b);
                if !spent.is_empty() {
                    off.record(&format!("{node} (failed)"), spent, self.pricing);
                }
            }
        }
        Ok(())
    }

    /// The usage ledger `thread`'s state started with, its branch's first checkpoint being
    /// `first`: that state's, unless a fork copied the thread from mid-way and kept the one its
    /// source started with.
    async fn started_with(
        &self,
        thread: &str,
        links: &Links,
        first: CheckpointId,
    ) -> Result<UsageLedger, CheckpointError> {
        let copied = links
            .by_id
            .get(&first)
            .is_some_and(|l| l.source != Source::Input);
        if copied {
            let kept = self.store.get_journal(thread, &start_key(first)).await?;
            // An entry that does not read is left out: this is a readout, not the ledger.
            if let Some(kept) = kept.and_then(|v| serde_json::from_value(v).ok()) {
                return Ok(kept);
            }
        }
        Ok(usage_at(links, first))
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

/// What `later` holds beyond `earlier`, row by row: `later` grew from `earlier` by merges.
fn grown(later: &UsageLedger, earlier: &UsageLedger) -> UsageLedger {
    let less = |a: Usage, b: Usage| Usage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        requests: a.requests.saturating_sub(b.requests),
    };
    let mut out = UsageLedger::default();
    for (row, l) in &later.nodes {
        let e = earlier.nodes.get(row).copied().unwrap_or_default();
        let row_grown = NodeUsage {
            calls: l.calls.saturating_sub(e.calls),
            usage: less(l.usage, e.usage),
            cost: l
                .cost
                .map(|c| c - e.cost.unwrap_or(0.0))
                .filter(|c| *c > 0.0),
            unpriced_calls: l.unpriced_calls.saturating_sub(e.unpriced_calls),
            replayed_calls: l.replayed_calls.saturating_sub(e.replayed_calls),
            replayed: less(l.replayed, e.replayed),
        };
        if row_grown.calls > 0 || !row_grown.usage.is_empty() {
            out.nodes.insert(row.clone(), row_grown);
        }
    }
    out
}

/// True when `task` saved its result (it finished) in `writes`.
fn finished(writes: &[PendingWrite], task: usize) -> bool {
    writes
        .iter()
        .any(|w| w.task == task && matches!(w.kind, PendingKind::Update { .. }))
}

/// The usage ledgers the finished tasks' results in `writes` hold (`usage`, the built-in
/// agents' convention), each with its node, in one row each.
fn results(writes: &[PendingWrite]) -> impl Iterator<Item = (&str, NodeUsage)> {
    writes.iter().filter_map(|w| {
        let PendingKind::Update { update, .. } = &w.kind else {
            return None;
        };
        let usage = usage_in(update.get());
        (!usage.is_empty()).then(|| (w.node.as_str(), usage.total()))
    })
}

fn one_row(name: String, usage: &NodeUsage) -> UsageLedger {
    UsageLedger {
        nodes: [(name, *usage)].into(),
    }
}

fn renamed(ledger: &UsageLedger, name: impl Fn(&str) -> String) -> UsageLedger {
    UsageLedger {
        nodes: (ledger.nodes.iter())
            .map(|(row, usage)| (name(row), *usage))
            .collect(),
    }
}

/// True when `thread` has a checkpoint.
async fn exists(store: &dyn Checkpointer, thread: &str) -> Result<bool, CheckpointError> {
    Ok(!store.list_checkpoints(thread, None, 1).await?.is_empty())
}
