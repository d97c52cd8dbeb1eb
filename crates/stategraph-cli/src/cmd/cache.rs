//! `graph cache clear`, and the store's node cache as runs use it: in a directory store a sled
//! directory beside the threads (`<db>/cache`), in a Postgres store the database's cache table.
//! `--no-cache` on a run leaves it out of the run's config.

use crate::args::{CacheAction, CacheArgs};
use crate::error::EXIT_DONE;
use crate::store::Store;
use crate::{out, Ctx};
use stategraph::checkpoint::NodeCache;
use stategraph::runtime::RunConfig;
use stategraph_sled::SledCache;
use std::sync::Arc;

/// The store's node cache.
pub(crate) fn node_cache(store: &Store) -> Arc<dyn NodeCache> {
    match store {
        Store::Folder(folder) => Arc::new(SledCache::of_store(folder.root())),
        Store::Postgres(pg) => Arc::new(pg.saver.node_cache()),
    }
}

/// `config` with the store's cache, unless the command said `--no-cache`.
pub(crate) fn with_cache(config: RunConfig, ctx: &Ctx, no_cache: bool) -> RunConfig {
    config.cache(node_cache(&ctx.store)).no_cache(no_cache)
}

/// A history row's writers, those served from the cache marked so.
pub(crate) fn marked(writers: &[String], cached: &[String]) -> Vec<String> {
    let mut hits = cached.iter().peekable();
    writers
        .iter()
        .map(|w| {
            // `cached` is the writers' hits in task order: match them in that order.
            if hits.peek() == Some(&w) {
                hits.next();
                format!("{w} (cached)")
            } else {
                w.clone()
            }
        })
        .collect()
}

/// `graph cache clear [GRAPH] [--node NODE]`.
pub(crate) async fn cache(ctx: &Ctx, args: CacheArgs) -> anyhow::Result<u8> {
    let CacheAction::Clear { graph, node, json } = args.action;
    let removed = node_cache(&ctx.store)
        .clear(graph.as_deref(), node.as_deref())
        .await
        .map_err(|e| anyhow::anyhow!("{e}; nothing was removed"))?;
    if json {
        out(&serde_json::json!({"removed": removed, "graph": graph, "node": node}).to_string());
        return Ok(EXIT_DONE);
    }
    let of_node = node.map(|n| format!(" of node {n}")).unwrap_or_default();
    let of_graph = match graph {
        Some(g) => format!(" of graph {g}"),
        None => String::new(),
    };
    let noun = if removed == 1 { "result" } else { "results" };
    out(&format!(
        "removed {removed} cached {noun}{of_node}{of_graph} from {}",
        ctx.store.place()
    ));
    Ok(EXIT_DONE)
}
