//! The background retention sweep of `graph serve` and `graph worker` (`--retention-every`):
//! a [`Sweeper`] over the command's store and the long-term store its runs use, started only
//! when some graph has a `[retention]` policy, each round that removed something said on
//! stderr (and logged), each failure warned about and tried again next interval.

use crate::store::Store as Threads;
use crate::Ctx;
use stategraph::runtime::SharedStore;
use stategraph_registry::{Holder, SweepRound, Sweeper, SweeperHandle};
use std::sync::Arc;
use std::time::Duration;

/// Starts the sweep every `every_secs` (0: off); `None` when it is off or no graph has a policy.
pub(crate) fn start(ctx: &Ctx, every_secs: u64, long_term: &SharedStore) -> Option<SweeperHandle> {
    if every_secs == 0 {
        return None;
    }
    let sweeper = Sweeper::new(
        ctx.registry.clone(),
        ctx.checkpointer(),
        Duration::from_secs(every_secs),
    )
    .long_term(long_term.0.clone())
    .holder(Arc::new(HeldHere(ctx.store.clone())));
    let targets = sweeper.targets();
    if targets.is_empty() {
        return None;
    }
    let graphs: Vec<String> = targets
        .iter()
        .map(|t| format!("{} ({})", t.graph, t.source))
        .collect();
    say!(
        "retention: sweeping every {every_secs}s by the [retention] policies of {}",
        graphs.join(", ")
    );
    let handle = sweeper.spawn();
    let mut status = handle.status();
    tokio::spawn(async move {
        let mut seen = 0;
        // Ends when the sweeper stops (its handle is dropped with the command).
        while status.changed().await.is_ok() {
            let now = status.borrow_and_update().clone();
            if now.rounds == seen {
                continue;
            }
            seen = now.rounds;
            if let Some(round) = &now.last {
                say_round(round);
            }
        }
    });
    Some(handle)
}

/// What a round removed, and what failed, one line each.
fn say_round(round: &SweepRound) {
    for g in &round.graphs {
        let r = &g.report;
        if r.deleted.is_empty() && r.pruned.is_empty() {
            continue;
        }
        let deleted: Vec<&str> = r.deleted.iter().map(|d| d.thread.as_str()).collect();
        let checkpoints: usize = r.pruned.iter().map(|p| p.removed).sum();
        say!(
            "retention: {}: deleted {} thread(s){}, removed {checkpoints} checkpoint(s) from {} \
             thread(s), skipped {}",
            g.graph,
            deleted.len(),
            match deleted.is_empty() {
                true => String::new(),
                false => format!(" ({})", deleted.join(", ")),
            },
            r.pruned.len(),
            r.skipped.len()
        );
    }
    if let Some(n) = round.items_expired.filter(|n| *n > 0) {
        say!("retention: removed {n} expired store item(s)");
    }
    for failure in &round.failures {
        say!("retention: {failure} (tried again next interval)");
    }
}

/// Holds a thread as `graph prune` does (a folder of threads locks it) while the sweep prunes.
struct HeldHere(Threads);

#[async_trait::async_trait]
impl Holder for HeldHere {
    async fn hold(&self, thread: &str) -> Result<(), String> {
        self.0.hold(thread).await.map_err(|e| e.to_string())
    }

    fn release(&self, thread: &str) -> Result<(), String> {
        self.0.release(thread).map_err(|e| e.to_string())
    }
}
