//! The research agent end to end at library level: a full run, a paused run whose plan is
//! edited then resumed, and the narrowed review schema. No network, no key: a fake model and a
//! corpus in a temp folder.

use crate::support;

use serde_json::json;
use stategraph::runtime::Resume;
use stategraph_agents::research::{apply_edit, render, PlanEdit, PlanStateUpdate, Status};
use std::sync::Arc;
use support::*;

#[tokio::test]
async fn a_full_run_with_yes_answers_with_numbered_citations() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let g = compiled(fake.clone());
    let input = PlanStateUpdate::default().question("How does sled make writes durable?");
    let out = g
        .invoke(input, config(docs.path(), "full").setting("yes", true))
        .await
        .unwrap();

    assert!(!out.is_interrupted());
    let answer = out.state.answer.clone().unwrap();
    assert!(
        answer.contains("[1]") && answer.contains("\n\nSources:\n[1] "),
        "{answer}"
    );
    assert!(
        answer.contains("file://"),
        "sources are the corpus files: {answer}"
    );
    assert!(
        out.state.plan.iter().all(|t| t.status == Status::Done),
        "{:?}",
        out.state.plan
    );
    assert!(out
        .state
        .plan
        .iter()
        .all(|t| !t.source_ids.is_empty() && t.result.is_some()));
    // t3 waits for t1; plan order otherwise.
    assert_eq!(
        summarised_tasks(&fake),
        [
            "How does sled make writes durable",
            "What is the Tokio runtime",
            "How do log-structured merge trees compact",
        ]
    );
    // Plan, 3 summaries, 3 reviews, the answer: each in the ledger under its node.
    let usage = &out.state.usage;
    assert_eq!(usage.total().calls, 8);
    assert_eq!(usage.node("execute").unwrap().calls, 3);
    assert_eq!(usage.node("reflect").unwrap().calls, 3);
    assert!(usage.total().usage.total() > 0);
}

#[tokio::test]
async fn a_paused_plan_edited_through_update_state_runs_as_edited() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let g = compiled(fake.clone());
    let cfg = config(docs.path(), "edit");
    let paused = g
        .invoke(
            PlanStateUpdate::default().question("durability?"),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert!(paused.is_interrupted(), "planning_mode pauses by default");
    assert_eq!(fake.call_count(), 1, "only the plan was paid for");

    // The person removes t3 and makes t2 wait for t1, as `graph plan` would.
    let snapshot = g.get_state("edit", None).await.unwrap();
    assert_eq!(snapshot.next, ["planning_mode"]);
    let plan = apply_edit(&snapshot.values.plan, PlanEdit::Remove { id: "t3".into() }).unwrap();
    let plan = apply_edit(
        &plan,
        PlanEdit::Dependencies {
            id: "t2".into(),
            dependencies: vec!["t1".into()],
        },
    )
    .unwrap();
    g.update_state(
        "edit",
        PlanStateUpdate::default().overwrite_plan(plan),
        None,
    )
    .await
    .unwrap();
    let edited = g.get_state("edit", None).await.unwrap();
    assert_eq!(
        edited.values.plan.len(),
        2,
        "the overwrite really removed t3"
    );
    assert!(render(&edited.values.plan)
        .contains("- [ ] t2 (research): What is the Tokio runtime (after: t1)"));

    let done = g
        .resume("edit", Resume::value("approve").unwrap(), cfg)
        .await
        .unwrap();
    assert!(done.state.answer.is_some());
    assert!(done.state.plan_approved);
    let tasks = summarised_tasks(&fake);
    assert_eq!(
        tasks,
        [
            "How does sled make writes durable",
            "What is the Tokio runtime"
        ]
    );
    let asked_about_t3 = fake.requests().iter().any(|r| {
        r.messages
            .iter()
            .any(|m| m.content.contains("log-structured merge trees compact"))
    });
    assert!(!asked_about_t3, "the removed todo never reached the model");
}

#[tokio::test]
async fn the_resume_value_can_be_an_edited_markdown_plan_and_a_bad_one_asks_again() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let g = compiled(fake.clone());
    let cfg = config(docs.path(), "md");
    let paused = g
        .invoke(PlanStateUpdate::default().question("q"), cfg.clone())
        .await
        .unwrap();
    let markdown = render(&paused.state.plan);

    // A cycle is refused with its line; the run pauses again with the problem and the same plan.
    let cyclic = markdown
        .replace(
            "What is the Tokio runtime",
            "What is the Tokio runtime (after: t3)",
        )
        .replace("compact (after: t1)", "compact (after: t2)");
    let again = g
        .resume("md", Resume::value(cyclic).unwrap(), cfg.clone())
        .await
        .unwrap();
    assert!(again.is_interrupted());
    let stranded = g.get_state("md", None).await.unwrap();
    let problem = stranded.interrupts.last().unwrap().payload["problem"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        problem.contains("line 6") && problem.contains("cycle"),
        "{problem}"
    );
    assert_eq!(stranded.values.plan.len(), 3);

    let without_t2: String = markdown
        .lines()
        .filter(|l| !l.contains("Tokio"))
        .map(|l| format!("{l}\n"))
        .collect();
    let done = g
        .resume("md", Resume::value(without_t2).unwrap(), cfg)
        .await
        .unwrap();
    assert!(done.state.answer.is_some(), "{:?}", done.status);
    assert_eq!(
        done.state
            .plan
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["t1", "t3"]
    );
    assert!(!summarised_tasks(&fake).iter().any(|t| t.contains("Tokio")));
}

#[tokio::test]
async fn the_review_schema_allows_only_the_current_id_and_existing_dependencies() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let g = compiled(fake.clone());
    g.invoke(
        PlanStateUpdate::default().question("q"),
        config(docs.path(), "schema").setting("yes", true),
    )
    .await
    .unwrap();
    let reviews: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| kind_of(r) == "PlanUpdate")
        .collect();
    assert_eq!(reviews.len(), 3);
    for (review, id) in reviews.iter().zip(["t1", "t2", "t3"]) {
        let schema = &review.response_format.as_ref().unwrap().schema;
        assert_eq!(
            schema["properties"]["completed_task_id"]["enum"],
            json!([id])
        );
        let deps = schema
            .pointer("/$defs/NewTask/properties/dependencies/items/enum")
            .unwrap();
        assert_eq!(deps, &json!(["t1", "t2", "t3"]));
    }
}

#[tokio::test]
async fn a_review_naming_another_todo_is_sent_back_then_follow_ups_get_fresh_ids_within_caps() {
    let docs = corpus();
    // The first review names the wrong todo and asks for three follow-ups; the cap is two.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let plan = json!({"todos": [{"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []}]});
    let fake = model(
        plan,
        Arc::new(move |id| {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if id == "t1" && n == 0 {
                return json!({"completed_task_id": "t9", "task_outcome": "x", "status": "done", "new_tasks": []});
            }
            if id == "t1" {
                return json!({"task_outcome": "ok", "status": "done", "new_tasks": [
                    {"task": "What is the Tokio runtime", "kind": "research", "dependencies": ["t1"]},
                    {"task": "How do log-structured merge trees compact", "kind": "research", "dependencies": []},
                    {"task": "one too many", "kind": "research", "dependencies": []}
                ]});
            }
            done()
        }),
    );
    let g = compiled(fake.clone());
    let out = g
        .invoke(
            PlanStateUpdate::default().question("q"),
            config(docs.path(), "follow").setting("yes", true),
        )
        .await
        .unwrap();
    let ids: Vec<_> = out.state.plan.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        ["t1", "t2", "t3"],
        "two follow-ups, ids made by the agent"
    );
    assert_eq!(out.state.plan[1].dependencies, ["t1"]);
    assert_eq!(out.state.plan[0].followups, 2);
    assert!(out.state.plan.iter().all(|t| t.status == Status::Done));
    // The wrong id was sent back: t1's review took two requests, then one each for t2 and t3.
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| kind_of(r) == "PlanUpdate")
            .count(),
        4
    );
}
