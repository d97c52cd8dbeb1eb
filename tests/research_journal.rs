//! The execute node's model call is journaled: when the step fails right after the model
//! answered (here the store refuses to save the step, as a dying disk or a kill
//! would), resuming the thread does not call the model again for that step.

#[path = "research_support.rs"]
mod support;

use async_trait::async_trait;
use stategraph::agents::research::{graph, PlanStateUpdate, ResearchAgent};
use stategraph::checkpoint::*;
use stategraph::llm::ChatModel;
use stategraph::runtime::Resume;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

/// A memory store that fails the first save after a `summary` journal entry.
#[derive(Default)]
struct FailAfterSummary {
    inner: MemoryCheckpointer,
    armed: AtomicBool,
    failures: AtomicUsize,
}

impl FailAfterSummary {
    /// Fails the first save of the step once the model's summary was journaled.
    fn fail_if_armed(&self) -> Result<(), CheckpointError> {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.failures.fetch_add(1, Ordering::SeqCst);
            return Err(CheckpointError::Storage(
                "disk gone right after the model answered".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Checkpointer for FailAfterSummary {
    async fn put_checkpoint(
        &self,
        r: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.fail_if_armed()?;
        self.inner.put_checkpoint(r, flush).await
    }
    async fn get_checkpoint(
        &self,
        t: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        self.inner.get_checkpoint(t, id).await
    }
    async fn list_checkpoints(
        &self,
        t: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.inner.list_checkpoints(t, before, limit).await
    }
    async fn put_writes(
        &self,
        t: &str,
        c: CheckpointId,
        w: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.fail_if_armed()?;
        self.inner.put_writes(t, c, w, flush).await
    }
    async fn get_writes(
        &self,
        t: &str,
        c: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.inner.get_writes(t, c).await
    }
    async fn get_journal(
        &self,
        t: &str,
        k: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.inner.get_journal(t, k).await
    }
    async fn put_journal(
        &self,
        t: &str,
        k: &str,
        v: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.inner.put_journal(t, k, v).await?;
        if k.ends_with("/summary") && self.failures.load(Ordering::SeqCst) == 0 {
            self.armed.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.list_threads().await
    }
    async fn delete_thread(&self, t: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(t).await
    }
    async fn delete_checkpoints(
        &self,
        t: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.inner.delete_checkpoints(t, ids).await
    }
    async fn get_lease(&self, t: &str) -> Result<Option<Lease>, CheckpointError> {
        self.inner.get_lease(t).await
    }
    async fn swap_lease(
        &self,
        t: &str,
        e: Option<&Lease>,
        n: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.inner.swap_lease(t, e, n).await
    }
    async fn flush(&self) -> Result<(), CheckpointError> {
        self.inner.flush().await
    }
}

#[tokio::test]
async fn resuming_after_a_failure_right_after_the_model_call_does_not_call_it_again() {
    let docs = corpus();
    let fake = model(three_todos(), Arc::new(|_| done()));
    let store = Arc::new(FailAfterSummary::default());
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
    assert_eq!(store.failures.load(Ordering::SeqCst), 1);
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
