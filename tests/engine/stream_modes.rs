//! Stream modes: values, updates, messages, custom and debug events, typed, carrying their
//! subgraph namespace, in an order that does not depend on which task finished first.

use super::{visit, Log, LogUpdate};
use futures::StreamExt;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, Event, RunConfig, StreamMode, TOKEN_EVENT};
use stategraph::{StateGraph, END, START};
use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel, Message};
use std::sync::Arc;
use std::time::Duration;

/// A node that sleeps a random 0-5 ms (so parallel tasks finish in any order), emits a custom
/// event, and records its visit.
fn jittery(g: &mut StateGraph<Log>, name: &'static str) {
    g.add_node(name, move |_s: Arc<Log>, ctx: Context| async move {
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 6)).await;
        ctx.emit("note", name);
        Ok(visit(name))
    });
}

/// `START -> split -> (x, y, z) -> join -> END`.
fn fan_out() -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for name in ["split", "x", "y", "z", "join"] {
        jittery(&mut g, name);
    }
    g.add_edge(START, "split");
    for w in ["x", "y", "z"] {
        g.add_edge("split", w);
    }
    g.add_join(["x", "y", "z"], "join");
    g.add_edge("join", END);
    g.compile().unwrap()
}

async fn collect(graph: &CompiledGraph<Log>, modes: &[StreamMode]) -> Vec<Event> {
    let config = RunConfig::new().stream_modes(modes.iter().copied());
    let mut run = graph.stream(LogUpdate::default(), config);
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        events.push(e);
    }
    run.outcome().await.unwrap();
    events
}

/// Events as comparable text, without timings.
fn shape(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("duration_ms");
                o.remove("checkpoint_id");
            }
            v.to_string()
        })
        .collect()
}

#[tokio::test]
async fn updates_and_values_come_in_task_order_whatever_finishes_first() {
    let graph = fan_out();
    let events = collect(&graph, &[StreamMode::Updates, StreamMode::Values]).await;
    let updates: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Updates { step, node, .. } => Some((*step, node.clone())),
            _ => None,
        })
        .collect();
    let expected: Vec<(u64, String)> = [(1, "split"), (2, "x"), (2, "y"), (2, "z"), (3, "join")]
        .iter()
        .map(|(s, n)| (*s, n.to_string()))
        .collect();
    assert_eq!(updates, expected);
    let values: Vec<(u64, usize)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Values { step, values, .. } => {
                Some((*step, values["visits"].as_array().unwrap().len()))
            }
            _ => None,
        })
        .collect();
    // After each step (the empty input wrote nothing to show, as in LangGraph).
    assert_eq!(values, vec![(1, 1), (2, 4), (3, 5)]);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::Custom { .. } | Event::NodeStarted { .. })),
        "only the modes asked for"
    );
    let again = collect(&graph, &[StreamMode::Updates, StreamMode::Values]).await;
    for _ in 0..5 {
        assert_eq!(
            shape(&collect(&graph, &[StreamMode::Updates, StreamMode::Values]).await),
            shape(&again)
        );
    }
}

#[tokio::test]
async fn debug_reports_task_starts_and_results_in_task_order_and_checkpoints() {
    let graph = fan_out().with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let first = collect(&graph, &[StreamMode::Debug]).await;
    let kinds: Vec<String> = first
        .iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            format!(
                "{} {}",
                v["event"].as_str().unwrap(),
                v["node"].as_str().unwrap_or("")
            )
        })
        .collect();
    let step2 = [
        "node_started x",
        "node_started y",
        "node_started z",
        "node_finished x",
        "node_finished y",
        "node_finished z",
        "checkpoint_saved ",
    ];
    let at = kinds.iter().position(|k| k == "node_started x").unwrap();
    assert_eq!(&kinds[at..at + step2.len()], step2, "{kinds:?}");
    // The input's checkpoint is saved as the run starts.
    assert_eq!(&kinds[..2], ["checkpoint_saved ", "run_started "]);
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished "));
    for _ in 0..5 {
        let again = collect(&graph, &[StreamMode::Debug]).await;
        let strip = |events: &[Event]| -> Vec<String> {
            shape(events)
                .into_iter()
                .map(|s| {
                    let mut v: serde_json::Value = serde_json::from_str(&s).unwrap();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("thread_id");
                        o.remove("run_id");
                    }
                    v.to_string()
                })
                .collect()
        };
        assert_eq!(strip(&again), strip(&first));
    }
}

/// A child whose node streams a model's reply and emits a custom event.
fn talking_child(model: Arc<FakeChatModel>) -> CompiledGraph<Log> {
    let mut child = StateGraph::<Log>::new();
    child.add_node("speak", move |_s: Arc<Log>, ctx: Context| {
        let model = model.clone();
        async move {
            ctx.emit("note", "about to speak");
            let mut request = ChatRequest::new(vec![Message::user("say it")]);
            request.stream = ctx.text_sink(TOKEN_EVENT);
            let reply = model.chat(request).await?;
            Ok::<_, stategraph::NodeError>(LogUpdate::default().last(reply.message.content))
        }
    });
    child.add_edge(START, "speak").add_edge("speak", END);
    child.compile().unwrap()
}

#[tokio::test]
async fn messages_and_custom_events_of_a_subgraph_name_their_namespace() {
    let model = Arc::new(FakeChatModel::new().then_text("tokens arrive one by one"));
    let mut g = StateGraph::<Log>::new();
    g.add_node("outer", talking_child(model));
    g.add_edge(START, "outer").add_edge("outer", END);
    let graph = g.compile().unwrap();
    let events = collect(
        &graph,
        &[
            StreamMode::Messages,
            StreamMode::Custom,
            StreamMode::Updates,
        ],
    )
    .await;
    let mut text = String::new();
    let mut pieces = 0;
    for e in &events {
        if let Event::Message {
            namespace,
            node,
            text: piece,
            ..
        } = e
        {
            assert!(namespace.starts_with("outer:"), "{namespace}");
            assert_eq!(node, "speak");
            text.push_str(piece);
            pieces += 1;
        }
    }
    assert_eq!(text, "tokens arrive one by one");
    assert!(pieces > 1, "{pieces} piece(s)");
    let custom: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Custom {
                namespace, kind, ..
            } => Some((namespace.clone(), kind.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(custom.len(), 1, "tokens go to messages, not custom");
    assert!(custom[0].0.starts_with("outer:") && custom[0].1 == "note");
    // The child's update (in its namespace) comes before the parent's.
    let updates: Vec<(bool, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Updates {
                namespace, node, ..
            } => Some((namespace.is_empty(), node.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        vec![(false, "speak".to_string()), (true, "outer".to_string())]
    );
}

#[tokio::test]
async fn without_modes_a_stream_shows_only_the_root_graph_as_before() {
    let model = Arc::new(FakeChatModel::new().then_text("quiet child"));
    let mut g = StateGraph::<Log>::new();
    g.add_node("outer", talking_child(model));
    g.add_edge(START, "outer").add_edge("outer", END);
    let events = collect(&g.compile().unwrap(), &[]).await;
    assert!(
        events
            .iter()
            .all(|e| serde_json::to_value(e).unwrap().get("namespace").is_none()),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::NodeFinished { node, .. } if node == "outer")));
}
