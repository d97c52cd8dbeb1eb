//! The task-tree agent's state. The files are the plan: the state holds only what the files do
//! not (what this decomposition has done, what was solved with which inputs, the results, and
//! what the calls cost).

use serde::{Deserialize, Serialize};
use stategraph::{Keyed, State};
use stategraph_llm::{Message, UsageLedger};

/// What a run on the tree does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decompose complex tasks into children, then pause for a person to review the files.
    #[default]
    Decompose,
    /// Solve the tree as the files now stand, leaves first.
    Solve,
}

/// A task solved by the run: what it was solved with, and its result. Merges by `path`.
#[derive(Keyed, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SolvedTask {
    /// The task file, relative to the root task's folder.
    #[key]
    pub path: String,
    /// Its title when solved.
    pub title: String,
    /// BLAKE3 of the task file when solved: another hash means it was edited since.
    pub file_hash: String,
    /// BLAKE3 over the file and the fingerprints of its children and dependencies: when any
    /// of them changes, so does this one, and the task is solved again.
    pub fingerprint: String,
    /// The children and dependencies whose results it was solved with.
    pub inputs: Vec<String>,
    /// Its result.
    pub result: String,
    /// The step it was solved at.
    pub step: u64,
}

/// The task being solved, with the prompt made for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CurrentTask {
    /// The task file, relative to the root task's folder.
    pub path: String,
    /// Its title.
    pub title: String,
    /// See [`SolvedTask::file_hash`].
    pub file_hash: String,
    /// See [`SolvedTask::fingerprint`].
    pub fingerprint: String,
    /// See [`SolvedTask::inputs`].
    pub inputs: Vec<String>,
    /// Why it is solved now (not solved yet, edited since, ...).
    pub reason: String,
    /// The conversation the model is given.
    pub messages: Vec<Message>,
    /// The model's result, once it answered.
    pub result: Option<String>,
}

/// Adds one node's model usage to the run's ledger (each update carries only its new calls).
pub fn merge_usage(current: &mut UsageLedger, incoming: UsageLedger) {
    current.merge(&incoming);
}

/// The task-tree agent's state.
///
/// ```
/// use stategraph_agents::tree::{Mode, TreeStateUpdate};
/// // What `graph solve web_scraper.md` starts a run with.
/// let input = TreeStateUpdate::default().task("/work/web_scraper.md".to_string()).mode(Mode::Solve);
/// assert_eq!(serde_json::to_value(&input).unwrap()["mode"], "solve");
/// ```
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct TreeState {
    /// The root task file (the run's input); an absolute path keeps the thread usable from
    /// any folder.
    pub task: String,
    /// What the run does.
    pub mode: Mode,
    /// Most decomposition calls for this decomposition; the setting `max_nodes` when `None`.
    pub max_nodes: Option<u32>,
    /// The task files this decomposition decomposed, in order: its seen-set (a file in it is
    /// never decomposed again) and its count of calls.
    pub decomposed: Vec<String>,
    /// True once this decomposition has nothing left to do.
    pub decompose_done: bool,
    /// Complex tasks left without children because the node limit was reached.
    pub not_decomposed: Vec<String>,
    /// Every task solved, with its result. Merges by path.
    #[state(merge_by_id)]
    pub solved: Vec<SolvedTask>,
    /// The task being solved.
    pub current: Option<CurrentTask>,
    /// The root task's result, once the whole tree is solved.
    pub result: Option<String>,
    /// Model calls and tokens, per node.
    #[state(with = merge_usage)]
    pub usage: UsageLedger,
    /// What happened, one line per event, for people reading a thread's state.
    #[state(append)]
    pub log: Vec<String>,
}

/// The input of a decomposition of the tree rooted at `task`: a fresh seen-set and count, at
/// most `max_nodes` calls (the setting `max_nodes` when `None`).
///
/// ```
/// use stategraph_agents::tree::{decompose_input, Mode};
/// let input = serde_json::to_value(decompose_input("/work/app.md", Some(3))).unwrap();
/// assert_eq!((input["mode"].as_str(), input["max_nodes"].as_u64()), (Some("decompose"), Some(3)));
/// assert_eq!(input["decomposed"], serde_json::json!([]));
/// ```
pub fn decompose_input(task: &str, max_nodes: Option<u32>) -> TreeStateUpdate {
    TreeStateUpdate::default()
        .task(task.to_string())
        .mode(Mode::Decompose)
        .max_nodes(max_nodes)
        .decomposed(Vec::new())
        .decompose_done(false)
        .not_decomposed(Vec::new())
}

/// The input of a solve of the tree rooted at `task`.
pub fn solve_input(task: &str) -> TreeStateUpdate {
    TreeStateUpdate::default()
        .task(task.to_string())
        .mode(Mode::Solve)
        .current(None)
}

impl TreeState {
    /// The record of the task at `path`, when it was solved.
    pub fn solved_task(&self, path: &str) -> Option<&SolvedTask> {
        self.solved.iter().find(|s| s.path == path)
    }
}
