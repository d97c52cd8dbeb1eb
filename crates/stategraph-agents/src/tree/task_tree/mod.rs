//! The task tree as the files on disk make it: `{name}.md`, its children in `{name}_children/`,
//! recursively, and the `### Dependents` links between tasks.
//!
//! Loading never fails on a child: what is wrong is kept as a [`Problem`] (a file that cannot
//! be read as a task, a broken link, a dependency cycle, a complex task without children...),
//! so `graph tree` can show everything at once; [`TaskTree::check`] refuses a tree that cannot
//! be solved. Paths are relative to the root task file's folder, with `/` separators.
//!
//! Layout: the model ([`Task`], [`TaskTree`]) and its queries here; reading the files, links
//! and cycles in `load.rs`; drawing the tree as text in `render.rs`.

mod load;
mod render;
#[cfg(test)]
mod tests;

use super::problem::{Problem, TreeError};
use super::task_file::{TaskFile, TaskType};
use std::path::{Path, PathBuf};

pub use render::TreeView;

/// One task file of the tree.
#[derive(Clone, Debug)]
pub struct Task {
    /// Relative to the root task file's folder, e.g. `web_scraper_children/fetch_urls.md`.
    pub path: String,
    /// What the file says.
    pub file: TaskFile,
    /// BLAKE3 of the file's bytes, hex: a changed hash means the file was edited.
    pub hash: String,
    /// Its parent task (none for the root).
    pub parent: Option<usize>,
    /// Its children, in the order of the parent's plan, then by file name.
    pub children: Vec<usize>,
    /// The tasks its `### Dependents` links name (the ones that resolve).
    pub depends_on: Vec<usize>,
}

impl Task {
    /// The file's name.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Complex by its type (the root counts as complex when it says nothing).
    pub fn is_complex(&self) -> bool {
        match self.file.task_type {
            Some(t) => t == TaskType::Complex,
            None => self.parent.is_none(),
        }
    }
}

/// A task tree loaded from its files.
///
/// ```
/// use stategraph_agents::tree::{TaskTree, TreeView};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.md"), "# App\n\nBuild it.\n").unwrap();
/// std::fs::create_dir(dir.path().join("app_children")).unwrap();
/// std::fs::write(dir.path().join("app_children/ui.md"), "# UI\n## Type\nsimple\n## Summary\nDraw it.\n").unwrap();
/// let tree = TaskTree::load(&dir.path().join("app.md")).unwrap();
/// assert_eq!(tree.task(1).path, "app_children/ui.md");
/// assert!(tree.render(&TreeView::default()).contains("└── ui.md [simple] UI: Draw it."));
/// ```
#[derive(Clone, Debug)]
pub struct TaskTree {
    dir: PathBuf,
    tasks: Vec<Task>,
    problems: Vec<Problem>,
}

impl TaskTree {
    /// Reads the tree and refuses it when it cannot be solved (unreadable files, broken
    /// links, cycles), naming every file and line at fault.
    pub fn load_solvable(root: &Path) -> Result<TaskTree, TreeError> {
        let tree = TaskTree::load(root)?;
        tree.check()?;
        Ok(tree)
    }

    /// Fails with every problem that stops the tree from being solved.
    pub fn check(&self) -> Result<(), TreeError> {
        let blocking: Vec<Problem> = self
            .problems
            .iter()
            .filter(|p| p.blocks_solving())
            .cloned()
            .collect();
        if blocking.is_empty() {
            Ok(())
        } else {
            Err(TreeError::Invalid(blocking))
        }
    }

    /// The folder of the root task file; every path is relative to it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every task, the root first, then depth-first in tree order.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The task at `index` (0 is the root).
    pub fn task(&self, index: usize) -> &Task {
        &self.tasks[index]
    }

    /// The index of the task at `path` (relative to [`dir`](Self::dir)).
    pub fn find(&self, path: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.path == path)
    }

    /// What is wrong with the tree.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The file at a tree-relative path.
    pub fn file_path(&self, path: &str) -> PathBuf {
        self.dir.join(path)
    }

    /// The order to solve in: every task after the tasks it depends on and after its children,
    /// depth-first from the root, so the root comes last. Tasks in a cycle are left out (a
    /// tree with a cycle is refused by [`check`](Self::check)).
    pub fn solve_order(&self) -> Vec<usize> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        fn visit(tree: &TaskTree, i: usize, marks: &mut [Mark], order: &mut Vec<usize>) {
            if marks[i] != Mark::New {
                return;
            }
            marks[i] = Mark::Open;
            let task = &tree.tasks[i];
            for &next in task.depends_on.iter().chain(&task.children) {
                visit(tree, next, marks, order);
            }
            marks[i] = Mark::Done;
            order.push(i);
        }
        let mut marks = vec![Mark::New; self.tasks.len()];
        let mut order = Vec::with_capacity(self.tasks.len());
        visit(self, 0, &mut marks, &mut order);
        order
    }
}
