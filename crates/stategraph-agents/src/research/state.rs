//! The research agent's state: the question, the plan of [`Todo`]s, the sources collected, the
//! answer, and what the run cost.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::{Keyed, State};
use stategraph_llm::UsageLedger;

/// What kind of work a todo is, which decides how `execute` carries it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Search (the web or a local corpus), read the hits, summarise them.
    #[default]
    Research,
    /// Do the task with tools: with a `workspace` setting, the model↔tool loop (workspace
    /// tools, search, fetch); without one, fetch the first `http(s)://` URL in the task text and
    /// summarise the page (a tool todo without a URL falls back to a search).
    Tool,
}

impl Kind {
    /// The lowercase name used in JSON and in the Markdown plan.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Research => "research",
            Kind::Tool => "tool",
        }
    }

    /// Parses `research` or `tool` (case-insensitive).
    pub fn parse(text: &str) -> Option<Kind> {
        match text.trim().to_ascii_lowercase().as_str() {
            "research" => Some(Kind::Research),
            "tool" => Some(Kind::Tool),
            _ => None,
        }
    }
}

/// Where a todo stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started (or sent back for another attempt).
    #[default]
    Pending,
    /// Being executed or reviewed.
    InProgress,
    /// Finished with a result.
    Done,
    /// Will not run: a dependency failed or is blocked, or it was zoomed out. See its reason.
    Blocked,
    /// Given up on, after its attempts and its escalation. See its reason.
    Failed,
}

impl Status {
    /// The snake_case name used in JSON and edit commands.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Done => "done",
            Status::Blocked => "blocked",
            Status::Failed => "failed",
        }
    }

    /// Parses a status name (`pending`, `in_progress`/`in-progress`, `done`, `blocked`, `failed`).
    pub fn parse(text: &str) -> Option<Status> {
        match text.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "pending" | "todo" => Some(Status::Pending),
            "in_progress" | "running" => Some(Status::InProgress),
            "done" => Some(Status::Done),
            "blocked" => Some(Status::Blocked),
            "failed" => Some(Status::Failed),
            _ => None,
        }
    }

    /// True when the todo will not run again by itself (done, blocked or failed).
    pub fn is_settled(self) -> bool {
        matches!(self, Status::Done | Status::Blocked | Status::Failed)
    }
}

/// One step of the plan. Todos merge by `id`: a node writes only the todos it changed.
///
/// ```
/// use stategraph_agents::research::{Kind, Status, Todo};
/// let todo = Todo::new("t1", "Find who designed sled", Kind::Research).depends_on(["t0"]);
/// assert_eq!(todo.status, Status::Pending);
/// assert_eq!(todo.dependencies, ["t0"]);
/// ```
#[derive(Keyed, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Todo {
    /// Unique within the plan: letters, digits, `.`, `_` and `-`.
    #[key]
    pub id: String,
    /// What to find out or do, in one line.
    pub task: String,
    /// Research or tool.
    #[serde(default)]
    pub kind: Kind,
    /// Where it stands.
    #[serde(default)]
    pub status: Status,
    /// Ids of the todos that must be done before this one runs.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// The findings (a summary citing sources as `[n]`), once executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The numbers of the sources (1-based, into [`PlanState::sources`]) the result rests on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_ids: Vec<usize>,
    /// The tools used, in order (`search`, `corpus`, `fetch`, `synthesis`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_used: Vec<String>,
    /// Executions so far (reset once, when the todo is split into sub-todos).
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed, or why the todo is blocked or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// The todo this one was split from (zoom in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// True once the todo was escalated (split or zoomed out); a todo escalates at most once.
    #[serde(default)]
    pub escalated: bool,
    /// Follow-up todos appended after reviewing this one (capped per todo).
    #[serde(default)]
    pub followups: u32,
    /// The last execution's tool error (no hits, unreachable page), reviewed without a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Model↔tool rounds of the current attempt (tool todos in a workspace): state, so a run
    /// resumed in the middle of a loop goes on with the same count.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rounds: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Todo {
    /// A pending todo without dependencies.
    pub fn new(id: impl Into<String>, task: impl Into<String>, kind: Kind) -> Self {
        Todo {
            id: id.into(),
            task: task.into(),
            kind,
            ..Todo::default()
        }
    }

    /// The same todo with these dependencies.
    pub fn depends_on<I: IntoIterator<Item = T>, T: Into<String>>(mut self, ids: I) -> Self {
        self.dependencies = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The same todo with this status.
    pub fn with_status(mut self, status: Status) -> Self {
        self.status = status;
        self
    }
}

/// A document the research read, cited in answers as `[n]` by its 1-based position in
/// [`PlanState::sources`]. Sources merge by URL, so a page found twice is cited once.
#[derive(Keyed, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Where it is (a web URL or a `file://` URL).
    #[key]
    pub url: String,
    /// Its title.
    pub title: String,
    /// The excerpt that was read.
    pub excerpt: String,
    /// The todo that found it first.
    pub found_by: String,
}

/// Adds one node's model usage to the run's ledger (each update carries only its new calls).
pub fn merge_usage(current: &mut UsageLedger, incoming: UsageLedger) {
    current.merge(&incoming);
}

/// The research agent's state.
///
/// Edit the plan of a paused thread with an explicit overwrite, so a removed todo is really
/// gone (a plain write merges by id and can only add or change todos):
///
/// ```
/// use stategraph_agents::research::{Kind, PlanStateUpdate, Todo};
/// let edited = vec![Todo::new("t1", "Find the release date", Kind::Research)];
/// let update = PlanStateUpdate::default().overwrite_plan(edited);
/// assert_eq!(serde_json::to_value(&update).unwrap()["plan"]["$overwrite"][0]["id"], "t1");
/// ```
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlanState {
    /// The research question (the run's input).
    pub question: String,
    /// The plan, in order. Merges by todo id.
    #[state(merge_by_id)]
    pub plan: Vec<Todo>,
    /// The todo being executed and reviewed.
    pub current_task_id: Option<String>,
    /// True once a person (or `yes = true`) approved the plan.
    pub plan_approved: bool,
    /// Every source read, numbered by position from 1. Merges by URL.
    #[state(merge_by_id)]
    pub sources: Vec<Source>,
    /// The final answer, with numbered citations and the list of sources.
    pub answer: Option<String>,
    /// Model calls and tokens, per node.
    #[state(with = merge_usage)]
    pub usage: UsageLedger,
    /// Todo executions so far (all todos, all attempts).
    #[state(add)]
    pub executions: u32,
    /// Escalations so far (zoom in or zoom out).
    #[state(add)]
    pub escalations: u32,
    /// What happened, one line per event, for people reading a thread's state.
    #[state(append)]
    pub log: Vec<String>,
    /// The conversation of the tool todo being worked on (add-messages reducer; started
    /// afresh for each attempt).
    #[state(with = stategraph_prebuilt::add_messages)]
    #[serde(default)]
    pub messages: Vec<stategraph_llm::Message>,
    /// Model↔tool rounds so far (all tool todos, all attempts).
    #[state(add)]
    #[serde(default)]
    pub rounds: u32,
    /// Shell commands run to verify work (`limits.verify_command`), with their verdicts.
    #[state(append)]
    #[serde(default)]
    pub verifications: Vec<String>,
    /// Set when the agent gave up on the goal: what was tried. The run then fails.
    #[serde(default)]
    pub gave_up: Option<String>,
    /// True when `tool` todos run the model↔tool loop (a workspace is set); routing reads it.
    #[serde(default)]
    pub tool_loop: bool,
}

impl stategraph_prebuilt::MessagesState for PlanState {
    fn messages(&self) -> &[stategraph_llm::Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<stategraph_llm::Message>) -> PlanStateUpdate {
        PlanStateUpdate::default().messages(messages)
    }
}

impl PlanState {
    /// The todo with this id.
    pub fn todo(&self, id: &str) -> Option<&Todo> {
        self.plan.iter().find(|t| t.id == id)
    }

    /// The todo being worked on.
    pub fn current(&self) -> Option<&Todo> {
        self.current_task_id.as_deref().and_then(|id| self.todo(id))
    }
}
