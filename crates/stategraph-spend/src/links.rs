//! A thread's checkpoints as the spend walk reads them: each one's parent, why it was written,
//! its tasks' nodes and (when asked) its state's usage ledger; which ones a step finished at.

use stategraph::checkpoint::{CheckpointError, CheckpointId, Checkpointer, Source, StateData};
use stategraph_llm::UsageLedger;
use std::collections::{HashMap, HashSet};

/// The thread's checkpoints as links of its branches.
pub(super) struct Links {
    pub(super) newest: Option<CheckpointId>,
    /// Every checkpoint is listed (not only those from a `down_to` on).
    pub(super) complete: bool,
    pub(super) by_id: HashMap<CheckpointId, Link>,
    /// Checkpoints a step finished at: the parents of `loop` checkpoints.
    pub(super) finished: HashSet<CheckpointId>,
}

pub(super) struct Link {
    pub(super) parent: Option<CheckpointId>,
    pub(super) source: Source,
    /// The nodes of the checkpoint's tasks, in task order.
    pub(super) tasks: Vec<String>,
    /// The state's usage ledger (`usage`), when asked for.
    usage: Option<StateUsage>,
}

/// A checkpoint's usage ledger, as its state stores it.
enum StateUsage {
    /// A snapshot's whole ledger.
    Whole(UsageLedger),
    /// What a delta's writes add to its parent's (the built-in agents' ledgers merge).
    Added(UsageLedger),
}

/// The thread's checkpoints; with `usage`, each one's usage ledger too. With `down_to`, only
/// those from that checkpoint on (and a few older), newest first as listed: a checkpoint's
/// children are all newer than it (a new checkpoint has a new, later id), so each one listed
/// comes with every step that finished at it.
pub(super) async fn branch_links(
    store: &dyn Checkpointer,
    thread: &str,
    usage: bool,
    down_to: Option<CheckpointId>,
) -> Result<Links, CheckpointError> {
    let mut links = Links {
        newest: None,
        complete: false,
        by_id: HashMap::new(),
        finished: HashSet::new(),
    };
    let mut before = None;
    // Small pages first when a few checkpoints will do (the kept one is often the newest).
    let mut size = if down_to.is_some() { 8 } else { 200 };
    loop {
        if down_to.is_some_and(|d| before.is_some_and(|b| b <= d)) {
            break;
        }
        let page = store.list_checkpoints(thread, before, size).await?;
        let Some(last) = page.last() else {
            links.complete = true;
            break;
        };
        before = Some(last.id);
        links.complete = page.len() < size;
        size = (size * 4).min(200);
        for record in page {
            links.newest.get_or_insert(record.id);
            if let (Source::Loop, Some(parent)) = (record.metadata.source, record.parent_id) {
                links.finished.insert(parent);
            }
            let usage = usage.then(|| match &record.state {
                StateData::Snapshot(raw) => StateUsage::Whole(usage_in(raw.get())),
                StateData::Delta(writes) => {
                    StateUsage::Added((writes.iter()).fold(UsageLedger::default(), |sum, w| {
                        sum.merged(&usage_in(w.update.get()))
                    }))
                }
            });
            let tasks = record.frontier.tasks.into_iter().map(|t| t.node).collect();
            let link = Link {
                parent: record.parent_id,
                source: record.metadata.source,
                tasks,
                usage,
            };
            links.by_id.insert(record.id, link);
        }
        if links.complete {
            break;
        }
    }
    Ok(links)
}

/// The usage ledger in a state or an update (`usage`, the built-in agents' convention); empty
/// when there is none or it does not read (this is a readout).
pub(super) fn usage_in(json: &str) -> UsageLedger {
    #[derive(serde::Deserialize)]
    struct WithUsage {
        #[serde(default)]
        usage: Option<UsageLedger>,
    }
    serde_json::from_str::<WithUsage>(json)
        .ok()
        .and_then(|w| w.usage)
        .unwrap_or_default()
}

/// The usage ledger of the state at `at`: its snapshot's, plus the deltas after it.
pub(super) fn usage_at(links: &Links, mut at: CheckpointId) -> UsageLedger {
    let mut sum = UsageLedger::default();
    while let Some(link) = links.by_id.get(&at) {
        match &link.usage {
            Some(StateUsage::Whole(whole)) => return sum.merged(whole),
            Some(StateUsage::Added(added)) => sum.merge(added),
            None => break,
        }
        match link.parent {
            Some(parent) => at = parent,
            None => break,
        }
    }
    sum
}

/// The first checkpoint of the branch of `links` that ends at `head`, and why it was written.
pub(super) fn first_of(links: &Links, mut head: CheckpointId) -> (CheckpointId, Option<Source>) {
    while let Some(link) = links.by_id.get(&head) {
        match link.parent {
            Some(parent) => head = parent,
            None => return (head, Some(link.source)),
        }
    }
    (head, None)
}

/// The nodes of the tasks of `checkpoint`, in task order.
pub(super) fn tasks_of(links: &Links, checkpoint: CheckpointId) -> &[String] {
    links
        .by_id
        .get(&checkpoint)
        .map_or(&[], |l| l.tasks.as_slice())
}
