//! Group commit: one flush makes durable every write that finished before it started, so
//! runs that ask for durability at the same time share flushes instead of queueing for one
//! each.
//!
//! Callers are grouped into epochs. An epoch is the next flush to start; every caller that
//! asks for durability before it starts joins it. Whoever finds no flush running becomes the
//! leader: it starts the epoch's flush on its own thread, then wakes the epoch's other
//! callers with the outcome. A caller that arrives while a flush runs does not count on that
//! flush (it may have read the log's end before the caller's write): it waits for the next
//! epoch.
//!
//! The guarantee: [`GroupCommit::commit`] returns `Ok` only once a flush that started after
//! the call began has succeeded, and a failed flush reports its error to every caller of its
//! epoch.

use super::error::CheckpointError;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Coalesces concurrent durability requests on one store into as few flushes as possible.
///
/// A lone caller runs its flush inline, on its own thread, as it would without grouping: no
/// hand-off to another thread, and only a few uncontended lock operations on top of the flush.
pub struct GroupCommit {
    // A std mutex, not tokio's: it is only held for a few field updates, never across an
    // await or a flush.
    state: Mutex<State>,
    finished: Notify,
}

struct State {
    /// A leader is flushing right now.
    flushing: bool,
    /// The epoch a caller arriving now joins: the next flush to start.
    next: Arc<Epoch>,
    /// Callers that joined `next` so far.
    joined: usize,
    /// Callers covered by the last flush that started: more than one means runs are flushing
    /// side by side, and waiting a moment gathers more of them per flush.
    last_group: usize,
}

/// One flush and the callers it covers.
#[derive(Default)]
struct Epoch {
    // Per epoch rather than one "last error" for the store, so a caller always learns the
    // outcome of the flush that was meant to cover it, even when later flushes finish before
    // it wakes up.
    outcome: OnceLock<Result<(), CheckpointError>>,
}

/// What a caller does next.
enum Move<'a> {
    Done(Result<(), CheckpointError>),
    Lead(Arc<Epoch>),
    Wait(Notified<'a>),
}

impl GroupCommit {
    pub fn new() -> Self {
        GroupCommit {
            state: Mutex::new(State {
                flushing: false,
                next: Arc::new(Epoch::default()),
                joined: 0,
                last_group: 0,
            }),
            finished: Notify::new(),
        }
    }

    /// Returns once a `flush` that started after this call began has completed, with its
    /// outcome. Call it after the write to be made durable has returned.
    ///
    /// `flush` must make durable everything written before it was called. It blocks the
    /// calling thread; it runs at most once per epoch, on the thread of the epoch's leader.
    pub async fn commit(
        &self,
        mut flush: impl FnMut() -> Result<(), CheckpointError>,
    ) -> Result<(), CheckpointError> {
        let (mine, crowded) = {
            let mut state = self.lock();
            state.joined += 1;
            (state.next.clone(), state.last_group > 1)
        };
        if crowded {
            // Let the runs that are about to write join this epoch before its flush starts: a
            // flush costs ~200 µs, a yield microseconds. Not for a lone run, which would only
            // pay for the trip through the scheduler.
            tokio::task::yield_now().await;
        }
        loop {
            match self.next_move(&mine) {
                Move::Done(outcome) => return outcome,
                Move::Lead(epoch) => self.lead(epoch, &mut flush),
                Move::Wait(finished) => finished.await,
            }
        }
    }

    fn next_move(&self, mine: &Epoch) -> Move<'_> {
        let mut state = self.lock();
        if let Some(outcome) = mine.outcome.get() {
            return Move::Done(outcome.clone());
        }
        if state.flushing {
            // Created under the lock, before the running flush can finish and notify: a
            // `Notified` receives every `notify_waiters` call made after its creation, so the
            // wake-up cannot be lost.
            return Move::Wait(self.finished.notified());
        }
        // No flush is running and ours has no outcome, so ours has not started: it is
        // `state.next`. Its flush starts now; later callers join a fresh epoch.
        state.flushing = true;
        state.last_group = std::mem::take(&mut state.joined);
        Move::Lead(std::mem::take(&mut state.next))
    }

    fn lead(&self, epoch: Arc<Epoch>, flush: &mut impl FnMut() -> Result<(), CheckpointError>) {
        let leading = Leading { group: self, epoch };
        let outcome = flush();
        // Cannot already be set: only this leader finishes this epoch.
        let _ = leading.epoch.outcome.set(outcome);
        drop(leading);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for GroupCommit {
    fn default() -> Self {
        Self::new()
    }
}

/// Ends a leader's flush on every path, including a panicking flush: otherwise `flushing`
/// would stay set and every later caller on the store would wait forever.
struct Leading<'a> {
    group: &'a GroupCommit,
    epoch: Arc<Epoch>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut state = self.group.lock();
        // Only unset when the flush panicked: its callers must not take that for success.
        let _ = self.epoch.outcome.set(Err(CheckpointError::Storage(
            "the flush panicked; writes since the last flush may not be on disk".into(),
        )));
        state.flushing = false;
        drop(state);
        self.group.finished.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
    use std::time::Duration;

    /// A stand-in for a disk flush: counts calls and takes `delay`.
    struct FakeDisk {
        flushes: AtomicUsize,
        delay: Duration,
    }

    impl FakeDisk {
        fn new(delay: Duration) -> Arc<Self> {
            Arc::new(FakeDisk {
                flushes: AtomicUsize::new(0),
                delay,
            })
        }

        fn flush(&self) -> Result<(), CheckpointError> {
            self.flushes.fetch_add(1, SeqCst);
            std::thread::sleep(self.delay);
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_lone_caller_flushes_once() {
        let group = GroupCommit::new();
        let disk = FakeDisk::new(Duration::ZERO);
        group.commit(|| disk.flush()).await.unwrap();
        assert_eq!(disk.flushes.load(SeqCst), 1);
        group.commit(|| disk.flush()).await.unwrap();
        assert_eq!(disk.flushes.load(SeqCst), 2, "nothing is skipped later");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_share_flushes() {
        let group = Arc::new(GroupCommit::new());
        let disk = FakeDisk::new(Duration::from_millis(20));
        let callers: Vec<_> = (0..50)
            .map(|_| {
                let (group, disk) = (group.clone(), disk.clone());
                tokio::spawn(async move { group.commit(|| disk.flush()).await })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap().unwrap();
        }
        let flushes = disk.flushes.load(SeqCst);
        assert!(
            (1..=10).contains(&flushes),
            "50 callers took {flushes} flushes"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_caller_is_released_only_by_a_flush_that_saw_its_write() {
        let group = Arc::new(GroupCommit::new());
        // The "log": how many writes have finished. A flush makes durable what it sees at its
        // start; `durable` is the most any completed flush has covered.
        let written = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = (0..50)
            .map(|i| {
                let (group, written, durable) = (group.clone(), written.clone(), durable.clone());
                tokio::spawn(async move {
                    // Stagger the writes so that many land while a flush is running.
                    tokio::time::sleep(Duration::from_micros(200 * (i % 10))).await;
                    let my_write = written.fetch_add(1, SeqCst) + 1;
                    let flush = || {
                        let seen = written.load(SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        durable.fetch_max(seen, SeqCst);
                        Ok(())
                    };
                    group.commit(flush).await.unwrap();
                    let covered = durable.load(SeqCst);
                    assert!(
                        my_write <= covered,
                        "write {my_write} released when only {covered} were durable"
                    );
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failed_flush_fails_every_caller_of_its_epoch_and_the_next_one_retries() {
        let group = Arc::new(GroupCommit::new());
        let flushes = Arc::new(AtomicUsize::new(0));
        // Flush 1 is slow and succeeds, flush 2 fails, later ones succeed.
        let flush = {
            let flushes = flushes.clone();
            move || match flushes.fetch_add(1, SeqCst) + 1 {
                1 => {
                    // Long enough for the callers spawned below to arrive on a loaded machine.
                    std::thread::sleep(Duration::from_millis(600));
                    Ok(())
                }
                2 => Err(CheckpointError::Storage("disk full".into())),
                _ => Ok(()),
            }
        };
        let spawn = |group: &Arc<GroupCommit>| {
            let (group, flush) = (group.clone(), flush.clone());
            tokio::spawn(async move { group.commit(flush).await })
        };
        let first = spawn(&group);
        while flushes.load(SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // These arrive while flush 1 runs, so flush 2 (which fails) is theirs.
        let during: Vec<_> = (0..3).map(|_| spawn(&group)).collect();
        first.await.unwrap().unwrap();
        for caller in during {
            let err = caller.await.unwrap().unwrap_err();
            assert!(err.to_string().contains("disk full"), "{err}");
        }
        assert_eq!(
            flushes.load(SeqCst),
            2,
            "the failure was shared, not retried"
        );
        spawn(&group).await.unwrap().unwrap();
        assert_eq!(flushes.load(SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_flush_is_an_error_and_does_not_wedge_the_store() {
        let group = Arc::new(GroupCommit::new());
        let panicked = {
            let group = group.clone();
            tokio::spawn(async move { group.commit(|| panic!("flush exploded")).await })
        };
        assert!(panicked.await.is_err());
        group.commit(|| Ok(())).await.unwrap();
    }
}
