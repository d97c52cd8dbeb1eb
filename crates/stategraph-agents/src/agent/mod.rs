//! The tool-using agent (`graph run agent`): the plan-execute-reflect graph of
//! [`research`](super::research) with every todo of kind `tool`, worked through in a workspace
//! folder with the model↔tool loop, bounded by round limits and escalation (decompose, zoom
//! out, give up), verified with `limits.verify_command`, and reported.
//!
//! ```text
//! graph run agent --input "Create a package mathx with 5 modules, each with tests; pytest must pass" \
//!     --set workspace=./ws --set limits.verify_command="python3 -m pytest -q"
//! graph plan <thread>     # its todos, including those added by escalation
//! ```
//!
//! It shares the research agent's state ([`PlanState`]), `Plan` and `PlanUpdate` structured
//! outputs, Todo fields and plan editor, so `graph plan` shows and edits its plan the same way;
//! its graph file (`graphs/agent.toml`) sets the prompts for coding and file work, skips the plan
//! review (`yes = true`; set `yes=false` to review it) and names a default workspace.

use std::sync::Arc;

use crate::research::{check_mcp, settings_of, PlanState, Research};
use stategraph::graph::CompiledGraph;
use stategraph_llm::ChatModel;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, PlanEditor, SettingsSchema};

/// Registers the tool-using agent as `agent`, with `graphs/agent.toml` built in.
///
/// ```
/// use std::sync::Arc;
/// use stategraph_agents::agent::Agent;
/// use stategraph_llm::FakeChatModel;
/// use stategraph_registry::Registry;
/// let mut registry = Registry::new();
/// registry.register(Agent::with_model(Arc::new(FakeChatModel::new())));
/// let resolved = registry.resolve("agent", &["workspace=./ws".parse().unwrap()]).unwrap();
/// assert!(resolved.preflight().is_ok());
/// assert!(resolved.build(None).is_ok());
/// ```
#[derive(Clone, Default)]
pub struct Agent {
    /// What it is built on: the research agent, with no fixed search tool.
    research: Research,
}

impl Agent {
    /// The factory that builds its model from the settings and the environment.
    pub fn from_env() -> Self {
        Agent::default()
    }

    /// A factory whose graphs call `model` (tests, embedders).
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        Agent {
            research: Research::with_model(model),
        }
    }
}

/// Its own name, description and graph file; the rest is the research agent's, except the
/// checks before a run (a workspace, and no search settings: its todos use the workspace).
impl GraphFactory for Agent {
    type State = PlanState;

    fn name(&self) -> &str {
        "agent"
    }

    fn description(&self) -> &str {
        "Work toward a goal with tools in a workspace: plan tool todos, act with a model/tool loop, escalate when stuck, verify, report"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/agent.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        self.research.input_field()
    }

    fn output_field(&self) -> Option<&str> {
        self.research.output_field()
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        self.research.settings_schema()
    }

    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<PlanState>, BuildError> {
        // Its checkpoints name it `agent`, as `graph threads` lists them.
        self.research.build_named(file, GraphFactory::name(self))
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        let settings = settings_of(file)?;
        if settings.workspace.is_none() {
            return Err(BuildError::Setting {
                key: "workspace".into(),
                message: "the agent works in a folder, and none is set".into(),
            });
        }
        check_mcp(&settings)?;
        self.research.check_model(file)
    }

    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>> {
        self.research.plan_editor()
    }

    fn failure(&self, state: &PlanState) -> Option<String> {
        self.research.failure(state)
    }
}
