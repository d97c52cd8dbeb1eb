//! The research agent: plans a question into todos, lets a person review the plan, executes
//! each todo (search or tool, then a summary with sources), reviews each result, and writes
//! an answer with numbered citations.
//!
//! ```text
//! START -> generate_plan -> planning_mode -> execution_router --(a todo is ready)--> execute -> reflect
//!                                               ^     |                                          |
//!                                               |     +--(nothing left)--> finalize -> END       |
//!                                               +------------------------------------------------+
//!                                               +-- escalate <-- (a todo reached its attempt cap)+
//!
//! execution_router --(tool todo, workspace set)--> act <--> tools        (model↔tool rounds)
//!                                                   |--(finished)--> reflect
//!                                                   +--(round limit)--> escalate_tool --> execution_router
//!                                                                            +--(give up)--> give_up (fails)
//! ```
//!
//! - `generate_plan` asks for a structured `Plan`; a plan with duplicate ids, unknown
//!   dependencies, a cycle or too many todos is sent back to the model with the problem, then
//!   the run fails with it. A plan given as input is kept as is (after validation).
//! - `planning_mode` pauses with the plan (Markdown and JSON) unless the setting `yes` is
//!   true. Resume with `approve`, or with an edited plan (Markdown or a JSON list of todos); an
//!   invalid edit pauses again with the problem named. While paused, the plan can also be
//!   changed with `update_state` and an explicit overwrite of `plan`
//!   (`PlanStateUpdate::default().overwrite_plan(todos)`, built with [`apply_edit`] or
//!   [`apply_markdown`]); a plain write merges by id and cannot remove a todo.
//! - `execution_router` is a node plus a router: the node writes what routing decides
//!   (todos blocked by a failed or blocked dependency, with the reason; the next todo as
//!   `current_task_id`), so every decision is in a checkpoint and visible in the thread's
//!   history; the router then only reads `current_task_id`.
//! - `execute` runs one todo: research todos search (web or a local corpus), tool todos fetch
//!   the URL in their task; a todo split into sub-todos synthesises their results instead.
//!   Search and model calls are journaled with `Context::record`, so a crash after the model
//!   answered does not pay for the call again on resume.
//! - `reflect` asks for a structured `PlanUpdate` whose JSON schema is narrowed at run time:
//!   `completed_task_id` to the current todo's id, dependencies to existing ids. Follow-ups are
//!   appended (ids made here, within the caps); a failed todo is tried again until its attempt
//!   cap, then sent to `escalate`.
//! - `act` and `tools` (a `tool` todo when the setting `workspace` names a folder): the
//!   model↔tool loop with the workspace tools plus search and fetch; every model call and every
//!   tool call is journaled (tools by tool-call id), so a resume never repeats a finished one.
//!   The loop's rounds are counted on the todo; at `limits.max_rounds` (`max_rounds_per_subtask`
//!   for a sub-todo) it goes to `escalate_tool`, which asks for a structured `Escalation`
//!   (`decompose` | `zoom_out` | `give_up`); `execution_router` settles decomposed todos once
//!   their sub-todos settle (done, verified with `limits.verify_command`, or re-planned), and
//!   `give_up` ends the run as a failure with what was tried. With `approve_commands = true`
//!   each `run_command` pauses for `yes`, `no` or an edited command line.
//! - `escalate` zooms in (the model splits the todo into sub-todos with `parent` set; the todo
//!   then waits for them and synthesises their results) or, when the todo cannot be split
//!   (it is a sub-todo, it was split already, the plan is full, or splitting failed), zooms
//!   out: the todo is blocked with its reason and the rest of the plan goes on without it
//!   (its dependents are blocked in turn). A split todo whose sub-todos fail is given up
//!   (`failed`), its reason naming the whole chain.
//! - `finalize` writes the answer citing sources `[n]` and appends the numbered source list.
//!
//! Limits (`[settings.limits]`) cap todos, follow-ups per todo and attempts per todo, so a run
//! always ends; the graph file adds a recursion limit as a last guard. Every model request
//! (retries of an unusable structured reply, and a split that failed, included) is added to the
//! state's [`UsageLedger`](stategraph_llm::UsageLedger) (`usage`); those of a step that failed are
//! kept in its task's journal and added when the step runs again and succeeds.
//!
//! Settings: see [`ResearchSettings`] and `graphs/research.toml`.
//!
//! Registered as `research` by [`Research`], whose model is made on its first call (so the
//! graph builds, draws and shows stored threads with no key; the preflight before a run says
//! how to configure one) and whose [`ResearchPlanEditor`] lets `graph plan THREAD` show and edit
//! a paused run's plan without the command line knowing this agent. Its plan is also written
//! as `plan.md` into the run's folder after every checkpoint (see [`artifacts()`]); an edit of
//! that file is picked up by `graph resume` as the reviewed plan.

mod artifacts;
mod memory;
mod nodes;
mod plan;
mod plan_edit;
mod plan_editor;
mod plan_markdown;
pub mod prompts;
mod settings;
mod state;
mod toolbox;

pub use artifacts::{artifacts, PLAN_FILE};
pub use memory::MemorySettings;
pub use nodes::escalate::{Split, SubTask};
pub use nodes::generate_plan::{Plan, PlannedTodo};
pub use nodes::reflect::{plan_update_schema, NewTask, PlanUpdate, TaskOutcome};
pub use plan::{is_valid_id, validate_plan, PlanProblem};
pub use plan_edit::{apply_edit, next_id, MoveTo, PlanEdit};
pub use plan_editor::ResearchPlanEditor;
pub use plan_markdown::{apply_markdown, parse, render, PlanEditError};
pub use settings::{
    Limits, Prompts, ResearchSettings, SearchProvider, SearchSettings, SettingsError,
};
pub use state::{merge_usage, Kind, PlanState, PlanStateUpdate, Source, Status, Todo};
pub use toolbox::{command_approval, FetchArgs, SearchArgs};

use stategraph::graph::{CompiledGraph, GraphError, RetryPolicy, StateGraph};
use stategraph::runtime::{Context, NodeError};
use stategraph::{END, START};
use stategraph_artifacts::ArtifactSet;
use stategraph_llm::provider::{self, LazyModel, ProviderSettings};
use stategraph_llm::ChatModel;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, PlanEditor, SettingsSchema};
use stategraph_tools::corpus::CorpusSearch;
use stategraph_tools::fetch::{FetchConfig, PageFetcher};
use stategraph_tools::tavily::TavilySearch;
use stategraph_tools::SearchTool;
use std::sync::{Arc, Mutex};

/// What the nodes share: the model, an optional fixed search tool, and tools opened lazily
/// from the run settings.
pub struct ResearchAgent {
    model: Arc<dyn ChatModel>,
    search: Option<Arc<dyn SearchTool>>,
    // std Mutexes: held only to read or store an Arc, never across an await.
    opened: Mutex<Option<(String, Arc<dyn SearchTool>)>>,
    fetcher: Mutex<Option<PageFetcher>>,
    // A tokio Mutex: opening the search tool and starting MCP servers for the loop await
    // while holding it. Keyed by the settings it was made for.
    tool_nodes: tokio::sync::Mutex<Option<(String, Arc<stategraph_prebuilt::ToolNode>)>>,
}

impl ResearchAgent {
    /// An agent calling `model`; searches follow the run's `search` settings.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph_agents::research::{graph, ResearchAgent};
    /// use stategraph_llm::FakeChatModel;
    /// let agent = ResearchAgent::new(Arc::new(FakeChatModel::new()));
    /// let compiled = graph(Arc::new(agent)).compile().unwrap();
    /// assert!(compiled.node_names().contains(&"reflect"));
    /// ```
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ResearchAgent {
            model,
            search: None,
            opened: Mutex::new(None),
            fetcher: Mutex::new(None),
            tool_nodes: tokio::sync::Mutex::new(None),
        }
    }

    /// Searches with `tool` whatever the settings say (tests, custom engines).
    pub fn with_search(mut self, tool: Arc<dyn SearchTool>) -> Self {
        self.search = Some(tool);
        self
    }

    /// The model.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// The search tool for these settings and the name recorded in `tools_used`.
    pub(crate) async fn search_tool(
        &self,
        s: &SearchSettings,
    ) -> Result<(Arc<dyn SearchTool>, &'static str), NodeError> {
        if let Some(tool) = &self.search {
            return Ok((tool.clone(), "search"));
        }
        let corpus = s.uses_corpus().then(|| s.corpus.clone()).flatten();
        let key = match &corpus {
            Some(path) => format!("corpus:{}", path.display()),
            None => "web".to_string(),
        };
        let name = if corpus.is_some() { "corpus" } else { "search" };
        if let Some((k, tool)) = self
            .opened
            .lock()
            .map_err(|_| NodeError::new("search tool cache poisoned"))?
            .as_ref()
        {
            if *k == key {
                return Ok((tool.clone(), name));
            }
        }
        let tool: Arc<dyn SearchTool> = match corpus {
            Some(path) => {
                // Indexing reads every file: keep it off the async threads.
                let opened = tokio::task::spawn_blocking(move || CorpusSearch::open(path))
                    .await
                    .map_err(|e| NodeError::new(format!("opening the corpus failed: {e}")))?
                    .map_err(|e| NodeError::new(format!("search.corpus: {e}")))?;
                Arc::new(opened)
            }
            None => Arc::new(TavilySearch::from_env().map_err(|e| {
                NodeError::new(format!(
                    "{e}; to search a local folder instead, set search.corpus"
                ))
            })?),
        };
        if let Ok(mut cache) = self.opened.lock() {
            *cache = Some((key, tool.clone()));
        }
        Ok((tool, name))
    }

    pub(crate) fn fetcher(&self) -> Result<PageFetcher, NodeError> {
        let mut slot = self
            .fetcher
            .lock()
            .map_err(|_| NodeError::new("page fetcher cache poisoned"))?;
        if let Some(f) = slot.as_ref() {
            return Ok(f.clone());
        }
        let f =
            PageFetcher::new(FetchConfig::default()).map_err(|e| NodeError::new(e.to_string()))?;
        *slot = Some(f.clone());
        Ok(f)
    }
}

/// The research graph, uncompiled (see the [module docs](self) for its shape).
pub fn graph(agent: Arc<ResearchAgent>) -> StateGraph<PlanState> {
    graph_named(agent, "research")
}

/// The research graph under another name: the name its checkpoints carry, so a graph built on
/// this one (the tool-using `agent`) is listed as what the user ran.
pub(crate) fn graph_named(agent: Arc<ResearchAgent>, name: &str) -> StateGraph<PlanState> {
    let mut g = StateGraph::<PlanState>::named(name);
    add_nodes(&mut g, &agent);
    add_edges(&mut g);
    g
}

/// The nodes, each a function of [`nodes`] called with the agent; their retries, and the
/// destinations of those that route by command.
fn add_nodes(g: &mut StateGraph<PlanState>, agent: &Arc<ResearchAgent>) {
    // Only transient failures (rate limits, 5xx, timeouts) are retried; a run never retries a
    // refused plan or a bad setting.
    let retry = || RetryPolicy::new(3);
    macro_rules! node {
        ($name:literal, $module:ident :: $function:ident) => {{
            let agent = agent.clone();
            g.add_node($name, move |s: Arc<PlanState>, ctx: Context| {
                let agent = agent.clone();
                async move { nodes::$module::$function(&agent, s, ctx).await }
            })
        }};
    }
    node!("generate_plan", generate_plan::run).retry(retry());
    node!("planning_mode", planning_mode::run);
    node!("execution_router", execution_router::run);
    node!("execute", execute::run).retry(retry());
    node!("reflect", reflect::run).retry(retry()).destinations([
        "execution_router",
        "escalate",
        "escalate_tool",
    ]);
    node!("escalate", escalate::run).retry(retry());
    node!("finalize", finalize::run).retry(retry());
    node!("act", tool_loop::act)
        .retry(retry())
        .destinations(["tools", "reflect", "escalate_tool"]);
    node!("tools", tool_loop::tools);
    node!("escalate_tool", escalate_tool::run)
        .retry(retry())
        .destinations(["execution_router", "give_up"]);
    node!("give_up", escalate_tool::give_up);
}

/// The fixed edges, and the router after `execution_router`.
fn add_edges(g: &mut StateGraph<PlanState>) {
    g.add_edge(START, "generate_plan")
        .add_edge("generate_plan", "planning_mode")
        .add_edge("planning_mode", "execution_router")
        .add_edge("execute", "reflect")
        .add_edge("escalate", "execution_router")
        .add_edge("tools", "act")
        // Never taken: `give_up` fails the run. The edge keeps the graph valid and drawable.
        .add_edge("give_up", END)
        .add_edge("finalize", END);
    g.add_conditional_edges(
        "execution_router",
        after_execution_router,
        ["execute", "act", "finalize", "give_up"],
    )
    .label("a todo is ready?");
}

/// Where `execution_router` leads: `give_up` once the run gave up; the current todo to the
/// tool loop (`act`) or to `execute`; `finalize` when no todo is left to run.
fn after_execution_router(s: &PlanState) -> &'static str {
    if s.gave_up.is_some() {
        return "give_up";
    }
    match s.current() {
        Some(todo) if s.tool_loop && todo.kind == Kind::Tool => "act",
        Some(_) => "execute",
        None => "finalize",
    }
}

/// The compiled research graph over `model`, searching per the run settings.
pub fn build(model: Arc<dyn ChatModel>) -> Result<CompiledGraph<PlanState>, GraphError> {
    graph(Arc::new(ResearchAgent::new(model))).compile()
}

/// Registers the research agent under the name `research`, with `graphs/research.toml` built
/// in, and its [`ResearchPlanEditor`] for `graph plan`. Without an injected model, the model is
/// made from the model settings (`model`, `provider`, `base_url`) and the environment on its
/// first call, so the graph can be built, drawn and its threads inspected with no key; before a
/// run, [`preflight`](GraphFactory::preflight) fails at once, saying how to configure a model,
/// when none is configured (and when the search settings cannot work).
///
/// ```
/// use std::sync::Arc;
/// use stategraph_agents::research::Research;
/// use stategraph_llm::FakeChatModel;
/// use stategraph_registry::Registry;
/// let mut registry = Registry::new();
/// registry.register(Research::with_model(Arc::new(FakeChatModel::new())));
/// let resolved = registry.resolve("research", &["search.corpus=.".parse().unwrap()]).unwrap();
/// assert!(resolved.preflight().is_ok());
/// assert!(resolved.build(None).is_ok());
/// ```
#[derive(Clone, Default)]
pub struct Research {
    model: Option<Arc<dyn ChatModel>>,
    search: Option<Arc<dyn SearchTool>>,
}

impl Research {
    /// The factory that builds its model from the settings and the environment.
    pub fn from_env() -> Self {
        Research::default()
    }

    /// A factory whose graphs call `model` (tests, embedders).
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        Research {
            model: Some(model),
            search: None,
        }
    }

    /// Searches with `tool` whatever the settings say.
    pub fn with_search(mut self, tool: Arc<dyn SearchTool>) -> Self {
        self.search = Some(tool);
        self
    }

    /// The graph of `file`, named `name` (its checkpoints' graph): the build of every factory
    /// built on this one, each under its own name.
    pub(crate) fn build_named(
        &self,
        file: &GraphFile,
        name: &str,
    ) -> Result<CompiledGraph<PlanState>, BuildError> {
        let settings = settings_of(file)?;
        let model: Arc<dyn ChatModel> = match &self.model {
            Some(model) => model.clone(),
            None => Arc::new(LazyModel::new(provider_settings(&settings))),
        };
        let mut agent = ResearchAgent::new(model);
        if let Some(tool) = &self.search {
            agent = agent.with_search(tool.clone());
        }
        Ok(graph_named(Arc::new(agent), name).compile()?)
    }

    /// Checks that a model can be made for a run of `file` (always, with an injected model):
    /// the model part of [`preflight`](GraphFactory::preflight), for graphs built on this one.
    pub fn check_model(&self, file: &GraphFile) -> Result<(), BuildError> {
        if self.model.is_none() {
            let settings = settings_of(file)?;
            provider::from_env(provider_settings(&settings)).map_err(BuildError::from_model)?;
        }
        Ok(())
    }
}

impl GraphFactory for Research {
    type State = PlanState;

    fn name(&self) -> &str {
        "research"
    }

    fn description(&self) -> &str {
        "Research a question: plan todos, review the plan, search and read, reflect, answer with citations"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/research.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        Some("question")
    }

    fn output_field(&self) -> Option<&str> {
        Some("answer")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Some(SettingsSchema::of::<ResearchSettings>())
    }

    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<PlanState>, BuildError> {
        self.build_named(file, GraphFactory::name(self))
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        let settings = settings_of(file)?;
        self.check_model(file)?;
        if self.search.is_none() {
            check_search(&settings.search)?;
        }
        check_mcp(&settings)
    }

    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>> {
        Some(Arc::new(ResearchPlanEditor))
    }

    fn failure(&self, state: &PlanState) -> Option<String> {
        failure_of(state)
    }

    fn artifacts(&self, _file: &GraphFile) -> Option<ArtifactSet<PlanState>> {
        Some(artifacts())
    }
}

/// Why a finished research run failed: no todo of its plan succeeded (is done with a result),
/// so its answer only says what could not be found.
///
/// ```
/// use stategraph_agents::research::{failure_of, Kind, PlanState, Status, Todo};
/// let mut state = PlanState::default();
/// state.plan = vec![Todo::new("t1", "a", Kind::Research).with_status(Status::Failed)];
/// assert!(failure_of(&state).unwrap().contains("no todo of the plan succeeded"));
/// let mut done = Todo::new("t2", "b", Kind::Research).with_status(Status::Done);
/// done.result = Some("found it".into());
/// state.plan.push(done);
/// assert_eq!(failure_of(&state), None);
/// ```
pub fn failure_of(state: &PlanState) -> Option<String> {
    let succeeded = |t: &Todo| t.status == Status::Done && t.result.is_some();
    if state.plan.is_empty() || state.plan.iter().any(succeeded) {
        return None;
    }
    let count = |status: Status| state.plan.iter().filter(|t| t.status == status).count();
    Some(format!(
        "no todo of the plan succeeded ({} failed, {} blocked, {} not run)",
        count(Status::Failed),
        count(Status::Blocked),
        count(Status::Pending) + count(Status::InProgress)
    ))
}

/// The research settings of `file` (a bad one is a [`BuildError::Setting`]).
pub fn settings_of(file: &GraphFile) -> Result<ResearchSettings, BuildError> {
    ResearchSettings::from_map(&file.settings).map_err(|e| BuildError::Setting {
        key: "settings".into(),
        message: e.0,
    })
}

pub(crate) fn provider_settings(settings: &ResearchSettings) -> ProviderSettings {
    settings.llm.provider_settings()
}

/// Fails fast on MCP servers that cannot start here (a command not found, a token variable not
/// set), rather than after the plan was paid for.
pub(crate) fn check_mcp(settings: &ResearchSettings) -> Result<(), BuildError> {
    settings.mcp.preflight().map_err(|e| {
        let key = match &e {
            stategraph_mcp::McpError::CommandNotFound { server, .. } => {
                format!("mcp.servers.{server}.command")
            }
            stategraph_mcp::McpError::Setting { server, .. } => format!("mcp.servers.{server}"),
            _ => "mcp.servers".to_string(),
        };
        BuildError::Setting {
            key,
            message: e.to_string(),
        }
    })
}

/// Fails fast on search settings that cannot work, rather than after the plan was paid for.
fn check_search(s: &SearchSettings) -> Result<(), BuildError> {
    if s.uses_corpus() {
        let path = s.corpus.clone().unwrap_or_default();
        if !path.is_dir() {
            return Err(BuildError::Setting {
                key: "search.corpus".into(),
                message: format!("{} is not a folder", path.display()),
            });
        }
    } else if stategraph_llm::http::non_empty_env("TAVILY_API_KEY").is_none() {
        return Err(BuildError::Setting {
            key: "search.provider".into(),
            message:
                "web search needs TAVILY_API_KEY; to search a local folder of .md, .txt or .html \
                      files instead, set search.corpus to it"
                    .into(),
        });
    }
    Ok(())
}
