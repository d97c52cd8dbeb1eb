//! The CLI's store in a Postgres database: what the engine does not do there itself.
//!
//! A run, an edit or a prune takes the thread's lease in the engine. The CLI's own writes
//! outside those (a new thread's record of how it started, deleting a thread) take the same
//! lease first ([`Claim`]), as the engine judges it: a live lease refuses them as busy, a
//! lapsed one or one whose holder died on this machine is taken over. Holding the lease makes
//! the database fence their writes, so a write of a thread another process took over meanwhile
//! is refused, never mixed into it.
//!
//! A thread exists once it holds its record of how it started (written under the claim): a
//! second `run --thread ID` at the same moment finds it and is refused, never starting a second
//! writer on the same id.

use super::NeverSaved;
use crate::origin::{self, Origin, ORIGIN_KEY};
use stategraph::checkpoint::{
    now_ms, summarize, CheckpointError, Checkpointer, Lease, ThreadStatus,
};
use stategraph_postgres::{ConnectError, PostgresCheckpointer, PostgresOptions};
use stategraph_sled::{Damage, RecordUnreadable, ThreadListing};
use std::sync::Arc;
use std::time::Duration;

/// How long the CLI's own claim on a thread lasts unless let go: far longer than the few
/// statements it covers, and short enough that a CLI killed meanwhile blocks nobody for long.
const CLAIM: Duration = Duration::from_secs(15);

/// How long a new connection may take from its first packet to ready (TLS and authentication
/// included): a person waits for a command, so a server that accepts and then says nothing is
/// reported after this long, not the library's 5 s. Connecting (the first packet answered)
/// keeps the library's 1 s.
const HANDSHAKE: Duration = Duration::from_secs(2);

/// A connected database.
#[derive(Clone)]
pub(crate) struct Pg {
    pub saver: Arc<PostgresCheckpointer>,
}

impl Pg {
    /// Connects (creating or migrating the tables); a failure says what failed.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Pg> {
        let options = PostgresOptions::new(url).handshake_timeout(HANDSHAKE);
        match PostgresCheckpointer::connect_with(options).await {
            Ok(saver) => Ok(Pg {
                saver: Arc::new(saver),
            }),
            // A URL that does not parse is a mistake on the command line: nothing was tried.
            Err(e @ ConnectError::InvalidUrl { .. }) => Err(crate::error::bad_input(format!(
                "--db (or GRAPH_DB): {e}; give postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            ))),
            Err(e) => Err(anyhow::Error::from(e)
                .context("cannot open the database that --db (or GRAPH_DB) names")),
        }
    }

    pub(super) async fn create(&self, thread: &str, origin: &Origin) -> anyhow::Result<()> {
        let claim = Claim::take(&self.saver, thread).await?;
        let made = async {
            if self.saver.get_checkpoint(thread, None).await?.is_some() {
                return Err(CheckpointError::ThreadExists {
                    thread: thread.to_string(),
                }
                .into());
            }
            // A record there (or one that does not read) is a thread started before.
            if self.has_origin(thread).await? {
                return Err(NeverSaved {
                    thread: thread.to_string(),
                }
                .into());
            }
            origin.write_to(self.saver.as_ref(), thread).await?;
            anyhow::Ok(())
        }
        .await;
        claim.release().await;
        made
    }

    pub(super) async fn hold(&self, thread: &str) -> Result<(), CheckpointError> {
        if self.saver.get_checkpoint(thread, None).await?.is_none() {
            return Err(CheckpointError::ThreadNotFound {
                thread: thread.to_string(),
            });
        }
        match self.saver.get_lease(thread).await? {
            Some(lease) if is_live(&lease) => Err(busy(thread, &lease)),
            _ => Ok(()),
        }
    }

    pub(super) async fn is_running(&self, thread: &str) -> bool {
        matches!(self.saver.get_lease(thread).await, Ok(Some(lease)) if is_live(&lease))
    }

    pub(super) async fn delete(&self, thread: &str) -> Result<(), CheckpointError> {
        let claim = Claim::take(&self.saver, thread).await?;
        let deleted = async {
            // A damaged thread can go too: a checkpoint that does not read is one there.
            let checkpoint = match self.saver.get_checkpoint(thread, None).await {
                Ok(found) => found.is_some(),
                Err(CheckpointError::Corrupt { .. }) => true,
                Err(e) => return Err(e),
            };
            if !checkpoint && !self.has_origin(thread).await? {
                return Err(CheckpointError::ThreadNotFound {
                    thread: thread.to_string(),
                });
            }
            // The lease goes with the thread's rows.
            self.saver.delete_thread(thread).await
        }
        .await;
        if deleted.is_err() {
            claim.release().await;
        }
        deleted
    }

    /// Whether the thread holds a record of how it started, readable or not.
    async fn has_origin(&self, thread: &str) -> Result<bool, CheckpointError> {
        match self.saver.get_journal(thread, ORIGIN_KEY).await {
            Ok(found) => Ok(found.is_some()),
            Err(CheckpointError::Corrupt { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// The record of how the thread started, checked as the directory store checks it.
    pub(super) async fn origin_record(
        &self,
        thread: &str,
    ) -> Result<Result<Option<serde_json::Value>, RecordUnreadable>, CheckpointError> {
        let unreadable = |reason: String| RecordUnreadable {
            record: format!(
                "journal entry `{ORIGIN_KEY}` in the Postgres database {}",
                self.saver.target()
            ),
            file: self.saver.target(),
            reason,
        };
        match self.saver.get_journal(thread, ORIGIN_KEY).await {
            // Bytes that fail their checksum: damage, never "no record".
            Err(e @ CheckpointError::Corrupt { .. }) => Ok(Err(unreadable(e.to_string()))),
            Err(e) => Err(e),
            Ok(None) => Ok(Ok(None)),
            Ok(Some(value)) => Ok(match (origin::RECORD.check)(&value) {
                Ok(()) => Ok(Some(value)),
                Err(why) => Err(unreadable(why)),
            }),
        }
    }

    /// Every thread's line: its newest checkpoint, running while a live lease holds it, damaged
    /// when its newest checkpoint or its record of how it started does not read.
    pub(super) async fn threads(&self) -> Result<Vec<ThreadListing>, CheckpointError> {
        let mut out = Vec::new();
        for thread in self.saver.list_threads().await? {
            out.push(self.listing(thread).await?);
        }
        Ok(out)
    }

    async fn listing(&self, thread: String) -> Result<ThreadListing, CheckpointError> {
        let damaged = |reason: String| Damage {
            file: self.saver.target(),
            reason,
            lost_checkpoints: false,
        };
        let (mut summary, mut damage) = match summarize(self.saver.as_ref(), &thread).await {
            Ok(summary) => (summary, None),
            Err(e @ (CheckpointError::Corrupt { .. } | CheckpointError::Damaged { .. })) => {
                (None, Some(damaged(e.to_string())))
            }
            Err(e) => return Err(e),
        };
        let created_at_ms = match self.origin_record(&thread).await? {
            Ok(Some(value)) => serde_json::from_value::<Origin>(value)
                .ok()
                .map(|o| o.created_at_ms),
            Ok(None) => None,
            Err(unreadable) => {
                damage = damage.or(Some(damaged(format!(
                    "{}: {}",
                    unreadable.record, unreadable.reason
                ))));
                None
            }
        };
        if let Some(s) = &mut summary {
            if self.is_running(&thread).await {
                s.status = ThreadStatus::Running;
            }
        }
        Ok(ThreadListing {
            thread_id: thread,
            summary,
            created_at_ms,
            damage,
        })
    }
}

/// The CLI's own hold on a thread in Postgres: the engine's lease, taken as the engine takes
/// it, and let go when done (or lapsing if this process dies first).
pub(crate) struct Claim {
    saver: Arc<PostgresCheckpointer>,
    thread: String,
    lease: Lease,
}

impl Claim {
    /// Takes the thread's lease: refused with [`CheckpointError::ThreadBusy`] while a live one
    /// holds it.
    pub(crate) async fn take(
        saver: &Arc<PostgresCheckpointer>,
        thread: &str,
    ) -> Result<Claim, CheckpointError> {
        let mut current: Option<Lease> = None;
        // A few rounds: each lost one means a lease changed in between; the next reads it.
        for _ in 0..5 {
            if let Some(held) = &current {
                if is_live(held) {
                    return Err(busy(thread, held));
                }
            }
            let lease = Lease {
                owner: uuid::Uuid::now_v7().to_string(),
                pid: std::process::id(),
                host: host_name().to_string(),
                expires_at_ms: now_ms() + CLAIM.as_millis() as u64,
            };
            match saver
                .swap_lease(thread, current.as_ref(), Some(&lease))
                .await?
            {
                Ok(()) => {
                    return Ok(Claim {
                        saver: saver.clone(),
                        thread: thread.to_string(),
                        lease,
                    })
                }
                Err(found) => current = found,
            }
        }
        match current {
            Some(held) => Err(busy(thread, &held)),
            None => Err(CheckpointError::Storage(format!(
                "cannot take thread `{thread}`: its lease kept changing; try again"
            ))),
        }
    }

    /// Runs `work` holding the lease, renewed every third of [`CLAIM`] so a long job keeps
    /// it, then lets it go. Writes through this handle meanwhile are fenced: if the lease is
    /// lost anyway (this process paused past it, another took the thread), they are refused.
    pub(crate) async fn hold_while<T>(mut self, work: impl std::future::Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        let mut renew = tokio::time::interval(CLAIM / 3);
        renew.tick().await;
        let done = loop {
            tokio::select! {
                done = &mut work => break done,
                _ = renew.tick() => {
                    let renewed = Lease {
                        expires_at_ms: now_ms() + CLAIM.as_millis() as u64,
                        ..self.lease.clone()
                    };
                    let swapped = (self.saver)
                        .swap_lease(&self.thread, Some(&self.lease), Some(&renewed))
                        .await;
                    if let Ok(Ok(())) = swapped {
                        self.lease = renewed;
                    }
                }
            }
        };
        self.release().await;
        done
    }

    /// Lets the lease go; one that cannot be let go lapses after [`CLAIM`].
    async fn release(self) {
        let released = self
            .saver
            .swap_lease(&self.thread, Some(&self.lease), None)
            .await;
        if !matches!(released, Ok(Ok(()))) {
            tracing::warn!(thread = %self.thread, "could not let the thread's lease go; it lapses in 15 s");
        }
    }
}

fn busy(thread: &str, lease: &Lease) -> CheckpointError {
    CheckpointError::ThreadBusy {
        thread: thread.to_string(),
        pid: lease.pid,
        host: lease.host.clone(),
        expires_in_ms: lease.expires_at_ms.saturating_sub(now_ms()),
    }
}

/// Whether a lease still binds, as the engine judges it: not lapsed, and its holder not known
/// to be dead (a process of this machine that no longer exists).
fn is_live(lease: &Lease) -> bool {
    lease.expires_at_ms > now_ms() && !holder_is_dead(lease)
}

fn holder_is_dead(lease: &Lease) -> bool {
    if lease.host != host_name() {
        return false;
    }
    let Ok(pid) = libc::pid_t::try_from(lease.pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only asks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// This machine's name as the engine writes it into leases.
fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "localhost".to_string())
    })
}
