//! Reading a task tree from disk: the root task file, each task's `_children/` folder in
//! its plan's order, the `### Dependents` links, and dependency cycles. What is wrong below
//! the root becomes a [`Problem`] instead of an error.

use super::{Task, TaskTree};
use crate::tree::cycles::{find_cycles, needs_edges};
use crate::tree::paths::{children_dir, plan_path, resolve_link};
use crate::tree::plan_file::PlanFile;
use crate::tree::problem::{Problem, TreeError};
use crate::tree::task_file::{FormatError, TaskFile, TaskType};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

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

    /// Reads the children of task `i` from its `_children/` folder, recursively.
    fn walk(&mut self, i: usize, seen: &mut HashMap<PathBuf, String>) {
        let folder = children_dir(&self.tasks[i].path);
        let Some((files, folders)) = self.list_children(&folder) else {
            return;
        };
        self.report_orphans(&folder, &files, &folders);
        for name in self.plan_order(i, &folder, files) {
            if let Some(child) = self.read_child(i, format!("{folder}/{name}"), seen) {
                self.walk(child, seen);
            }
        }
    }

    /// The task files and the `_children` folders in `folder`, by name. `None` when it does not
    /// exist (the task has no children) or cannot be read (a problem).
    fn list_children(&mut self, folder: &str) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
        let entries = match std::fs::read_dir(self.dir.join(folder)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                self.problems.push(Problem::Unreadable {
                    path: format!("{folder}/"),
                    line: 0,
                    message: e.to_string(),
                });
                return None;
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
        Some((files, folders))
    }

    /// A `_children` folder in `folder` with no task file of its name beside it is an orphan:
    /// its tasks are not in the tree.
    fn report_orphans(
        &mut self,
        folder: &str,
        files: &BTreeSet<String>,
        folders: &BTreeSet<String>,
    ) {
        for orphan in folders
            .iter()
            .filter(|f| !files.contains(&format!("{}.md", f.trim_end_matches("_children"))))
        {
            self.problems.push(Problem::Orphans {
                folder: format!("{folder}/{orphan}"),
            });
        }
    }

    /// Reads the task file at `path` (relative to the tree's folder) as a child of task `i` and
    /// returns its index. A file already read under another path (a link) or one that cannot
    /// be read as a task is a problem instead.
    fn read_child(
        &mut self,
        i: usize,
        path: String,
        seen: &mut HashMap<PathBuf, String>,
    ) -> Option<usize> {
        let file = self.dir.join(&path);
        if let Some(first) = seen.get(&canonical(&file)) {
            self.problems.push(Problem::SameFile {
                path,
                same_as: first.clone(),
            });
            return None;
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
                return None;
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
                Some(child)
            }
            Err(e) => {
                self.problems.push(Problem::Unreadable {
                    path,
                    line: e.line,
                    message: e.message,
                });
                None
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
