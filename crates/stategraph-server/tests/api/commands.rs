//! What a run request is checked for before anything runs: a command's `update` and `goto`
//! (taken, and refused naming the field when they cannot be), and the graph's own check of a
//! new run's input (`GraphFactory::check_input`), which leaves no thread behind.

use super::support::TestServer;
use serde_json::json;

#[tokio::test]
async fn a_command_update_and_goto_run_beside_the_paused_step() {
    let s = TestServer::start().await;
    let thread = s.thread(json!({})).await;
    let run =
        json!({"assistant_id": "steps", "input": {"topic": "t"}, "interrupt_before": ["three"]});
    let paused = s.post(&format!("/threads/{thread}/runs/wait"), run).await;
    assert_eq!(paused["log"], json!(["one", "two"]), "{paused}");

    let command = json!({"update": {"log": ["by hand"]}, "goto": ["four"]});
    let done = s
        .post(
            &format!("/threads/{thread}/runs/wait"),
            json!({"assistant_id": "steps", "command": command}),
        )
        .await;
    // The update is merged before the step; `four` runs beside `three`, then after it.
    assert_eq!(
        done["log"],
        json!(["one", "two", "by hand", "three", "four", "four"]),
        "{done}"
    );
}

#[tokio::test]
async fn a_command_that_cannot_be_taken_is_refused_naming_its_field() {
    let s = TestServer::start().await;
    let thread = s.thread(json!({})).await;
    let path = format!("/threads/{thread}/runs/wait");
    let refused = [
        (
            json!({"goto": "nope"}),
            "command.goto: no node named `nope`",
        ),
        (
            json!({"goto": [{"arg": 1}]}),
            "command.goto: a Send names its node",
        ),
        (json!({"goto": "one"}), "command.goto: thread"),
        (json!({"update": {"log": "not a list"}}), "command.update:"),
    ];
    for (command, says) in refused {
        let body = json!({"assistant_id": "steps", "command": command});
        let (status, answer) = s.call("POST", &path, Some(body)).await;
        assert_eq!(status, 422, "{command}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.starts_with(says), "{command}: {message}");
    }
    let both =
        json!({"assistant_id": "steps", "input": {"topic": "t"}, "command": {"goto": "one"}});
    let (status, answer) = s.call("POST", &path, Some(both)).await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().starts_with("command:"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_input_the_graph_refuses_is_a_400_naming_it_and_leaves_no_thread() {
    let s = TestServer::start().await;
    let run =
        json!({"assistant_id": "approval", "input": {"item": "  "}, "if_not_exists": "create"});
    let (status, answer) = s.call("POST", "/threads/fresh/runs/wait", Some(run)).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with("input: the input of graph `approval`: item is empty"),
        "{message}"
    );
    let (status, _) = s.call("GET", "/threads/fresh", None).await;
    assert_eq!(status, 404, "the refused run made no thread");

    let run =
        json!({"assistant_id": "approval", "input": {"item": "a memo"}, "if_not_exists": "create"});
    let paused = s.post("/threads/fresh/runs/wait", run).await;
    assert!(paused["__interrupt__"].is_array(), "{paused}");
}
