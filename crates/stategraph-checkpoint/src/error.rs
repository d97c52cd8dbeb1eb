use super::codec::FrameError;
use super::record::CheckpointId;

/// What can go wrong saving or loading checkpoints.
///
/// `Clone` so that one failed flush can be reported to every caller it was meant to cover.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A stored record failed its integrity check or does not decode.
    #[error(
        "checkpoint store is damaged: {what} of thread `{thread}`{} cannot be read ({source}); \
         older checkpoints may still be good: list them with `history` and fork from one",
        checkpoint.map(|c| format!(" at checkpoint {c}")).unwrap_or_default()
    )]
    Corrupt {
        /// The thread the record belongs to.
        thread: String,
        /// The checkpoint, when the record belongs to one.
        checkpoint: Option<CheckpointId>,
        /// Which record: "checkpoint", "pending writes", "journal entry", "lease".
        what: &'static str,
        /// What is wrong with it.
        #[source]
        source: FrameError,
    },
    /// Another run, or another process, holds the thread.
    #[error("{}", busy_text(thread, *pid, host, *expires_in_ms))]
    ThreadBusy {
        /// The thread.
        thread: String,
        /// The holder's process id; 0 when not known.
        pid: u32,
        /// The holder's host.
        host: String,
        /// Time until the holder's lease lapses unless renewed; 0 when the holder has no lease
        /// (a holder other than a run, such as an edit, which holds the thread for moments).
        expires_in_ms: u64,
    },
    /// The process holding the thread is stopped (suspended with Ctrl+Z or SIGSTOP): it keeps
    /// the thread, whatever its lease says, until it goes on or ends.
    #[error(
        "thread `{thread}` is held by process {pid}, which is stopped (suspended with Ctrl+Z or \
         SIGSTOP): it keeps the thread until it goes on or ends, even after its lease lapsed. \
         Continue it (`fg` in its terminal, or `kill -CONT {pid}`) and let it finish, or end it \
         (`kill {pid}`); then try again"
    )]
    HolderStopped {
        /// The thread.
        thread: String,
        /// The stopped process.
        pid: u32,
    },
    /// An id that is not valid as a thread id.
    #[error("invalid thread id `{thread}`: {reason}")]
    InvalidThreadId {
        /// The id given.
        thread: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The store itself failed (disk, permissions, lock).
    #[error("checkpoint store failed: {0}")]
    Storage(String),
    /// The store is locked by another process.
    #[error(
        "the checkpoint store at {path} is in use by another process; sled lets one process \
         open a store at a time"
    )]
    Locked {
        /// The store's path.
        path: String,
    },
    /// The disk holding the store has no space left. What was saved before stays readable.
    #[error("the disk holding {path} is full (no space left on device)")]
    DiskFull {
        /// The store (or file) that could not be written.
        path: String,
    },
    /// The store's files are damaged: the store cannot be opened, or it lost checkpoints it held
    /// when it was last closed. Nothing was changed; what can still be read stays readable, and a
    /// repair (`FolderCheckpointer::repair`) keeps a backup first.
    #[error("the store of thread `{thread}` is damaged: {reason} (file {file})")]
    Damaged {
        /// The thread whose store it is (empty for a store of many threads).
        thread: String,
        /// The damaged file, or the store's directory when sled does not say which file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A thread that does not exist (or holds no checkpoint yet).
    #[error("no thread `{thread}`")]
    ThreadNotFound {
        /// The thread.
        thread: String,
    },
    /// Creating a thread whose id is taken.
    #[error("thread `{thread}` already exists")]
    ThreadExists {
        /// The thread.
        thread: String,
    },
    /// A record sealed at rest (stategraph-crypt) that cannot be opened: never read as
    /// anything else, and never reported as damage when the key is what is wrong.
    #[error("thread `{thread}`: {detail}")]
    Sealed {
        /// The thread the record belongs to.
        thread: String,
        /// What kind of trouble: a key, or the record itself.
        fault: SealFault,
        /// What is wrong and what mends it.
        detail: String,
    },
}

/// Why a sealed record did not open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealFault {
    /// The key that sealed it is not configured (or no key is).
    KeyMissing,
    /// A key with its id is configured, but it is another key.
    WrongKey,
    /// It was altered after it was sealed (or moved to another thread or place).
    Tampered,
    /// It is stored unencrypted while encryption is required.
    NotSealed,
}

/// The error for a stored record that fails its frame check or does not decode.
pub fn corrupt(
    thread: &str,
    checkpoint: Option<CheckpointId>,
    what: &'static str,
    source: FrameError,
) -> CheckpointError {
    CheckpointError::Corrupt {
        thread: thread.to_string(),
        checkpoint,
        what,
        source,
    }
}

/// Frames a record for storage; every backend stores exactly these bytes.
pub fn encode<T: serde::Serialize>(thread: &str, v: &T) -> Result<Vec<u8>, CheckpointError> {
    super::codec::encode(v).map_err(|e| corrupt(thread, None, "record", e))
}

impl CheckpointError {
    /// A backend's own failure, in its own words.
    pub fn storage(e: impl std::fmt::Display) -> Self {
        CheckpointError::Storage(e.to_string())
    }
}

/// Checks that a thread id is usable as a key in every backend.
pub fn validate_thread_id(thread: &str) -> Result<(), CheckpointError> {
    let reason = if thread.is_empty() {
        Some("it is empty")
    } else if thread.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if thread
        .chars()
        .any(|c| c.is_control() || c == '/' || c == '\\')
    {
        Some("it contains a control character or a path separator")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CheckpointError::InvalidThreadId {
            thread: thread.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// What [`CheckpointError::ThreadBusy`] says: a run's lease names its process and when it lapses;
/// without one, the holder is a process that lets go when it is done (or dies).
fn busy_text(thread: &str, pid: u32, host: &str, expires_in_ms: u64) -> String {
    if expires_in_ms == 0 {
        let process = match pid {
            0 => String::new(),
            pid => format!(" (pid {pid})"),
        };
        return format!(
            "thread `{thread}` is busy: another process{process} holds it; wait for it to let go \
             (a short operation such as an edit holds a thread for moments, a run until it ends \
             or pauses), or stop it"
        );
    }
    let process = match pid {
        0 => format!("on {host}"),
        pid => format!("pid {pid} on {host}"),
    };
    format!(
        "thread `{thread}` is busy: another run ({process}) is writing it; wait for it to \
         finish or stop it. A run that died releases the thread when its lease lapses (in \
         {expires_in_ms} ms at most)"
    )
}
