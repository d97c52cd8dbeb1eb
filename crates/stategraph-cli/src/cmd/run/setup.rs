//! What `run`, `resume` and `rerun` resolve before anything runs: the overrides kept with the
//! thread, the graph (its relative paths pinned), the input or the answer, the checks that
//! refuse a command before it changes anything, and the thread it runs on.

use crate::args::{RunArgs, RunSettings};
use crate::error::bad_input;
use crate::origin::Origin;
use crate::store::NeverSaved;
use crate::{parse_json, parse_overrides, Ctx};
use serde_json::{json, Value};
use stategraph::checkpoint::CheckpointError;
use stategraph_registry::{AnyFactory, ErasedGraph, GraphFileError, RegistryError, Resolved};
use std::path::Path;

/// The `--set`, `--yes` and `--durability` of a command, as overrides kept with the thread.
pub(in crate::cmd) fn thread_overrides(s: &RunSettings) -> Vec<String> {
    let mut sets = s.sets.clone();
    if s.yes {
        sets.push("yes=true".to_string());
    }
    if let Some(d) = s.durability {
        sets.push(format!("durability={:?}", d.as_str()));
    }
    sets
}

/// `--yes` on a graph without a `yes` setting: it has no review to approve, which is what the
/// user needs to hear (the override `--yes` stands for is an implementation detail).
fn explain_yes(e: anyhow::Error, graph: &str) -> anyhow::Error {
    let no_yes = e.chain().any(|cause| {
        let file_error = cause.downcast_ref::<GraphFileError>().or_else(|| {
            match cause.downcast_ref::<RegistryError>() {
                Some(RegistryError::File(f)) => Some(f),
                _ => None,
            }
        });
        matches!(
            file_error,
            Some(GraphFileError::BadOverride { text, message })
                if text == "yes=true" && message.contains("there is no setting `yes`")
        )
    });
    if no_yes {
        bad_input(format!(
            "--yes: the graph {graph} has no review to approve (it has no `yes` setting and never \
             pauses for one); run it without --yes"
        ))
    } else {
        e
    }
}

/// The run's relative path settings made absolute against the folder it starts in, as
/// overrides to keep with the thread (see [`Resolved::absolute_path_overrides`]).
fn path_pins(resolved: &Resolved) -> Vec<String> {
    match std::env::current_dir() {
        Ok(here) => {
            let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
            resolved.absolute_path_overrides(&here, home.as_deref().map(Path::new))
        }
        // No current folder: a relative path then reads nothing anyway, and says so.
        Err(_) => Vec::new(),
    }
}

/// The graph a new run names, with its overrides `sets`, its relative path settings pinned
/// (added to `sets`, which the run keeps with the thread).
pub(in crate::cmd) fn new_graph(
    ctx: &Ctx,
    graph: &str,
    sets: &mut Vec<String>,
) -> anyhow::Result<Resolved> {
    let resolved = ctx
        .registry
        .resolve(graph, &parse_overrides(sets)?)
        .map_err(|e| explain_yes(e.into(), &format!("`{graph}`")))?;
    let pins = path_pins(&resolved);
    if pins.is_empty() {
        return Ok(resolved);
    }
    sets.extend(pins);
    Ok(ctx.registry.resolve(graph, &parse_overrides(sets)?)?)
}

/// A thread's graph with this command's `extra` overrides, its relative path settings pinned
/// (added to `extra`, which the command keeps with the thread).
pub(super) async fn thread_graph(
    ctx: &Ctx,
    thread: &str,
    extra: &mut Vec<String>,
) -> anyhow::Result<(Resolved, Option<Origin>)> {
    let (resolved, origin) = ctx
        .graph_for_thread(thread, extra)
        .await
        .map_err(|e| explain_yes(e, &format!("of thread {thread}")))?;
    let pins = path_pins(&resolved);
    if pins.is_empty() {
        return Ok((resolved, origin));
    }
    extra.extend(pins);
    ctx.graph_for_thread(thread, extra).await
}

/// The graph file a new run used, as its resumes find it from whichever folder: the file's
/// absolute path, or the name of a built-in graph.
pub(in crate::cmd) fn graph_file(resolved: &Resolved, given: &str) -> String {
    match &resolved.path {
        Some(path) => std::fs::canonicalize(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.display().to_string()),
        None => given.to_string(),
    }
}

/// Checks the run's `--interrupt-before/after` names against the graph's nodes.
pub(super) fn check_breakpoints(
    graph: &dyn ErasedGraph,
    settings: &RunSettings,
) -> anyhow::Result<()> {
    check_nodes(graph, &settings.interrupt_before, "--interrupt-before")?;
    check_nodes(graph, &settings.interrupt_after, "--interrupt-after")
}

pub(super) fn check_nodes(
    graph: &dyn ErasedGraph,
    names: &[String],
    flag: &str,
) -> anyhow::Result<()> {
    let known = graph.node_names();
    for name in names {
        if !known.contains(name) {
            return Err(bad_input(format!(
                "{flag}: no node named `{name}` in graph `{}`; its nodes are: {}",
                graph.name(),
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// Refuses a run whose graph has an input field the input leaves empty: it could only fail at
/// its first step, leaving a thread behind.
pub(in crate::cmd) fn require_input(input: &Value, factory: &dyn AnyFactory) -> anyhow::Result<()> {
    if let Some(field) = factory.input_field() {
        let filled = match input.get(field) {
            None | Some(Value::Null) => false,
            Some(Value::String(text)) => !text.trim().is_empty(),
            Some(_) => true,
        };
        if !filled {
            return Err(bad_input(format!(
                "graph `{}` needs an input: give it with --input TEXT (or --input-json '{{\"{field}\": ...}}')",
                factory.name()
            )));
        }
    }
    Ok(())
}

/// The run's input, from `--input`, `--input-json` or `--input-file`; `{}` without any.
pub(in crate::cmd) fn read_input(
    args: &RunArgs,
    factory: &dyn AnyFactory,
) -> anyhow::Result<Value> {
    if let Some(text) = &args.input {
        let field = factory.input_field().ok_or_else(|| {
            bad_input(format!(
                "graph `{}` takes no text input: give --input-json '{{\"field\": ...}}' instead",
                factory.name()
            ))
        })?;
        return Ok(json!({ field: text }));
    }
    if let Some(text) = &args.input_json {
        return parse_json(text, "--input-json");
    }
    if let Some(path) = &args.input_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad_input(format!("cannot read --input-file {}: {e}", path.display())))?;
        return parse_json(&text, &format!("--input-file {}", path.display()));
    }
    Ok(json!({}))
}

/// The answer of `--resume` or `--resume-json`, if one was given.
pub(in crate::cmd) fn read_answer(
    text: Option<&String>,
    json: Option<&String>,
) -> anyhow::Result<Option<Value>> {
    Ok(match (text, json) {
        (Some(text), _) => Some(Value::String(text.clone())),
        (None, Some(text)) => Some(parse_json(text, "--resume-json")?),
        (None, None) => None,
    })
}

/// Creates a new run's thread with its record of how it started, and holds it; an existing
/// thread is refused, pointing to the commands that continue, copy or remove it.
pub(super) async fn create_thread(ctx: &Ctx, thread: &str, origin: &Origin) -> anyhow::Result<()> {
    let Err(e) = ctx.store.create(thread, origin).await else {
        return Ok(());
    };
    if let Some(CheckpointError::ThreadExists { .. }) = e.downcast_ref::<CheckpointError>() {
        return Err(bad_input(format!(
            "thread `{thread}` already exists: continue it with `{}`, or copy one of its \
             checkpoints into a new thread with `{}`",
            ctx.command_line(&["resume", thread]),
            ctx.command_line_with(&["fork", thread], "--checkpoint <ID> --to <NEW-ID>")
        )));
    }
    if let Some(never) = e.downcast_ref::<NeverSaved>() {
        return Err(bad_input(format!(
            "{never}: remove it with `{}` and run again, or run with another --thread",
            ctx.command_line(&["delete", thread])
        )));
    }
    Err(e)
}

/// Keeps the `--set` overrides of a resume with the thread, so later resumes apply them too.
pub(super) async fn remember_overrides(
    ctx: &Ctx,
    resolved: &Resolved,
    origin: Option<Origin>,
    thread: &str,
    extra: Vec<String>,
) -> anyhow::Result<()> {
    if extra.is_empty() && origin.is_some() {
        return Ok(());
    }
    let mut origin =
        origin.unwrap_or_else(|| Origin::new(&resolved.file.graph, &resolved.origin, Vec::new()));
    origin.overrides.extend(extra);
    ctx.store.write_origin(&origin, thread).await?;
    Ok(())
}
