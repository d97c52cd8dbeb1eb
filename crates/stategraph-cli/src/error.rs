//! Exit codes, and how the library's typed errors map to them.

use stategraph::checkpoint::store::StoreError;
use stategraph::checkpoint::{CheckpointError, SealFault};
use stategraph::runtime::{RunError, StopReason};
use stategraph_artifacts::ArtifactError;
use stategraph_registry::{BuildError, GraphFileError, RegistryError};

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

/// What to do about an error, when the error alone does not say it in CLI terms: the library
/// says what is wrong and what mends it in its own words (restoring the artifacts, `as_node`,
/// a setting, an override); this names the command line that does it.
/// `store` is the one the command opened (none for the commands that read no thread).
pub(crate) fn hint(
    ctx: &super::invocation::Invocation,
    store: Option<&super::store::Store>,
    err: &anyhow::Error,
) -> Option<String> {
    err.chain().find_map(|cause| {
        if let Some(e) = checkpoint_error(cause) {
            return damaged_hint(ctx, store?, e);
        }
        if let Some(ArtifactError::Record { thread, .. }) = cause.downcast_ref::<ArtifactError>() {
            return Some(format!(
                "write the files and records again from the checkpoint with:\n  {}",
                ctx.command_line_with(&["artifacts", thread], "--restore")
            ));
        }
        if let Some(RunError::AmbiguousEdit { thread_id, nodes }) = run_error(cause) {
            let first = nodes.first().map(String::as_str).unwrap_or("<NODE>");
            return Some(format!(
                "say which node the edit stands for with --as-node ({}):\n  {}",
                nodes.join(" or "),
                ctx.command_line_with(
                    &["update", thread_id],
                    &format!("--set-json <JSON> --as-node {}", super::shell_quote(first))
                )
            ));
        }
        if let Some(GraphFileError::BadOverride { text, .. }) = graph_file_error(cause) {
            if text.starts_with("recursion_limit=") {
                return Some(
                    "give the most steps a run may take as --set recursion_limit=N with N ≥ 1, \
                     or leave it out"
                        .to_string(),
                );
            }
            return Some(format!(
                "fix or leave out --set {}",
                stategraph::quote::cut(text)
            ));
        }
        if let Some(RegistryError::Input { message, .. }) = cause.downcast_ref::<RegistryError>() {
            // A setting the graph's refusal names ("the setting `dataroom`") is one way out.
            let sets: Vec<String> = (settings_named(message).iter())
                .map(|k| format!("--set {k}=<VALUE>"))
                .collect();
            return (!sets.is_empty())
                .then(|| format!("give another input, or another setting: {}", sets.join(" ")));
        }
        match cause.downcast_ref::<BuildError>() {
            Some(BuildError::Setting { key, .. }) if key != "settings" => Some(format!(
                "set it with --set {key}=<VALUE> (or in the graph file)"
            )),
            _ => None,
        }
    })
}

/// One error of an error's chain.
type Cause = dyn std::error::Error + 'static;

/// The store's error in `cause`, also where a run or an artifact operation carries it.
fn checkpoint_error(cause: &Cause) -> Option<&CheckpointError> {
    if let Some(e) = cause.downcast_ref::<CheckpointError>() {
        return Some(e);
    }
    match (run_error(cause), cause.downcast_ref::<ArtifactError>()) {
        (Some(RunError::Checkpoint(e)), _) | (_, Some(ArtifactError::Checkpoint(e))) => Some(e),
        _ => None,
    }
}

/// The graph file's error in `cause`, also where the registry carries it.
fn graph_file_error(cause: &Cause) -> Option<&GraphFileError> {
    cause
        .downcast_ref::<GraphFileError>()
        .or_else(|| match cause.downcast_ref::<RegistryError>() {
            Some(RegistryError::File(e)) => Some(e),
            _ => None,
        })
}

/// The run's error in `cause`, also where an artifact operation carries it.
fn run_error(cause: &Cause) -> Option<&RunError> {
    cause
        .downcast_ref::<RunError>()
        .or_else(|| match cause.downcast_ref::<ArtifactError>() {
            Some(ArtifactError::Run(e)) => Some(&**e),
            _ => None,
        })
}

fn damaged_hint(
    ctx: &super::invocation::Invocation,
    store: &super::store::Store,
    e: &CheckpointError,
) -> Option<String> {
    let CheckpointError::Damaged { thread, .. } = e else {
        return None;
    };
    if thread.is_empty() {
        return None;
    }
    Some(match store.single_store_recovery() {
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

/// What mends a failed run beside resuming it, as a line to print after the resume command
/// (`resume`, the command that continues the thread): a higher recursion limit, or a setting
/// a node's failure names. The library says these in its own words (`RunConfig::recursion_limit`,
/// "the setting `KEY`"); the command line sets both with `--set`.
pub(crate) fn run_mend(e: &RunError, resume: &str) -> Option<String> {
    match e {
        RunError::RecursionLimit { limit, .. } => Some(format!(
            "or, if the run is legitimately long, with a higher limit:\n  {resume} --set recursion_limit={}",
            limit.saturating_mul(2).max(1)
        )),
        RunError::NodeFailed { message, .. } => {
            let keys = settings_named(message);
            (!keys.is_empty()).then(|| {
                let sets: Vec<String> = keys.iter().map(|k| format!("--set {k}=<VALUE>")).collect();
                format!("or, with the setting changed:\n  {resume} {}", sets.join(" "))
            })
        }
        _ => None,
    }
}

/// The settings a node's message names as "setting `KEY`" (the built-in agents' words for
/// what to change), in order, once each.
fn settings_named(message: &str) -> Vec<&str> {
    const BEFORE: &str = "setting `";
    let mut keys: Vec<&str> = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find(BEFORE) {
        let Some((key, after)) = rest[at + BEFORE.len()..].split_once('`') else {
            break;
        };
        rest = after;
        let plain = !key.is_empty()
            && (key.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if plain && !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
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
