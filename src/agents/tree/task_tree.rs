//! The task tree as the files on disk make it: `{name}.md`, its children in `{name}_children/`,
//! recursively, and the `### Dependents` links between tasks.
//!
//! Loading never fails on a child: what is wrong is kept as a [`Problem`] (a file that cannot
//! be read as a task, a broken link, a dependency cycle, a complex task without children...),
//! so `graph tree` can show everything at once; [`TaskTree::check`] refuses a tree that cannot
//! be solved. Paths are relative to the root task file's folder, with `/` separators.

use super::cycles::{find_cycles, needs_edges};
use super::markdown::one_line;
use super::paths::{children_dir, plan_path, resolve_link};
use super::plan_file::PlanFile;
use super::problem::{Problem, TreeError};
use super::task_file::{FormatError, TaskFile, TaskType};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

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

/// A task tree loaded from its files.
///
/// ```
/// use stategraph::agents::tree::{TaskTree, TreeView};
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
    /// Reads the tree rooted at the task file `root`. Fails only when `root` itself cannot be
    /// read as a task; what is wrong below it is kept in [`problems`](Self::problems).
    pub fn load(root: &Path) -> Result<TaskTree, TreeError> {
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let not_task = |reason: &str| {
            Err(TreeError::NotATaskFile {
                path: root.to_path_buf(),
                reason: reason.to_string(),
            })
        };
        if !name.ends_with(".md") {
            return not_task("a task file is a Markdown file whose name ends in `.md`");
        }
        if name.ends_with("_plan.md") {
            return not_task("this is a plan file (written by the engine); give its task file");
        }
        let dir = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let bytes = std::fs::read(root).map_err(|source| TreeError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let file = parse_bytes(&bytes).map_err(|error| TreeError::Format {
            path: root.to_path_buf(),
            error,
        })?;
        let mut tree = TaskTree {
            dir,
            tasks: vec![Task {
                path: name,
                file,
                hash: blake3::hash(&bytes).to_hex().to_string(),
                parent: None,
                children: Vec::new(),
                depends_on: Vec::new(),
            }],
            problems: Vec::new(),
        };
        let mut seen = HashMap::new();
        seen.insert(canonical(root), tree.tasks[0].path.clone());
        tree.walk(0, &mut seen);
        tree.resolve_links();
        tree.find_cycles();
        for task in &tree.tasks {
            if task.file.task_type == Some(TaskType::Complex) && task.children.is_empty() {
                tree.problems.push(Problem::NotDecomposed {
                    path: task.path.clone(),
                });
            }
        }
        Ok(tree)
    }

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

    /// Reads the children of task `i` from its `_children/` folder, recursively.
    fn walk(&mut self, i: usize, seen: &mut HashMap<PathBuf, String>) {
        let folder = children_dir(&self.tasks[i].path);
        let entries = match std::fs::read_dir(self.dir.join(&folder)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.problems.push(Problem::Unreadable {
                    path: format!("{folder}/"),
                    line: 0,
                    message: e.to_string(),
                });
                return;
            }
        };
        let mut files = BTreeSet::new();
        let mut folders = BTreeSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Follows symbolic links: a linked task file is a task file.
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            if meta.is_file() && name.ends_with(".md") && !name.ends_with("_plan.md") {
                files.insert(name);
            } else if meta.is_dir() && name.ends_with("_children") {
                folders.insert(name);
            }
        }
        for orphan in folders
            .iter()
            .filter(|f| !files.contains(&format!("{}.md", f.trim_end_matches("_children"))))
        {
            self.problems.push(Problem::Orphans {
                folder: format!("{folder}/{orphan}"),
            });
        }
        for name in self.plan_order(i, &folder, files) {
            let path = format!("{folder}/{name}");
            let file = self.dir.join(&path);
            if let Some(first) = seen.get(&canonical(&file)) {
                self.problems.push(Problem::SameFile {
                    path,
                    same_as: first.clone(),
                });
                continue;
            }
            seen.insert(canonical(&file), path.clone());
            let bytes = match std::fs::read(&file) {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.problems.push(Problem::Unreadable {
                        path,
                        line: 0,
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            match parse_bytes(&bytes) {
                Ok(task) => {
                    let child = self.tasks.len();
                    self.tasks.push(Task {
                        path,
                        file: task,
                        hash: blake3::hash(&bytes).to_hex().to_string(),
                        parent: Some(i),
                        children: Vec::new(),
                        depends_on: Vec::new(),
                    });
                    self.tasks[i].children.push(child);
                    self.walk(child, seen);
                }
                Err(e) => self.problems.push(Problem::Unreadable {
                    path,
                    line: e.line,
                    message: e.message,
                }),
            }
        }
    }

    /// The children's file names: those the task's plan lists, in its order, then the rest
    /// by name.
    fn plan_order(&self, i: usize, folder: &str, mut files: BTreeSet<String>) -> Vec<String> {
        let task_path = &self.tasks[i].path;
        let listed = std::fs::read_to_string(self.dir.join(plan_path(task_path)))
            .map(|text| PlanFile::parse(&text).children())
            .unwrap_or_default();
        let mut order = Vec::new();
        for target in listed {
            let Ok(path) = resolve_link(task_path, &target) else {
                continue;
            };
            if let Some(name) = path.strip_prefix(&format!("{folder}/")) {
                if files.remove(name) {
                    order.push(name.to_string());
                }
            }
        }
        order.extend(files);
        order
    }

    fn resolve_links(&mut self) {
        let index: HashMap<String, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.path.clone(), i))
            .collect();
        let unreadable: HashSet<String> = self
            .problems
            .iter()
            .filter_map(|p| match p {
                Problem::Unreadable { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        for i in 0..self.tasks.len() {
            let mut depends_on = Vec::new();
            for link in &self.tasks[i].file.dependents {
                let reason = match resolve_link(&self.tasks[i].path, &link.target) {
                    Ok(path) => match index.get(&path) {
                        Some(&j) => {
                            if !depends_on.contains(&j) {
                                depends_on.push(j);
                            }
                            continue;
                        }
                        None if unreadable.contains(&path) => {
                            format!("{path} cannot be read as a task (see above)")
                        }
                        None if self.dir.join(&path).exists() => format!(
                            "{path} is not a task of this tree (tasks are the root and the files \
                             in `_children` folders below it)"
                        ),
                        None => format!("no such file: {path}"),
                    },
                    Err(reason) => reason,
                };
                self.problems.push(Problem::BrokenLink {
                    path: self.tasks[i].path.clone(),
                    line: link.line,
                    target: link.target.clone(),
                    reason,
                });
            }
            self.tasks[i].depends_on = depends_on;
        }
    }

    fn find_cycles(&mut self) {
        let edges = needs_edges(&self.tasks);
        for cycle in find_cycles(self.tasks.len(), &edges) {
            self.problems.push(Problem::Cycle {
                paths: cycle
                    .into_iter()
                    .map(|i| self.tasks[i].path.clone())
                    .collect(),
            });
        }
    }
}

fn parse_bytes(bytes: &[u8]) -> Result<TaskFile, FormatError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => TaskFile::parse(text),
        Err(e) => Err(FormatError {
            line: bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1,
            message: "not UTF-8 text".into(),
        }),
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::tree::task_file::render_task;

    struct Files(tempfile::TempDir);

    impl Files {
        fn new() -> Files {
            Files(tempfile::tempdir().unwrap())
        }
        fn task(&self, path: &str, kind: TaskType, deps: &[&str]) -> &Self {
            let deps: Vec<(String, String)> = deps
                .iter()
                .map(|d| (d.to_string(), d.to_string()))
                .collect();
            let title = path.rsplit('/').next().unwrap().trim_end_matches(".md");
            self.write(
                path,
                &render_task(title, kind, &format!("Do {title}."), &deps),
            )
        }
        fn write(&self, path: &str, text: &str) -> &Self {
            let file = self.0.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
            self
        }
        fn load(&self) -> TaskTree {
            TaskTree::load(&self.0.path().join("root.md")).unwrap()
        }
    }

    fn paths(tree: &TaskTree, order: &[usize]) -> Vec<String> {
        order.iter().map(|&i| tree.task(i).path.clone()).collect()
    }

    #[test]
    fn children_come_in_plan_order_then_by_name_and_solve_after_their_dependencies() {
        let f = Files::new();
        f.task("root.md", TaskType::Complex, &[])
            .task("root_children/fetch.md", TaskType::Simple, &[])
            .task("root_children/parse.md", TaskType::Simple, &["fetch.md"])
            .task("root_children/extract.md", TaskType::Complex, &["parse.md"])
            .task(
                "root_children/extract_children/select.md",
                TaskType::Simple,
                &["../fetch.md"],
            )
            .task("root_children/zz_extra.md", TaskType::Simple, &[])
            .write(
                "root_plan.md",
                "# Plan: root\n\n## Children\n- [F](root_children/fetch.md)\n- [P](root_children/parse.md)\n- [E](root_children/extract.md)\n",
            );
        let tree = f.load();
        assert!(tree.problems().is_empty(), "{:?}", tree.problems());
        let children: Vec<_> = tree
            .task(0)
            .children
            .iter()
            .map(|&c| tree.task(c).name())
            .collect();
        assert_eq!(
            children,
            ["fetch.md", "parse.md", "extract.md", "zz_extra.md"]
        );
        assert_eq!(
            paths(&tree, &tree.solve_order()),
            [
                "root_children/fetch.md",
                "root_children/parse.md",
                "root_children/extract_children/select.md",
                "root_children/extract.md",
                "root_children/zz_extra.md",
                "root.md"
            ]
        );
        let drawn = tree.render(&TreeView {
            here: tree.find("root_children/parse.md"),
            ..TreeView::default()
        });
        assert!(
            drawn.contains("├── parse.md [simple] parse: Do parse. (after: root_children/fetch.md)  [YOU ARE HERE]\n"),
            "{drawn}"
        );
        assert!(drawn.contains("│   └── select.md"), "{drawn}");
    }

    #[test]
    fn broken_links_cycles_and_undecomposed_tasks_are_problems() {
        let f = Files::new();
        f.task("root.md", TaskType::Complex, &[])
            .task("root_children/a.md", TaskType::Simple, &["b.md"])
            .task("root_children/b.md", TaskType::Simple, &["a.md"])
            .task(
                "root_children/c.md",
                TaskType::Complex,
                &["gone.md", "../../x.md"],
            )
            .task("root_children/d.md", TaskType::Simple, &["../root.md"])
            .write("root_children/e.md", "# E\n## Type\nhuge\n")
            .task("root_children/f.md", TaskType::Simple, &["e.md"])
            .task("root_children/lost_children/x.md", TaskType::Simple, &[]);
        let tree = f.load();
        let shown: Vec<String> = tree.problems().iter().map(ToString::to_string).collect();
        let expected = [
            "root_children/e.md:3: cannot be read as a task: `## Type` must be `simple` or `complex`, not `huge`",
            "root_children/lost_children/: no task file root_children/lost.md beside it",
            "root_children/c.md:10: broken link to `gone.md`: no such file: root_children/gone.md",
            "root_children/c.md:11: broken link to `../../x.md`: it leads out of the root task's folder",
            "root_children/f.md:10: broken link to `e.md`: root_children/e.md cannot be read as a task",
            "dependency cycle: root.md -> root_children/d.md -> root.md",
            "dependency cycle: root_children/a.md -> root_children/b.md -> root_children/a.md",
            "root_children/c.md: complex task without children",
        ];
        for e in expected {
            assert!(
                shown.iter().any(|s| s.starts_with(e)),
                "missing {e:?} in {shown:#?}"
            );
        }
        assert_eq!(shown.len(), expected.len(), "{shown:#?}");
        let err = tree.check().unwrap_err().to_string();
        assert!(
            err.contains("root_children/e.md:3") && !err.contains("without children"),
            "{err}"
        );
    }

    #[test]
    fn a_file_linked_twice_is_read_once() {
        let f = Files::new();
        f.task("root.md", TaskType::Complex, &[]).task(
            "root_children/a.md",
            TaskType::Complex,
            &[],
        );
        let dir = f.0.path();
        std::fs::create_dir_all(dir.join("root_children/a_children")).unwrap();
        std::os::unix::fs::symlink(
            dir.join("root.md"),
            dir.join("root_children/a_children/up.md"),
        )
        .unwrap();
        let tree = f.load();
        assert_eq!(tree.tasks().len(), 2);
        assert_eq!(
            tree.problems()[0],
            Problem::SameFile {
                path: "root_children/a_children/up.md".into(),
                same_as: "root.md".into()
            }
        );
    }

    #[test]
    fn the_root_must_be_a_readable_task_file() {
        let f = Files::new();
        f.write("root.md", "no title\n").write("x.txt", "");
        let err = TaskTree::load(&f.0.path().join("root.md")).unwrap_err();
        assert!(err.to_string().ends_with("root.md:1: cannot be read as a task: no `# Title` heading; a task file starts with its title as `# Title`"), "{err}");
        assert!(matches!(
            TaskTree::load(&f.0.path().join("x.txt")),
            Err(TreeError::NotATaskFile { .. })
        ));
        assert!(matches!(
            TaskTree::load(&f.0.path().join("none.md")),
            Err(TreeError::Io { .. })
        ));
        std::fs::write(f.0.path().join("bin.md"), b"# T\n\nab\xff\n").unwrap();
        let err = TaskTree::load(&f.0.path().join("bin.md")).unwrap_err();
        assert!(
            err.to_string()
                .contains("bin.md:3: cannot be read as a task: not UTF-8"),
            "{err}"
        );
    }
}
