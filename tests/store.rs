//! The long-term store through a node's context (`ctx.store()`): items outlive threads, a
//! node's writes reach the store only when its step is saved (a failed attempt, a failed step
//! or a store that refused leaves nothing half-written, and a resume applies a saved step's
//! writes exactly once). The kill -9 version is `store_crash.rs`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stategraph::checkpoint::store::{
    FakeClock, Item, MemoryStore, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store,
    StoreError, StoreOp, TtlConfig,
};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::RetryPolicy;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError, SharedStore};
use stategraph::{State, StateGraph, END, START};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Chat {
    user: String,
    #[state(append)]
    said: Vec<String>,
}

fn config(store: &Arc<dyn Store>, thread: &str) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .with_store(SharedStore(store.clone()))
}

fn ns(labels: &[&str]) -> Namespace {
    labels.iter().map(|s| s.to_string()).collect()
}

async fn all(store: &Arc<dyn Store>, prefix: &[&str]) -> Vec<Item> {
    let hits = store.search(&SearchRequest::under(prefix).limit(0)).await;
    hits.unwrap().into_iter().map(|h| h.item).collect()
}

/// `remember` keeps what the user said under their namespace; `recall` reads it back.
fn memory_graph() -> StateGraph<Chat> {
    let mut g = StateGraph::<Chat>::named("memory");
    g.add_node("remember", |s: Arc<Chat>, ctx: Context| async move {
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        for (i, text) in s.said.iter().enumerate() {
            let key = format!("{}-{i}", ctx.thread_id());
            store
                .put(&["users", &s.user], &key, json!({"text": text}))
                .await?;
        }
        // Its own writes are visible to the node at once.
        let mine = store
            .get(&["users", &s.user], &format!("{}-0", ctx.thread_id()))
            .await?;
        assert!(mine.is_some(), "a node reads its own staged write");
        Ok(ChatUpdate::default())
    });
    g.add_node("recall", |s: Arc<Chat>, ctx: Context| async move {
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        let hits = store
            .search(&SearchRequest::under(&["users", &s.user]).limit(0))
            .await?;
        let texts = hits
            .iter()
            .map(|h| h.item.value["text"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>();
        Ok(ChatUpdate::default().said(vec![format!("recalled {}", texts.len())]))
    });
    g.add_edge(START, "remember")
        .add_edge("remember", "recall")
        .add_edge("recall", END);
    g
}

#[tokio::test]
async fn what_a_user_said_in_one_thread_is_recalled_in_another() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let graph = memory_graph()
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let first = ChatUpdate::default()
        .user("ada")
        .said(vec!["I like Rust".into()]);
    let out = graph.invoke(first, config(&store, "t1")).await.unwrap();
    assert_eq!(
        out.state.said.last().map(String::as_str),
        Some("recalled 1")
    );
    let second = ChatUpdate::default()
        .user("ada")
        .said(vec!["call me Ada".into()]);
    let out = graph.invoke(second, config(&store, "t2")).await.unwrap();
    assert_eq!(
        out.state.said.last().map(String::as_str),
        Some("recalled 2"),
        "the second thread sees the first thread's item and its own"
    );
    let items = all(&store, &["users", "ada"]).await;
    assert_eq!(items.len(), 2);
    let spaces = store
        .list_namespaces(&NamespaceQuery::default())
        .await
        .unwrap();
    assert_eq!(spaces, [ns(&["users", "ada"])]);
}

#[tokio::test]
async fn without_a_store_a_node_gets_none_and_without_a_checkpointer_writes_go_straight_in() {
    let mut g = StateGraph::<Chat>::named("plain");
    g.add_node("look", |_s: Arc<Chat>, ctx: Context| async move {
        Ok(ChatUpdate::default().said(vec![format!("store: {}", ctx.store().is_some())]))
    });
    g.add_edge(START, "look").add_edge("look", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(ChatUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.said, ["store: false"]);

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let graph = memory_graph().compile().unwrap();
    let input = ChatUpdate::default().user("bo").said(vec!["hi".into()]);
    let out = graph.invoke(input, config(&store, "t")).await.unwrap();
    assert_eq!(
        out.state.said.last().map(String::as_str),
        Some("recalled 1")
    );
}

/// A node's read chooses whether an item's TTL starts again (LangGraph's `refresh_ttl`), over
/// the store's default; the refresh is the store's at once, not staged with the step.
#[tokio::test]
async fn a_nodes_read_refreshes_a_ttl_when_it_asks() {
    let clock = Arc::new(FakeClock::at(0));
    let store: Arc<dyn Store> =
        Arc::new(MemoryStore::with_clock(clock.clone()).with_ttl(TtlConfig {
            default_ttl_ms: Some(1_000),
            refresh_on_read: false,
        }));
    store.put(&["s"], "kept", json!(1)).await.unwrap();
    store.put(&["s"], "left", json!(2)).await.unwrap();
    clock.advance(900);
    let mut g = StateGraph::<Chat>::named("refresh");
    g.add_node("read", |_s: Arc<Chat>, ctx: Context| async move {
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        let kept = store.get_with(&["s"], "kept", Some(true)).await?;
        let left = store.get(&["s"], "left").await?;
        let expiries = [kept, left].map(|item| item.and_then(|i| i.expires_at_ms));
        Ok(ChatUpdate::default().said(vec![format!("{expiries:?}")]))
    });
    g.add_edge(START, "read").add_edge("read", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await
        .unwrap();
    assert_eq!(out.state.said, ["[Some(1900), Some(1000)]"]);
    clock.advance(200);
    let kept = store.get(&ns(&["s"]), "kept").await.unwrap();
    assert_eq!(
        kept.map(|i| i.value),
        Some(json!(1)),
        "refreshed at 900, lives to 1900"
    );
    assert!(
        store.get(&ns(&["s"]), "left").await.unwrap().is_none(),
        "expired at 1000"
    );
}

/// Two tasks in one step: `put` writes, `peek` looks after it did; then `after` looks.
#[tokio::test]
async fn a_write_reaches_the_store_when_its_step_is_saved_not_before() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let put_done = Arc::new(tokio::sync::Notify::new());
    let mut g = StateGraph::<Chat>::named("steps");
    let signal = put_done.clone();
    g.add_node("put", move |_s: Arc<Chat>, ctx: Context| {
        let signal = signal.clone();
        async move {
            let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
            store.put(&["n"], "k", json!("v")).await?;
            signal.notify_one();
            Ok(ChatUpdate::default())
        }
    });
    let wait = put_done.clone();
    g.add_node("peek", move |_s: Arc<Chat>, ctx: Context| {
        let wait = wait.clone();
        async move {
            wait.notified().await;
            let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
            let seen = store.get(&["n"], "k").await?.is_some();
            Ok(ChatUpdate::default().said(vec![format!("peek saw {seen}")]))
        }
    });
    g.add_node("after", |_s: Arc<Chat>, ctx: Context| async move {
        let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
        let seen = store.get(&["n"], "k").await?.is_some();
        Ok(ChatUpdate::default().said(vec![format!("after saw {seen}")]))
    });
    g.add_edge(START, "put")
        .add_edge(START, "peek")
        .add_edge("put", "after")
        .add_edge("peek", "after")
        .add_edge("after", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await
        .unwrap();
    assert_eq!(out.state.said, ["peek saw false", "after saw true"]);
}

#[tokio::test]
async fn a_failed_attempt_leaves_nothing_and_the_retry_writes_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let attempts = Arc::new(AtomicU32::new(0));
    let mut g = StateGraph::<Chat>::named("retry");
    let seen = attempts.clone();
    g.add_node("flaky", move |_s: Arc<Chat>, ctx: Context| {
        let seen = seen.clone();
        async move {
            let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
            let attempt = seen.fetch_add(1, Ordering::SeqCst) + 1;
            if attempt == 1 {
                store.put(&["n"], "from-attempt-1", json!(1)).await?;
                return Err(NodeError::transient("the model timed out"));
            }
            store.put(&["n"], "from-attempt-2", json!(2)).await?;
            Ok(ChatUpdate::default())
        }
    })
    .retry(RetryPolicy::new(3).initial_interval(Duration::from_millis(1)));
    g.add_edge(START, "flaky").add_edge("flaky", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await
        .unwrap();
    let keys: Vec<String> = all(&store, &["n"])
        .await
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, ["from-attempt-2"]);
}

/// `good` writes and finishes; `bad` fails on the first run: nothing reaches the store. The
/// resume reuses `good`'s saved result (it does not run again) and applies its writes once.
#[tokio::test]
async fn a_failed_step_writes_nothing_and_its_resume_writes_each_item_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let fail = Arc::new(AtomicBool::new(true));
    let good_runs = Arc::new(AtomicU32::new(0));
    let mut g = StateGraph::<Chat>::named("partial");
    let runs = good_runs.clone();
    g.add_node("good", move |_s: Arc<Chat>, ctx: Context| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
            // A fresh key each run: a second run would leave a second item.
            let key = uuid::Uuid::now_v7().to_string();
            store
                .put(&["facts"], &key, json!("the sky is blue"))
                .await?;
            Ok(ChatUpdate::default())
        }
    });
    let failing = fail.clone();
    g.add_node("bad", move |_s: Arc<Chat>, _ctx: Context| {
        let failing = failing.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if failing.load(Ordering::SeqCst) {
                return Err(NodeError::new("disk full"));
            }
            Ok(ChatUpdate::default())
        }
    });
    g.add_edge(START, "good")
        .add_edge(START, "bad")
        .add_edge("good", END)
        .add_edge("bad", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let failed = graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await;
    assert!(
        matches!(failed, Err(RunError::NodeFailed { .. })),
        "{failed:?}"
    );
    assert!(
        all(&store, &["facts"]).await.is_empty(),
        "a failed step wrote nothing"
    );
    fail.store(false, Ordering::SeqCst);
    graph
        .resume("t", Resume::Continue, config(&store, "t"))
        .await
        .unwrap();
    assert_eq!(
        good_runs.load(Ordering::SeqCst),
        1,
        "good's saved result was reused"
    );
    assert_eq!(all(&store, &["facts"]).await.len(), 1);
}

/// A task's writes staged by an attempt that failed are not its result's: when a later run
/// finishes the task without writing, and a sibling's failure saves that result for the run
/// after to reuse, the failed attempt's writes are never applied with it.
#[tokio::test]
async fn a_reused_result_brings_only_the_writes_of_the_run_that_finished_it() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let flaky_runs = Arc::new(AtomicU32::new(0));
    let bad_runs = Arc::new(AtomicU32::new(0));
    let mut g = StateGraph::<Chat>::named("stale");
    let runs = flaky_runs.clone();
    g.add_node("flaky", move |_s: Arc<Chat>, ctx: Context| {
        let runs = runs.clone();
        async move {
            if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first run stages a write, then fails: it must never reach the store.
                let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
                store.put(&["facts"], "ghost", json!("half done")).await?;
                return Err(NodeError::new("timed out"));
            }
            Ok(ChatUpdate::default())
        }
    });
    let runs = bad_runs.clone();
    g.add_node("bad", move |_s: Arc<Chat>, _ctx: Context| {
        let runs = runs.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if runs.fetch_add(1, Ordering::SeqCst) < 2 {
                return Err(NodeError::new("disk full"));
            }
            Ok(ChatUpdate::default())
        }
    });
    g.add_edge(START, "flaky")
        .add_edge(START, "bad")
        .add_edge("flaky", END)
        .add_edge("bad", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let first = graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await;
    assert!(
        matches!(first, Err(RunError::NodeFailed { .. })),
        "{first:?}"
    );
    // `flaky` finishes without writing; `bad` fails again, so `flaky`'s result is saved for
    // the next run to reuse.
    let second = graph
        .resume("t", Resume::Continue, config(&store, "t"))
        .await;
    assert!(
        matches!(second, Err(RunError::NodeFailed { .. })),
        "{second:?}"
    );
    graph
        .resume("t", Resume::Continue, config(&store, "t"))
        .await
        .unwrap();
    assert_eq!(
        flaky_runs.load(Ordering::SeqCst),
        2,
        "the finished result was reused"
    );
    assert_eq!(
        all(&store, &["facts"]).await,
        Vec::<Item>::new(),
        "the failed attempt's write stayed out of the store"
    );
}

/// A store that refuses its first `refusals` batches.
struct Refusing {
    inner: MemoryStore,
    refusals: AtomicU32,
}

#[async_trait]
impl Store for Refusing {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        if self
            .refusals
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Backend("connection reset".into()));
        }
        self.inner.batch(ops).await
    }
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.inner.get(namespace, key).await
    }
    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        self.inner.search(request).await
    }
    async fn list_namespaces(&self, q: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        self.inner.list_namespaces(q).await
    }
    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        self.inner.sweep_expired().await
    }
}

/// The step is saved but the store refuses its writes: the run fails naming the checkpoint,
/// and a resume applies the saved writes (once) before going on.
#[tokio::test]
async fn writes_a_store_refused_are_applied_by_the_resume() {
    let store: Arc<dyn Store> = Arc::new(Refusing {
        inner: MemoryStore::new(),
        refusals: AtomicU32::new(1),
    });
    let remembered = Arc::new(AtomicU32::new(0));
    let mut g = StateGraph::<Chat>::named("refused");
    let count = remembered.clone();
    g.add_node("remember", move |_s: Arc<Chat>, ctx: Context| {
        let count = count.clone();
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            let store = ctx.store().ok_or_else(|| NodeError::new("no store"))?;
            store
                .put(&["facts"], &uuid::Uuid::now_v7().to_string(), json!(1))
                .await?;
            Ok(ChatUpdate::default().said(vec!["remembered".into()]))
        }
    });
    g.add_node("end", |_s: Arc<Chat>, _ctx: Context| async move {
        Ok(ChatUpdate::default().said(vec!["end".into()]))
    });
    g.add_edge(START, "remember")
        .add_edge("remember", "end")
        .add_edge("end", END);
    let graph = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let failed = graph
        .invoke(ChatUpdate::default(), config(&store, "t"))
        .await;
    match &failed {
        Err(e @ RunError::Store { .. }) => {
            assert!(
                e.to_string().contains("resuming the thread applies them"),
                "{e}"
            );
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    assert!(all(&store, &["facts"]).await.is_empty());
    let out = graph
        .resume("t", Resume::Continue, config(&store, "t"))
        .await
        .unwrap();
    assert_eq!(out.state.said, ["remembered", "end"]);
    assert_eq!(
        remembered.load(Ordering::SeqCst),
        1,
        "the saved step did not run again"
    );
    assert_eq!(
        all(&store, &["facts"]).await.len(),
        1,
        "applied once, by the resume"
    );
    // A later resume of the finished thread applies nothing again.
    let _ = graph
        .resume("t", Resume::Continue, config(&store, "t"))
        .await;
    assert_eq!(all(&store, &["facts"]).await.len(), 1);
}
