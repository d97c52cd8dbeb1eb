//! Tool todos in a workspace: the model↔tool loop, round limits, and each escalation path
//! (decompose then verify, zoom out then re-plan, give up), over a scripted model.

use serde_json::{json, Value};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::RunConfig;
use stategraph::CompiledGraph;
use stategraph_agents::research::{graph, Kind, PlanState, PlanStateUpdate, ResearchAgent, Status};
use stategraph_llm::{
    ChatModel, ChatRequest, ChatResponse, FakeChatModel, FinishReason, Message, Role, ToolCall,
    Usage,
};
use std::sync::Arc;

/// What the scripted model does in a tool round: call tools, or finish with a text.
enum Act {
    Call(Vec<(&'static str, Value)>),
    Finish(&'static str),
}

type Script = Arc<dyn Fn(&str, usize, &str) -> Act + Send + Sync>;
type Choose = Arc<dyn Fn(&str) -> Value + Send + Sync>;

fn kind_of(req: &ChatRequest) -> String {
    if let Some(f) = &req.response_format {
        return f.name.clone();
    }
    if !req.tools.is_empty() {
        return "Act".into();
    }
    "Answer".into()
}

/// The `Your task:` of a loop request, or the `Stuck task` of an escalation.
fn task_of(req: &ChatRequest) -> String {
    let user = req
        .messages
        .get(1)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    user.lines()
        .find_map(|l| {
            l.strip_prefix("Your task: ").or_else(|| {
                l.strip_prefix("Stuck task ")
                    .and_then(|r| r.split_once(": ").map(|x| x.1))
            })
        })
        .unwrap_or_default()
        .to_string()
}

fn model(plan: Value, act: Script, choose: Choose) -> Arc<FakeChatModel> {
    Arc::new(FakeChatModel::from_fn(move |req| {
        let kind = kind_of(req);
        let text = match kind.as_str() {
            "Plan" => plan.to_string(),
            "PlanUpdate" => {
                let id = req.response_format.as_ref().unwrap().schema["properties"]
                    ["completed_task_id"]["enum"][0]
                    .clone();
                json!({"completed_task_id": id, "task_outcome": "it works", "status": "done", "new_tasks": []}).to_string()
            }
            "Escalation" => choose(&task_of(req)).to_string(),
            "Act" => {
                let round = req
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::Assistant)
                    .count();
                let intro = req
                    .messages
                    .get(1)
                    .map(|m| m.content.clone())
                    .unwrap_or_default();
                return Ok(match act(&task_of(req), round, &intro) {
                    Act::Finish(text) => FakeChatModel::text_reply(text),
                    Act::Call(calls) => ChatResponse {
                        message: Message::assistant_tool_calls(
                            "",
                            calls
                                .into_iter()
                                .enumerate()
                                .map(|(i, (name, arguments))| ToolCall {
                                    id: format!("call_{round}_{i}"),
                                    name: name.into(),
                                    arguments,
                                })
                                .collect(),
                        ),
                        usage: Usage::new(5, 5),
                        model: "fake".into(),
                        finish_reason: Some(FinishReason::ToolCalls),
                    },
                });
            }
            _ => "Report: the work is done.".to_string(),
        };
        Ok(FakeChatModel::text_reply(text))
    }))
}

fn compiled(model: Arc<FakeChatModel>) -> CompiledGraph<PlanState> {
    let model: Arc<dyn ChatModel> = model;
    graph(Arc::new(ResearchAgent::new(model)))
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

fn config(ws: &std::path::Path, thread: &str, limits: Value) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .recursion_limit(300)
        .setting("yes", true)
        .setting("workspace", ws.display().to_string())
        .setting("limits", limits)
}

fn one_tool_todo(task: &str) -> Value {
    json!({"todos": [{"id": "t1", "task": task, "kind": "tool", "dependencies": []}]})
}

fn escalations(m: &FakeChatModel) -> Vec<ChatRequest> {
    m.requests()
        .into_iter()
        .filter(|r| kind_of(r) == "Escalation")
        .collect()
}

#[tokio::test]
async fn a_tool_todo_writes_a_file_runs_a_command_and_is_reviewed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let act: Script = Arc::new(|_task, round, _| match round {
        0 => Act::Call(vec![(
            "write_file",
            json!({"path": "hello.sh", "content": "echo hello from the workspace\n"}),
        )]),
        1 => Act::Call(vec![(
            "run_command",
            json!({"command": "sh hello.sh > out.txt; cat out.txt"}),
        )]),
        _ => Act::Finish("wrote hello.sh and ran it"),
    });
    let m = model(
        one_tool_todo("write hello.sh and run it"),
        act,
        Arc::new(|_| json!({})),
    );
    let out = compiled(m.clone())
        .invoke(
            PlanStateUpdate::default().question("say hello"),
            config(&ws, "happy", json!({})),
        )
        .await
        .unwrap();
    let s = out.state;
    let t1 = s.todo("t1").unwrap();
    assert_eq!(t1.status, Status::Done);
    assert_eq!(t1.tools_used, ["write_file", "run_command"]);
    assert_eq!(t1.result.as_deref(), Some("wrote hello.sh and ran it"));
    assert_eq!((t1.rounds, s.rounds), (3, 3));
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "hello from the workspace\n"
    );
    let tool_results: Vec<&str> = s
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tool_results[1], "exit code: 0\nhello from the workspace\n");
    assert!(s.answer.is_some());
    // The loop offered the six workspace tools plus fetch.
    let act_req = m
        .requests()
        .into_iter()
        .find(|r| kind_of(r) == "Act")
        .unwrap();
    let names: Vec<String> = act_req.tools.iter().map(|t| t.name.clone()).collect();
    for name in [
        "list_dir",
        "read_file",
        "write_file",
        "edit_file",
        "search_files",
        "run_command",
        "fetch",
    ] {
        assert!(
            names.contains(&name.to_string()),
            "{name} missing from {names:?}"
        );
    }
}

#[tokio::test]
async fn at_the_round_limit_the_todo_is_decomposed_and_verified_done() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let act: Script = Arc::new(|task, round, _| {
        if task.starts_with("build") {
            // The big task never finishes: it keeps looking around.
            return Act::Call(vec![("list_dir", json!({"path": "."}))]);
        }
        let file = if task.contains("a.txt") {
            "a.txt"
        } else {
            "b.txt"
        };
        match round {
            0 => Act::Call(vec![("write_file", json!({"path": file, "content": "x"}))]),
            _ => Act::Finish("written"),
        }
    });
    let choose: Choose = Arc::new(
        |_| json!({"action": "decompose", "reason": "too big at once", "subtasks": ["write a.txt", "write b.txt"]}),
    );
    let m = model(one_tool_todo("build both files"), act, choose);
    let limits = json!({"max_rounds": 3, "max_rounds_per_subtask": 2, "verify_command": "test -f a.txt && test -f b.txt"});
    let out = compiled(m.clone())
        .invoke(
            PlanStateUpdate::default().question("two files"),
            config(&ws, "decompose", limits),
        )
        .await
        .unwrap();
    let s = out.state;
    let t1 = s.todo("t1").unwrap();
    assert_eq!(t1.status, Status::Done, "{:?}", t1.failure_reason);
    assert!(t1.escalated);
    assert!(t1
        .result
        .as_deref()
        .unwrap()
        .contains("verified: `test -f a.txt && test -f b.txt` passed"));
    for (id, task) in [("t1.1", "write a.txt"), ("t1.2", "write b.txt")] {
        let c = s.todo(id).unwrap();
        assert_eq!(
            (c.status, c.parent.as_deref(), c.kind, c.task.as_str()),
            (Status::Done, Some("t1"), Kind::Tool, task)
        );
    }
    // t1 used exactly its 3 rounds before escalating; each sub-todo 2.
    let list_calls = m
        .requests()
        .iter()
        .filter(|r| kind_of(r) == "Act" && task_of(r) == "build both files")
        .count();
    assert_eq!(list_calls, 3);
    assert_eq!(s.escalations, 1);
    // The decomposed todo's check, then the goal's before the report.
    assert_eq!(s.verifications.len(), 2, "{:?}", s.verifications);
    assert!(s.verifications[0].starts_with("t1: `test -f a.txt && test -f b.txt` passed"));
    assert!(s.verifications[1].starts_with("goal: `test -f a.txt && test -f b.txt` passed"));
    assert!(s
        .answer
        .as_deref()
        .unwrap()
        .contains("Verification:\n- t1: "));
    assert!(s
        .log
        .iter()
        .any(|l| l.contains("t1 escalated: decompose into t1.1, t1.2")));
    // The escalation prompt says what was tried, what exists and why it is stuck.
    let e = &escalations(&m)[0];
    let user = &e.messages[1].content;
    assert!(user.contains("round limit (3"), "{user}");
    assert!(user.contains("list_dir"), "{user}");
    let offered = &e.response_format.as_ref().unwrap().schema["properties"]["action"]["enum"];
    assert_eq!(offered, &json!(["decompose", "zoom_out", "give_up"]));
}

#[tokio::test]
async fn blocked_sub_todos_are_cleared_and_the_parent_is_re_planned() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let act: Script = Arc::new(|task, _, intro| {
        if task == "make it work" {
            // The first attempt is stuck; the re-planned second attempt succeeds.
            if intro.contains("re-planning") {
                return Act::Finish("it works now");
            }
            return Act::Call(vec![("run_command", json!({"command": "exit 1"}))]);
        }
        Act::Call(vec![("read_file", json!({"path": "missing.txt"}))])
    });
    let choose: Choose = Arc::new(|task| {
        if task == "make it work" {
            json!({"action": "decompose", "reason": "smaller steps", "subtasks": ["step one", "step two"]})
        } else {
            json!({"action": "zoom_out", "reason": "cannot read it", "subtasks": []})
        }
    });
    let m = model(one_tool_todo("make it work"), act, choose);
    let limits = json!({"max_rounds": 1, "max_rounds_per_subtask": 1});
    let out = compiled(m.clone())
        .invoke(
            PlanStateUpdate::default().question("work"),
            config(&ws, "zoom", limits),
        )
        .await
        .unwrap();
    let s = out.state;
    let ids: Vec<&str> = s.plan.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["t1"], "the blocked sub-todos were cleared");
    let t1 = s.todo("t1").unwrap();
    assert_eq!((t1.status, t1.attempts), (Status::Done, 2));
    assert!(s
        .log
        .iter()
        .any(|l| l.starts_with("t1.1 escalated: zoom out")));
    assert!(
        s.log
            .iter()
            .any(|l| l.starts_with("t1 zoomed out: cleared t1.1, t1.2")),
        "{:#?}",
        s.log
    );
    assert_eq!(s.escalations, 3);
    // Sub-todo escalations could not give up.
    let sub = escalations(&m)
        .into_iter()
        .find(|e| task_of(e) == "step one")
        .unwrap();
    assert_eq!(
        sub.response_format.unwrap().schema["properties"]["action"]["enum"],
        json!(["decompose", "zoom_out"])
    );
    // The second attempt was told what happened.
    let second = m
        .requests()
        .into_iter()
        .filter(|r| kind_of(r) == "Act" && task_of(r) == "make it work")
        .nth(1)
        .unwrap();
    assert!(
        second.messages[1]
            .content
            .contains("re-planning (zoom out)"),
        "{}",
        second.messages[1].content
    );
}

#[tokio::test]
async fn giving_up_at_the_goal_level_fails_the_run_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let act: Script =
        Arc::new(|_, _, _| Act::Call(vec![("run_command", json!({"command": "exit 7"}))]));
    let choose: Choose = Arc::new(
        |_| json!({"action": "give_up", "reason": "the command can never pass", "subtasks": []}),
    );
    let m = model(one_tool_todo("make exit 7 succeed"), act, choose);
    let g = compiled(m.clone());
    let err = g
        .invoke(
            PlanStateUpdate::default().question("impossible"),
            config(&ws, "giveup", json!({"max_rounds": 2})),
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("gave up on the goal \"impossible\": the command can never pass"),
        "{text}"
    );
    let state = g.get_state("giveup", None).await.unwrap().values;
    let t1 = state.todo("t1").unwrap();
    assert_eq!(t1.status, Status::Failed);
    assert!(t1
        .failure_reason
        .as_deref()
        .unwrap()
        .starts_with("escalated (give up)"));
    assert!(state.gave_up.is_some());
    assert!(state.answer.is_none(), "never reported as a success");
}
