//! Drawing a task tree as text, one task a line, for people and for the model's prompts.

use super::TaskTree;
use crate::tree::markdown::one_line;
use crate::tree::task_file::TaskType;

/// How [`TaskTree::render`] draws the tree.
#[derive(Default)]
pub struct TreeView<'a> {
    /// Marks this task with `[YOU ARE HERE]`.
    pub here: Option<usize>,
    /// Shows each task's path from the root's folder instead of its file name.
    pub paths: bool,
    /// A status per task, shown at the end of its line (e.g. `solved`).
    pub status: Option<&'a dyn Fn(usize) -> Option<String>>,
}

impl TaskTree {
    /// The tree, one task a line: name, type, title, one-line summary, what it depends on,
    /// and (as asked) its status and `[YOU ARE HERE]`.
    pub fn render(&self, view: &TreeView<'_>) -> String {
        let mut out = String::new();
        self.render_task(0, "", "", view, &mut out);
        out
    }

    fn render_task(&self, i: usize, lead: &str, rest: &str, view: &TreeView<'_>, out: &mut String) {
        let task = &self.tasks[i];
        let kind = task.file.task_type.map_or("no type", TaskType::as_str);
        out.push_str(&format!(
            "{lead}{} [{kind}] {}: {}",
            if view.paths { &task.path } else { task.name() },
            one_line(&task.file.title, 80),
            task.file.summary_line()
        ));
        if !task.depends_on.is_empty() {
            let after: Vec<&str> = task
                .depends_on
                .iter()
                .map(|&d| self.tasks[d].path.as_str())
                .collect();
            out.push_str(&format!(" (after: {})", after.join(", ")));
        }
        if let Some(status) = view.status.and_then(|s| s(i)) {
            out.push_str(&format!(" — {status}"));
        }
        if view.here == Some(i) {
            out.push_str("  [YOU ARE HERE]");
        }
        out.push('\n');
        for (n, &child) in task.children.iter().enumerate() {
            let last = n + 1 == task.children.len();
            let (branch, below) = if last {
                ("└── ", "    ")
            } else {
                ("├── ", "│   ")
            };
            self.render_task(
                child,
                &format!("{rest}{branch}"),
                &format!("{rest}{below}"),
                view,
                out,
            );
        }
    }
}
