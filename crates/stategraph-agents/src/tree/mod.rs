//! The task-tree agent: decompose a task file into a tree of task files, let a person edit
//! them, then solve the tree leaves first, dependencies before the tasks that need them.
//!
//! The Markdown files and folders *are* the tree, and they are the plan: every step reads them
//! again, so what a person changed is what the next step works from. The checkpoints keep only
//! what the files do not: what a decomposition did, what was solved with which inputs, the
//! results, and the journal of model calls.
//!
//! ```text
//! tasks/
//! ├── web_scraper.md               the task (written by a person)
//! ├── web_scraper_plan.md          ## Analysis, ## Children, ## Progress, ## Result
//! └── web_scraper_children/
//!     ├── fetch_urls.md            # Title, ## Type, ## Summary, ### Dependents
//!     ├── fetch_urls_plan.md       ## Progress, ## Result
//!     ├── extract_data.md          a complex child, decomposed in turn
//!     └── extract_data_children/
//! ```
//!
//! The graph (registered as `tree`):
//!
//! ```text
//! START --(mode = decompose)--> decompose --(more to do)--> decompose
//!   |                               |
//!   |                               +--(done)--> review (pause) --> next_task
//!   +--(mode = solve)------------------------------------------------> next_task
//! next_task --(a task to solve)--> work --> finish_task --> next_task
//!     +--------(nothing left)--> END
//! ```
//!
//! - `decompose` makes one decomposition per step: the first complex task without children
//!   (depth first; the root counts as complex unless it says otherwise) not decomposed yet by
//!   this decomposition (the seen-set, `decomposed`) is given to the model, which answers with
//!   a [`TaskPlan`]; the plan is checked against the tree (file-safe names, dependents that
//!   resolve, no cycle) and sent back with the problem when it does not fit. Then the engine
//!   writes `{name}_plan.md` and `{name}_children/{child}.md` (a child file that already
//!   exists is kept as found; no file is ever moved). At most `max_nodes` decompositions per
//!   decomposition run (input `max_nodes`, else the setting, default 5).
//! - `review` pauses with the tree. Any answer continues to solving.
//! - `next_task` reads and checks the tree ([`TaskTree::load_solvable`]: a file that cannot be
//!   read as a task, a broken link or a cycle fails the step, naming files and lines) and picks
//!   the first task of the post-order that is not solved with its current inputs
//!   ([`SolvePlan`]): never solved, its file edited since, or built on a task solved again.
//! - `work` asks the model to solve it, given the tree with `[YOU ARE HERE]`, the task file
//!   and the results of its children and dependencies ([`solve_request`]); the call is
//!   journaled, so a kill after the model answered does not pay again on resume.
//! - `finish_task` records the result and writes `## Progress` and `## Result` into the task's
//!   `{name}_plan.md` (never into the task file) and the progress of its ancestors.
//!
//! Settings: see [`TreeSettings`] and `graphs/tree.toml`.
//!
//! A front end reaches the workflow (check the files, start or continue a decomposition or a
//! solve, show where each task stands) through the registry's
//! [`TaskFiles`](stategraph_registry::TaskFiles) capability, which [`TreeGraph`] hands out as
//! [`TreeWorkflow`].

mod cycles;
mod decompose;
mod disk;
mod markdown;
mod nodes;
mod paths;
mod plan_file;
mod problem;
pub mod prompts;
mod reading;
mod settings;
mod solve;
mod state;
mod task_file;
mod task_tree;
mod workflow;

pub use decompose::{
    decompose_request, prepare, slug, to_decompose, ChildFile, Decomposition, PlannedChild,
    TaskPlan, WriteReport,
};
pub use paths::{children_dir, plan_path, relative_link, resolve_link};
pub use plan_file::PlanFile;
pub use problem::{Problem, TreeError};
pub use reading::READING_TOOLS;
pub use settings::{SettingsError, TreeLimits, TreePrompts, TreeSettings};
pub use solve::{inputs, progress_text, solve_request, Reason, SolvePlan};
pub use state::{
    decompose_input, merge_usage, solve_input, CurrentTask, Mode, SolvedTask, TreeState,
    TreeStateUpdate,
};
pub use task_file::{render_task, FormatError, TaskFile, TaskLink, TaskType};
pub use task_tree::{Task, TaskTree, TreeView};
pub use workflow::TreeWorkflow;

use stategraph::graph::{CompiledGraph, GraphError, RetryPolicy, StateGraph};
use stategraph::runtime::Context;
use stategraph::{END, START};
use stategraph_llm::provider::{self, LazyModel};
use stategraph_llm::ChatModel;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, SettingsSchema, TaskFiles};
use std::sync::Arc;

/// What the nodes share: the model.
pub struct TreeAgent {
    model: Arc<dyn ChatModel>,
}

impl TreeAgent {
    /// An agent calling `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        TreeAgent { model }
    }
}

/// The task-tree graph, uncompiled (see the [module docs](self) for its shape).
///
/// ```
/// use std::sync::Arc;
/// use stategraph_agents::tree::{graph, TreeAgent};
/// use stategraph_llm::FakeChatModel;
/// let compiled = graph(Arc::new(TreeAgent::new(Arc::new(FakeChatModel::new())))).compile().unwrap();
/// assert_eq!(compiled.node_names(), ["decompose", "review", "next_task", "work", "finish_task"]);
/// ```
pub fn graph(agent: Arc<TreeAgent>) -> StateGraph<TreeState> {
    // Only transient failures (rate limits, 5xx, timeouts) are retried.
    let retry = || RetryPolicy::new(3);
    let mut g = StateGraph::<TreeState>::named("tree");
    let a = agent.clone();
    g.add_node("decompose", move |s: Arc<TreeState>, ctx: Context| {
        let a = a.clone();
        async move { nodes::decompose(&a, s, ctx).await }
    })
    .retry(retry());
    g.add_node("review", nodes::review);
    g.add_node("next_task", nodes::next_task);
    g.add_node("work", move |s: Arc<TreeState>, ctx: Context| {
        let a = agent.clone();
        async move { nodes::work(&a, s, ctx).await }
    })
    .retry(retry());
    g.add_node("finish_task", nodes::finish_task);
    g.add_conditional_edges(
        START,
        |s: &TreeState| match s.mode {
            Mode::Decompose => "decompose",
            Mode::Solve => "next_task",
        },
        ["decompose", "next_task"],
    )
    .label("mode");
    g.add_conditional_edges(
        "decompose",
        |s: &TreeState| {
            if s.decompose_done {
                "review"
            } else {
                "decompose"
            }
        },
        ["decompose", "review"],
    )
    .label("more to decompose?");
    g.add_edge("review", "next_task");
    g.add_conditional_edges(
        "next_task",
        |s: &TreeState| if s.current.is_some() { "work" } else { END },
        ["work", END],
    )
    .label("a task to solve?");
    g.add_edge("work", "finish_task")
        .add_edge("finish_task", "next_task");
    g
}

/// The compiled task-tree graph over `model`.
pub fn build(model: Arc<dyn ChatModel>) -> Result<CompiledGraph<TreeState>, GraphError> {
    graph(Arc::new(TreeAgent::new(model))).compile()
}

/// Registers the task-tree agent under the name `tree`, with `graphs/tree.toml` built in.
/// Without an injected model, the model is made from the settings (`model`, `provider`,
/// `base_url`) and the environment on its first call; before a run,
/// [`preflight`](GraphFactory::preflight) fails at once, saying what to set, when none is
/// configured. It hands out [`TreeWorkflow`] as its [`TaskFiles`], so a front end runs the
/// decompose, review and solve workflow by the graph's name alone.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_agents::tree::TreeGraph;
/// use stategraph_llm::FakeChatModel;
/// use stategraph_registry::Registry;
/// let mut registry = Registry::new();
/// registry.register(TreeGraph::with_model(Arc::new(FakeChatModel::new())));
/// let resolved = registry.resolve("tree", &[]).unwrap();
/// assert!(resolved.preflight().is_ok());
/// assert!(resolved.factory.task_files().is_some());
/// ```
#[derive(Clone, Default)]
pub struct TreeGraph {
    model: Option<Arc<dyn ChatModel>>,
}

impl TreeGraph {
    /// The factory that builds its model from the settings and the environment.
    pub fn from_env() -> Self {
        TreeGraph::default()
    }

    /// A factory whose graphs call `model` (tests, embedders).
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        TreeGraph { model: Some(model) }
    }
}

impl GraphFactory for TreeGraph {
    type State = TreeState;

    fn name(&self) -> &str {
        "tree"
    }

    fn description(&self) -> &str {
        "Task tree: decompose a task file into task files, pause for edits, solve leaves first"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/tree.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        Some("task")
    }

    fn output_field(&self) -> Option<&str> {
        Some("result")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Some(SettingsSchema::of::<TreeSettings>())
    }

    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<TreeState>, BuildError> {
        let settings = settings_of(file)?;
        let model: Arc<dyn ChatModel> = match &self.model {
            Some(model) => model.clone(),
            None => Arc::new(LazyModel::new(settings.provider())),
        };
        Ok(build(model)?)
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        let settings = settings_of(file)?;
        if self.model.is_none() {
            provider::from_env(settings.provider()).map_err(BuildError::from_model)?;
        }
        Ok(())
    }

    fn task_files(&self) -> Option<Arc<dyn TaskFiles>> {
        Some(Arc::new(TreeWorkflow))
    }
}

fn settings_of(file: &GraphFile) -> Result<TreeSettings, BuildError> {
    TreeSettings::from_map(&file.settings).map_err(|e| BuildError::Setting {
        key: "settings".into(),
        message: e.0,
    })
}
