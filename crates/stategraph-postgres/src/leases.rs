//! Leases and fencing. A lease is the one-writer claim on a thread (the engine takes it, renews
//! it and lets it go through [`swap_lease`](stategraph_checkpoint::Checkpointer::swap_lease));
//! here it also carries an *epoch*, a number from a database sequence that changes whenever the
//! lease passes to another owner (a renewal keeps it).
//!
//! A handle remembers the epoch of each lease it took. Every write of a thread, or of one of its
//! subgraphs, runs the fence first in its transaction (`stategraph_fence`, `schema/sql/v1.sql`):
//! it locks the root thread's row and, if this handle holds a lease there, refuses the
//! transaction unless the lease is still at that epoch. A worker that was paused (SIGSTOP, a long
//! pause) or cut off while its lease lapsed and another took the thread over therefore cannot add
//! a record: its write fails as [`CheckpointError::ThreadBusy`], inside the transaction, whatever
//! the clocks say. A swap holds the row for update, so it waits for writes in flight and they for
//! it: a write commits wholly before a takeover or is refused wholly after it.
//!
//! A handle that holds no lease on a thread writes it unfenced, as the other stores do (a fork's
//! first records of its new thread, a record between runs). Fencing tells handles apart: two runs
//! sharing one handle are kept apart by the engine's lease check.

use crate::keys::ThreadKeys;
use crate::transaction::{stmt, Lock, Stmt};
use crate::PostgresCheckpointer;
use deadpool_postgres::GenericClient;
use stategraph_checkpoint::backend::{corrupt, encode};
use stategraph_checkpoint::{codec, now_ms, root_thread, CheckpointError, Lease};
use std::collections::HashMap;
use std::sync::Mutex;

const FENCE: &str = "SELECT stategraph_fence($1, $2, $3)";
const SWAP: &str =
    "SELECT swapped, found, fencing_epoch FROM stategraph_swap_lease($1, $2, $3, $4, $5, $6)";
const GET: &str = "SELECT lease FROM stategraph_threads WHERE thread_key = $1";

/// Per thread, the epoch of the lease this handle took.
#[derive(Default)]
pub(crate) struct HeldEpochs(Mutex<HashMap<String, i64>>);

impl HeldEpochs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        // A panic while holding the lock leaves a plain map behind, consistent per call.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, thread: &str) -> Option<i64> {
        self.lock().get(thread).copied()
    }

    fn set(&self, thread: &str, epoch: i64) {
        self.lock().insert(thread.to_string(), epoch);
    }

    pub(crate) fn forget(&self, thread: &str) {
        self.lock().remove(thread);
    }
}

impl PostgresCheckpointer {
    /// The fence of a write of `thread`: the first statement of its transaction.
    pub(crate) fn fence(&self, thread: &str, keys: &ThreadKeys, lock: Lock) -> Stmt {
        let held = self.held_epoch(thread);
        stmt!(FENCE, keys.root.clone(), held, lock == Lock::Exclusive)
    }

    /// The epoch of the lease this handle holds on `thread`'s root, if it holds one: what the
    /// fence of a write compares with the root's.
    pub(crate) fn held_epoch(&self, thread: &str) -> Option<i64> {
        self.held.get(root_thread(thread))
    }

    /// The thread's lease, if any.
    pub(crate) async fn lease_of(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        let key = ThreadKeys::of(thread).key;
        let client = self.client().await?;
        let found = async {
            let statement = client.prepare_cached(GET).await?;
            let row = client.query_opt(&statement, &[&key]).await?;
            row.map(|r| r.try_get::<_, Option<Vec<u8>>>(0))
                .transpose()
                .map(Option::flatten)
        }
        .await
        .map_err(|e| self.target.query_error(&e))?;
        found
            .map(|bytes| codec::decode(&bytes).map_err(|e| corrupt(thread, None, "lease", e)))
            .transpose()
    }

    /// Replaces the lease if it is `expected`; remembers the epoch of a lease taken.
    pub(crate) async fn swap_lease_of(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        let keys = ThreadKeys::of(thread);
        let new_bytes = new.map(|l| encode(thread, l)).transpose()?;
        let owner = new.map(|l| l.owner.clone());
        let mut expected_bytes = expected.map(|l| encode(thread, l)).transpose()?;
        let client = self.client().await?;
        let statement = client
            .prepare_cached(SWAP)
            .await
            .map_err(|e| self.target.query_error(&e))?;
        // Swapped on the exact bytes: a lease equal to `expected` but stored as other bytes (by
        // another version) is swapped on those, so a change in between still fails the swap.
        for _ in 0..2 {
            let row = client
                .query_one(
                    &statement,
                    &[
                        &keys.key,
                        &thread,
                        &keys.root,
                        &expected_bytes,
                        &new_bytes,
                        &owner,
                    ],
                )
                .await
                .map_err(|e| self.target.query_error(&e))?;
            let read = || -> Result<(bool, Option<Vec<u8>>, i64), tokio_postgres::Error> {
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            };
            let (swapped, found, epoch) = read().map_err(|e| self.target.query_error(&e))?;
            if swapped {
                match new {
                    Some(_) => self.held.set(thread, epoch),
                    None => self.held.forget(thread),
                }
                return Ok(Ok(()));
            }
            let current: Option<Lease> = found
                .as_deref()
                .map(|b| codec::decode(b).map_err(|e| corrupt(thread, None, "lease", e)))
                .transpose()?;
            if current.as_ref() != expected {
                // A release that failed leaves the epoch held: this handle lost the thread, and
                // its writes stay refused until it takes a lease again.
                return Ok(Err(current));
            }
            expected_bytes = found;
        }
        Ok(Err(self.lease_of(thread).await?))
    }

    /// The error of a write the fence refused: the thread is another run's now.
    pub(crate) async fn refused(&self, thread: &str) -> CheckpointError {
        let root = root_thread(thread);
        tracing::warn!(
            thread,
            "a write was refused: the thread's lease was taken over by another run"
        );
        let holder = self.lease_of(root).await.ok().flatten();
        let now = now_ms();
        match holder {
            Some(lease) if lease.expires_at_ms > now => CheckpointError::ThreadBusy {
                thread: root.to_string(),
                pid: lease.pid,
                host: lease.host,
                expires_in_ms: lease.expires_at_ms - now,
            },
            _ => CheckpointError::ThreadBusy {
                thread: root.to_string(),
                pid: 0,
                host: String::new(),
                expires_in_ms: 0,
            },
        }
    }
}
