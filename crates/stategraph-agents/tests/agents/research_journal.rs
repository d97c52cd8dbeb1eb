//! The execute node's model call is journaled: when the step fails right after the model
//! answered (here the store refuses to save the step, as a dying disk or a kill
//! would), resuming the thread does not call the model again for that step; requests a failed
//! attempt paid for are counted once even when the step that adds them is lost, and, without a
//! checkpointer, by the node's retry in the same run.

use crate::support;

use stategraph_checkpoint_conformance::faulty_store;

use faulty_store::{Fault, FaultyStore};
use serde_json::json;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Resume, RunConfig};
use stategraph_agents::research::{build, graph, PlanStateUpdate, ResearchAgent};
use stategraph_llm::{ChatModel, FakeChatModel, LlmError};
use std::sync::Arc;
use support::*;

/// A memory store whose writes can be made to fail.
fn faulty_memory() -> Arc<FaultyStore> {
    Arc::new(FaultyStore::over(Arc::new(MemoryCheckpointer::new())))
}

#[tokio::test]
async fn resuming_after_a_failure_right_after_the_model_call_does_not_call_it_again() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let store = faulty_memory();
    // The first save after the model's summary was journaled fails.
    store.inject(
        Fault::next_save("disk gone right after the model answered")
            .after(|op| op.is_journal_key("/summary")),
    );
    let model: Arc<dyn ChatModel> = fake.clone();
    let g = graph(Arc::new(ResearchAgent::new(model)))
        .compile()
        .unwrap()
        .with_checkpointer(store.clone());
    let cfg = config(docs.path(), "journal").setting("yes", true);

    let failed = g
        .invoke(
            PlanStateUpdate::default().question("durability?"),
            cfg.clone(),
        )
        .await;
    assert!(
        failed.is_err(),
        "the step with the first summary could not be saved"
    );
    assert_eq!(store.failures(), 1);
    assert_eq!(
        summarised_tasks(&fake),
        ["How does sled make writes durable"]
    );

    let done = g.resume("journal", Resume::Continue, cfg).await.unwrap();
    assert!(done.state.answer.is_some());
    // t1's summary came from the journal: still one request for it, then one for each other todo.
    assert_eq!(
        summarised_tasks(&fake),
        [
            "How does sled make writes durable",
            "What is the Tokio runtime",
            "How do log-structured merge trees compact",
        ]
    );
    assert!(done
        .state
        .todo("t1")
        .unwrap()
        .result
        .as_deref()
        .unwrap()
        .contains("How does sled"));
    // The thread's ledger counts t1's summary once, and shows it as reused by the resume.
    let execute = done.state.usage.node("execute").unwrap();
    assert_eq!(execute.calls, 3, "one summary per todo, none paid twice");
    assert_eq!(
        execute.replayed_calls, 1,
        "t1's summary came back from the journal"
    );
    assert!(done.state.usage.to_string().contains("reused by resume"));
}

#[tokio::test]
async fn failed_requests_are_counted_once_when_the_step_that_adds_them_is_lost() {
    // Run 1: the plan never fits (three requests), the run fails. Run 2: the plan fits and
    // the step adds the three, but its checkpoint is never saved. Run 3: the step runs
    // again from the journal (no request) and adds them again, to the update that counts.
    let bad = r#"{"todos": []}"#;
    let plan =
        r#"{"todos": [{"id": "t1", "task": "find it", "kind": "research", "dependencies": []}]}"#;
    let model = Arc::new(FakeChatModel::with_replies([bad, bad, bad, plan]));
    let store = faulty_memory();
    let graph = build(model.clone())
        .unwrap()
        .with_checkpointer(store.clone());
    let config = RunConfig::new()
        .thread("lost")
        .interrupt_after(["generate_plan"]);
    let question = PlanStateUpdate::default().question("why?");
    assert!(graph.invoke(question, config.clone()).await.is_err());
    // As a kill before the save would leave it.
    store.inject(Fault::next_checkpoint(
        "disk gone before the step was saved",
    ));
    let lost = graph.resume("lost", Resume::Continue, config.clone()).await;
    assert!(lost.is_err(), "the step's checkpoint was not saved");
    let outcome = graph
        .resume("lost", Resume::Continue, config)
        .await
        .unwrap();
    assert_eq!(model.call_count(), 4);
    let planned = outcome.state.usage.node("generate_plan").copied().unwrap();
    assert_eq!(
        (planned.calls, planned.replayed_calls),
        (4, 1),
        "three failed requests and the plan, once each: {planned:?}"
    );
}

#[tokio::test]
async fn without_a_checkpointer_a_retried_step_counts_what_its_failed_attempt_paid() {
    // The plan's first reply does not fit (answered, so billed); asked again, the provider is
    // overloaded (transient, nothing billed), so the node's retry policy runs it again, and
    // that attempt's plan fits. No checkpointer: the task's journal is kept in memory.
    let docs = corpus();
    let bad = r#"{"todos": []}"#;
    let plan = json!({"todos": [{"id": "t1", "task": "How does sled make writes durable",
        "kind": "research", "dependencies": []}]});
    let overloaded = LlmError::Provider {
        provider: "fake".into(),
        kind: "overloaded_error".into(),
        message: "busy".into(),
        transient: true,
    };
    let review = json!({"completed_task_id": "t1", "task_outcome": "answered",
        "status": "done", "new_tasks": []});
    let model = Arc::new(
        FakeChatModel::with_replies([bad])
            .then_error(overloaded)
            .then_text(plan.to_string())
            .then_text("The sources say: sled flushes its log [1].")
            .then_text(review.to_string())
            .then_text("Sled makes writes durable by flushing its log [1]."),
    );
    let graph = build(model.clone()).unwrap();
    let cfg = config(docs.path(), "no-store").setting("yes", true);
    let done = graph
        .invoke(PlanStateUpdate::default().question("durability?"), cfg)
        .await
        .unwrap();
    assert_eq!(model.remaining(), 0, "every scripted reply was asked for");
    // Six requests, five answered: the overloaded one was not billed.
    assert_eq!(model.call_count(), 6);
    let usage = &done.state.usage;
    assert_eq!(usage.total().calls, 5, "{usage}");
    assert_eq!(
        usage.node("generate_plan").map(|n| n.calls),
        Some(2),
        "the failed attempt's unfit plan and the plan that fitted: {usage}"
    );
}
