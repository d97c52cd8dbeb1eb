//! An optional capability of a graph: a plan a person can read and edit while a run is paused
//! (`graph plan THREAD`, `--edit`, `add|rm|move|status|deps`).
//!
//! The registry only names the operations; an agent whose state holds a plan implements
//! [`PlanEditor`] over its state's JSON and hands it out with
//! [`GraphFactory::plan_editor`](super::GraphFactory::plan_editor). The CLI stays generic: it
//! reads a thread's state, asks the editor for Markdown or for the state update an edit makes,
//! and stores that update as a new checkpoint. An edit the editor refuses changes nothing.

use serde_json::Value;

/// Where [`PlanOp::Add`] or [`PlanOp::Move`] puts a todo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanPosition {
    /// Just before the todo with this id.
    Before(String),
    /// Just after the todo with this id.
    After(String),
    /// At this 1-based position (past the end means last).
    At(usize),
}

/// How [`PlanOp::Dependencies`] changes a todo's dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DependencyChange {
    /// Replace them with these ids (empty: none).
    Set(Vec<String>),
    /// Add these ids (already present ones are kept once).
    Add(Vec<String>),
    /// Remove these ids.
    Remove(Vec<String>),
}

/// One change to a plan, as `graph plan THREAD add|rm|move|status|deps` gives it. Kinds and
/// statuses are the plan's own words (e.g. `research`, `done`); the editor reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanOp {
    /// Adds a todo (at the end unless `at` says where).
    Add {
        /// Its id; `None` lets the editor pick the next free one.
        id: Option<String>,
        /// What to do.
        task: String,
        /// Its kind; `None` for the editor's default.
        kind: Option<String>,
        /// Ids it waits for.
        dependencies: Vec<String>,
        /// Where to put it.
        at: Option<PlanPosition>,
    },
    /// Removes a todo.
    Remove {
        /// The todo.
        id: String,
    },
    /// Moves a todo.
    Move {
        /// The todo.
        id: String,
        /// Where to.
        to: PlanPosition,
    },
    /// Sets a todo's status.
    Status {
        /// The todo.
        id: String,
        /// The new status.
        status: String,
        /// Why (kept with the todo).
        reason: Option<String>,
    },
    /// Changes a todo's dependencies.
    Dependencies {
        /// The todo.
        id: String,
        /// How.
        change: DependencyChange,
    },
}

/// A refused plan edit: what is wrong and, when it is on a line of the plan's Markdown, that
/// line's number (1-based) and text.
///
/// ```
/// use stategraph_registry::PlanError;
/// let e = PlanError::on_line(4, "- [ ] t2: b (after: t9)", "unknown dependency `t9`");
/// assert_eq!(e.to_string(), "line 4: unknown dependency `t9`\n    4 | - [ ] t2: b (after: t9)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct PlanError {
    /// The line at fault.
    pub line: Option<usize>,
    /// The text of that line.
    pub text: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl PlanError {
    /// A problem not tied to a line (an unknown id, a state without a plan).
    pub fn general(message: impl Into<String>) -> Self {
        PlanError {
            line: None,
            text: None,
            message: message.into(),
        }
    }

    /// A problem on a line.
    pub fn on_line(line: usize, text: impl Into<String>, message: impl Into<String>) -> Self {
        PlanError {
            line: Some(line),
            text: Some(text.into()),
            message: message.into(),
        }
    }

    fn describe(&self) -> String {
        match (self.line, &self.text) {
            (Some(n), Some(text)) => format!("line {n}: {}\n    {n} | {text}", self.message),
            (Some(n), None) => format!("line {n}: {}", self.message),
            _ => self.message.clone(),
        }
    }
}

/// Reads and edits the plan held in a graph's state, given as JSON (the state's values at a
/// checkpoint). Every edit returns the state update to store, e.g.
/// `{"plan": {"$overwrite": [...]}}`, or a [`PlanError`]; it never changes anything itself.
pub trait PlanEditor: Send + Sync {
    /// The plan as JSON (for `--json`).
    fn plan(&self, state: &Value) -> Result<Value, PlanError>;

    /// The plan as Markdown, the form a person edits.
    fn render(&self, state: &Value) -> Result<String, PlanError>;

    /// The update that replaces the plan with an edited Markdown (as [`render`](Self::render)
    /// made it, then changed). Errors name the line of `markdown` at fault.
    fn apply_markdown(&self, state: &Value, markdown: &str) -> Result<Value, PlanError>;

    /// The update that makes one change.
    fn apply(&self, state: &Value, op: PlanOp) -> Result<Value, PlanError>;
}
