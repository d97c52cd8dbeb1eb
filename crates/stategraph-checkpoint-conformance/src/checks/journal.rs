//! The journal: a node records an expensive call's result as soon as it returns, so a re-run of
//! the node (after a failure, a crash or an interrupt) gets the result instead of calling again.

use crate::backends::Backend;
use crate::common::{entries, strings, Log, LogUpdate};
use stategraph::runtime::{Context, NodeError, Resume, RunConfig};
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
