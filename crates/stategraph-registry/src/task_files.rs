//! An optional capability of a graph whose work is a folder of Markdown task files: a root task
//! file a run decomposes into task files a person edits, then solves as the files stand.
//!
//! The registry only names what a front end asks of such a graph; the graph's agent implements
//! [`TaskFiles`] and hands it out with
//! [`GraphFactory::task_files`](super::GraphFactory::task_files). The front end stays generic:
//! it keeps its arguments, the thread a root file runs on, the running itself and the words
//! that name its own commands; the agent decides what a thread's state means (is a run to be
//! continued, with which input does one start, what is solved) and returns it as plain data.

use serde_json::Value;
use stategraph::runtime::StateSnapshot;
use std::path::Path;

/// How a run on a task tree's thread starts.
#[derive(Clone, Debug, PartialEq)]
pub enum Start {
    /// A new run with this input (a state update).
    Run(Value),
    /// The run that was stopped (killed, interrupted) continues where it stopped.
    Continue {
        /// Says what continues, for people.
        note: String,
    },
    /// The pause the thread waits in is answered with this value.
    Answer(Value),
}

/// What a front end needs to start a decomposition or a solve: how it starts and what to tell
/// people before and after.
#[derive(Clone, Debug, PartialEq)]
pub struct RunStart {
    /// How the run starts.
    pub start: Start,
    /// The nodes that run first, for progress; empty when it is not known.
    pub first_step: Vec<String>,
    /// What the run will do, one message each, for people (not for machine-read output).
    pub announce: Vec<String>,
    /// What is wrong with the files without stopping the run, one warning each.
    pub warnings: Vec<String>,
    /// What to tell people when the run reaches its end, if anything.
    pub done: Option<String>,
}

/// The tree after a decomposition paused for review.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decomposed {
    /// The tree as the files now stand, one task a line.
    pub tree: String,
    /// The task files this decomposition decomposed, in order.
    pub decomposed: Vec<String>,
    /// Complex tasks left without children because the decomposition's limit was reached.
    pub not_decomposed: Vec<String>,
    /// What the decomposition did, in a sentence.
    pub summary: String,
    /// When tasks were left undecomposed: which, and the limit that stopped them, in a
    /// sentence (a front end adds how to decompose them).
    pub limit_reached: Option<String>,
    /// What is wrong with the files, one problem each.
    pub problems: Vec<String>,
}

/// Where every task of a tree stands against what a thread solved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeStatus {
    /// The tree, one task a line, each with its status.
    pub tree: String,
    /// One JSON object per task, the root first (path, title, type, summary, status, children,
    /// dependencies).
    pub tasks: Vec<Value>,
    /// How many tasks are solved as the files stand.
    pub solved: usize,
    /// How many tasks the tree has.
    pub total: usize,
    /// What is wrong with the files, one problem each.
    pub problems: Vec<String>,
    /// Results a person changed by hand in files the run never reads back, one warning each.
    pub edited_results: Vec<String>,
}

/// Why a task tree cannot be worked on.
///
/// ```
/// use stategraph_registry::TaskFilesError;
/// let e = serde_json::from_str::<u32>("\"x\"").unwrap_err();
/// let e = TaskFilesError::State(e);
/// assert_eq!(e.to_string(), "the thread's state is not a task tree's");
/// assert!(std::error::Error::source(&e).is_some());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum TaskFilesError {
    /// The task files cannot be read as a tree, or not solved as they stand; the error names
    /// the files and lines at fault, and a person mends them.
    #[error(transparent)]
    Files(Box<dyn std::error::Error + Send + Sync>),
    /// A thread's state is not the state of this graph.
    #[error("the thread's state is not a task tree's")]
    State(#[source] serde_json::Error),
    /// The input of a run cannot be made.
    #[error("cannot make the run's input")]
    Input(#[source] serde_json::Error),
}

/// Works with the folder of task files rooted at a task file `root` (a path a front end made
/// absolute, so a thread's input names the same file from any folder), and with the JSON of
/// the thread that runs on it. Nothing here writes a file or a checkpoint: the graph's runs do.
///
/// A front end asks [`decompose`](Self::decompose) or [`solve`](Self::solve) how to start a
/// run (they read the files once and refuse what cannot be worked on, so ask before checking
/// for a model and before a thread exists), runs it, and shows
/// [`decomposed`](Self::decomposed) when a decomposition pauses for review, or
/// [`status`](Self::status) at any time.
pub trait TaskFiles: Send + Sync {
    /// How a decomposition of at most `max_nodes` decompositions (the graph's setting when
    /// `None`) starts on a thread at `thread` (`None`: a new thread). Fails when the root task
    /// file cannot be read as a task.
    fn decompose(
        &self,
        root: &Path,
        max_nodes: Option<u32>,
        thread: Option<&StateSnapshot<Value>>,
    ) -> Result<RunStart, TaskFilesError>;

    /// The tree and what a decomposition did, from the state it paused with.
    fn decomposed(&self, root: &Path, state: &Value) -> Result<Decomposed, TaskFilesError>;

    /// How a solve of the tree as the files stand starts on a thread at `thread` (`None`: a
    /// new thread). Fails when the tree cannot be solved as the files stand (unreadable files,
    /// broken links, cycles), naming every file and line at fault.
    fn solve(
        &self,
        root: &Path,
        thread: Option<&StateSnapshot<Value>>,
    ) -> Result<RunStart, TaskFilesError>;

    /// Where each task stands against the thread's state (`None`: nothing solved yet).
    fn status(&self, root: &Path, state: Option<&Value>) -> Result<TreeStatus, TaskFilesError>;
}
