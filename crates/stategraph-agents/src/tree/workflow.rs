//! The tree agent's [`TaskFiles`]: what a front end's decompose, tree and solve commands ask of
//! the `tree` graph, answered from the task files and the JSON of a [`TreeState`].
//!
//! Here live the decisions that need to know the graph: which nodes mean a run was stopped
//! half-way, which input starts a decomposition or a solve, and what each task's status is.
//! The answers are plain data; the front end words its own commands around them.

use super::paths::plan_path;
use super::problem::TreeError;
use super::solve::{Reason, SolvePlan};
use super::state::{decompose_input, solve_input, TreeState, TreeStateUpdate};
use super::task_tree::{TaskTree, TreeView};
use serde_json::{json, Value};
use stategraph::runtime::StateSnapshot;
use stategraph_registry::{Decomposed, RunStart, Start, TaskFiles, TaskFilesError, TreeStatus};
use std::path::Path;

/// Decomposes and solves the folder of task files rooted at a task file, for a front end.
///
/// ```
/// use stategraph_agents::tree::TreeWorkflow;
/// use stategraph_registry::{Start, TaskFiles};
/// let dir = tempfile::tempdir().unwrap();
/// let root = dir.path().join("app.md");
/// std::fs::write(&root, "# App\n\nBuild it.\n").unwrap();
/// let start = TreeWorkflow.decompose(&root, Some(2), None).unwrap();
/// let Start::Run(input) = start.start else { panic!("a new thread starts a run") };
/// assert_eq!((input["mode"].as_str(), input["max_nodes"].as_u64()), (Some("decompose"), Some(2)));
/// let status = TreeWorkflow.status(&root, None).unwrap();
/// assert_eq!((status.solved, status.total), (0, 1));
/// assert!(status.tree.starts_with("app.md [no type] App: Build it. — not solved yet"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeWorkflow;

/// The nodes a solve run goes through; a thread stopped in one of them was solving.
const SOLVING: [&str; 3] = ["next_task", "work", "finish_task"];

fn files(e: TreeError) -> TaskFilesError {
    TaskFilesError::Files(Box::new(e))
}

fn load(root: &Path) -> Result<TaskTree, TaskFilesError> {
    TaskTree::load(root).map_err(files)
}

fn state_of(values: Option<&Value>) -> Result<TreeState, TaskFilesError> {
    match values {
        Some(v) => serde_json::from_value(v.clone()).map_err(TaskFilesError::State),
        None => Ok(TreeState::default()),
    }
}

fn input(update: TreeStateUpdate) -> Result<Value, TaskFilesError> {
    serde_json::to_value(update).map_err(TaskFilesError::Input)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn problems(tree: &TaskTree) -> Vec<String> {
    tree.problems().iter().map(ToString::to_string).collect()
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

/// What will be solved again and why, what was dropped, and what is to be solved, in order.
fn announce(tree: &TaskTree, plan: &SolvePlan) -> Vec<String> {
    let mut said = Vec::new();
    let again: Vec<String> = plan
        .pending()
        .iter()
        .filter(|(_, r)| *r != Reason::New)
        .map(|(i, r)| format!("  {}: {r}", tree.task(*i).path))
        .collect();
    if !again.is_empty() {
        said.push(format!(
            "solving again, since the files changed:\n{}",
            again.join("\n")
        ));
    }
    for removed in plan.removed() {
        said.push(format!("no longer in the tree, so not solved: {removed}"));
    }
    said.push(match plan.pending().len() {
        0 => "every task is solved as the files stand".to_string(),
        n => format!(
            "{n} task{} to solve, in this order: {}",
            plural(n),
            plan.pending()
                .iter()
                .map(|(i, _)| tree.task(*i).path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    });
    said
}

/// Continue the thread where it stopped when that is still the right next step; else start a
/// solve run on it. A pause for review is answered.
fn solve_start(
    root: &Path,
    tree: &TaskTree,
    plan: &SolvePlan,
    state: &TreeState,
    thread: Option<&StateSnapshot<Value>>,
) -> Result<Start, TaskFilesError> {
    let fresh = || Ok(Start::Run(input(solve_input(&root.display().to_string()))?));
    let Some(snapshot) = thread else {
        return fresh();
    };
    if snapshot.interrupts.iter().any(|i| i.node == "review") {
        return Ok(Start::Answer(json!("solve")));
    }
    if snapshot.next.is_empty() || !snapshot.next.iter().all(|n| SOLVING.contains(&n.as_str())) {
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
        Ok(Start::Continue {
            note: "continuing the solve that was stopped".into(),
        })
    } else {
        fresh()
    }
}

/// One task of [`TaskFiles::status`]'s JSON.
fn task_json(tree: &TaskTree, i: usize, status: String) -> Value {
    let t = tree.task(i);
    let paths = |list: &[usize]| -> Vec<String> {
        list.iter().map(|&j| tree.task(j).path.clone()).collect()
    };
    json!({
        "path": t.path,
        "title": t.file.title,
        "type": t.file.task_type,
        "summary": t.file.summary_line(),
        "status": status,
        "children": paths(&t.children),
        "depends_on": paths(&t.depends_on),
    })
}

impl TaskFiles for TreeWorkflow {
    fn decompose(
        &self,
        root: &Path,
        max_nodes: Option<u32>,
        thread: Option<&StateSnapshot<Value>>,
    ) -> Result<RunStart, TaskFilesError> {
        // Read only to refuse what is not a task file: the run reads the files itself.
        load(root)?;
        // A decomposition stopped by a kill or Ctrl+C continues; anything else starts a new one.
        let stopped = thread
            .is_some_and(|s| s.interrupts.is_empty() && s.next.iter().any(|n| n == "decompose"));
        let start = if stopped {
            Start::Continue {
                note: "continuing the decomposition that was stopped".into(),
            }
        } else {
            let task = root.display().to_string();
            Start::Run(input(decompose_input(&task, max_nodes))?)
        };
        Ok(RunStart {
            start,
            first_step: vec!["decompose".to_string()],
            announce: Vec::new(),
            warnings: Vec::new(),
            done: None,
        })
    }

    fn decomposed(&self, root: &Path, state: &Value) -> Result<Decomposed, TaskFilesError> {
        let state = state_of(Some(state))?;
        let tree = load(root)?;
        let summary = match state.decomposed.len() {
            0 if !tree.task(0).is_complex() => format!(
                "nothing to decompose: {} is marked simple (make its `## Type` complex to \
                 decompose it)",
                tree.task(0).path
            ),
            0 => "nothing to decompose: every complex task has children".to_string(),
            n => format!(
                "decomposed {n} task{}: {}",
                plural(n),
                state.decomposed.join(", ")
            ),
        };
        let limit_reached = (!state.not_decomposed.is_empty()).then(|| {
            let limit = (state.max_nodes.map(|n| n.to_string()))
                .unwrap_or_else(|| "the `max_nodes` setting".into());
            format!(
                "not decomposed, the limit of {limit} decompositions was reached: {}",
                state.not_decomposed.join(", ")
            )
        });
        Ok(Decomposed {
            tree: tree.render(&TreeView::default()),
            decomposed: state.decomposed,
            not_decomposed: state.not_decomposed,
            summary,
            limit_reached,
            problems: problems(&tree),
        })
    }

    fn solve(
        &self,
        root: &Path,
        thread: Option<&StateSnapshot<Value>>,
    ) -> Result<RunStart, TaskFilesError> {
        // The files are the plan: refused before anything runs when they cannot be solved.
        let tree = TaskTree::load_solvable(root).map_err(files)?;
        let state = state_of(thread.map(|s| &s.values))?;
        let plan = SolvePlan::new(&tree, &state.solved);
        let mut warnings = problems(&tree);
        warnings.extend(edited_results(&tree, &plan, &state));
        let n = plan.pending().len();
        let whole = tree.file_path(&plan_path(&tree.task(0).path));
        let done = format!(
            "done: the tree is solved ({n} task{} solved by this run); each task's result is in \
             its _plan.md file, the whole in {}",
            plural(n),
            whole.display()
        );
        Ok(RunStart {
            start: solve_start(root, &tree, &plan, &state, thread)?,
            first_step: Vec::new(),
            announce: announce(&tree, &plan),
            warnings,
            done: Some(done),
        })
    }

    fn status(&self, root: &Path, state: Option<&Value>) -> Result<TreeStatus, TaskFilesError> {
        let tree = load(root)?;
        let state = state_of(state)?;
        let plan = SolvePlan::new(&tree, &state.solved);
        let current = state.current.as_ref().map(|c| c.path.as_str());
        let status = |i: usize| {
            if Some(tree.task(i).path.as_str()) == current {
                "being solved".to_string()
            } else {
                plan.status_text(i)
            }
        };
        let total = tree.tasks().len();
        let drawn = tree.render(&TreeView {
            status: Some(&|i| Some(status(i))),
            ..TreeView::default()
        });
        Ok(TreeStatus {
            tree: drawn,
            tasks: (0..total).map(|i| task_json(&tree, i, status(i))).collect(),
            solved: (0..total).filter(|&i| plan.reason(i).is_none()).count(),
            total,
            problems: problems(&tree),
            edited_results: edited_results(&tree, &plan, &state),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph::checkpoint::{CheckpointMetadata, InterruptRecord, InterruptWhen, Source};

    /// A thread whose next step runs `next`, paused in `paused` when given.
    fn thread(next: &[&str], paused: Option<&str>, values: Value) -> StateSnapshot<Value> {
        StateSnapshot {
            values,
            next: next.iter().map(|n| n.to_string()).collect(),
            interrupts: (paused.into_iter())
                .map(|node| InterruptRecord {
                    id: "i1".into(),
                    node: node.into(),
                    when: InterruptWhen::Dynamic,
                    task: 0,
                    ordinal: 0,
                    payload: Value::Null,
                    namespace: String::new(),
                })
                .collect(),
            errors: Vec::new(),
            completed: Vec::new(),
            checkpoint_id: Default::default(),
            parent_id: None,
            step: 1,
            metadata: CheckpointMetadata {
                source: Source::Loop,
                writers: Vec::new(),
                created_at_ms: 0,
                schema_version: 1,
                run_id: "r1".into(),
                graph: Some("tree".into()),
            },
            subgraphs: Vec::new(),
        }
    }

    fn fresh_state() -> Value {
        serde_json::to_value(TreeState::default()).unwrap()
    }

    fn root_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("app.md");
        std::fs::write(&root, text).unwrap();
        (dir, root)
    }

    #[test]
    fn a_stopped_decomposition_continues_and_a_paused_one_starts_again() {
        let (_dir, root) = root_file("# App\n\nBuild it.\n");
        let stopped = thread(&["decompose"], None, fresh_state());
        let start = TreeWorkflow.decompose(&root, None, Some(&stopped)).unwrap();
        assert!(matches!(start.start, Start::Continue { .. }), "{start:?}");
        assert_eq!(start.first_step, ["decompose"]);
        let in_review = thread(&["review"], Some("review"), fresh_state());
        let start = TreeWorkflow
            .decompose(&root, None, Some(&in_review))
            .unwrap();
        let Start::Run(input) = start.start else {
            panic!("a paused decomposition is not continued: {start:?}")
        };
        assert_eq!(input["decomposed"], json!([]));
    }

    #[test]
    fn solve_answers_the_review_and_continues_only_a_stopped_solve() {
        let (_dir, root) = root_file("# App\n\n## Type\nsimple\n\nBuild it.\n");
        let review = thread(&["review"], Some("review"), fresh_state());
        let start = TreeWorkflow.solve(&root, Some(&review)).unwrap();
        assert_eq!(start.start, Start::Answer(json!("solve")));
        assert_eq!(start.announce, ["1 task to solve, in this order: app.md"]);
        let solving = thread(&["work"], None, fresh_state());
        let start = TreeWorkflow.solve(&root, Some(&solving)).unwrap();
        assert!(matches!(start.start, Start::Continue { .. }), "{start:?}");
        let done = thread(&[], None, fresh_state());
        let Start::Run(input) = TreeWorkflow.solve(&root, Some(&done)).unwrap().start else {
            panic!("a finished thread starts a new solve")
        };
        assert_eq!(input["mode"], "solve");
        assert!(start.done.unwrap().contains("(1 task solved by this run)"));
    }

    #[test]
    fn a_state_of_another_graph_and_unreadable_files_are_told_apart() {
        let (_dir, root) = root_file("# App\n\nBuild it.\n");
        let wrong = json!({"solved": "not a list"});
        let e = TreeWorkflow.status(&root, Some(&wrong)).unwrap_err();
        assert!(matches!(e, TaskFilesError::State(_)), "{e:?}");
        let missing = root.with_file_name("missing.md");
        let e = TreeWorkflow.decompose(&missing, None, None).unwrap_err();
        assert!(matches!(e, TaskFilesError::Files(_)), "{e:?}");
        assert!(e.to_string().contains("missing.md"), "{e}");
        std::fs::write(&root, "# App\n\n### Dependents\n- [Gone](gone.md)\n").unwrap();
        let e = TreeWorkflow.solve(&root, None).unwrap_err();
        assert!(matches!(e, TaskFilesError::Files(_)), "{e:?}");
        assert!(e.to_string().contains("broken link to `gone.md`"), "{e}");
        assert!(TreeWorkflow.decompose(&root, None, None).is_ok());
    }

    #[test]
    fn a_decomposition_that_did_nothing_says_why() {
        let (_dir, root) = root_file("# App\n\n## Type\nsimple\n\nBuild it.\n");
        let state = TreeState {
            max_nodes: Some(2),
            not_decomposed: vec!["a.md".into()],
            ..TreeState::default()
        };
        let state = serde_json::to_value(state).unwrap();
        let d = TreeWorkflow.decomposed(&root, &state).unwrap();
        assert_eq!(
            d.summary,
            "nothing to decompose: app.md is marked simple (make its `## Type` complex to \
             decompose it)"
        );
        assert_eq!(
            d.limit_reached.as_deref(),
            Some("not decomposed, the limit of 2 decompositions was reached: a.md")
        );
        assert!(d.tree.starts_with("app.md [simple] App"), "{}", d.tree);
    }
}
