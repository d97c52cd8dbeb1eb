//! The prebuilt building blocks: the agent loop over a scripted model, parallel tool calls
//! recorded in call order, the round limit, and the approval pause.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Resume, RunConfig};
use stategraph_llm::{ChatResponse, FakeChatModel, FinishReason, Message, Role, ToolCall, Usage};
use stategraph_prebuilt::{agent, AgentOptions, AgentStateUpdate, Approval};
use stategraph_tools::{tool_fn, ToolFailure, Toolbox};

#[derive(Deserialize, JsonSchema)]
struct Wait {
    /// Milliseconds to wait.
    ms: u64,
    /// What to answer.
    say: String,
}

#[derive(Deserialize, JsonSchema)]
struct Shell {
    command: String,
}

fn calls(calls: &[(&str, &str, serde_json::Value)]) -> ChatResponse {
    ChatResponse {
        message: Message::assistant_tool_calls(
            "",
            calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: args.clone(),
                })
                .collect(),
        ),
        usage: Usage::new(10, 5),
        model: "fake".into(),
        finish_reason: Some(FinishReason::ToolCalls),
    }
}

fn wait_tool(running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> Toolbox {
    Toolbox::new(vec![tool_fn(
        "wait",
        "Wait, then answer",
        move |a: Wait| {
            let running = running.clone();
            let peak = peak.clone();
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(a.ms)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                if a.say.is_empty() {
                    return Err(ToolFailure::new("nothing to say"));
                }
                Ok(a.say)
            }
        },
    )])
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_results_keep_call_order() {
    let model = Arc::new(
        FakeChatModel::new()
            .then_response(calls(&[
                ("slow", "wait", json!({"ms": 300, "say": "first"})),
                ("fast", "wait", json!({"ms": 10, "say": "second"})),
                ("bad", "wait", json!({"ms": 1, "say": ""})),
                ("odd", "nope", json!({})),
            ]))
            .then_text("done"),
    );
    let (running, peak) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let g = agent(
        model.clone(),
        wait_tool(running, peak.clone()),
        AgentOptions::default().with_system_prompt("Be quick."),
    )
    .compile()
    .unwrap();
    let out = g
        .invoke(
            AgentStateUpdate::default().messages(vec![Message::user("go")]),
            RunConfig::new(),
        )
        .await
        .unwrap();
    let s = out.state;
    assert_eq!(s.answer(), Some("done"));
    assert_eq!(s.rounds, 2);
    assert!(s.input_tokens >= 10, "usage is counted");
    assert!(
        peak.load(Ordering::SeqCst) >= 2,
        "the calls ran one at a time"
    );
    let results: Vec<(&str, &str)> = s
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_str()))
        .collect();
    assert_eq!(results[0], ("slow", "first"));
    assert_eq!(results[1], ("fast", "second"));
    assert_eq!(results[2], ("bad", "Error: nothing to say"));
    assert!(results[3]
        .1
        .starts_with("Error: there is no tool named `nope`"));
    // The system prompt is sent, not stored; the second call saw all four results.
    let sent = model.requests();
    assert_eq!(sent[1].messages[0].role, Role::System);
    assert_eq!(sent[1].messages.len(), 1 + 2 + 4);
    assert_eq!(sent[0].tools[0].name, "wait");
    assert!(s.messages.iter().all(|m| m.id.is_some()));
}

#[tokio::test]
async fn the_loop_stops_at_its_round_limit() {
    let model = Arc::new(FakeChatModel::from_fn(|_| {
        Ok(calls(&[("c", "wait", json!({"ms": 1, "say": "again"}))]))
    }));
    let g = agent(
        model.clone(),
        wait_tool(Arc::default(), Arc::default()),
        AgentOptions::default().with_max_rounds(3),
    )
    .compile()
    .unwrap();
    let out = g
        .invoke(
            AgentStateUpdate::default().messages(vec![Message::user("loop")]),
            RunConfig::new(),
        )
        .await
        .unwrap();
    assert_eq!(model.call_count(), 3);
    assert_eq!(out.state.rounds, 3);
    assert!(out.state.answer().is_none());
    assert!(out.state.stopped.unwrap().contains("round limit (3"));
}

fn shell(ran: Arc<std::sync::Mutex<Vec<String>>>) -> Toolbox {
    Toolbox::new(vec![tool_fn("run_command", "Run", move |a: Shell| {
        let ran = ran.clone();
        async move {
            ran.lock().unwrap().push(a.command.clone());
            Ok::<_, String>(format!("ran {}", a.command))
        }
    })])
}

#[tokio::test]
async fn approval_pauses_before_each_command_and_takes_yes_no_or_an_edit() {
    let model = Arc::new(
        FakeChatModel::new()
            .then_response(calls(&[
                ("c1", "run_command", json!({"command": "rm -rf build"})),
                ("c2", "run_command", json!({"command": "make tset"})),
            ]))
            .then_response(calls(&[("c3", "run_command", json!({"command": "ls"}))]))
            .then_text("finished"),
    );
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let approval = Approval {
        tool: "run_command".into(),
        argument: "command".into(),
        setting: Some("approve_commands".into()),
    };
    let g = agent(
        model.clone(),
        shell(ran.clone()),
        AgentOptions::default().with_approval(approval),
    )
    .compile()
    .unwrap()
    .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let cfg = || {
        RunConfig::new()
            .thread("approve")
            .setting("approve_commands", true)
    };
    let out = g
        .invoke(
            AgentStateUpdate::default().messages(vec![Message::user("clean and test")]),
            cfg(),
        )
        .await
        .unwrap();
    assert!(out.is_interrupted());
    let shown = format!("{:?}", out.status);
    assert!(shown.contains("rm -rf build"), "{shown}");
    assert!(ran.lock().unwrap().is_empty());

    let out = g
        .resume("approve", Resume::value("no").unwrap(), cfg())
        .await
        .unwrap();
    assert!(out.is_interrupted(), "the second command waits too");
    assert!(format!("{:?}", out.status).contains("make tset"));
    let out = g
        .resume("approve", Resume::value("make test").unwrap(), cfg())
        .await
        .unwrap();
    assert!(out.is_interrupted(), "the next round's command waits");
    assert_eq!(*ran.lock().unwrap(), ["make test"]);
    let out = g
        .resume("approve", Resume::value("yes").unwrap(), cfg())
        .await
        .unwrap();
    assert_eq!(out.state.answer(), Some("finished"));
    assert_eq!(*ran.lock().unwrap(), ["make test", "ls"]);
    let results: Vec<&str> = out
        .state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        results[0].starts_with("Error: the user refused"),
        "{results:?}"
    );
    assert_eq!(&results[1..], ["ran make test", "ran ls"]);
    assert_eq!(
        model.call_count(),
        3,
        "no model call was repeated by the pauses"
    );

    // Without the setting nothing pauses.
    let model = Arc::new(
        FakeChatModel::new()
            .then_response(calls(&[("c1", "run_command", json!({"command": "ls"}))]))
            .then_text("ok"),
    );
    let g = agent(
        model,
        shell(ran.clone()),
        AgentOptions::default().with_approval(Approval {
            tool: "run_command".into(),
            argument: "command".into(),
            setting: Some("approve_commands".into()),
        }),
    )
    .compile()
    .unwrap();
    let out = g
        .invoke(
            AgentStateUpdate::default().messages(vec![Message::user("ls")]),
            RunConfig::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.answer(), Some("ok"));
}

/// The prebuilt agent as a subgraph of a graph with another state: the parent hands it a
/// question, its tool calls run inside the child (checkpointed under the parent's thread), and
/// its answer comes back; an approval pause inside the child pauses the whole run.
#[tokio::test]
async fn the_prebuilt_agent_runs_as_a_subgraph_and_its_pause_pauses_the_parent() {
    use serde::Serialize;
    use stategraph::graph::StateGraph;
    use stategraph::runtime::Subgraph;
    use stategraph::{State, END, START};
    use stategraph_prebuilt::AgentState;

    #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
    struct Desk {
        question: String,
        answer: Option<String>,
    }

    let model = Arc::new(
        FakeChatModel::new()
            .then_response(calls(&[("c1", "run_command", json!({"command": "ls"}))]))
            .then_text("it is listed"),
    );
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let child = agent(
        model.clone(),
        shell(ran.clone()),
        AgentOptions::default().with_approval(Approval {
            tool: "run_command".into(),
            argument: "command".into(),
            setting: None,
        }),
    )
    .compile()
    .unwrap();
    let mut g = StateGraph::<Desk>::new();
    g.add_node(
        "ask",
        Subgraph::new(
            child,
            |p: &Desk, _| {
                Ok(AgentStateUpdate::default().messages(vec![Message::user(p.question.clone())]))
            },
            |_, c: AgentState| DeskUpdate::default().answer(c.answer().map(str::to_string)),
        ),
    );
    g.add_edge(START, "ask").add_edge("ask", END);
    let g = g
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = g
        .invoke(
            DeskUpdate::default().question("what is here?".to_string()),
            RunConfig::new().thread("desk"),
        )
        .await
        .unwrap();
    assert!(
        out.is_interrupted(),
        "the child's approval pauses the parent"
    );
    assert!(ran.lock().unwrap().is_empty());
    let out = g
        .resume(
            "desk",
            Resume::value("yes").unwrap(),
            RunConfig::new().thread("desk"),
        )
        .await
        .unwrap();
    assert_eq!(out.state.answer.as_deref(), Some("it is listed"));
    assert_eq!(*ran.lock().unwrap(), ["ls"]);
    assert_eq!(model.call_count(), 2);
}
