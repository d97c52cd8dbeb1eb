//! `decompose`, `tree` and `solve`: the task-tree workflow over a folder of Markdown task files.
//!
//! The files are read through the tree agent's public API (`agents::tree`); the graph itself
//! (registered as `tree`) is run through the registry like any other, on a thread whose id is
//! made from the root task file's path, so running a command again on the same file continues
//! the same thread.

use super::run::{report, run_on_thread, Action, Ended};
use crate::args::{DecomposeArgs, RunSettings, SolveArgs, TreeArgs};
use crate::error::{bad_input, EXIT_DONE, EXIT_PAUSED};
use crate::{out, parse_overrides, Ctx};
use serde_json::{json, Value};
use stategraph::checkpoint::Checkpointer;
use stategraph::runtime::{Resume, RunError, RunOutcome, RunStatus, StateSnapshot};
use stategraph_agents::tree::{
    decompose_input, solve_input, Problem, SolvePlan, TaskTree, TreeError, TreeState, TreeView,
};
use stategraph_registry::{ErasedGraph, Resolved};
use std::path::{Path, PathBuf};

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

    fn load(&self) -> anyhow::Result<TaskTree> {
        TaskTree::load(&self.path).map_err(tree_error)
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

fn tree_error(e: TreeError) -> anyhow::Error {
    bad_input(e.to_string())
}

/// The `tree` graph with a command's `--set`s, checked for a model, and its thread's state.
struct Prepared {
    resolved: Resolved,
    graph: Box<dyn ErasedGraph>,
    snapshot: Option<StateSnapshot<Value>>,
    sets: Vec<String>,
    json: bool,
}

impl Prepared {
    async fn new(
        ctx: &Ctx,
        sets: &[String],
        json: bool,
        task: &TaskFileArg,
    ) -> anyhow::Result<Prepared> {
        let resolved = ctx.registry.resolve(GRAPH, &parse_overrides(sets)?)?;
        resolved.preflight()?;
        let graph = resolved.build(Some(ctx.checkpointer()))?;
        let snapshot = existing_state(ctx, graph.as_ref(), &task.thread).await?;
        Ok(Prepared {
            resolved,
            graph,
            snapshot,
            sets: sets.to_vec(),
            json,
        })
    }

    /// Runs `action` on the tree's thread; `first_step` names what runs first, for progress.
    async fn run(
        &self,
        ctx: &Ctx,
        task: &TaskFileArg,
        action: Action,
        first_step: &[String],
    ) -> anyhow::Result<(Ended, Result<RunOutcome<Value>, RunError>)> {
        say!("thread {}", task.thread);
        let settings = RunSettings {
            sets: self.sets.clone(),
            json: self.json,
            ..RunSettings::default()
        };
        let graph = self.graph.as_ref();
        let sets = self.sets.clone();
        run_on_thread(
            ctx,
            &self.resolved,
            graph,
            &task.thread,
            sets,
            action,
            &settings,
            first_step,
        )
        .await
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

fn tree_state(snapshot: Option<&StateSnapshot<Value>>) -> anyhow::Result<TreeState> {
    match snapshot {
        Some(s) => serde_json::from_value(s.values.clone())
            .map_err(|e| anyhow::anyhow!("the thread's state is not a task tree's: {e}")),
        None => Ok(TreeState::default()),
    }
}

fn problems_text(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `graph decompose TASK.md [--max-nodes N]`.
pub(crate) async fn decompose(ctx: &Ctx, args: DecomposeArgs) -> anyhow::Result<u8> {
    // Heard from the start, as in `graph run`: a stop before the run means it never starts.
    ctx.stops.listen();
    if args.max_nodes == Some(0) {
        return Err(bad_input("--max-nodes must be at least 1"));
    }
    let task = TaskFileArg::new(&args.task)?;
    task.load()?;
    let prepared = Prepared::new(ctx, &args.sets, args.json, &task).await?;
    // A decomposition stopped by a kill or Ctrl+C continues; anything else starts a new one.
    let stopped = prepared
        .snapshot
        .as_ref()
        .is_some_and(|s| s.interrupts.is_empty() && s.next.iter().any(|n| n == "decompose"));
    let action = if stopped {
        say!("continuing the decomposition that was stopped");
        Action::Resume(Resume::Continue)
    } else {
        Action::Run(serde_json::to_value(decompose_input(
            &task.text(),
            args.max_nodes,
        ))?)
    };
    let (meta, result) = prepared
        .run(ctx, &task, action, &["decompose".to_string()])
        .await?;
    let outcome = match result {
        Ok(outcome) if matches!(outcome.status, RunStatus::Interrupted { .. }) => outcome,
        other => {
            let hint = ctx.command_line(&["decompose", &task.given]);
            return report(ctx, &prepared.resolved, &meta, other, args.json, &hint);
        }
    };
    let state: TreeState = serde_json::from_value(outcome.state.clone())
        .map_err(|e| anyhow::anyhow!("the thread's state is not a task tree's: {e}"))?;
    paused(ctx, &task, &state, args.json)
}

/// Prints the tree a decomposition paused on, and what continues.
fn paused(ctx: &Ctx, task: &TaskFileArg, state: &TreeState, json: bool) -> anyhow::Result<u8> {
    let tree = task.load()?;
    let tree_cmd = ctx.command_line(&["tree", &task.given]);
    let solve_cmd = ctx.command_line(&["solve", &task.given]);
    if json {
        out(&format!(
            "{:#}",
            json!({
                "thread_id": task.thread,
                "status": "paused",
                "decomposed": state.decomposed,
                "not_decomposed": state.not_decomposed,
                "tree": tree.render(&TreeView::default()),
                "problems": tree.problems().iter().map(ToString::to_string).collect::<Vec<_>>(),
                "continue_with": solve_cmd,
            })
        ));
        return Ok(EXIT_PAUSED);
    }
    out(tree.render(&TreeView::default()).trim_end());
    match state.decomposed.len() {
        0 if !tree.task(0).is_complex() => say!(
            "nothing to decompose: {} is marked simple (make its `## Type` complex to decompose it)",
            tree.task(0).path
        ),
        0 => say!("nothing to decompose: every complex task has children"),
        n => say!(
            "decomposed {n} task{}: {}",
            if n == 1 { "" } else { "s" },
            state.decomposed.join(", ")
        ),
    }
    if !state.not_decomposed.is_empty() {
        let limit = state
            .max_nodes
            .map(|n| n.to_string())
            .unwrap_or_else(|| "the `max_nodes` setting".into());
        say!(
            "not decomposed, the limit of {limit} decompositions was reached: {}\n  \
             run `{}` again to decompose them (with --max-nodes N for more), or make them simple",
            state.not_decomposed.join(", "),
            ctx.command_line(&["decompose", &task.given])
        );
    }
    if !tree.problems().is_empty() {
        say!("warnings:\n{}", problems_text(tree.problems()));
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
    let tree = task.load()?;
    // Reading a thread needs no model: the graph is built only to read its state.
    let resolved = ctx.registry.resolve(GRAPH, &[])?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let snapshot = existing_state(ctx, graph.as_ref(), &task.thread).await?;
    let state = tree_state(snapshot.as_ref())?;
    let plan = SolvePlan::new(&tree, &state.solved);
    let current = state.current.as_ref().map(|c| c.path.as_str());
    let status = |i: usize| {
        let path = tree.task(i).path.as_str();
        Some(if Some(path) == current {
            "being solved".to_string()
        } else {
            plan.status_text(i)
        })
    };
    let solved = (0..tree.tasks().len())
        .filter(|&i| plan.reason(i).is_none())
        .count();
    if args.json {
        let tasks: Vec<Value> = tree
            .tasks()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({
                    "path": t.path,
                    "title": t.file.title,
                    "type": t.file.task_type,
                    "summary": t.file.summary_line(),
                    "status": status(i),
                    "children": t.children.iter().map(|&c| &tree.task(c).path).collect::<Vec<_>>(),
                    "depends_on": t.depends_on.iter().map(|&d| &tree.task(d).path).collect::<Vec<_>>(),
                })
            })
            .collect();
        out(&format!(
            "{:#}",
            json!({
                "task": task.text(),
                "thread_id": snapshot.as_ref().map(|_| &task.thread),
                "tasks": tasks,
                "solved": solved,
                "problems": tree.problems().iter().map(ToString::to_string).collect::<Vec<_>>(),
            })
        ));
        return Ok(EXIT_DONE);
    }
    let drawn = tree.render(&TreeView {
        status: Some(&status),
        ..TreeView::default()
    });
    out(drawn.trim_end());
    out(&format!(
        "{solved} of {} tasks solved{}",
        tree.tasks().len(),
        if snapshot.is_some() {
            format!(" (thread {})", task.thread)
        } else {
            String::new()
        }
    ));
    let mut warnings: Vec<String> = tree.problems().iter().map(ToString::to_string).collect();
    warnings.extend(edited_results(&tree, &plan, &state));
    if !warnings.is_empty() {
        out(&format!("warnings:\n  {}", warnings.join("\n  ")));
    }
    Ok(EXIT_DONE)
}

/// What a person changed in a solved task's `## Result`, which nothing reads back.
fn edited_results(tree: &TaskTree, plan: &SolvePlan, state: &TreeState) -> Vec<String> {
    (plan.edited_results(tree, &state.solved).into_iter())
        .map(|(plan_file, task)| {
            format!(
                "{plan_file}: its `## Result` was changed since {task} was solved; results are \
                 read from the thread, not from plan files, so the tasks that build on it use the \
                 result as solved. To change what they get, edit {task} itself (it is solved \
                 again, and they after it)"
            )
        })
        .collect()
}

/// `graph solve TASK.md`.
pub(crate) async fn solve(ctx: &Ctx, args: SolveArgs) -> anyhow::Result<u8> {
    ctx.stops.listen();
    let task = TaskFileArg::new(&args.task)?;
    // The files are the plan: refused before anything runs when they cannot be solved.
    let tree = TaskTree::load_solvable(&task.path).map_err(tree_error)?;
    let prepared = Prepared::new(ctx, &args.sets, args.json, &task).await?;
    let snapshot = prepared.snapshot.as_ref();
    let state = tree_state(snapshot)?;
    let plan = SolvePlan::new(&tree, &state.solved);
    announce(&tree, &plan, args.json);
    for warning in tree.problems() {
        say!("warning: {warning}");
    }
    for warning in edited_results(&tree, &plan, &state) {
        say!("warning: {warning}");
    }
    let action = solve_action(&tree, &plan, &state, snapshot, &task)?;
    let (meta, result) = prepared.run(ctx, &task, action, &[]).await?;
    let hint = ctx.command_line(&["solve", &task.given]);
    match result {
        Ok(outcome) if outcome.status == RunStatus::Done && !args.json => {
            let root = stategraph_agents::tree::plan_path(&tree.task(0).path);
            if !ctx.quiet {
                say!(
                    "done: the tree is solved ({} task{} solved by this run); each task's result \
                     is in its _plan.md file, the whole in {}",
                    plan.pending().len(),
                    if plan.pending().len() == 1 { "" } else { "s" },
                    tree.file_path(&root).display()
                );
            }
            out(outcome.state["result"].as_str().unwrap_or_default());
            Ok(EXIT_DONE)
        }
        other => report(ctx, &prepared.resolved, &meta, other, args.json, &hint),
    }
}

/// Says what will be solved again and why, and what was dropped.
fn announce(tree: &TaskTree, plan: &SolvePlan, json: bool) {
    if json {
        return;
    }
    let again: Vec<String> = plan
        .pending()
        .iter()
        .filter(|(_, r)| *r != stategraph_agents::tree::Reason::New)
        .map(|(i, r)| format!("  {}: {r}", tree.task(*i).path))
        .collect();
    if !again.is_empty() {
        say!(
            "solving again, since the files changed:\n{}",
            again.join("\n")
        );
    }
    for removed in plan.removed() {
        say!("no longer in the tree, so not solved: {removed}");
    }
    match plan.pending().len() {
        0 => say!("every task is solved as the files stand"),
        n => say!(
            "{n} task{} to solve, in this order: {}",
            if n == 1 { "" } else { "s" },
            plan.pending()
                .iter()
                .map(|(i, _)| tree.task(*i).path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Continue the thread where it stopped when that is still the right next step; else start a
/// solve run on it.
fn solve_action(
    tree: &TaskTree,
    plan: &SolvePlan,
    state: &TreeState,
    snapshot: Option<&StateSnapshot<Value>>,
    task: &TaskFileArg,
) -> anyhow::Result<Action> {
    let fresh = || -> anyhow::Result<Action> {
        Ok(Action::Run(serde_json::to_value(solve_input(
            &task.text(),
        ))?))
    };
    let Some(snapshot) = snapshot else {
        return fresh();
    };
    if snapshot.interrupts.iter().any(|i| i.node == "review") {
        return Ok(Action::Resume(Resume::Value(json!("solve"))));
    }
    let solving = ["next_task", "work", "finish_task"];
    if snapshot.next.is_empty() || !snapshot.next.iter().all(|n| solving.contains(&n.as_str())) {
        return fresh();
    }
    // A task stopped half-way continues (its model call, if it finished, is not paid again)
    // unless its file changed since: then it is picked afresh.
    let still_next = match &state.current {
        None => true,
        Some(current) => plan.next().is_some_and(|(i, _)| {
            tree.task(*i).path == current.path && plan.fingerprint(*i) == current.fingerprint
        }),
    };
    if still_next {
        say!("continuing the solve that was stopped");
        Ok(Action::Resume(Resume::Continue))
    } else {
        fresh()
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
