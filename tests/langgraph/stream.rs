//! What the `updates` and `values` stream modes show of a pause and of a resume.

use crate::store;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{
    Context, Event, NodeError, Resume, RunConfig, RunStream, StreamMode, INTERRUPT,
};
use stategraph::{State, StateGraph, END, START};
use std::sync::Arc;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Robot {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    robot_input: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    human_input: String,
}

/// `START -> robot_input_node -> human_input_node -> END`; the human node asks (an interrupt)
/// and writes the answer.
fn robot_then_human() -> CompiledGraph<Robot> {
    let mut g = StateGraph::<Robot>::new();
    g.add_node("robot_input_node", |_s: Arc<Robot>, _c: Context| async {
        Ok::<_, NodeError>(RobotUpdate::default().robot_input("beep boop i am a robot".to_string()))
    });
    g.add_node(
        "human_input_node",
        |_s: Arc<Robot>, ctx: Context| async move {
            let answer: String = ctx.interrupt("interrupt").await?;
            Ok::<_, NodeError>(RobotUpdate::default().human_input(answer))
        },
    );
    g.add_edge(START, "robot_input_node")
        .add_edge("robot_input_node", "human_input_node")
        .add_edge("human_input_node", END);
    g.compile().unwrap().with_checkpointer(store())
}

fn modes() -> RunConfig {
    RunConfig::new().stream_modes([StreamMode::Updates, StreamMode::Values])
}

/// A run's events as LangGraph's `(mode, chunk)` pairs, interrupts shown by their payload.
async fn chunks(mut run: RunStream<Robot>) -> Vec<(&'static str, Value)> {
    let shown = |records: &[stategraph::checkpoint::InterruptRecord]| -> Value {
        records.iter().map(|r| r.payload.clone()).collect()
    };
    let mut out = Vec::new();
    while let Some(event) = run.next().await {
        match event {
            Event::Updates { node, update, .. } if node == INTERRUPT => {
                let records: Vec<stategraph::checkpoint::InterruptRecord> =
                    serde_json::from_value(update).unwrap();
                out.push(("updates", json!({ INTERRUPT: shown(&records) })));
            }
            Event::Updates { node, update, .. } => out.push(("updates", json!({ node: update }))),
            Event::Values {
                mut values,
                interrupts,
                ..
            } => {
                if !interrupts.is_empty() {
                    values[INTERRUPT] = shown(&interrupts);
                }
                out.push(("values", values));
            }
            other => panic!("only the modes asked for: {other:?}"),
        }
    }
    run.outcome().await.unwrap();
    out
}

/// LangGraph: test_pregel.py::test_interrupt_stream_mode_values — with `updates` and `values`,
/// an empty input shows nothing, a pause shows as `{"__interrupt__": [...]}` in `updates` and
/// as the state with its interrupts in `values`; the resumed run's `values` start with the
/// state it resumes from.
#[tokio::test]
async fn a_pause_shows_in_updates_and_values_and_a_resume_starts_with_the_state() {
    let graph = robot_then_human();
    let config = || modes().thread("t");
    let first = chunks(graph.stream(RobotUpdate::default(), config())).await;
    let robot = json!({"robot_input": "beep boop i am a robot"});
    assert_eq!(
        first,
        [
            ("updates", json!({"robot_input_node": robot})),
            ("values", robot.clone()),
            ("updates", json!({"__interrupt__": ["interrupt"]})),
            (
                "values",
                json!({"robot_input": "beep boop i am a robot", "__interrupt__": ["interrupt"]})
            ),
        ]
    );

    let resumed =
        chunks(graph.stream_resume("t", Resume::value("i am a human").unwrap(), modes())).await;
    assert_eq!(
        resumed,
        [
            ("values", robot),
            (
                "updates",
                json!({"human_input_node": {"human_input": "i am a human"}})
            ),
            (
                "values",
                json!({"robot_input": "beep boop i am a robot", "human_input": "i am a human"})
            ),
        ]
    );
}

/// LangGraph: test_pregel.py::test_in_one_fan_out_state_graph_defer_node (its
/// `interrupt_after` stream) — a static breakpoint shows in `updates` as one
/// `{"__interrupt__": ...}` (our records carry no payload), and adds no `values`.
#[tokio::test]
async fn a_static_breakpoint_shows_in_updates_only() {
    let graph = robot_then_human()
        .interrupt_after(["robot_input_node"])
        .unwrap();
    let first = chunks(graph.stream(RobotUpdate::default(), modes().thread("t"))).await;
    let robot = json!({"robot_input": "beep boop i am a robot"});
    assert_eq!(
        first,
        [
            ("updates", json!({"robot_input_node": robot})),
            ("values", robot),
            ("updates", json!({"__interrupt__": [null]})),
        ]
    );
}
