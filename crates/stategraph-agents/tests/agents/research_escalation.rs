//! A todo that keeps failing is escalated, not looped on: zoomed in (split into sub-todos),
//! and given up only when the sub-todos fail too, with the reason kept on every todo.

use crate::support;

use serde_json::json;
use stategraph_agents::research::{PlanStateUpdate, Status};
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
    let fake = model(plan, failing_while(|id| id.starts_with("t1")));
    let s = &approved_run(&fake, docs.path(), "esc").await;
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

/// A todo split after failing is done by a synthesis once its sub-todos are: its summary is
/// written from their results and the sources they cited, with no search of its own.
#[tokio::test]
async fn a_split_todo_is_synthesised_from_its_done_sub_todos() {
    let docs = corpus();
    let plan = json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []}
    ]});
    // t1's two own attempts fail, which splits it; its sub-todos and its synthesis pass review.
    let t1_reviews = std::sync::atomic::AtomicUsize::new(0);
    let fake = model(
        plan,
        failing_while(move |id| {
            id == "t1" && t1_reviews.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2
        }),
    );
    let s = &approved_run(&fake, docs.path(), "synth").await;
    let t1 = s.todo("t1").unwrap();
    assert_eq!(t1.status, Status::Done, "{t1:?}");
    assert_eq!(
        t1.tools_used.last().map(String::as_str),
        Some("synthesis"),
        "{:?}",
        t1.tools_used
    );
    let subs: Vec<_> = s
        .plan
        .iter()
        .filter(|t| t.parent.as_deref() == Some("t1"))
        .collect();
    assert_eq!(subs.len(), 2);
    let mut cited = Vec::new();
    for sub in &subs {
        assert_eq!(sub.status, Status::Done, "{sub:?}");
        assert!(!sub.tools_used.iter().any(|t| t == "synthesis"));
        cited.extend(sub.source_ids.iter().copied());
    }
    // The synthesis cites what its sub-todos cited, each source once.
    cited.sort_unstable();
    cited.dedup();
    let mut own = t1.source_ids.clone();
    own.sort_unstable();
    assert_eq!(own, cited);

    // Its summary was asked with the sub-todos' results as notes; no search ran for it.
    let summaries: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| kind_of(r) == "Summary" && task_of(r).as_deref() == Some(t1.task.as_str()))
        .collect();
    assert_eq!(
        summaries.len(),
        3,
        "two failed attempts, then the synthesis"
    );
    let last = summaries.last().unwrap();
    let text: String = last.messages.iter().map(|m| m.content.as_str()).collect();
    for sub in &subs {
        let line = format!(
            "Sub-task {} ({}): {}",
            sub.id,
            sub.task,
            sub.result.as_deref().unwrap()
        );
        assert!(text.contains(&line), "missing `{line}` in: {text}");
    }
    assert_eq!(
        t1.tools_used.iter().filter(|t| *t != "synthesis").count(),
        2,
        "a search for each failed attempt, none for the synthesis: {:?}",
        t1.tools_used
    );
}

/// Reviews that fail a todo while `fails(id)` says so, and pass it otherwise.
fn failing_while(fails: impl Fn(&str) -> bool + Send + Sync + 'static) -> Verdict {
    Arc::new(move |id| if fails(id) { failed() } else { done() })
}

/// The research graph over `fake`, run to its end with the plan approved up front.
async fn approved_run(
    fake: &Arc<stategraph_llm::FakeChatModel>,
    corpus: &std::path::Path,
    thread: &str,
) -> stategraph_agents::research::PlanState {
    compiled(fake.clone())
        .invoke(
            PlanStateUpdate::default().question("durability?"),
            config(corpus, thread).setting("yes", true),
        )
        .await
        .unwrap()
        .state
}
