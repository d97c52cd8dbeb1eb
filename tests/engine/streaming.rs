//! Consuming a run as a stream of events.

use super::{visit, Log, LogUpdate};
use futures::StreamExt;
use stategraph::runtime::{Context, Event, RunConfig};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

#[tokio::test]
async fn a_run_streams_node_and_custom_events_in_order_then_yields_its_state() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_s: Arc<Log>, ctx: Context| async move {
        ctx.emit("progress", serde_json::json!({"pct": 50}));
        Ok(visit("a"))
    });
    g.add_node("b", |_s: Arc<Log>, _c: Context| async { Ok(visit("b")) });
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END);
    let mut run = g
        .compile()
        .unwrap()
        .stream(LogUpdate::default(), RunConfig::new().thread("s1"));
    let mut events = Vec::new();
    while let Some(e) = run.next().await {
        events.push(e);
    }
    let outcome = run.outcome().await.unwrap();
    assert_eq!(outcome.state.visits, vec!["a", "b"]);

    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "run_started",
            "node_started",
            "custom",
            "node_finished",
            "node_started",
            "node_finished",
            "run_finished"
        ]
    );
    match &events[3] {
        Event::NodeFinished {
            node,
            update,
            duration_ms,
            ..
        } => {
            assert_eq!(node, "a");
            assert_eq!(update, &serde_json::json!({"visits": ["a"]}));
            assert!(*duration_ms >= 0.0);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&events[2], Event::Custom { kind, payload, .. } if kind == "progress" && payload["pct"] == 50)
    );
}

#[tokio::test]
async fn checkpoint_saved_events_appear_when_a_checkpointer_is_attached() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("a", |_s: Arc<Log>, _c: Context| async { Ok(visit("a")) });
    g.add_edge(START, "a").add_edge("a", END);
    let saver = Arc::new(stategraph::checkpoint::MemoryCheckpointer::new());
    let graph = g.compile().unwrap().with_checkpointer(saver);
    let run = graph.stream(LogUpdate::default(), RunConfig::new());
    let events: Vec<Event> = run.collect().await;
    let saved: Vec<(u64, Vec<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::CheckpointSaved { step, next, .. } => Some((*step, next.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(saved, vec![(0, vec!["a".to_string()]), (1, vec![])]);
}

#[tokio::test]
async fn model_tokens_stream_as_events_while_the_node_runs() {
    use stategraph::runtime::TOKEN_EVENT;
    use stategraph_llm::{ChatModel, ChatRequest, FakeChatModel, Message};

    let model = Arc::new(
        FakeChatModel::new()
            .then_text("durable graphs resume")
            .then_text("quietly too"),
    );
    let mut g = StateGraph::<Log>::new();
    let m = model.clone();
    g.add_node("answer", move |_s: Arc<Log>, ctx: Context| {
        let m = m.clone();
        async move {
            let mut request = ChatRequest::new(vec![Message::user("why?")]);
            request.stream = ctx.text_sink(TOKEN_EVENT);
            let reply = m.chat(request).await?;
            Ok::<_, stategraph::NodeError>(LogUpdate::default().last(reply.message.content))
        }
    });
    g.add_edge(START, "answer").add_edge("answer", END);
    let graph = g.compile().unwrap();

    let mut run = graph.stream(LogUpdate::default(), RunConfig::new());
    let mut streamed = String::new();
    let mut pieces = 0;
    while let Some(event) = run.next().await {
        if let Event::Custom {
            kind,
            payload,
            node,
            ..
        } = &event
        {
            assert_eq!((kind.as_str(), node.as_str()), (TOKEN_EVENT, "answer"));
            streamed.push_str(payload.as_str().unwrap());
            pieces += 1;
        }
    }
    let out = run.outcome().await.unwrap();
    assert_eq!(streamed, out.state.last);
    assert!(pieces > 1, "the reply arrived in {pieces} piece(s)");

    // Without a listener there is no sink, and the same node still works.
    let quiet = graph
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(quiet.state.last, "quietly too");
    assert!(model.requests()[1].stream.is_none(), "no listener, no sink");
}
