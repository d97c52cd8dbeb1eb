//! Exit codes, and how the library's typed errors map to them.

use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::RunError;
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
        | RunError::Graph(_)
        | RunError::ThreadNotFound { .. }
        | RunError::CheckpointNotFound { .. }
        | RunError::Resume(_) => EXIT_USAGE,
        RunError::Checkpoint(c) => checkpoint_error_code(c),
        RunError::Cancelled { .. } => EXIT_INTERRUPTED,
        _ => EXIT_FAILURE,
    }
}

fn checkpoint_error_code(e: &CheckpointError) -> u8 {
    match e {
        CheckpointError::InvalidThreadId { .. }
        | CheckpointError::ThreadNotFound { .. }
        | CheckpointError::ThreadExists { .. } => EXIT_USAGE,
        _ => EXIT_FAILURE,
    }
}

/// What to do about an error, when the error alone does not say it in CLI terms.
pub(crate) fn hint(ctx: &super::Ctx, err: &anyhow::Error) -> Option<String> {
    let checkpoint_error = err.chain().find_map(|c| {
        c.downcast_ref::<CheckpointError>()
            .or_else(|| match c.downcast_ref::<RunError>() {
                Some(RunError::Checkpoint(e)) => Some(e),
                _ => None,
            })
    })?;
    match checkpoint_error {
        CheckpointError::Damaged { thread, .. } if !thread.is_empty() => {
            Some(match ctx.store.single_store_recovery() {
                Some(how) => format!(
                    "nothing was changed. What is intact can still be read (`{}`). {how}",
                    ctx.command_line(&["history", thread])
                ),
                None => format!(
            "nothing was changed. Its intact checkpoints can still be read (`{}`); to make it \
             usable again from the newest intact one, keeping a backup of it as it is: {}",
            ctx.command_line(&["history", thread]),
            ctx.command_line(&["repair", thread])
                ),
            })
        }
        _ => None,
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
        if cause.is::<RegistryError>() || cause.is::<GraphFileError>() {
            return EXIT_USAGE;
        }
    }
    EXIT_FAILURE
}
