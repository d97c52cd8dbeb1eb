//! A graph used as a node of its own state type hands its parent what it changed, through the
//! parent's reducers. A child that runs in one go knows which fields its steps wrote and
//! compares only those; a child paused and resumed from its checkpoint compares its states
//! whole. Both must give the parent the very same update, or a run's result would depend on
//! whether it paused (or crashed) inside the child.

use super::{visit, Item, Log, LogUpdate};
use futures::StreamExt;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, Event, Resume, RunConfig, RunStream, StreamMode};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

/// `a -> b`: appends, adds and takes back, sets a record and replaces it, and overwrites
/// `last` back to what it was in the parent. `pause`: `b` waits for a person first.
fn child(pause: bool) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::named("child");
    g.add_node("a", |_s: Arc<Log>, _c: Context| async move {
        Ok(visit("a").total(2).last("inside").items(vec![Item {
            id: 1,
            label: "draft".into(),
        }]))
    });
    g.add_node("b", move |s: Arc<Log>, ctx: Context| async move {
        if pause {
            let _: String = ctx.interrupt("go on?").await?;
        }
        let _ = s;
        Ok(visit("b")
            .total(-2)
            .overwrite_last("before")
            .items(vec![Item {
                id: 1,
                label: "final".into(),
            }]))
    });
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END);
    g.compile().unwrap()
}

/// `START -> (child, sibling) -> END`: the child's update merges with a sibling's.
fn parent(pause: bool) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::named("parent");
    g.add_node("child", child(pause));
    g.add_node("sibling", |_s: Arc<Log>, _c: Context| async move {
        Ok(visit("sibling").total(1))
    });
    g.add_edge(START, "child")
        .add_edge(START, "sibling")
        .add_edge("child", END)
        .add_edge("sibling", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

/// The root graph's update of task `child`, and the final state.
async fn childs_update(mut run: RunStream<Log>) -> (Option<serde_json::Value>, Log) {
    let mut update = None;
    while let Some(event) = run.next().await {
        if let Event::Updates {
            namespace,
            node,
            update: u,
            ..
        } = event
        {
            if namespace.is_empty() && node == "child" {
                update = Some(u);
            }
        }
    }
    (update, run.outcome().await.unwrap().state)
}

#[tokio::test]
async fn a_child_run_in_one_go_and_one_resumed_hand_the_parent_the_same_update() {
    let config = |thread: &str| {
        RunConfig::new()
            .thread(thread)
            .stream_modes([StreamMode::Updates])
    };
    let start = LogUpdate::default()
        .last("before")
        .visits(vec!["start".into()]);

    let straight = parent(false);
    let (in_one_go, state) =
        childs_update(straight.stream(start.clone(), config("straight"))).await;

    let paused = parent(true);
    let first = paused.invoke(start, config("paused")).await.unwrap();
    assert!(first.is_interrupted());
    let (resumed, resumed_state) = childs_update(paused.stream_resume(
        "paused",
        Resume::value("yes").unwrap(),
        config("paused"),
    ))
    .await;

    // What the child changed, not what it wrote: `total` came back to where it was and `last`
    // was overwritten with its old value, so neither is written; the record it set and then
    // replaced is new to the parent.
    let expected = serde_json::json!({
        "visits": ["a", "b"],
        "items": [{ "id": 1, "label": "final" }],
    });
    assert_eq!(in_one_go, Some(expected.clone()));
    assert_eq!(resumed, Some(expected));
    assert_eq!(state, resumed_state);
    assert_eq!(state.visits, ["start", "a", "b", "sibling"]);
    assert_eq!(state.total, 1);
    assert_eq!(state.last, "before");
}
