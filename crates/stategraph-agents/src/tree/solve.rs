//! Solving the tree: which tasks to solve (again) and why, what each solve is given, and the
//! progress written into the plan files.
//!
//! A task's *fingerprint* is a hash over its file and the fingerprints of its children and
//! dependencies, so editing a file changes its fingerprint and the fingerprints of everything
//! that builds on it: they are all solved again, and nothing else is. Adding or deleting a
//! child changes its parent's fingerprint the same way.

use super::markdown::{escape_link_text, link_dest};
use super::paths::{plan_path, relative_link};
use super::plan_file::PlanFile;
use super::state::SolvedTask;
use super::task_tree::{TaskTree, TreeView};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a task is to be solved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// It was never solved.
    New,
    /// Its task file was edited since it was solved.
    Edited,
    /// A task it builds on (a child or a dependency) is solved again first.
    After(String),
    /// Its children or dependencies are no longer the ones it was solved with.
    InputsChanged,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::New => write!(f, "not solved yet"),
            Reason::Edited => write!(f, "its task file was edited since it was solved"),
            Reason::After(path) => write!(f, "it builds on {path}, which is solved again"),
            Reason::InputsChanged => write!(
                f,
                "its children or dependencies changed since it was solved"
            ),
        }
    }
}

/// Where each task of a tree stands against what a thread solved, and what to solve next.
///
/// ```
/// use stategraph_agents::tree::{Reason, SolvePlan, TaskTree};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.md"), "# App\n\nBuild it.\n").unwrap();
/// let tree = TaskTree::load(&dir.path().join("app.md")).unwrap();
/// let plan = SolvePlan::new(&tree, &[]);
/// assert_eq!(plan.pending(), [(0, Reason::New)]);
/// ```
#[derive(Clone, Debug)]
pub struct SolvePlan {
    fingerprints: Vec<String>,
    /// `None` when solved with the task's current fingerprint.
    status: Vec<Option<Reason>>,
    pending: Vec<(usize, Reason)>,
    removed: Vec<String>,
}

impl SolvePlan {
    /// Compares the tree's tasks with `solved` (the thread's records).
    pub fn new(tree: &TaskTree, solved: &[SolvedTask]) -> SolvePlan {
        let n = tree.tasks().len();
        let order = tree.solve_order();
        let mut fingerprints = vec![String::new(); n];
        let mut status: Vec<Option<Reason>> = vec![Some(Reason::New); n];
        let mut pending = Vec::new();
        for &i in &order {
            let task = tree.task(i);
            let mut hasher = blake3::Hasher::new();
            hasher.update(b"task\0");
            hasher.update(task.hash.as_bytes());
            for (kind, list) in [("child", &task.children), ("dependency", &task.depends_on)] {
                for &j in list {
                    for part in [kind, &tree.task(j).path, &fingerprints[j]] {
                        hasher.update(b"\0");
                        hasher.update(part.as_bytes());
                    }
                }
            }
            fingerprints[i] = hasher.finalize().to_hex().to_string();
            let inputs = inputs(tree, i);
            status[i] = match solved.iter().find(|s| s.path == task.path) {
                None => Some(Reason::New),
                Some(s) if s.fingerprint == fingerprints[i] => None,
                Some(s) if s.file_hash != task.hash => Some(Reason::Edited),
                Some(s) => Some(
                    inputs
                        .iter()
                        .find(|p| tree.find(p).is_some_and(|j| status[j].is_some()))
                        .filter(|_| s.inputs == inputs)
                        .map(|p| Reason::After(p.clone()))
                        .unwrap_or(Reason::InputsChanged),
                ),
            };
            if let Some(reason) = &status[i] {
                pending.push((i, reason.clone()));
            }
        }
        let removed = solved
            .iter()
            .filter(|s| tree.find(&s.path).is_none())
            .map(|s| s.path.clone())
            .collect();
        SolvePlan {
            fingerprints,
            status,
            pending,
            removed,
        }
    }

    /// The tasks to solve, in solve order, each with why.
    pub fn pending(&self) -> &[(usize, Reason)] {
        &self.pending
    }

    /// The next task to solve.
    pub fn next(&self) -> Option<&(usize, Reason)> {
        self.pending.first()
    }

    /// The plan files whose `## Result` a person changed after the task was solved, with
    /// their task: a result is read from the thread, never back from its plan file, so what
    /// builds on the task still uses it as solved. Only tasks solved as the files stand.
    pub fn edited_results(&self, tree: &TaskTree, solved: &[SolvedTask]) -> Vec<(String, String)> {
        let mut edited = Vec::new();
        for (i, task) in tree.tasks().iter().enumerate() {
            let Some(done) = solved.iter().find(|s| s.path == task.path) else {
                continue;
            };
            if self.status[i].is_some() {
                continue;
            }
            let plan = plan_path(&task.path);
            let Ok(text) = std::fs::read_to_string(tree.file_path(&plan)) else {
                continue;
            };
            let written = PlanFile::parse(&text).section("Result");
            if written.is_some_and(|w| w != done.result.trim()) {
                edited.push((plan, task.path.clone()));
            }
        }
        edited
    }

    /// Task `i`'s fingerprint: a hash over its file and its children's and dependencies'
    /// fingerprints, so an edit anywhere below it changes it.
    pub fn fingerprint(&self, i: usize) -> &str {
        &self.fingerprints[i]
    }

    /// Why task `i` is to be solved; `None` when it is solved as it stands.
    pub fn reason(&self, i: usize) -> Option<&Reason> {
        self.status[i].as_ref()
    }

    /// Tasks solved before that are no longer in the tree (their files were deleted).
    pub fn removed(&self) -> &[String] {
        &self.removed
    }

    /// Task `i`'s status in words.
    pub fn status_text(&self, i: usize) -> String {
        match &self.status[i] {
            None => "solved".into(),
            Some(Reason::New) => "not solved yet".into(),
            Some(reason) => format!("to solve again: {reason}"),
        }
    }
}

/// Task `i`'s children, then its dependencies: the results it is solved with.
pub fn inputs(tree: &TaskTree, i: usize) -> Vec<String> {
    let task = tree.task(i);
    task.children
        .iter()
        .chain(&task.depends_on)
        .map(|&j| tree.task(j).path.clone())
        .collect()
}

/// What a solve of task `i` is given: the tree with one-line summaries and `[YOU ARE HERE]`,
/// the task file, and the results of its children and dependencies (each cut at `max_chars`).
pub fn solve_request(
    tree: &TaskTree,
    plan: &SolvePlan,
    solved: &[SolvedTask],
    i: usize,
    max_chars: usize,
) -> String {
    let task = tree.task(i);
    let status = |j: usize| Some(plan.status_text(j));
    let drawn = tree.render(&TreeView {
        here: Some(i),
        paths: true,
        status: Some(&status),
    });
    let mut out = format!(
        "The task tree (paths from the root task's folder):\n\n{drawn}\n\
         Your task: {path}\n\n--- {path}\n{text}\n---\n",
        path = task.path,
        text = task.file.text.trim_end()
    );
    let result = |j: usize| {
        let path = &tree.task(j).path;
        let text = solved
            .iter()
            .find(|s| &s.path == path)
            .map(|s| s.result.as_str())
            .unwrap_or("(no result)");
        let cut: String = text.chars().take(max_chars).collect();
        let more = if cut.len() < text.len() {
            format!(
                "\n(cut at {max_chars} characters; the whole result is in {})",
                super::paths::plan_path(path)
            )
        } else {
            String::new()
        };
        format!(
            "\n### {} ({path})\n{}{more}\n",
            tree.task(j).file.title,
            cut.trim_end()
        )
    };
    for (heading, list) in [
        ("Results of its children", &task.children),
        ("Results of the tasks it depends on", &task.depends_on),
    ] {
        if !list.is_empty() {
            out.push_str(&format!("\n## {heading}\n"));
            for &j in list {
                out.push_str(&result(j));
            }
        }
    }
    out.push('\n');
    out.push_str(if !task.children.is_empty() {
        "Integrate the results of its children into the result of this task."
    } else if task.is_complex() {
        "This task is marked complex but has no children: solve it directly."
    } else {
        "Solve this task."
    });
    out
}

/// The `## Progress` of task `i`'s plan file: its own status, its children's, and what it
/// builds on. `solving` marks it as being solved at `step`.
pub fn progress_text(
    tree: &TaskTree,
    plan: &SolvePlan,
    solved: &[SolvedTask],
    i: usize,
    thread: &str,
    solving: Option<u64>,
) -> String {
    let task = tree.task(i);
    let link = |j: usize| {
        let other = tree.task(j);
        format!(
            "[{}]({})",
            escape_link_text(&other.file.title),
            link_dest(&relative_link(&task.path, &other.path))
        )
    };
    let mut lines = vec![match (solving, plan.reason(i)) {
        (Some(step), _) => format!("- Being solved (step {step} of thread `{thread}`)."),
        (None, None) => {
            let step = solved
                .iter()
                .find(|s| s.path == task.path)
                .map_or(0, |s| s.step);
            format!("- Solved (step {step} of thread `{thread}`).")
        }
        (None, Some(reason)) => format!("- Not solved: {reason}."),
    }];
    if !task.children.is_empty() {
        let done = task
            .children
            .iter()
            .filter(|&&c| plan.reason(c).is_none())
            .count();
        lines.push(format!(
            "- Children: {done} of {} solved.",
            task.children.len()
        ));
        for &c in &task.children {
            let mark = if plan.reason(c).is_none() { 'x' } else { ' ' };
            lines.push(format!(
                "  - [{mark}] {} — {}",
                link(c),
                plan.status_text(c)
            ));
        }
    }
    if !task.depends_on.is_empty() {
        let deps: Vec<String> = task
            .depends_on
            .iter()
            .map(|&d| format!("{} ({})", link(d), plan.status_text(d)))
            .collect();
        lines.push(format!("- Builds on: {}.", deps.join(", ")));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files(tempfile::TempDir);

    impl Files {
        fn new(files: &[(&str, &str)]) -> Files {
            let f = Files(tempfile::tempdir().unwrap());
            for (path, text) in files {
                f.write(path, text);
            }
            f
        }
        fn write(&self, path: &str, text: &str) {
            let file = self.0.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        fn tree(&self) -> TaskTree {
            TaskTree::load_solvable(&self.0.path().join("root.md")).unwrap()
        }
    }

    /// Records every task of `tree` as solved with its current fingerprint.
    fn solve_all(tree: &TaskTree) -> Vec<SolvedTask> {
        let mut solved = Vec::new();
        loop {
            let plan = SolvePlan::new(tree, &solved);
            let Some((i, _)) = plan.next().cloned() else {
                return solved;
            };
            let task = tree.task(i);
            solved.retain(|s: &SolvedTask| s.path != task.path);
            solved.push(SolvedTask {
                path: task.path.clone(),
                title: task.file.title.clone(),
                file_hash: task.hash.clone(),
                fingerprint: plan.fingerprint(i).to_string(),
                inputs: inputs(tree, i),
                result: format!("result of {}", task.path),
                step: 1,
            });
        }
    }

    fn pending(tree: &TaskTree, solved: &[SolvedTask]) -> Vec<(String, Reason)> {
        SolvePlan::new(tree, solved)
            .pending()
            .iter()
            .map(|(i, r)| (tree.task(*i).path.clone(), r.clone()))
            .collect()
    }

    const TREE: &[(&str, &str)] = &[
        ("root.md", "# Root\n\nAll.\n"),
        ("root_children/a.md", "# A\n## Type\nsimple\n"),
        (
            "root_children/b.md",
            "# B\n## Type\nsimple\n### Dependents\n- [A](a.md)\n",
        ),
        ("root_children/c.md", "# C\n## Type\nsimple\n"),
    ];

    #[test]
    fn an_edit_resolves_the_file_and_what_builds_on_it_and_nothing_else() {
        let f = Files::new(TREE);
        let solved = solve_all(&f.tree());
        assert!(pending(&f.tree(), &solved).is_empty());
        f.write(
            "root_children/a.md",
            "# A\n## Type\nsimple\n## Summary\nNow in Rust.\n",
        );
        assert_eq!(
            pending(&f.tree(), &solved),
            [
                ("root_children/a.md".into(), Reason::Edited),
                (
                    "root_children/b.md".into(),
                    Reason::After("root_children/a.md".into())
                ),
                ("root.md".into(), Reason::After("root_children/a.md".into())),
            ]
        );
    }

    #[test]
    fn a_deleted_child_is_not_solved_and_its_parent_is_solved_again() {
        let f = Files::new(TREE);
        let solved = solve_all(&f.tree());
        std::fs::remove_file(f.0.path().join("root_children/c.md")).unwrap();
        let tree = f.tree();
        assert_eq!(
            pending(&tree, &solved),
            [("root.md".into(), Reason::InputsChanged)]
        );
        assert_eq!(
            SolvePlan::new(&tree, &solved).removed(),
            ["root_children/c.md"]
        );
    }

    #[test]
    fn an_added_dependency_changes_the_order() {
        let f = Files::new(TREE);
        let order = |tree: &TaskTree| -> Vec<String> {
            pending(tree, &[]).into_iter().map(|(p, _)| p).collect()
        };
        assert_eq!(
            order(&f.tree()),
            [
                "root_children/a.md",
                "root_children/b.md",
                "root_children/c.md",
                "root.md"
            ]
        );
        f.write(
            "root_children/a.md",
            "# A\n## Type\nsimple\n### Dependents\n- [C](c.md)\n",
        );
        assert_eq!(
            order(&f.tree()),
            [
                "root_children/c.md",
                "root_children/a.md",
                "root_children/b.md",
                "root.md"
            ]
        );
    }

    #[test]
    fn a_solve_is_given_the_tree_the_task_and_the_results_it_builds_on() {
        let f = Files::new(TREE);
        let tree = f.tree();
        let solved = solve_all(&tree);
        let plan = SolvePlan::new(&tree, &solved);
        let b = tree.find("root_children/b.md").unwrap();
        let text = solve_request(&tree, &plan, &solved, b, 4);
        assert!(text.contains("├── root_children/b.md [simple] B: (no summary) (after: root_children/a.md) — solved  [YOU ARE HERE]"), "{text}");
        assert!(text.contains("--- root_children/b.md\n# B\n"), "{text}");
        assert!(text.contains("## Results of the tasks it depends on\n\n### A (root_children/a.md)\nresu\n(cut at 4 characters; the whole result is in root_children/a_plan.md)"), "{text}");
        let root = solve_request(&tree, &plan, &solved, 0, 1000);
        assert!(
            root.contains("### C (root_children/c.md)\nresult of root_children/c.md"),
            "{root}"
        );
        assert!(
            root.ends_with("Integrate the results of its children into the result of this task.")
        );
        let progress = progress_text(&tree, &plan, &solved, 0, "t1", None);
        assert!(progress.starts_with("- Solved (step 1 of thread `t1`).\n- Children: 3 of 3 solved.\n  - [x] [A](root_children/a.md) — solved"), "{progress}");
        let progress = progress_text(&tree, &SolvePlan::new(&tree, &[]), &[], b, "t1", Some(4));
        assert_eq!(
            progress,
            "- Being solved (step 4 of thread `t1`).\n- Builds on: [A](a.md) (not solved yet)."
        );
    }
}
