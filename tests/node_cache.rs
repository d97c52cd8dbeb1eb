//! The node cache through the public API: a node whose input was seen before (in any thread of
//! the graph) does not run; its cached update is merged as if it had, marked as a hit in the
//! stream and in the thread's history; `no_cache` bypasses it; an expired, damaged or no longer
//! decodable entry is a miss, never an error or a wrong value.

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{CacheKey, MemoryCache, MemoryCheckpointer, NodeCache};
use stategraph::graph::{CachePolicy, StateGraph};
use stategraph::runtime::{Context, Event, HistoryQuery, RunConfig, StreamMode};
use stategraph::CompiledGraph;
use stategraph::{Send, State, END, START};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Search {
    query: String,
    /// Not part of the cached node's key when a custom key is used.
    noise: u32,
    #[state(append)]
    results: Vec<String>,
}

/// `search` (cached) then `tally`; counts how often `search` really ran.
fn search_graph(runs: Arc<AtomicU32>, policy: CachePolicy) -> CompiledGraph<Search> {
    let mut g = StateGraph::<Search>::named("cached-search");
    g.add_node("search", move |s: Arc<Search>, _c: Context| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(SearchUpdate::default().results(vec![format!("found {}", s.query)]))
        }
    })
    .cache(policy);
    g.add_node("tally", |s: Arc<Search>, _c: Context| async move {
        Ok(SearchUpdate::default().results(vec![format!("{} results", s.results.len())]))
    });
    g.add_edge(START, "search")
        .add_edge("search", "tally")
        .add_edge("tally", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

fn input(query: &str, noise: u32) -> SearchUpdate {
    SearchUpdate::default().query(query).noise(noise)
}

fn config(cache: &Arc<MemoryCache>, thread: &str) -> RunConfig {
    let cache: Arc<dyn NodeCache> = cache.clone();
    RunConfig::new().thread(thread).cache(cache)
}

#[tokio::test]
async fn a_second_thread_with_the_same_input_is_served_from_the_cache() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let graph = search_graph(runs.clone(), CachePolicy::new());

    let first = graph
        .invoke(input("rust", 0), config(&cache, "t1"))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(cache.len(), 1, "the finished result was stored");

    let modes = [StreamMode::Updates, StreamMode::Debug];
    let mut stream = graph.stream(input("rust", 0), config(&cache, "t2").stream_modes(modes));
    let mut updates = Vec::new();
    let mut finished = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Event::Updates { node, cached, .. } => updates.push((node, cached)),
            Event::NodeFinished { node, cached, .. } => finished.push((node, cached)),
            _ => {}
        }
    }
    let second = stream.outcome().await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the hit did not run the node"
    );
    assert_eq!(
        second.state, first.state,
        "a hit gives the same merged state as a run"
    );
    assert_eq!(
        updates,
        vec![("search".to_string(), true), ("tally".to_string(), false)]
    );
    assert!(finished.contains(&("search".to_string(), true)));

    let history = graph.history("t2", HistoryQuery::default()).await.unwrap();
    let marked: Vec<_> = history.iter().flat_map(|e| e.cached.clone()).collect();
    assert_eq!(marked, vec!["search".to_string()], "history marks the hit");
    let first_history = graph.history("t1", HistoryQuery::default()).await.unwrap();
    assert!(first_history.iter().all(|e| e.cached.is_empty()));
    let json = serde_json::to_value(&history).unwrap();
    assert!(json.to_string().contains(r#""cached":["search"]"#));
}

#[tokio::test]
async fn another_input_misses_and_no_cache_bypasses() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let graph = search_graph(runs.clone(), CachePolicy::new());
    graph
        .invoke(input("rust", 0), config(&cache, "a"))
        .await
        .unwrap();
    // The default key hashes the whole input: another field's change is a miss.
    graph
        .invoke(input("rust", 1), config(&cache, "b"))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(cache.len(), 2);

    let mut bypass = config(&cache, "c");
    bypass.no_cache = true;
    let out = graph.invoke(input("rust", 0), bypass).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3, "no_cache runs the node");
    assert_eq!(cache.len(), 2, "and stores nothing");
    assert_eq!(out.state.results, vec!["found rust", "1 results"]);
    let history = graph.history("c", HistoryQuery::default()).await.unwrap();
    assert!(history.iter().all(|e| e.cached.is_empty()));
}

#[tokio::test]
async fn a_custom_key_sees_only_what_it_reads_and_a_ttl_expires() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let policy = CachePolicy {
        key: Some(Arc::new(|input| input["query"].to_string())),
        ttl: Some(Duration::from_millis(300)),
    };
    let graph = search_graph(runs.clone(), policy);
    graph
        .invoke(input("rust", 0), config(&cache, "a"))
        .await
        .unwrap();
    graph
        .invoke(input("rust", 7), config(&cache, "b"))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "noise is not part of the key"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    graph
        .invoke(input("rust", 0), config(&cache, "c"))
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "an expired entry is a miss");
    graph
        .invoke(input("rust", 0), config(&cache, "d"))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "and the new result is served again"
    );
}

#[tokio::test]
async fn a_damaged_entry_is_a_miss() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let policy = CachePolicy::new().key(|input| input["query"].to_string());
    let graph = search_graph(runs.clone(), policy);
    graph
        .invoke(input("rust", 0), config(&cache, "a"))
        .await
        .unwrap();
    let key = CacheKey::new("cached-search", "search", "\"rust\"");
    cache.tamper(&key, |bytes| {
        let last = bytes.len() - 2;
        bytes[last] ^= 0x55;
    });
    let out = graph
        .invoke(input("rust", 0), config(&cache, "b"))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the damaged entry was not served"
    );
    assert_eq!(out.state.results, vec!["found rust", "1 results"]);
    graph
        .invoke(input("rust", 0), config(&cache, "c"))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the entry was replaced by the new result"
    );
}

/// The same graph name and node over a changed state type: `results` became numbers.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct SearchV2 {
    query: String,
    noise: u32,
    #[state(append)]
    results: Vec<u64>,
}

#[tokio::test]
async fn an_entry_that_no_longer_decodes_is_a_miss_not_an_error() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let policy = CachePolicy::new().key(|input| input["query"].to_string());
    let old = search_graph(runs.clone(), policy.clone());
    old.invoke(input("rust", 0), config(&cache, "a"))
        .await
        .unwrap();

    let runs_v2 = Arc::new(AtomicU32::new(0));
    let counter = runs_v2.clone();
    let mut g = StateGraph::<SearchV2>::named("cached-search");
    g.add_node("search", move |_s: Arc<SearchV2>, _c: Context| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(SearchV2Update::default().results(vec![42]))
        }
    })
    .cache(policy);
    g.add_edge(START, "search").add_edge("search", END);
    let new = g.compile().unwrap();
    let cache_dyn: Arc<dyn NodeCache> = cache.clone();
    let out = new
        .invoke(
            SearchV2Update::default().query("rust"),
            RunConfig::new().cache(cache_dyn),
        )
        .await
        .unwrap();
    assert_eq!(
        runs_v2.load(Ordering::SeqCst),
        1,
        "the old entry was a miss"
    );
    assert_eq!(out.state.results, vec![42]);
}

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Fan {
    items: Vec<u32>,
    #[state(append)]
    doubled: Vec<u32>,
    #[state(add)]
    total: u32,
}

/// `split` sends each item to the cached `double`; a cached `count` runs beside the sends.
fn fan_graph(runs: Arc<AtomicU32>) -> CompiledGraph<Fan> {
    let mut g = StateGraph::<Fan>::named("cached-fan");
    g.add_node("split", |_s: Arc<Fan>, _c: Context| async {
        Ok(FanUpdate::default())
    });
    let counter = runs.clone();
    g.add_node("double", move |_s: Arc<Fan>, c: Context| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            let n: u32 = c.arg()?;
            // Finish out of order: the merge must still be in task order.
            tokio::time::sleep(Duration::from_millis(u64::from(10 - n % 10))).await;
            Ok(FanUpdate::default().doubled(vec![n * 2]).total(n))
        }
    })
    .cache(CachePolicy::new());
    g.add_node("count", move |s: Arc<Fan>, _c: Context| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(FanUpdate::default().total(s.items.len() as u32 * 100))
        }
    })
    .cache(CachePolicy::new());
    g.add_edge(START, "split").add_edge("split", "count");
    g.add_conditional_edges(
        "split",
        |s: &Fan| {
            s.items
                .iter()
                .map(|&n| Send::new("double", n))
                .collect::<Vec<_>>()
        },
        ["double"],
    );
    g.add_edge("double", END).add_edge("count", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

#[tokio::test]
async fn hits_in_a_parallel_step_merge_in_task_order_like_runs() {
    let runs = Arc::new(AtomicU32::new(0));
    let cache = Arc::new(MemoryCache::new());
    let graph = fan_graph(runs.clone());
    let items = vec![3, 1, 4, 1, 5, 9, 2, 6];
    let ran = graph
        .invoke(
            FanUpdate::default().items(items.clone()),
            config(&cache, "ran"),
        )
        .await
        .unwrap();
    // `double` of 1 twice is one key: the second Send of 1 may or may not find the first's
    // entry (they run at once); both give the same result either way.
    let after_first = runs.load(Ordering::SeqCst);
    assert!(after_first >= 8, "{after_first}");
    let hit = graph
        .invoke(FanUpdate::default().items(items), config(&cache, "hit"))
        .await
        .unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        after_first,
        "every task was a hit"
    );
    assert_eq!(hit.state, ran.state);
    assert_eq!(ran.state.doubled, vec![6, 2, 8, 2, 10, 18, 4, 12]);
    assert_eq!(ran.state.total, 31 + 800);
}
