//! What can be wrong with a task tree: [`Problem`]s found while loading it (kept, so `graph
//! tree` shows them all), and [`TreeError`] when it cannot be loaded or solved.

use super::task_file::FormatError;
use std::fmt;
use std::path::PathBuf;

/// Something wrong with the tree, found while loading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A file that cannot be read as a task; it is left out of the tree.
    Unreadable {
        /// The file.
        path: String,
        /// 1-based; 0 when the file could not be read at all.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A `### Dependents` link that names no task of the tree.
    BrokenLink {
        /// The file holding the link.
        path: String,
        /// The link's line.
        line: usize,
        /// The link as written.
        target: String,
        /// Why it names no task.
        reason: String,
    },
    /// Tasks that each need the next first (dependencies, and children before parents), so
    /// none of them can be solved. The first path is repeated at the end.
    Cycle {
        /// The files, in the order each needs the next.
        paths: Vec<String>,
    },
    /// A complex task with no children: decompose it, or make it simple (it is solved directly).
    NotDecomposed {
        /// The file.
        path: String,
    },
    /// A `{name}_children/` folder with no `{name}.md` beside it: its tasks are not in the tree.
    Orphans {
        /// The folder.
        folder: String,
    },
    /// A file reached a second time (through a symbolic link): it is counted once.
    SameFile {
        /// The second path.
        path: String,
        /// The path it was first reached by.
        same_as: String,
    },
}

impl Problem {
    /// True when the tree cannot be solved while this stands.
    pub fn blocks_solving(&self) -> bool {
        matches!(
            self,
            Problem::Unreadable { .. } | Problem::BrokenLink { .. } | Problem::Cycle { .. }
        )
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unreadable {
                path,
                line: 0,
                message,
            } => write!(f, "{path}: cannot be read: {message}"),
            Problem::Unreadable {
                path,
                line,
                message,
            } => write!(f, "{path}:{line}: cannot be read as a task: {message}"),
            Problem::BrokenLink {
                path,
                line,
                target,
                reason,
            } => write!(f, "{path}:{line}: broken link to `{target}`: {reason}"),
            Problem::Cycle { paths } => write!(
                f,
                "dependency cycle: {} (each needs the next first, so none can be solved)",
                paths.join(" -> ")
            ),
            Problem::NotDecomposed { path } => write!(
                f,
                "{path}: complex task without children (decompose it, or make it `simple`)"
            ),
            Problem::Orphans { folder } => write!(
                f,
                "{folder}/: no task file {}.md beside it, so its tasks are not part of the tree",
                folder.trim_end_matches("_children")
            ),
            Problem::SameFile { path, same_as } => {
                write!(f, "{path}: the same file as {same_as}; counted once")
            }
        }
    }
}

/// The root task file cannot be loaded, or the tree cannot be solved.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The root task file is not a `.md` file, or is a plan file.
    #[error("{path}: {reason}")]
    NotATaskFile {
        /// The path given.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// The root task file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The root task file cannot be read as a task.
    #[error("{}:{}: cannot be read as a task: {}", path.display(), error.line, error.message)]
    Format {
        /// The file.
        path: PathBuf,
        /// The line at fault.
        error: FormatError,
    },
    /// Files of the tree that stop it from being solved.
    #[error("the task tree cannot be solved as it stands (nothing was changed):\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Invalid(Vec<Problem>),
}
