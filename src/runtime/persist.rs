//! The runtime's side of checkpointing: rebuilding a typed state from stored records, writing
//! checkpoints according to the durability mode, and holding a thread's lease.
//!
//! Invariant: everything here goes through the `Checkpointer` trait; no backend is named.

use crate::checkpoint::{
    now_ms, CheckpointError, CheckpointId, CheckpointRecord, Checkpointer, Lease, NodeWrite,
    StateData,
};
use crate::error::RunError;
use crate::run::config::{Durability, SnapshotPolicy};
use crate::state::{State, TaggedUpdate};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Generates checkpoint ids that sort in creation order, even within one millisecond.
///
/// A UUID v7 built from the clock and the thread-local userspace RNG: `Uuid::now_v7` asks the
/// kernel for randomness on every call, which cost a quarter of a fast step.
pub(crate) fn new_checkpoint_id() -> CheckpointId {
    static LAST: std::sync::Mutex<u128> = std::sync::Mutex::new(0);
    let random: [u8; 10] = rand::random();
    let fresh = uuid::Builder::from_unix_timestamp_millis(now_ms(), &random)
        .into_uuid()
        .as_u128();
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    // Within a millisecond v7's random bits do not order; bumping the last id keeps it monotonic
    // while staying a valid time-prefixed id.
    let next = if fresh > *last { fresh } else { *last + 1 };
    *last = next;
    CheckpointId::from_u128(next)
}

/// A new id for a run, a lease holder or an unnamed thread: time-ordered like a checkpoint id,
/// and made the same way, without a kernel call per run.
pub(crate) fn new_unique_id() -> String {
    new_checkpoint_id().to_string()
}

/// How far the chain behind a checkpoint reaches back to its snapshot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ChainStats {
    pub(crate) deltas: u32,
    pub(crate) delta_bytes: usize,
    pub(crate) snapshot_bytes: usize,
    /// What the store says the snapshot cost it (see `Checkpointer::snapshot_cost`).
    pub(crate) snapshot_cost: usize,
}

/// A delta checkpoint's writes with its id and the schema version they were written under.
type Delta = (CheckpointId, u32, Vec<NodeWrite>);

/// Rebuilds the state stored at `record`: its nearest snapshot plus the deltas since.
///
/// The chain is read one record at a time, so a writer may delete the thread, or prune it
/// (rewriting the oldest kept delta as a snapshot), between two reads: a parent not found is
/// then no damage. The checkpoint is read again: gone, the thread or checkpoint is said to be
/// missing; still there, its chain is walked once more, and only a chain broken again is damage.
pub(crate) async fn load_state<S: State>(
    store: &dyn Checkpointer,
    record: &CheckpointRecord,
) -> Result<(S, ChainStats), RunError> {
    let mut stats = ChainStats::default();
    if let Walked::ToSnapshot(current, deltas) = walk_to_snapshot(store, record, &mut stats).await?
    {
        return state_from(store, record, current, deltas, stats);
    }
    let fresh = read_again(store, record).await?;
    let mut stats = ChainStats::default();
    match walk_to_snapshot(store, &fresh, &mut stats).await? {
        Walked::ToSnapshot(current, deltas) => state_from(store, &fresh, current, deltas, stats),
        Walked::ParentMissing(broken) => Err(broken),
    }
}

/// The checkpoint a walk that broke off started from, as stored now; or that it is gone.
async fn read_again(
    store: &dyn Checkpointer,
    record: &CheckpointRecord,
) -> Result<CheckpointRecord, RunError> {
    let thread_id = record.thread_id.clone();
    if let Some(fresh) = store.get_checkpoint(&thread_id, Some(record.id)).await? {
        return Ok(fresh);
    }
    Err(match store.get_checkpoint(&thread_id, None).await? {
        None => RunError::ThreadNotFound { thread_id },
        Some(_) => RunError::CheckpointNotFound {
            thread_id,
            checkpoint: record.id.to_string(),
        },
    })
}

/// The state at `record`, from the snapshot its walk ended at (`current`; `None`: its own) and
/// the deltas on the way.
fn state_from<S: State>(
    store: &dyn Checkpointer,
    record: &CheckpointRecord,
    current: Option<CheckpointRecord>,
    deltas: Vec<Delta>,
    mut stats: ChainStats,
) -> Result<(S, ChainStats), RunError> {
    let thread = &record.thread_id;
    let base = current.as_ref().unwrap_or(record);
    // The walk only stops at a snapshot; matching again (instead of its loop breaking out with a
    // borrow, which the borrow checker refuses across the loop's reassignment) keeps this
    // panic-free.
    let StateData::Snapshot(snapshot) = &base.state else {
        return Err(corrupt_chain(
            thread,
            base.id,
            "no snapshot at the end of its chain".into(),
        ));
    };
    stats.snapshot_bytes = snapshot.get().len();
    stats.snapshot_cost = store.snapshot_cost(stats.snapshot_bytes);
    let mut state = decode_snapshot::<S>(thread, base, snapshot)?;
    apply_deltas(&mut state, thread, deltas)?;
    Ok((state, stats))
}

/// Walks from `record` back to its nearest snapshot, collecting the deltas on the way (newest
/// first) and counting them in `stats`. Returns the record holding the snapshot, or `None` when
/// `record` itself holds it.
async fn walk_to_snapshot(
    store: &dyn Checkpointer,
    record: &CheckpointRecord,
    stats: &mut ChainStats,
) -> Result<Walked, RunError> {
    let thread = &record.thread_id;
    let mut deltas: Vec<Delta> = Vec::new();
    let mut current: Option<CheckpointRecord> = None;
    // The snapshot is borrowed where the walk stops, not cloned: a clone copied the whole state
    // (10 MB at 100k messages).
    loop {
        let rec = current.as_ref().unwrap_or(record);
        match &rec.state {
            StateData::Snapshot(_) => break,
            StateData::Delta(writes) => {
                stats.deltas += 1;
                stats.delta_bytes += writes.iter().map(|w| w.update.get().len()).sum::<usize>();
                deltas.push((rec.id, rec.metadata.schema_version, writes.clone()));
                let missing = |what: String| corrupt_chain(thread, rec.id, what);
                let parent = rec.parent_id.ok_or_else(|| {
                    missing("a delta checkpoint has no parent to apply to".into())
                })?;
                match store.get_checkpoint(thread, Some(parent)).await? {
                    Some(next) => current = Some(next),
                    None => {
                        let broken = missing(format!("its parent checkpoint {parent} is missing"));
                        return Ok(Walked::ParentMissing(broken));
                    }
                }
            }
        }
    }
    Ok(Walked::ToSnapshot(current, deltas))
}

/// Where a walk back from a checkpoint ended.
enum Walked {
    /// At a snapshot: the record holding it (`None`: the first one), and the deltas on the way.
    ToSnapshot(Option<CheckpointRecord>, Vec<Delta>),
    /// At a parent not found: the damage it would be, were the thread not changed meanwhile.
    ParentMissing(RunError),
}

/// A chain of checkpoints that cannot be followed to a snapshot.
fn corrupt_chain(thread: &str, checkpoint: CheckpointId, what: String) -> RunError {
    RunError::Checkpoint(CheckpointError::Corrupt {
        thread: thread.to_owned(),
        checkpoint: Some(checkpoint),
        what: "checkpoint",
        source: crate::checkpoint::codec::FrameError::Decode(what),
    })
}

/// A stored state or update that does not fit the state type.
fn mismatch(thread: &str, checkpoint: CheckpointId, message: String) -> RunError {
    RunError::StateMismatch {
        thread_id: thread.to_owned(),
        checkpoint,
        message,
    }
}

/// Decodes the snapshot stored in `base`, through [`State::migrate`] when it was written under
/// another schema version.
fn decode_snapshot<S: State>(
    thread: &str,
    base: &CheckpointRecord,
    snapshot: &RawValue,
) -> Result<S, RunError> {
    let (version, snapshot_id) = (base.metadata.schema_version, base.id);
    if version == S::VERSION {
        return decode_named::<S>(snapshot.get()).map_err(|m| mismatch(thread, snapshot_id, m));
    }
    let value: serde_json::Value = serde_json::from_str(snapshot.get())
        .map_err(|e| mismatch(thread, snapshot_id, e.to_string()))?;
    let migrated = S::migrate(version, value).map_err(|message| RunError::SchemaVersion {
        thread_id: thread.to_owned(),
        found: version,
        expected: S::VERSION,
        message,
    })?;
    serde_json::from_value(migrated).map_err(|e| {
        mismatch(
            thread,
            snapshot_id,
            format!("the migrated state does not fit: {e}"),
        )
    })
}

/// Applies the deltas (collected newest first) to `state`, oldest first, each checkpoint's
/// writes as one batch, as the step that wrote them merged them.
fn apply_deltas<S: State>(state: &mut S, thread: &str, deltas: Vec<Delta>) -> Result<(), RunError> {
    for (id, written_as, writes) in deltas.into_iter().rev() {
        let mut batch = writes
            .iter()
            .map(|w| {
                let update = if written_as == S::VERSION {
                    decode_named::<S::Update>(w.update.get()).map_err(|m| {
                        mismatch(thread, id, format!("an update by `{}`: {m}", w.node))
                    })?
                } else {
                    migrate_update::<S>(thread, written_as, w)?
                };
                Ok(TaggedUpdate::new(w.node.as_str(), update))
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        state
            .apply(&mut batch)
            .map_err(|e| mismatch(thread, id, e.to_string()))?;
    }
    Ok(())
}

/// Reads an update stored under an older schema version through [`State::migrate_update`].
fn migrate_update<S: State>(
    thread: &str,
    version: u32,
    write: &NodeWrite,
) -> Result<S::Update, RunError> {
    let fail = |message: String| RunError::SchemaVersion {
        thread_id: thread.to_string(),
        found: version,
        expected: S::VERSION,
        message: format!(
            "an update by `{}` written under version {version}: {message}",
            write.node
        ),
    };
    let value: serde_json::Value =
        serde_json::from_str(write.update.get()).map_err(|e| fail(e.to_string()))?;
    let migrated = S::migrate_update(version, value).map_err(fail)?;
    let json = serde_json::to_string(&migrated).map_err(|e| fail(e.to_string()))?;
    decode_named::<S::Update>(&json).map_err(|m| {
        fail(format!(
            "{m}; implement State::migrate_update (#[state(migrate_update = path)]) to carry it over"
        ))
    })
}

/// Decodes JSON, naming the path of the field that does not fit.
pub(crate) fn decode_named<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, String> {
    // Tracking the path costs on every field; only a failure needs it, so it is decoded again.
    if let Ok(value) = serde_json::from_str(json) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("field `{path}`: {}", e.inner())
        }
    })
}

pub(crate) fn to_raw<T: serde::Serialize>(value: &T) -> Result<Box<RawValue>, RunError> {
    serde_json::value::to_raw_value(value)
        .map_err(|e| RunError::InvalidInput(format!("a value cannot be stored as JSON: {e}")))
}

/// Bytes of state a snapshot may re-encode per byte of delta since the last one. At 10 MB of
/// state that is a snapshot every ~640 KB of deltas (~5,000 steps of 100-byte messages): the
/// 100k-step loop then spends no more CPU than with snapshots stored whole, where 1/64 cost 29%
/// more user time (BENCHMARKS.md); a reader replays those small deltas in a few ms, beside ~20 ms
/// to decode the state itself.
const REENCODE_SHARE: usize = 16;

/// Decides when a checkpoint stores the whole state.
pub(crate) struct SnapshotTracker {
    policy: SnapshotPolicy,
    stats: ChainStats,
    forced: bool,
}

impl SnapshotTracker {
    pub(crate) fn new(policy: SnapshotPolicy, stats: ChainStats) -> Self {
        SnapshotTracker {
            policy,
            stats,
            forced: false,
        }
    }

    /// Makes the next checkpoint a snapshot (a new thread, or a state read through a migration).
    pub(crate) fn force(&mut self) {
        self.forced = true;
    }

    /// Whether the next checkpoint, whose writes total `delta_bytes`, should be a snapshot.
    pub(crate) fn wants_snapshot(&self, delta_bytes: usize) -> bool {
        let s = &self.stats;
        let deltas = (s.delta_bytes + delta_bytes) as f64;
        let stored = s.snapshot_cost as f64;
        // However cheap a snapshot is to store, it costs encoding the whole state: it waits for
        // deltas worth 1/REENCODE_SHARE of the state, so encoding stays a bounded multiple of
        // what the steps themselves wrote.
        let reencode = (s.snapshot_bytes / REENCODE_SHARE) as f64;
        self.forced
            || deltas >= reencode.max(self.policy.ratio * stored)
            || (s.deltas >= self.policy.max_chain
                && deltas >= reencode.max(self.policy.min_ratio * stored))
    }

    /// Records a snapshot of `bytes` that cost the store `cost` (`Checkpointer::snapshot_cost`).
    pub(crate) fn took_snapshot(&mut self, bytes: usize, cost: usize) {
        self.forced = false;
        self.stats = ChainStats {
            deltas: 0,
            delta_bytes: 0,
            snapshot_bytes: bytes,
            snapshot_cost: cost,
        };
    }

    pub(crate) fn took_delta(&mut self, bytes: usize) {
        self.stats.deltas = self.stats.deltas.saturating_add(1);
        self.stats.delta_bytes += bytes;
    }
}

/// Writes checkpoints as the durability mode says.
pub(crate) struct CheckpointWriter {
    store: Arc<dyn Checkpointer>,
    mode: Durability,
    background: Option<(mpsc::UnboundedSender<CheckpointRecord>, BackgroundWriter)>,
}

/// The task that writes queued checkpoints in async mode.
type BackgroundWriter = JoinHandle<Result<(), CheckpointError>>;

impl CheckpointWriter {
    pub(crate) fn new(store: Arc<dyn Checkpointer>, mode: Durability) -> Self {
        let background = (mode == Durability::Async).then(|| {
            let (tx, mut rx) = mpsc::unbounded_channel::<CheckpointRecord>();
            let store = store.clone();
            let handle = tokio::spawn(async move {
                while let Some(record) = rx.recv().await {
                    store.put_checkpoint(&record, false).await?;
                }
                Ok(())
            });
            (tx, handle)
        });
        CheckpointWriter {
            store,
            mode,
            background,
        }
    }

    pub(crate) fn mode(&self) -> Durability {
        self.mode
    }

    pub(crate) fn store(&self) -> &Arc<dyn Checkpointer> {
        &self.store
    }

    /// True when checkpoints are queued for a background writer (async mode): they must be
    /// handed over whole ([`CheckpointWriter::queue`]); otherwise [`CheckpointWriter::write`]
    /// writes one in place.
    pub(crate) fn queues(&self) -> bool {
        self.background.is_some()
    }

    /// Queues a checkpoint for the background writer (async mode).
    pub(crate) async fn queue(&mut self, record: CheckpointRecord) -> Result<(), RunError> {
        match &self.background {
            Some((tx, _)) => {
                if tx.send(record).is_err() {
                    // The writer stopped on an error; `finish` reports it.
                    return self.finish(false).await;
                }
                Ok(())
            }
            None => self.write(&record, true).await,
        }
    }

    /// Writes a checkpoint now (sync: on disk before returning, unless `flush` is false: then
    /// the next flushed write carries it). The caller keeps the record, so what it lent the
    /// record comes back without copies.
    pub(crate) async fn write(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), RunError> {
        Ok(self
            .store
            .put_checkpoint(record, flush && self.mode == Durability::Sync)
            .await?)
    }

    /// Waits for queued checkpoints and, with `flush`, flushes them to disk.
    pub(crate) async fn finish(&mut self, flush: bool) -> Result<(), RunError> {
        if let Some((tx, handle)) = self.background.take() {
            drop(tx);
            match handle.await {
                Ok(result) => result?,
                Err(e) => {
                    return Err(CheckpointError::Storage(format!(
                        "background checkpoint writer died: {e}"
                    ))
                    .into())
                }
            }
            if flush {
                self.store.flush().await?;
            }
        }
        Ok(())
    }
}

/// A run's claim on its thread, renewed while the run lives by [`LeaseGuard::keep_alive`],
/// which the run polls beside its steps: no task of its own, so a short run spawns nothing.
pub(crate) struct LeaseGuard {
    store: Arc<dyn Checkpointer>,
    thread: String,
    lease: tokio::sync::Mutex<Lease>,
    ttl: Duration,
}

/// This machine's name, read once: a lease records it, and every run takes a lease.
fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "localhost".to_string())
    })
}

/// True when the lease's holder is certainly gone: it ran on this host and its process no
/// longer exists. (A lease from another host can only lapse.)
fn holder_is_dead(lease: &Lease, host: &str) -> bool {
    if lease.host != host {
        return false;
    }
    #[cfg(unix)]
    {
        // kill(pid, 0) sends nothing; it only asks whether the process exists.
        let rc = unsafe { libc::kill(lease.pid as libc::pid_t, 0) };
        rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// True when a lease still binds: not lapsed, and its holder is not known to be dead.
pub(crate) fn lease_is_live(lease: &Lease) -> bool {
    lease.expires_at_ms > now_ms() && !holder_is_dead(lease, host_name())
}

impl LeaseGuard {
    /// Claims `thread`, failing at once with `ThreadBusy` when a live run holds it.
    pub(crate) async fn acquire(
        store: Arc<dyn Checkpointer>,
        thread: &str,
        ttl: Duration,
    ) -> Result<LeaseGuard, CheckpointError> {
        let host = host_name();
        let ttl_ms = ttl.as_millis() as u64;
        // Most threads are free: claim first, and a refused claim says who holds the thread.
        let mut current: Option<Lease> = None;
        for _ in 0..5 {
            if let Some(held) = &current {
                let now = now_ms();
                if lease_is_live(held) {
                    return Err(CheckpointError::ThreadBusy {
                        thread: thread.to_string(),
                        pid: held.pid,
                        host: held.host.clone(),
                        expires_in_ms: held.expires_at_ms.saturating_sub(now),
                    });
                }
            }
            let lease = Lease {
                owner: new_unique_id(),
                pid: std::process::id(),
                host: host.to_string(),
                expires_at_ms: now_ms() + ttl_ms,
            };
            match store
                .swap_lease(thread, current.as_ref(), Some(&lease))
                .await?
            {
                Ok(()) => {
                    return Ok(LeaseGuard {
                        store,
                        thread: thread.to_string(),
                        lease: tokio::sync::Mutex::new(lease),
                        ttl,
                    })
                }
                Err(found) => current = found,
            }
        }
        let held = store.get_lease(thread).await?;
        Err(CheckpointError::ThreadBusy {
            thread: thread.to_string(),
            pid: held.as_ref().map(|l| l.pid).unwrap_or(0),
            host: held.map(|l| l.host).unwrap_or_default(),
            expires_in_ms: ttl_ms,
        })
    }

    /// Renews the lease every third of its lifetime. Poll it beside the run; it returns only
    /// if another run took the thread over, and then renewing has stopped.
    ///
    /// It shares the run's task, so a node that blocks its thread (instead of awaiting, or
    /// moving heavy work to `spawn_blocking`) for longer than the lease's lifetime lets it lapse.
    pub(crate) async fn keep_alive(&self) {
        let period = (self.ttl / 3).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(period).await;
            let mut held = self.lease.lock().await;
            let renewed = Lease {
                expires_at_ms: now_ms() + self.ttl.as_millis() as u64,
                ..held.clone()
            };
            match self
                .store
                .swap_lease(&self.thread, Some(&held), Some(&renewed))
                .await
            {
                Ok(Ok(())) => *held = renewed,
                Ok(Err(_)) => {
                    tracing::warn!(thread = %self.thread, "lost the thread's lease to another run");
                    return;
                }
                Err(e) => {
                    tracing::warn!(thread = %self.thread, error = %e, "could not renew the thread's lease")
                }
            }
        }
    }

    /// Gives the thread up.
    pub(crate) async fn release(self) {
        let lease = self.lease.into_inner();
        if let Err(e) = self
            .store
            .swap_lease(&self.thread, Some(&lease), None)
            .await
        {
            tracing::warn!(thread = %self.thread, error = %e, "could not release the thread's lease; it will lapse");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decode_named;

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        #[allow(dead_code)]
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        #[allow(dead_code)]
        count: u32,
    }

    #[test]
    fn a_value_that_does_not_fit_is_reported_with_the_field_path() {
        assert!(decode_named::<Outer>(r#"{"inner": {"count": 3}}"#).is_ok());
        let err = decode_named::<Outer>(r#"{"inner": {"count": "three"}}"#).unwrap_err();
        assert!(
            err.starts_with("field `inner.count`: invalid type"),
            "{err}"
        );
        let err = decode_named::<Outer>("not json").unwrap_err();
        assert!(!err.starts_with("field"), "{err}");
    }
}
