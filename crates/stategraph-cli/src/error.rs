//! Exit codes, and how the library's typed errors map to them.

use stategraph::checkpoint::store::StoreError;
use stategraph::checkpoint::{CheckpointError, SealFault};
use stategraph::runtime::{RunError, StopReason};
use stategraph_registry::{GraphFileError, RegistryError};

/// The run reached its end (or the command did what it was asked).
pub const EXIT_DONE: u8 = 0;
/// Anything else went wrong: a node failed, the store failed, the thread is busy with another run.
pub const EXIT_FAILURE: u8 = 1;
/// The command line or its input is wrong; nothing was changed.
pub const EXIT_USAGE: u8 = 2;
/// The run paused, waiting for a person; the message says how to continue.
pub const EXIT_PAUSED: u8 = 3;
/// The run was stopped by Ctrl+C (SIGINT); its last checkpoint is kept.
pub const EXIT_INTERRUPTED: u8 = 130;
/// The run was stopped by SIGTERM (`kill`, `docker stop`, systemd); its last checkpoint is kept.
pub const EXIT_TERMINATED: u8 = 143;
/// The run was stopped by SIGHUP (its terminal closed); its last checkpoint is kept.
pub const EXIT_HANGUP: u8 = 129;
/// The run passed its `--timeout`: the step that passed it is saved, `graph resume` continues
/// (124, as `timeout(1)` ends a command that ran out of time).
pub const EXIT_TIMED_OUT: u8 = 124;
/// Stdout closed (its reader went away, as SIGPIPE would have ended the process): a `--stream`
/// run was stopped with its last checkpoint kept, or a command that would have succeeded could
/// not write all of its output.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// An error the CLI itself raises, with its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Fail {
    pub code: u8,
    pub message: String,
}

/// Bad input: exit code 2.
pub(crate) fn bad_input(message: impl Into<String>) -> anyhow::Error {
    Fail {
        code: EXIT_USAGE,
        message: message.into(),
    }
    .into()
}

/// The exit code for a run error.
pub(crate) fn run_error_code(e: &RunError) -> u8 {
    match e {
        RunError::InvalidInput(_)
        | RunError::AmbiguousEdit { .. }
        | RunError::Graph(_)
        | RunError::ThreadNotFound { .. }
        | RunError::CheckpointNotFound { .. }
        | RunError::Resume(_) => EXIT_USAGE,
        RunError::Checkpoint(c) => checkpoint_error_code(c),
        RunError::Cancelled { .. } => EXIT_INTERRUPTED,
        RunError::Stopped { reason, .. } => match reason {
            StopReason::Drained => EXIT_TERMINATED,
            StopReason::RunTimeout { .. } => EXIT_TIMED_OUT,
        },
        _ => EXIT_FAILURE,
    }
}

fn checkpoint_error_code(e: &CheckpointError) -> u8 {
    match e {
        CheckpointError::InvalidThreadId { .. }
        | CheckpointError::ThreadNotFound { .. }
        | CheckpointError::ThreadExists { .. } => EXIT_USAGE,
        // A key missing or wrong is the command's configuration: nothing was read or changed.
        CheckpointError::Sealed { fault, .. } if *fault != SealFault::Tampered => EXIT_USAGE,
        _ => EXIT_FAILURE,
    }
}

/// The exit code for any error reaching the top: the first typed error in its chain decides.
pub(crate) fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(f) = cause.downcast_ref::<Fail>() {
            return f.code;
        }
        if let Some(e) = cause.downcast_ref::<RunError>() {
            return run_error_code(e);
        }
        if let Some(e) = cause.downcast_ref::<CheckpointError>() {
            return checkpoint_error_code(e);
        }
        // As for a thread's records: a key missing or wrong is the command's configuration.
        if let Some(StoreError::Sealed { fault, .. }) = cause.downcast_ref::<StoreError>() {
            return if *fault == SealFault::Tampered {
                EXIT_FAILURE
            } else {
                EXIT_USAGE
            };
        }
        if cause.is::<RegistryError>() || cause.is::<GraphFileError>() {
            return EXIT_USAGE;
        }
    }
    EXIT_FAILURE
}
