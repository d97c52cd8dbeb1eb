//! `graph prune --policy`: each registered graph's `[retention]` table (from the graph file
//! `graph run NAME` uses) applied to the store's threads of that graph, through
//! [`stategraph_registry::sweep`]; what went and what was left (a thread being written) is said.
//! Then the long-term store's items past their TTL are removed (`sweep_expired`), and counted.

use crate::args::PruneArgs;
use crate::error::{EXIT_DONE, EXIT_FAILURE};
use crate::{out, Ctx};
use serde_json::json;
use stategraph::checkpoint::now_ms;
use stategraph::checkpoint::store::StoreError;
use stategraph_registry::{sweep, Pruner, Sweep, SweepReport};

/// Prunes a thread as `graph prune --thread` does: holding it first (a store directory locks
/// its folder), through the graph it was started with.
struct HeldPruner<'a> {
    ctx: &'a Ctx,
}

#[async_trait::async_trait]
impl Pruner for HeldPruner<'_> {
    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, String> {
        let ctx = self.ctx;
        ctx.store.hold(thread).await.map_err(|e| e.to_string())?;
        let pruned = async {
            let (resolved, _) = ctx.graph_for_thread(thread, &[]).await?;
            let graph = resolved.build(Some(ctx.checkpointer()))?;
            anyhow::Ok(graph.prune(thread, keep).await?)
        }
        .await;
        let released = ctx.store.release(thread);
        let pruned = pruned.map_err(|e| format!("{e:#}"))?;
        released.map_err(|e| e.to_string())?;
        Ok(pruned)
    }
}

/// Removes the long-term store's expired items; a folder without items has none, and none is
/// made.
async fn sweep_items(ctx: &Ctx) -> Result<usize, StoreError> {
    let threads = ctx.store.clone();
    // Opening may wait for another process holding the sled directory: off the async workers.
    let store = tokio::task::spawn_blocking(move || crate::long_term::open(&threads, true))
        .await
        .map_err(|e| StoreError::Backend(format!("opening the store failed: {e}")))??;
    store.sweep_expired().await
}

/// `graph prune --policy`.
pub(crate) async fn prune_by_policy(ctx: &Ctx, args: &PruneArgs) -> anyhow::Result<u8> {
    let now = now_ms();
    let pruner = HeldPruner { ctx };
    let mut per_graph = Vec::new();
    let mut total = SweepReport::default();
    let names: Vec<String> = ctx.registry.iter().map(|f| f.name().to_string()).collect();
    for name in names {
        // A graph whose file does not read has no policy to apply; `graph graphs` says why.
        let Ok(resolved) = ctx.registry.resolve(&name, &[]) else {
            continue;
        };
        let Some(policy) = resolved.file.retention.filter(|p| !p.is_empty()) else {
            continue;
        };
        let report = sweep(Sweep {
            store: &*ctx.store,
            graph: &name,
            policy: &policy,
            now_ms: now,
            pruner: Some(&pruner),
        })
        .await?;
        if !args.json {
            for d in report.deleted.iter() {
                say!(
                    "{}: deleted ({name}: {}, {} day(s) since its last update)",
                    d.thread,
                    d.rule,
                    d.idle_days
                );
            }
            for p in report.pruned.iter() {
                say!(
                    "{}: removed {} checkpoint(s) ({name}: keep_checkpoints)",
                    p.thread,
                    p.removed
                );
            }
            for s in report.skipped.iter() {
                say!("{}: skipped ({})", s.thread, s.reason);
            }
        }
        per_graph.push(json!({"graph": name, "policy": policy, "report": report}));
        total.deleted.extend(report.deleted);
        total.pruned.extend(report.pruned);
        total.skipped.extend(report.skipped);
    }
    let items = sweep_items(ctx).await;
    if args.json {
        let items = match &items {
            Ok(n) => json!({"expired_removed": n}),
            Err(e) => json!({"error": e.to_string()}),
        };
        out(&format!(
            "{:#}",
            json!({"policy": true, "graphs": per_graph, "items": items})
        ));
    } else {
        match &items {
            Ok(n) => say!("store items: removed {n} expired item(s)"),
            Err(e) => say!("store items: not swept: {e}"),
        }
        let removed: usize = total.pruned.iter().map(|p| p.removed).sum();
        say!(
            "by the graphs' [retention] tables: deleted {} thread(s), removed {removed} \
             checkpoint(s) from {} thread(s), skipped {}",
            total.deleted.len(),
            total.pruned.len(),
            total.skipped.len()
        );
    }
    Ok(if items.is_ok() {
        EXIT_DONE
    } else {
        EXIT_FAILURE
    })
}
