//! Where the CLI keeps threads: the embedded store (a directory, [`FolderCheckpointer`]) or a
//! Postgres database ([`PostgresCheckpointer`]), chosen by `--db` (or `GRAPH_DB`): a
//! `postgres://` or `postgresql://` URL is a database, anything else a directory.
//!
//! Every command reads and writes threads through [`Store::checkpointer`] (the engine's
//! `Checkpointer`) and asks here for what the engine does not do: making a thread with its
//! record of how it started, holding it between commands' steps, the listing, deleting one.
//! What only a directory has (read copies of a damaged store, `repair` of its files, the
//! folders of runs that died before their first checkpoint) is reached by matching
//! [`Store::Folder`], so each command says what it does on Postgres instead of failing
//! obscurely (`graph repair` there rewrites only the record of how a thread started).
//!
//! One writer per thread: in a directory, holding a thread locks its folder for this process;
//! in Postgres the engine's lease on the thread (fenced: see stategraph-postgres) keeps every
//! other writer out while a run or an edit writes, and the steps here that write outside a run
//! (a new thread's record, a delete) take that lease themselves (`postgres.rs`).

mod db_arg;
mod postgres;
pub(crate) use postgres::Claim;

pub(crate) use db_arg::DbArg;

use crate::origin::{self, Origin};
use stategraph::checkpoint::{CheckpointError, CheckpointId, Checkpointer};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_sled::{Damage, FolderCheckpointer, RecordUnreadable, ThreadListing};
use std::sync::Arc;

/// The CLI's store: a directory of threads, or a Postgres database.
#[derive(Clone)]
pub(crate) enum Store {
    Folder(Sealed<Arc<FolderCheckpointer>>),
    Postgres(Sealed<postgres::Pg>),
}

/// A store with what the engine reads and writes through it: every record sealed with the
/// configured encryption keys (`GRAPH_ENCRYPTION_KEY`, see stategraph-crypt), or, with none,
/// a sealed record read refused with an error that names the key it needs. It derefs to the
/// store itself, for what only it does (holding, listing, repair).
#[derive(Clone)]
pub(crate) struct Sealed<T> {
    store: T,
    engine: Arc<stategraph_crypt::EncryptedCheckpointer>,
}

impl<T> std::ops::Deref for Sealed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.store
    }
}

/// The journal keys kept in the clear: the record of how a thread started and its verdict,
/// which the stores' own listings read without a key (graph name, file, --set overrides).
const CLEAR_JOURNAL: &[&str] = &[crate::origin::ORIGIN_KEY, "graph/verdict"];

fn sealed<T>(store: T, inner: Arc<dyn Checkpointer>) -> anyhow::Result<Sealed<T>> {
    let keys = stategraph_crypt::Keyring::from_env()
        .map_err(|e| crate::error::bad_input(e.to_string()))?;
    let saver = stategraph_crypt::EncryptedCheckpointer::new(inner, keys)
        .with_clear_journal_keys(CLEAR_JOURNAL);
    Ok(Sealed {
        store,
        engine: Arc::new(saver),
    })
}

/// A new thread that holds a record of how it started but no checkpoint: a run that stopped
/// before its first step was saved (or one starting this very moment). It is not taken over,
/// since the run that made it may be about to save; deleting it frees its id.
#[derive(Debug, thiserror::Error)]
#[error(
    "thread `{thread}` was started but has no checkpoint (its run stopped before its first step \
     was saved, or is starting right now); nothing was changed"
)]
pub(crate) struct NeverSaved {
    pub thread: String,
}

impl Store {
    /// Opens the store `db` names: a directory (made when the first thread is written), or a
    /// Postgres database (connected, its tables created or migrated). A database that cannot
    /// be reached says what failed (host, user, database) within about a second.
    pub(crate) async fn open(db: &DbArg) -> anyhow::Result<Store> {
        match db {
            DbArg::Folder(root) => {
                if root.exists() && !root.is_dir() {
                    return Err(anyhow::anyhow!(
                        "cannot open the store at {}: it is a file, not a directory (pass --db DIR)",
                        root.display()
                    ));
                }
                let folder =
                    Arc::new(FolderCheckpointer::open(root)?.require_record(origin::RECORD));
                Ok(Store::Folder(sealed(folder.clone(), folder)?))
            }
            DbArg::Postgres(url) => {
                let pg = postgres::Pg::connect(url).await?;
                let inner = pg.saver.clone();
                Ok(Store::Postgres(sealed(pg, inner)?))
            }
        }
    }

    /// The store as the engine writes it.
    pub(crate) fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        self.sealed().clone()
    }

    /// The store's engine side without its encryption: what `rekey` reads sealed records
    /// (and plaintext ones) from.
    pub(crate) fn unsealed(&self) -> Arc<dyn Checkpointer> {
        match self {
            Store::Folder(f) => f.store.clone(),
            Store::Postgres(p) => p.saver.clone(),
        }
    }

    /// The store's engine side with its encryption (see [`Sealed`]).
    pub(crate) fn sealed(&self) -> &Arc<stategraph_crypt::EncryptedCheckpointer> {
        match self {
            Store::Folder(f) => &f.engine,
            Store::Postgres(p) => &p.engine,
        }
    }

    /// The Postgres database, when the store is one (the run queue lives there too).
    pub(crate) fn postgres(&self) -> Option<&Arc<PostgresCheckpointer>> {
        match self {
            Store::Postgres(p) => Some(&p.saver),
            Store::Folder(_) => None,
        }
    }

    /// Where the threads are, for messages: the directory, or the database (never its
    /// password).
    pub(crate) fn place(&self) -> String {
        match self {
            Store::Folder(f) => f.root().display().to_string(),
            Store::Postgres(p) => format!("the Postgres database {}", p.saver.target()),
        }
    }

    /// Makes a new thread with its record of how it started, and holds it for this process
    /// (a directory: until [`release`](Self::release); Postgres: the engine's lease keeps the
    /// thread while it runs). Fails with [`CheckpointError::ThreadExists`] when the thread has a
    /// checkpoint, [`NeverSaved`] (Postgres) when it has only its record, and
    /// [`CheckpointError::ThreadBusy`] when another process writes it now. When the record
    /// cannot be written, no thread stays behind.
    pub(crate) async fn create(&self, thread: &str, origin: &Origin) -> anyhow::Result<()> {
        match self {
            Store::Folder(f) => {
                f.create(thread).await?;
                if let Err(e) = self.write_origin(origin, thread).await {
                    // Not even started (a full disk, say): no half-made thread stays behind.
                    let _ = f.delete_thread(thread).await;
                    return Err(e.into());
                }
                Ok(())
            }
            Store::Postgres(p) => p.create(thread, origin).await,
        }
    }

    /// Holds an existing thread for this process, to write it: fails with
    /// [`CheckpointError::ThreadNotFound`] when it has no checkpoint and
    /// [`CheckpointError::ThreadBusy`] when another process writes it now (a directory also
    /// reports a store that lost checkpoints as [`CheckpointError::Damaged`]).
    pub(crate) async fn hold(&self, thread: &str) -> Result<(), CheckpointError> {
        match self {
            Store::Folder(f) => f.hold(thread).await,
            Store::Postgres(p) => p.hold(thread).await,
        }
    }

    /// Lets a held thread go (a directory: flushed, closed, indexed). Nothing to do on
    /// Postgres, whose writes are committed as they are made and whose leases the engine lets
    /// go.
    pub(crate) fn release(&self, thread: &str) -> Result<(), CheckpointError> {
        match self {
            Store::Folder(f) => f.release(thread),
            Store::Postgres(_) => Ok(()),
        }
    }

    /// Lets every held thread go, at the command's end.
    pub(crate) fn close(&self) {
        if let Store::Folder(f) = self {
            f.close();
        }
    }

    /// True when another process is writing the thread now.
    pub(crate) async fn is_running(&self, thread: &str) -> bool {
        match self {
            Store::Folder(f) => f.is_running(thread).await,
            Store::Postgres(p) => p.is_running(thread).await,
        }
    }

    /// What is wrong with a damaged store that could still be read (a directory's; Postgres
    /// reports a record that fails its checksum when it is read).
    pub(crate) async fn damage(&self, thread: &str) -> Result<Option<Damage>, CheckpointError> {
        match self {
            Store::Folder(f) => f.damage(thread).await,
            Store::Postgres(_) => Ok(None),
        }
    }

    /// The process holding the thread, when what is read of it is a copy of what that holder
    /// (which does not answer) last saved (see [`FolderCheckpointer::possibly_behind`]); never
    /// on Postgres, where every committed write is read.
    pub(crate) async fn possibly_behind(
        &self,
        thread: &str,
    ) -> Result<Option<u32>, CheckpointError> {
        match self {
            Store::Folder(f) => f.possibly_behind(thread).await,
            Store::Postgres(_) => Ok(None),
        }
    }

    /// How to keep what still reads of a damaged single sled store (see
    /// [`FolderCheckpointer::single_store_recovery`]); `None` for any other store.
    pub(crate) fn single_store_recovery(&self) -> Option<String> {
        match self {
            Store::Folder(f) => f.single_store_recovery(),
            Store::Postgres(_) => None,
        }
    }

    /// The thread's checkpoint ids, newest first: what a command that removes checkpoints
    /// counts before and after.
    pub(crate) async fn checkpoint_ids(
        &self,
        thread: &str,
    ) -> Result<Vec<CheckpointId>, CheckpointError> {
        match self {
            Store::Folder(f) => f.checkpoint_ids(thread).await,
            Store::Postgres(p) => Ok(p
                .saver
                .list_checkpoints(thread, None, usize::MAX)
                .await?
                .into_iter()
                .map(|r| r.id)
                .collect()),
        }
    }

    /// Every thread's line, damaged ones with what is wrong.
    pub(crate) async fn threads(&self) -> Result<Vec<ThreadListing>, CheckpointError> {
        match self {
            Store::Folder(f) => f.threads().await,
            Store::Postgres(p) => p.threads().await,
        }
    }

    /// How `thread` was started; `None` for a thread written by another program. A record
    /// that is there but does not read is [`OriginDamaged`](crate::origin::OriginDamaged).
    pub(crate) async fn read_origin(&self, thread: &str) -> anyhow::Result<Option<Origin>> {
        let value = self.origin_record(thread).await?.map_err(|unreadable| {
            anyhow::Error::from(crate::origin::OriginDamaged {
                thread: thread.to_string(),
                record: unreadable.record,
                reason: unreadable.reason,
            })
        })?;
        // The store checked it with RECORD's check, which is this decoding.
        value
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| anyhow::anyhow!("the origin of thread `{thread}`: {e}"))
    }

    /// Keeps how `thread` was started in its journal.
    pub(crate) async fn write_origin(
        &self,
        origin: &Origin,
        thread: &str,
    ) -> Result<(), CheckpointError> {
        origin.write_to(&**self, thread).await
    }

    /// The thread's record of how it started as stored (see `origin.rs`): `Ok(None)` when it
    /// has none, `Ok(Err(_))` when it is there but does not read.
    pub(crate) async fn origin_record(
        &self,
        thread: &str,
    ) -> Result<Result<Option<serde_json::Value>, RecordUnreadable>, CheckpointError> {
        match self {
            Store::Folder(f) => f.required_record(thread).await,
            Store::Postgres(p) => p.origin_record(thread).await,
        }
    }

    /// Deletes a thread, refused while a run writes it ([`CheckpointError::ThreadBusy`]) and
    /// for a thread that does not exist ([`CheckpointError::ThreadNotFound`]). Also how a
    /// command drops a thread it made that saved nothing: in Postgres a thread another process
    /// started writing meanwhile is refused as busy, never deleted under it.
    pub(crate) async fn delete(&self, thread: &str) -> Result<(), CheckpointError> {
        match self {
            Store::Folder(f) => f.delete_thread(thread).await,
            Store::Postgres(p) => p.delete(thread).await,
        }
    }
}

/// The store's reads and writes as the engine's trait, for `ctx.store.get_checkpoint(..)` and
/// the library functions that take a `&dyn Checkpointer`.
impl std::ops::Deref for Store {
    type Target = dyn Checkpointer;

    fn deref(&self) -> &Self::Target {
        self.sealed().as_ref()
    }
}

impl AsRef<dyn Checkpointer> for Store {
    fn as_ref(&self) -> &(dyn Checkpointer + 'static) {
        &**self
    }
}
