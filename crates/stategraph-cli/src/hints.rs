//! What mends an error, in CLI terms: the library says what is wrong and what mends it in its
//! own words (restoring the artifacts, `as_node`, a setting, an override, a recursion limit);
//! these name the command line that does it. Printed after the error (`hint`) or after a
//! failed run's resume command (`run_mend`).

use crate::invocation::Invocation;
use crate::store::Store;
use stategraph::checkpoint::store::StoreError;
use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::RunError;
use stategraph_artifacts::ArtifactError;
use stategraph_registry::{BuildError, GraphFileError, RegistryError};

/// What to do about an error, when the error alone does not say it in CLI terms: the library
/// says what is wrong and what mends it in its own words (restoring the artifacts, `as_node`,
/// a setting, an override); this names the command line that does it.
/// `store` is the one the command opened (none for the commands that read no thread).
pub(crate) fn hint(ctx: &Invocation, store: Option<&Store>, err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|cause| {
        if let Some(e) = checkpoint_error(cause) {
            return damaged_hint(ctx, store?, e);
        }
        let missing = matches!(
            checkpoint_error(cause),
            Some(CheckpointError::ThreadNotFound { .. })
        ) || matches!(run_error(cause), Some(RunError::ThreadNotFound { .. }));
        if missing {
            return Some(format!(
                "list the threads there are with:\n  {}",
                ctx.command_line(&["threads"])
            ));
        }
        if let Some(StoreError::Locked { .. }) = cause.downcast_ref::<StoreError>() {
            return Some(
                "if that process is a `graph serve` over this store, it keeps the items open \
                 once a run or a request used them: while it runs, reach them through it \
                 (GET /store/items?namespace=A.B&key=K, POST /store/items/search, PUT and \
                 DELETE /store/items), or stop it first"
                    .to_string(),
            );
        }
        if let Some(RunError::CheckpointNotFound { thread_id, .. }) = run_error(cause) {
            return Some(format!(
                "list its checkpoints with:\n  {}",
                ctx.command_line(&["history", thread_id])
            ));
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
                    &format!("--set-json <JSON> --as-node {}", crate::shell_quote(first))
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

fn damaged_hint(ctx: &Invocation, store: &Store, e: &CheckpointError) -> Option<String> {
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
