//! The journal: a node records an expensive call's result as soon as it returns, so a re-run of
//! the node (after a failure, a crash or an interrupt) gets the result instead of calling again.
//! A thread's journal keys (and a subgraph namespace's) are listed, and a thread's namespaces
//! are, so whatever rewrites a thread's records (a re-seal under a new key) reaches every entry.

use crate::backends::Backend;
use crate::common::{entries, strings, Log, LogUpdate};
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunStatus};
use stategraph::{StateGraph, END, START};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Stands in for a model call that costs money: counts its calls.
async fn expensive_call(calls: Arc<AtomicUsize>, prompt: String) -> Result<String, NodeError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("answer #{n} to {prompt}"))
}

pub async fn a_recorded_call_is_not_repeated_when_the_node_reruns(backend: &dyn Backend) {
    let calls = Arc::new(AtomicUsize::new(0));
    let crash_after_call = Arc::new(AtomicBool::new(true));

    // `summarise` pays for a call, then fails (the process "dies") before it completes.
    let mut g = StateGraph::<Log>::new();
    let (c, crash) = (calls.clone(), crash_after_call.clone());
    g.add_node("summarise", move |_s: Arc<Log>, ctx: Context| {
        let (c, crash) = (c.clone(), crash.clone());
        async move {
            let summary: String = ctx
                .record("summary", || expensive_call(c, "summarise".into()))
                .await?;
            if crash.load(Ordering::SeqCst) {
                return Err(NodeError::new("lost the connection after the call"));
            }
            Ok(LogUpdate::default().steps(vec![summary]))
        }
    });
    // `approve` pays for a call, then asks a person: the re-run after the answer reuses it.
    let c = calls.clone();
    g.add_node("approve", move |_s: Arc<Log>, ctx: Context| {
        let c = c.clone();
        async move {
            let draft: String = ctx
                .record("draft", || expensive_call(c, "draft".into()))
                .await?;
            let verdict: String = ctx.interrupt(&draft).await?;
            Ok::<_, NodeError>(LogUpdate::default().steps(vec![format!("{draft}: {verdict}")]))
        }
    });
    g.add_edge(START, "summarise")
        .add_edge("summarise", "approve")
        .add_edge("approve", END);
    let graph = g.compile().unwrap().with_checkpointer(backend.saver());

    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    crash_after_call.store(false, Ordering::SeqCst);
    let paused = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "summarise reused its call; approve made one"
    );

    let done = graph
        .resume("t", Resume::value("ok").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "approve reused its call after the interrupt"
    );
    assert_eq!(
        done.state.steps,
        strings(&["answer #1 to summarise", "answer #2 to draft: ok"])
    );

    // Recorded results belong to one task at one checkpoint: a later run of the same node (here,
    // the same thread run again) makes a fresh call.
    let again = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(again.is_interrupted());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "summarise and approve each called again"
    );
}

/// A node that records one call under `key`, returning `value`, and appends the thread it ran
/// in (`at:...`) and what the call returned.
fn recorder(g: &mut StateGraph<Log>, node: &str, key: &'static str, calls: Arc<AtomicUsize>) {
    g.add_node(node, move |_s: Arc<Log>, ctx: Context| {
        let calls = calls.clone();
        async move {
            let got: String = ctx
                .record(key, || expensive_call(calls, key.into()))
                .await?;
            Ok::<_, NodeError>(entries(&[&format!("at:{}", ctx.thread_id()), &got]))
        }
    });
}

pub async fn journal_keys_are_listed_per_thread_and_namespace(backend: &dyn Backend) {
    let store = backend.saver();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut child = StateGraph::<Log>::named("child");
    recorder(&mut child, "look", "lookup", calls.clone());
    child.add_edge(START, "look").add_edge("look", END);
    let mut g = StateGraph::<Log>::named("parent");
    recorder(&mut g, "fetch", "page", calls.clone());
    g.add_node("child", child.compile().unwrap());
    g.add_edge(START, "fetch")
        .add_edge("fetch", "child")
        .add_edge("child", END);
    let graph = g.compile().unwrap().with_checkpointer(store.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(matches!(out.status, RunStatus::Done), "{:?}", out.status);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let at: Vec<&str> = (out.state.steps.iter())
        .filter_map(|s| s.strip_prefix("at:"))
        .collect();
    assert_eq!(at.len(), 2, "{:?}", out.state.steps);
    let namespace = at[1].to_string();
    assert!(namespace.starts_with("t/child:"), "{namespace}");

    // The root lists its own entry, the namespace its own: neither lists the other's.
    let root = store.list_journal("t").await.unwrap();
    let ns = store.list_journal(&namespace).await.unwrap();
    assert!(
        root.iter().any(|k| k.ends_with("/page")) && !root.iter().any(|k| k.ends_with("lookup")),
        "the root's journal keys: {root:?}"
    );
    assert_eq!(ns.len(), 1, "the namespace's journal keys: {ns:?}");
    assert!(ns[0].ends_with("/lookup"), "{ns:?}");
    // The namespace is listed under its root, and nowhere else.
    assert_eq!(
        store.list_namespaces("t").await.unwrap(),
        vec![namespace.clone()]
    );
    assert!(store.list_namespaces(&namespace).await.unwrap().is_empty());

    // Each listed key is one that reads back.
    for key in &root {
        assert!(
            store.get_journal("t", key).await.unwrap().is_some(),
            "{key}"
        );
    }
    assert_eq!(
        store.get_journal(&namespace, &ns[0]).await.unwrap(),
        Some(serde_json::json!("answer #2 to lookup"))
    );

    // Keys written straight come back in byte order, with the runtime's.
    let v = serde_json::json!(1);
    store.put_journal("t", "~/last", &v).await.unwrap();
    store.put_journal("t", "!/first", &v).await.unwrap();
    store.put_journal("t", "~/last", &v).await.unwrap();
    let listed = store.list_journal("t").await.unwrap();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "listed in byte order");
    assert_eq!(
        listed.len(),
        root.len() + 2,
        "a key written twice is listed once"
    );
    assert_eq!(listed.first().map(String::as_str), Some("!/first"));
    assert_eq!(listed.last().map(String::as_str), Some("~/last"));

    // A read: listing leaves no trace. An unknown thread or namespace lists nothing and is no
    // thread afterwards; the listed thread is not held, and its records are as they were.
    let newest = store.get_checkpoint("t", None).await.unwrap().unwrap().id;
    let bytes = backend.stored_bytes("t");
    assert!(store.list_journal("never").await.unwrap().is_empty());
    assert!(store.list_journal("t/none:0").await.unwrap().is_empty());
    assert!(store.list_namespaces("never").await.unwrap().is_empty());
    assert_eq!(store.list_threads().await.unwrap(), vec!["t".to_string()]);
    assert!(store.get_checkpoint("never", None).await.unwrap().is_none());
    assert!(store.get_lease("never").await.unwrap().is_none());
    assert!(store.get_lease("t").await.unwrap().is_none());
    assert_eq!(store.list_journal("t").await.unwrap(), listed);
    assert_eq!(backend.stored_bytes("t"), bytes);
    assert_eq!(
        store.get_checkpoint("t", None).await.unwrap().map(|c| c.id),
        Some(newest)
    );

    // The journal goes with its thread, the namespace's with it.
    store.delete_thread("t").await.unwrap();
    assert!(store.list_journal("t").await.unwrap().is_empty());
    assert!(store.list_journal(&namespace).await.unwrap().is_empty());
    assert!(store.list_namespaces("t").await.unwrap().is_empty());
}
