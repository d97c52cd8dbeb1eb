//! The node cache in Postgres: two handles (as two processes) share it, a damaged row is a
//! miss for the run and `Damaged` for the cache, and clearing goes by graph and node.

use super::support::pg_cluster::cluster;
use super::{psql, worker};
use serde::{Deserialize, Serialize};
use stategraph::graph::{CachePolicy, StateGraph};
use stategraph::runtime::{Context, HistoryQuery, RunConfig};
use stategraph::{CompiledGraph, State, END, START};
use stategraph_checkpoint::{CacheError, CacheKey, NodeCache};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Page {
    url: String,
    #[state(append)]
    text: Vec<String>,
}

fn fetch_graph(runs: Arc<AtomicU32>) -> StateGraph<Page> {
    let mut g = StateGraph::<Page>::named("pages");
    g.add_node("fetch", move |s: Arc<Page>, _c: Context| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(PageUpdate::default().text(vec![format!("body of {}", s.url)]))
        }
    })
    .cache(CachePolicy::new().key(|input| input["url"].as_str().unwrap_or("").to_string()));
    g.add_edge(START, "fetch").add_edge("fetch", END);
    g
}

async fn handle(
    db: &super::support::pg_cluster::TestDatabase,
    runs: &Arc<AtomicU32>,
) -> (CompiledGraph<Page>, Arc<dyn NodeCache>) {
    let saver = worker(db).await;
    let cache: Arc<dyn NodeCache> = Arc::new(saver.node_cache());
    let graph = fetch_graph(runs.clone())
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(saver));
    (graph, cache)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_the_cache_and_damage_is_a_miss() {
    let db = cluster().database();
    let runs = Arc::new(AtomicU32::new(0));
    let (one, cache_one) = handle(&db, &runs).await;
    let (two, cache_two) = handle(&db, &runs).await;
    let input = || PageUpdate::default().url("https://example.org/a");

    let first = one
        .invoke(
            input(),
            RunConfig::new().thread("t1").cache(cache_one.clone()),
        )
        .await
        .unwrap();
    let second = two
        .invoke(
            input(),
            RunConfig::new().thread("t2").cache(cache_two.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the other handle's result was served"
    );
    assert_eq!(second.state, first.state);
    let history = two.history("t2", HistoryQuery::default()).await.unwrap();
    assert_eq!(history[0].cached, vec!["fetch".to_string()]);

    // A byte of the stored entry changes: the cache says so, the run runs the node.
    let client = psql(&db).await;
    let damaged = client
        .execute(
            "UPDATE stategraph_node_cache SET entry = overlay(entry placing '\\x00'::bytea from length(entry) - 1)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(damaged, 1);
    let key = CacheKey::new("pages", "fetch", "https://example.org/a");
    assert!(matches!(
        cache_one.get(&key).await,
        Err(CacheError::Damaged { .. })
    ));
    let third = one
        .invoke(
            input(),
            RunConfig::new().thread("t3").cache(cache_one.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the damaged entry was a miss"
    );
    assert_eq!(third.state, first.state);
    assert!(
        cache_two.get(&key).await.unwrap().is_some(),
        "and was replaced"
    );

    assert_eq!(cache_two.clear(Some("other"), None).await.unwrap(), 0);
    assert_eq!(
        cache_two.clear(Some("pages"), Some("fetch")).await.unwrap(),
        1
    );
    assert!(cache_one.get(&key).await.unwrap().is_none());
}
