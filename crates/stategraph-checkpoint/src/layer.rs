//! [`CheckpointerLayer`]: a store in front of another that changes a few of its calls and passes
//! every other call through, including the ones added to [`Checkpointer`] later.

use crate::{CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, PendingWrite};
use async_trait::async_trait;

/// A store in front of another (`inner`) that changes some of its calls: counts them, fails
/// them on demand, logs what was written. Implement [`inner`](Self::inner) and the methods you
/// change, with the signatures they have on [`Checkpointer`]; every other method goes to
/// `inner` as it was called, and the layer is a `Checkpointer` wherever one is wanted.
///
/// Why not forward by hand: a method added to `Checkpointer` reaches every layer here at once.
/// A wrapper that forwards by hand and misses one silently gets the trait's default, which
/// answers for no store (a default `snapshot_cost` makes the runtime snapshot as if the store
/// behind it shared no pieces).
///
/// A layer that changes what records *hold* (sealing, compressing) implements `Checkpointer`
/// itself instead, as `stategraph-crypt`'s `EncryptedCheckpointer` does: a method added later
/// must fail to compile there until someone decides what it seals, not pass records through
/// unchanged.
///
/// Call a layer as a `Checkpointer` (a `dyn Checkpointer`, or with only `Checkpointer` in
/// scope): where both traits are in scope, a method call names two methods.
///
/// ```
/// use async_trait::async_trait;
/// use stategraph_checkpoint::{
///     CheckpointError, CheckpointId, Checkpointer, CheckpointerLayer, MemoryCheckpointer,
///     PendingKind, PendingWrite,
/// };
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// /// The memory store, counting the task results it is given.
/// #[derive(Default)]
/// struct CountingWrites {
///     inner: MemoryCheckpointer,
///     writes: AtomicUsize,
/// }
///
/// #[async_trait]
/// impl CheckpointerLayer for CountingWrites {
///     fn inner(&self) -> &dyn Checkpointer {
///         &self.inner
///     }
///
///     async fn put_writes(
///         &self,
///         thread: &str,
///         checkpoint: CheckpointId,
///         writes: &[PendingWrite],
///         flush: bool,
///     ) -> Result<(), CheckpointError> {
///         self.writes.fetch_add(writes.len(), Ordering::SeqCst);
///         self.inner.put_writes(thread, checkpoint, writes, flush).await
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let counting = Arc::new(CountingWrites::default());
/// let store: Arc<dyn Checkpointer> = counting.clone();
/// let failed = PendingWrite {
///     task: 0,
///     node: "draft".into(),
///     kind: PendingKind::Error { message: "timed out".into() },
/// };
/// store.put_writes("t1", CheckpointId::nil(), &[failed], true).await?;
/// assert_eq!(counting.writes.load(Ordering::SeqCst), 1);
/// // Everything else is the memory store's: its journal, its leases, its snapshot cost.
/// store.put_journal("t1", "note", &serde_json::json!("kept")).await?;
/// assert_eq!(store.list_journal("t1").await?, vec!["note"]);
/// assert_eq!(store.snapshot_cost(1 << 20), counting.inner.snapshot_cost(1 << 20));
/// # Ok::<(), CheckpointError>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait CheckpointerLayer: Send + Sync + 'static {
    /// The store every call this layer does not change goes to.
    fn inner(&self) -> &dyn Checkpointer;

    /// [`Checkpointer::put_checkpoint`], passed to `inner` unless changed.
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner().put_checkpoint(record, flush).await
    }

    /// [`Checkpointer::get_checkpoint`], passed to `inner` unless changed.
    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        self.inner().get_checkpoint(thread, id).await
    }

    /// [`Checkpointer::list_checkpoints`], passed to `inner` unless changed.
    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.inner().list_checkpoints(thread, before, limit).await
    }

    /// [`Checkpointer::put_writes`], passed to `inner` unless changed.
    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.inner()
            .put_writes(thread, checkpoint, writes, flush)
            .await
    }

    /// [`Checkpointer::get_writes`], passed to `inner` unless changed.
    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        self.inner().get_writes(thread, checkpoint).await
    }

    /// [`Checkpointer::get_journal`], passed to `inner` unless changed.
    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.inner().get_journal(thread, key).await
    }

    /// [`Checkpointer::put_journal`], passed to `inner` unless changed.
    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.inner().put_journal(thread, key, value).await
    }

    /// [`Checkpointer::list_journal`], passed to `inner` unless changed.
    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        self.inner().list_journal(thread).await
    }

    /// [`Checkpointer::list_namespaces`], passed to `inner` unless changed.
    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        self.inner().list_namespaces(thread).await
    }

    /// [`Checkpointer::list_threads`], passed to `inner` unless changed.
    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner().list_threads().await
    }

    /// [`Checkpointer::delete_thread`], passed to `inner` unless changed.
    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        self.inner().delete_thread(thread).await
    }

    /// [`Checkpointer::delete_checkpoints`], passed to `inner` unless changed.
    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.inner().delete_checkpoints(thread, ids).await
    }

    /// [`Checkpointer::get_lease`], passed to `inner` unless changed.
    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        self.inner().get_lease(thread).await
    }

    /// [`Checkpointer::swap_lease`], passed to `inner` unless changed.
    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.inner().swap_lease(thread, expected, new).await
    }

    /// [`Checkpointer::flush`], passed to `inner` unless changed.
    async fn flush(&self) -> Result<(), CheckpointError> {
        self.inner().flush().await
    }

    /// [`Checkpointer::snapshot_cost`]: `inner`'s answer unless changed.
    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        self.inner().snapshot_cost(state_bytes)
    }
}

// Every method is spelled out, the provided ones too, so none is left to `Checkpointer`'s
// default: a new required method fails to compile here, and clippy's `missing_trait_methods`
// refuses a new provided one, until it is added above (forwarding) and here.
#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<L: CheckpointerLayer> Checkpointer for L {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        CheckpointerLayer::put_checkpoint(self, record, flush).await
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        CheckpointerLayer::get_checkpoint(self, thread, id).await
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        CheckpointerLayer::list_checkpoints(self, thread, before, limit).await
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        CheckpointerLayer::put_writes(self, thread, checkpoint, writes, flush).await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        CheckpointerLayer::get_writes(self, thread, checkpoint).await
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        CheckpointerLayer::get_journal(self, thread, key).await
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        CheckpointerLayer::put_journal(self, thread, key, value).await
    }

    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        CheckpointerLayer::list_journal(self, thread).await
    }

    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        CheckpointerLayer::list_namespaces(self, thread).await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        CheckpointerLayer::list_threads(self).await
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        CheckpointerLayer::delete_thread(self, thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        CheckpointerLayer::delete_checkpoints(self, thread, ids).await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        CheckpointerLayer::get_lease(self, thread).await
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        CheckpointerLayer::swap_lease(self, thread, expected, new).await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        CheckpointerLayer::flush(self).await
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        CheckpointerLayer::snapshot_cost(self, state_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckpointMetadata, Frontier, MemoryCheckpointer, PendingKind, Source, StateData};
    use std::sync::Arc;

    /// Changes nothing: every call must land in the memory store behind it.
    struct Passing(MemoryCheckpointer);

    impl CheckpointerLayer for Passing {
        fn inner(&self) -> &dyn Checkpointer {
            &self.0
        }
    }

    /// Refuses journal writes, passes the rest.
    struct NoJournal(Passing);

    #[async_trait]
    impl CheckpointerLayer for NoJournal {
        fn inner(&self) -> &dyn Checkpointer {
            &self.0
        }

        async fn put_journal(
            &self,
            _thread: &str,
            key: &str,
            _value: &serde_json::Value,
        ) -> Result<(), CheckpointError> {
            Err(CheckpointError::Storage(format!("journal `{key}` refused")))
        }
    }

    fn record(thread: &str, n: u128, parent: Option<u128>) -> CheckpointRecord {
        CheckpointRecord {
            thread_id: thread.into(),
            id: uuid::Uuid::from_u128(n),
            parent_id: parent.map(uuid::Uuid::from_u128),
            step: n as u64,
            state: StateData::Snapshot(
                serde_json::value::RawValue::from_string(format!("{{\"n\":{n}}}")).unwrap(),
            ),
            frontier: Frontier::default(),
            metadata: CheckpointMetadata {
                source: Source::Loop,
                writers: vec![],
                created_at_ms: 1,
                schema_version: 1,
                run_id: "r".into(),
                graph: None,
            },
        }
    }

    fn lease(owner: &str) -> Lease {
        Lease {
            owner: owner.into(),
            pid: 1,
            host: "h".into(),
            expires_at_ms: u64::MAX,
        }
    }

    #[tokio::test]
    async fn a_layer_that_changes_nothing_reaches_its_store_through_every_method() {
        let layer = Arc::new(Passing(MemoryCheckpointer::new()));
        let store: Arc<dyn Checkpointer> = layer.clone();
        let inner = &layer.0;
        let (first, second) = (record("t", 1, None), record("t", 2, Some(1)));
        store.put_checkpoint(&first, true).await.unwrap();
        store.put_checkpoint(&second, false).await.unwrap();
        store
            .put_checkpoint(&record("t/child:0a", 3, None), true)
            .await
            .unwrap();
        let newest = store.get_checkpoint("t", None).await.unwrap().unwrap();
        assert_eq!(newest.id, second.id);
        let listed = store.list_checkpoints("t", None, 10).await.unwrap();
        assert_eq!(
            listed.iter().map(|r| r.id).collect::<Vec<_>>(),
            [second.id, first.id]
        );
        assert_eq!(
            inner.list_checkpoints("t", None, 10).await.unwrap().len(),
            2
        );

        let write = PendingWrite {
            task: 0,
            node: "n".into(),
            kind: PendingKind::Error {
                message: "boom".into(),
            },
        };
        store
            .put_writes("t", first.id, &[write], true)
            .await
            .unwrap();
        assert_eq!(store.get_writes("t", first.id).await.unwrap().len(), 1);
        assert_eq!(inner.get_writes("t", first.id).await.unwrap().len(), 1);

        let value = serde_json::json!({"sent": 1});
        store.put_journal("t", "mail", &value).await.unwrap();
        assert_eq!(store.get_journal("t", "mail").await.unwrap(), Some(value));
        assert_eq!(store.list_journal("t").await.unwrap(), ["mail"]);
        assert_eq!(store.list_namespaces("t").await.unwrap(), ["t/child:0a"]);
        assert_eq!(store.list_threads().await.unwrap(), ["t"]);

        let held = lease("run-1");
        assert_eq!(
            store.swap_lease("t", None, Some(&held)).await.unwrap(),
            Ok(())
        );
        assert_eq!(store.get_lease("t").await.unwrap(), Some(held.clone()));
        assert_eq!(
            store.swap_lease("t", None, None).await.unwrap(),
            Err(Some(held.clone())),
            "the inner store's compare-and-swap, not a fresh one"
        );
        assert_eq!(inner.get_lease("t").await.unwrap(), Some(held));

        store.flush().await.unwrap();
        // The memory store shares a large snapshot's pieces: its cost, not the trait default.
        let big = 1 << 20;
        assert_eq!(store.snapshot_cost(big), inner.snapshot_cost(big));
        assert!(store.snapshot_cost(big) < big);

        store.delete_checkpoints("t", &[first.id]).await.unwrap();
        assert_eq!(
            inner.list_checkpoints("t", None, 10).await.unwrap().len(),
            1
        );
        store.delete_thread("t").await.unwrap();
        assert!(inner.get_checkpoint("t", None).await.unwrap().is_none());
        assert!(inner.list_journal("t").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_layer_changes_only_what_it_overrides_and_stacks_on_another() {
        let layer = NoJournal(Passing(MemoryCheckpointer::new()));
        let store: &dyn Checkpointer = &layer;
        let err = store
            .put_journal("t", "mail", &serde_json::json!(1))
            .await
            .unwrap_err();
        assert!(matches!(&err, CheckpointError::Storage(m) if m == "journal `mail` refused"));
        assert!(layer.0 .0.list_journal("t").await.unwrap().is_empty());
        // The rest goes through both layers to the memory store.
        store
            .put_checkpoint(&record("t", 1, None), true)
            .await
            .unwrap();
        assert_eq!(layer.0 .0.list_threads().await.unwrap(), ["t"]);
        assert_eq!(
            store.snapshot_cost(1 << 20),
            layer.0 .0.snapshot_cost(1 << 20)
        );
    }
}
