//! A todo that keeps failing is escalated, not looped on: zoomed in (split into sub-todos),
//! and given up only when the sub-todos fail too, with the reason kept on every todo.

#[path = "research_support.rs"]
mod support;

use serde_json::json;
use stategraph::agents::research::{PlanStateUpdate, Status};
use std::sync::Arc;
use support::*;

#[tokio::test]
async fn a_todo_that_keeps_failing_is_split_then_given_up_with_its_reason() {
    let docs = corpus();
    let plan = json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []},
        {"id": "t2", "task": "What is the Tokio runtime", "kind": "research", "dependencies": []},
        {"id": "t3", "task": "How do log-structured merge trees compact", "kind": "research", "dependencies": ["t1"]}
    ]});
    // Everything about t1 (and its sub-todos) fails; t2 succeeds.
    let fake = model(
        plan,
        Arc::new(|id| {
            if id.starts_with("t1") {
                failed()
            } else {
                done()
            }
        }),
    );
    let g = compiled(fake.clone());
    let out = g
        .invoke(
            PlanStateUpdate::default().question("durability?"),
            config(docs.path(), "esc").setting("yes", true),
        )
        .await
        .unwrap();
    let s = &out.state;
    let by_id = |id: &str| s.todo(id).unwrap().clone();

    let t1 = by_id("t1");
    assert_eq!(t1.status, Status::Failed);
    assert!(t1.escalated);
    let reason = t1.failure_reason.unwrap();
    assert!(
        reason.starts_with("gave up: escalation failed, sub-todo `t1.1` is blocked"),
        "{reason}"
    );
    assert!(
        reason.contains("split into t1.1, t1.2"),
        "the earlier reason is kept: {reason}"
    );
    assert!(reason.contains("the sources do not answer it"), "{reason}");

    for sub in ["t1.1", "t1.2"] {
        let t = by_id(sub);
        assert_eq!(
            (t.status, t.parent.as_deref(), t.attempts),
            (Status::Blocked, Some("t1"), 2),
            "{sub}"
        );
        assert!(t.failure_reason.unwrap().contains("zoom out"), "{sub}");
    }
    let t3 = by_id("t3");
    assert_eq!(t3.status, Status::Blocked);
    assert!(t3
        .failure_reason
        .unwrap()
        .contains("dependency `t1` is failed"));
    assert_eq!(by_id("t2").status, Status::Done);

    // Attempts are capped: t1 twice, each sub-todo twice; t2 once. One split, three escalations.
    let tasks = summarised_tasks(&fake);
    assert_eq!(
        tasks
            .iter()
            .filter(|t| t.starts_with("How does sled"))
            .count(),
        2
    );
    assert_eq!(tasks.len(), 2 + 2 + 2 + 1);
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| kind_of(r) == "Split")
            .count(),
        1
    );
    assert_eq!(s.escalations, 3);
    assert!(
        s.answer.is_some(),
        "the run ends cleanly with an answer from what was found"
    );
}

#[tokio::test]
async fn a_todo_with_no_search_results_fails_without_a_model_review_and_is_zoomed_out_when_the_plan_is_full(
) {
    let docs = corpus();
    let plan = json!({"todos": [
        {"id": "t1", "task": "zzzz qqqq", "kind": "research", "dependencies": []}
    ]});
    let fake = model(plan, Arc::new(|_| done()));
    let g = compiled(fake.clone());
    let cfg = config(docs.path(), "empty").setting("yes", true).setting(
        "limits",
        json!({"max_todos": 1, "max_attempts_per_todo": 3}),
    );
    let out = g
        .invoke(PlanStateUpdate::default().question("q"), cfg)
        .await
        .unwrap();
    let t1 = out.state.todo("t1").unwrap();
    assert_eq!((t1.status, t1.attempts), (Status::Blocked, 3));
    let reason = t1.failure_reason.clone().unwrap();
    assert!(
        reason.contains("no room for sub-todos") && reason.contains("no results for `zzzz qqqq`"),
        "{reason}"
    );
    // Only the plan was asked of the model: no summaries, reviews or answer for nothing found.
    assert_eq!(fake.call_count(), 1);
    assert!(out.state.answer.unwrap().contains("could not answer"));
}
