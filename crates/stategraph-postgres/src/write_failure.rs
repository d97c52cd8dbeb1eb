//! A write that failed, as the transaction code carries it: the database's error (which may be
//! the fence refusing a stale epoch, and is then read again as the lease's story) or the
//! store's own. Apart from `transaction.rs` because the pieces' sweep, which runs inside a transaction, fails
//! the same way.

use stategraph_checkpoint::CheckpointError;

/// The SQLSTATE the fence raises for a write under a stale or missing lease (`schema/sql`).
const REFUSED: &str = "SG409";

/// A failed write: the database's error (read again for a refused fence) or the store's own.
pub(crate) enum Failed {
    Db(tokio_postgres::Error),
    Store(CheckpointError),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Self {
        Failed::Db(e)
    }
}

impl From<CheckpointError> for Failed {
    fn from(e: CheckpointError) -> Self {
        Failed::Store(e)
    }
}

/// Whether a failed write was refused by the fence.
pub(crate) fn is_refusal(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code() == REFUSED)
}
