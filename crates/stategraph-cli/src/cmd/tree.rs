//! `decompose`, `tree` and `solve`: the task-tree workflow over a folder of Markdown task files.
//!
//! The commands know no agent: the graph registered as `tree` hands out a
//! [`TaskFiles`](stategraph_registry::TaskFiles) that checks the files, says how a run starts
//! and where each task stands. This file keeps the arguments, the thread (made from the root
//! task file's path, so running a command again on the same file continues the same thread),
//! the running through the registry like any other graph, and the words naming the commands.

use super::run::{report, run_on_thread, Action, Ended, ThreadRun};
use crate::args::{DecomposeArgs, RunSettings, SolveArgs, TreeArgs};
use crate::error::{bad_input, EXIT_DONE, EXIT_PAUSED};
use crate::{out, parse_overrides, Ctx};
use serde_json::{json, Value};
use stategraph::runtime::{Resume, RunError, RunOutcome, RunStatus, StateSnapshot};
use stategraph_registry::{ErasedGraph, Resolved, RunStart, Start, TaskFiles, TaskFilesError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The graph the commands run.
const GRAPH: &str = "tree";

/// A root task file as given and as found.
struct TaskFileArg {
    /// As typed, for the commands printed back.
    given: String,
    /// Absolute, for the thread.
    path: PathBuf,
    thread: String,
}

impl TaskFileArg {
    fn new(given: &Path) -> anyhow::Result<TaskFileArg> {
        let path = std::fs::canonicalize(given).map_err(|e| {
            bad_input(format!(
                "cannot read the task file {}: {e}",
                given.display()
            ))
        })?;
        Ok(TaskFileArg {
            given: given.display().to_string(),
            thread: thread_for(&path),
            path,
        })
    }

    fn text(&self) -> String {
        self.path.display().to_string()
    }
}

/// The thread of the tree rooted at `path`: `tree-{file stem}-{hash of the path}`.
fn thread_for(path: &Path) -> String {
    let stem: String = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = blake3::hash(path.as_os_str().as_encoded_bytes()).to_hex();
    format!("tree-{stem}-{}", &hash[..10])
}

/// Files a person must mend are bad input (exit 2); a thread of another graph is a failure.
fn refused(e: TaskFilesError) -> anyhow::Error {
    match e {
        TaskFilesError::Files(_) => bad_input(e.to_string()),
        other => other.into(),
    }
}

/// The task-files capability of the graph `resolved` names.
fn task_files(resolved: &Resolved) -> anyhow::Result<Arc<dyn TaskFiles>> {
    resolved.factory.task_files().ok_or_else(|| {
        let graph = &resolved.file.graph;
        let named = match graph == &resolved.origin {
            true => format!("graph `{graph}`"),
            false => format!("graph `{graph}` ({})", resolved.origin),
        };
        bad_input(format!(
            "{named} does not work on task files: `decompose`, `tree` and `solve` run the graph \
             `{GRAPH}`, which must be one that does (as the built-in task-tree agent)"
        ))
    })
}

/// The `tree` graph with a command's `--set`s, its task-files capability, and its thread's
/// state.
struct Prepared {
    resolved: Resolved,
    files: Arc<dyn TaskFiles>,
    graph: Box<dyn ErasedGraph>,
    snapshot: Option<StateSnapshot<Value>>,
    sets: Vec<String>,
    json: bool,
}

impl Prepared {
    /// Needs no model: the graph is built to read the thread's state, so that the files are
    /// refused (by [`TaskFiles`]) before a missing model is.
    async fn new(
        ctx: &Ctx,
        sets: &[String],
        json: bool,
        task: &TaskFileArg,
    ) -> anyhow::Result<Prepared> {
        let resolved = ctx.registry.resolve(GRAPH, &parse_overrides(sets)?)?;
        let files = task_files(&resolved)?;
        let graph = resolved.build(Some(ctx.checkpointer()))?;
        let snapshot = existing_state(ctx, graph.as_ref(), &task.thread).await?;
        Ok(Prepared {
            resolved,
            files,
            graph,
            snapshot,
            sets: sets.to_vec(),
            json,
        })
    }

    /// Checks that the graph can run (a model is configured), says what `start` announces and
    /// warns of, then runs it on the tree's thread.
    async fn run(
        &self,
        ctx: &Ctx,
        task: &TaskFileArg,
        start: &RunStart,
    ) -> anyhow::Result<(Ended, Result<RunOutcome<Value>, RunError>)> {
        self.resolved.preflight()?;
        if !self.json {
            for line in &start.announce {
                say!("{line}");
            }
        }
        for warning in &start.warnings {
            say!("warning: {warning}");
        }
        let action = match &start.start {
            Start::Run(input) => Action::Run(input.clone()),
            Start::Continue { note } => {
                say!("{note}");
                Action::Resume(Resume::Continue)
            }
            Start::Answer(value) => Action::Resume(Resume::Value(value.clone())),
        };
        say!("thread {}", task.thread);
        let settings = RunSettings {
            sets: self.sets.clone(),
            json: self.json,
            ..RunSettings::default()
        };
        let run = ThreadRun {
            ctx,
            resolved: &self.resolved,
            graph: self.graph.as_ref(),
            thread: &task.thread,
            settings: &settings,
            first_step: &start.first_step,
        };
        run_on_thread(&run, self.sets.clone(), action).await
    }
}

async fn existing_state(
    ctx: &Ctx,
    graph: &dyn ErasedGraph,
    thread: &str,
) -> anyhow::Result<Option<StateSnapshot<Value>>> {
    if ctx.store.get_checkpoint(thread, None).await?.is_none() {
        return Ok(None);
    }
    Ok(Some(graph.get_state(thread, None).await?))
}

/// `graph decompose TASK.md [--max-nodes N]`.
pub(crate) async fn decompose(ctx: &Ctx, args: DecomposeArgs) -> anyhow::Result<u8> {
    // Heard from the start, as in `graph run`: a stop before the run means it never starts.
    ctx.stops.listen();
    if args.max_nodes == Some(0) {
        return Err(bad_input("--max-nodes must be at least 1"));
    }
    let task = TaskFileArg::new(&args.task)?;
    let prepared = Prepared::new(ctx, &args.sets, args.json, &task).await?;
    let start = (prepared.files)
        .decompose(&task.path, args.max_nodes, prepared.snapshot.as_ref())
        .map_err(refused)?;
    let (meta, result) = prepared.run(ctx, &task, &start).await?;
    let outcome = match result {
        Ok(outcome) if matches!(outcome.status, RunStatus::Interrupted { .. }) => outcome,
        other => {
            let hint = ctx.command_line(&["decompose", &task.given]);
            return report(ctx, &prepared.resolved, &meta, other, args.json, &hint);
        }
    };
    paused(ctx, &prepared, &task, &outcome.state)
}

/// Prints the tree a decomposition paused on, and what continues.
fn paused(ctx: &Ctx, prepared: &Prepared, task: &TaskFileArg, state: &Value) -> anyhow::Result<u8> {
    let done = (prepared.files)
        .decomposed(&task.path, state)
        .map_err(refused)?;
    let tree_cmd = ctx.command_line(&["tree", &task.given]);
    let solve_cmd = ctx.command_line(&["solve", &task.given]);
    if prepared.json {
        out(&format!(
            "{:#}",
            json!({
                "thread_id": task.thread,
                "status": "paused",
                "decomposed": done.decomposed,
                "not_decomposed": done.not_decomposed,
                "tree": done.tree,
                "problems": done.problems,
                "continue_with": solve_cmd,
            })
        ));
        return Ok(EXIT_PAUSED);
    }
    out(done.tree.trim_end());
    say!("{}", done.summary);
    if let Some(limit) = &done.limit_reached {
        say!(
            "{limit}\n  run `{}` again to decompose them (with --max-nodes N for more), or make \
             them simple",
            ctx.command_line(&["decompose", &task.given])
        );
    }
    if !done.problems.is_empty() {
        say!("warnings:\n  {}", done.problems.join("\n  "));
    }
    say!(
        "paused for review: edit the task files (their text, simple or complex, children, \
         dependency links); see the tree with:\n  {tree_cmd}\ncontinue with:\n  {solve_cmd}"
    );
    Ok(EXIT_PAUSED)
}

/// `graph tree TASK.md`.
pub(crate) async fn tree(ctx: &Ctx, args: TreeArgs) -> anyhow::Result<u8> {
    let task = TaskFileArg::new(&args.task)?;
    // Reading a thread needs no model: the graph is built only to read its state.
    let resolved = ctx.registry.resolve(GRAPH, &[])?;
    let files = task_files(&resolved)?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let snapshot = existing_state(ctx, graph.as_ref(), &task.thread).await?;
    let values = snapshot.as_ref().map(|s| &s.values);
    let status = files.status(&task.path, values).map_err(refused)?;
    if args.json {
        out(&format!(
            "{:#}",
            json!({
                "task": task.text(),
                "thread_id": snapshot.as_ref().map(|_| &task.thread),
                "tasks": status.tasks,
                "solved": status.solved,
                "problems": status.problems,
            })
        ));
        return Ok(EXIT_DONE);
    }
    out(status.tree.trim_end());
    out(&format!(
        "{} of {} tasks solved{}",
        status.solved,
        status.total,
        if snapshot.is_some() {
            format!(" (thread {})", task.thread)
        } else {
            String::new()
        }
    ));
    let warnings = [status.problems, status.edited_results].concat();
    if !warnings.is_empty() {
        out(&format!("warnings:\n  {}", warnings.join("\n  ")));
    }
    Ok(EXIT_DONE)
}

/// `graph solve TASK.md`.
pub(crate) async fn solve(ctx: &Ctx, args: SolveArgs) -> anyhow::Result<u8> {
    ctx.stops.listen();
    let task = TaskFileArg::new(&args.task)?;
    let prepared = Prepared::new(ctx, &args.sets, args.json, &task).await?;
    // The files are the plan: refused before anything runs when they cannot be solved.
    let start = (prepared.files)
        .solve(&task.path, prepared.snapshot.as_ref())
        .map_err(refused)?;
    let (meta, result) = prepared.run(ctx, &task, &start).await?;
    let hint = ctx.command_line(&["solve", &task.given]);
    match result {
        Ok(outcome) if outcome.status == RunStatus::Done && !args.json => {
            if let Some(done) = start.done.as_ref().filter(|_| !ctx.quiet) {
                say!("{done}");
            }
            let output = (prepared.resolved.factory.output_field())
                .and_then(|field| outcome.state.get(field)?.as_str());
            out(output.unwrap_or_default());
            Ok(EXIT_DONE)
        }
        other => report(ctx, &prepared.resolved, &meta, other, args.json, &hint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_has_one_thread_per_root_file() {
        let a = thread_for(Path::new("/work/tasks/web scraper.md"));
        assert!(a.starts_with("tree-web_scraper-"), "{a}");
        assert_eq!(a.len(), "tree-web_scraper-".len() + 10);
        assert_ne!(a, thread_for(Path::new("/other/tasks/web scraper.md")));
        stategraph::checkpoint::validate_thread_id(&a).unwrap();
    }
}
