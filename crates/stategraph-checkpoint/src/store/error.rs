//! What can go wrong with a long-term store.

use crate::codec::FrameError;
use crate::SealFault;

/// A store's errors: each says what failed and what to do.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// A namespace every backend cannot keep.
    #[error("invalid namespace `{namespace}`: {reason}")]
    InvalidNamespace {
        /// The namespace, its labels joined by `/`.
        namespace: String,
        /// Why.
        reason: &'static str,
    },
    /// A key every backend cannot keep.
    #[error("invalid key `{key}`: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// A text query reached a backend without an index.
    #[error(
        "a text query needs a search index, and this store has none: wrap it in \
         stategraph_store::IndexedStore, or search with a filter only"
    )]
    NeedsIndex,
    /// A stored item failed its integrity check or does not decode.
    #[error(
        "the long-term store is damaged: item `{key}` in `{namespace}` cannot be read ({source}); \
         delete it and put it again"
    )]
    Corrupt {
        /// Its namespace, labels joined by `/`.
        namespace: String,
        /// Its key.
        key: String,
        /// What is wrong with it.
        #[source]
        source: FrameError,
    },
    /// An encrypted item did not open: its key is missing or wrong, or it was altered or moved
    /// (as [`CheckpointError::Sealed`](crate::CheckpointError::Sealed) for a thread's records).
    #[error("item `{key}` in `{namespace}`: {detail}")]
    Sealed {
        /// Its namespace, labels joined by `/`.
        namespace: String,
        /// Its key.
        key: String,
        /// What kind of trouble: a key, or the item itself.
        fault: SealFault,
        /// What is wrong and what mends it (boxed: it keeps this error, which a run's error
        /// carries, small).
        detail: Box<str>,
    },
    /// A read asked to refresh TTLs of a store that cannot.
    #[error(
        "this store cannot refresh an item's time to live on read; read without refreshing, \
         or use a backend that implements `get_with`"
    )]
    CannotRefresh,
    /// The store is a directory another process has open (an embedded store admits one process
    /// at a time), still after waiting for it.
    #[error(
        "cannot open the long-term store at {path}: another process has it open (a run using \
         the store, or another command); try again when it has finished"
    )]
    Locked {
        /// The store's directory.
        path: String,
    },
    /// The backend failed (disk, database, network): its own words.
    #[error("the long-term store failed: {0}")]
    Backend(String),
    /// The search index or the embeddings endpoint failed.
    #[error("searching the long-term store failed: {0}")]
    Search(String),
}
