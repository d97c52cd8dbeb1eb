//! The research agent's settings, read from the run settings (the graph file's `[settings]`
//! table plus `--set` overrides) with defaults for everything.
//!
//! ```
//! use stategraph_agents::research::ResearchSettings;
//! let mut map = serde_json::Map::new();
//! map.insert("search".into(), serde_json::json!({"corpus": "notes/"}));
//! map.insert("limits".into(), serde_json::json!({"max_todos": 5}));
//! let s = ResearchSettings::from_map(&map).unwrap();
//! assert_eq!(s.limits.max_todos, 5);
//! assert_eq!(s.limits.max_attempts_per_todo, 2);
//! assert!(s.search.uses_corpus());
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph_llm::ModelSettings;
use stategraph_mcp::McpSettings;
use stategraph_registry::decode_settings;
use std::path::PathBuf;

/// Settings that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("research settings: {0}")]
pub struct SettingsError(pub String);

/// Caps that keep a run finite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most todos in the plan, follow-ups and sub-todos included.
    pub max_todos: usize,
    /// Most follow-up todos appended after reviewing one todo.
    pub max_followups_per_todo: usize,
    /// Executions of one todo before it is escalated.
    pub max_attempts_per_todo: u32,
    /// Most sub-todos a todo is split into when it is escalated (zoom in).
    pub max_subtasks: usize,
    /// Model↔tool rounds (model calls) of one attempt at a top-level tool todo before it is
    /// escalated.
    pub max_rounds: u32,
    /// The same for a sub-todo (one added by escalation).
    pub max_rounds_per_subtask: u32,
    /// A shell command run in the workspace that decides whether work is done (exit code 0),
    /// e.g. `python3 -m pytest -q`: checked when a decomposed todo's sub-todos finish.
    pub verify_command: Option<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_todos: 12,
            max_followups_per_todo: 2,
            max_attempts_per_todo: 2,
            max_subtasks: 3,
            max_rounds: 16,
            max_rounds_per_subtask: 8,
            verify_command: None,
        }
    }
}

/// Where research todos search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// A local corpus when `corpus` is set, else the web.
    #[default]
    Auto,
    /// The web, through Tavily (`TAVILY_API_KEY`).
    Web,
    /// The local folder `corpus`.
    Corpus,
}

/// Search settings (`[settings.search]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SearchSettings {
    /// Web, corpus, or auto.
    pub provider: SearchProvider,
    /// The folder of .md, .txt and .html files to search instead of the web.
    #[schemars(schema_with = "stategraph_registry::path_setting")]
    pub corpus: Option<PathBuf>,
    /// Hits read per search.
    pub max_results: usize,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            provider: SearchProvider::Auto,
            corpus: None,
            max_results: 5,
        }
    }
}

impl SearchSettings {
    /// True when searches go to the local corpus.
    pub fn uses_corpus(&self) -> bool {
        match self.provider {
            SearchProvider::Corpus => true,
            SearchProvider::Web => false,
            SearchProvider::Auto => self
                .corpus
                .as_ref()
                .is_some_and(|p| !p.as_os_str().is_empty()),
        }
    }
}

/// System prompts, each replacing a built-in one of [`prompts`](super::prompts) when set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Prompts {
    /// For `generate_plan`.
    pub plan: Option<String>,
    /// For `execute`'s summary.
    pub execute: Option<String>,
    /// For `reflect`.
    pub reflect: Option<String>,
    /// For splitting a todo (escalation).
    pub split: Option<String>,
    /// For a tool todo's model↔tool loop.
    pub act: Option<String>,
    /// For choosing an escalation when a tool todo is stuck (`Escalation`).
    pub escalate: Option<String>,
    /// For `finalize`.
    pub finalize: Option<String>,
}

/// Everything the agent reads from the run settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ResearchSettings {
    /// The model: which server and model, sampling, prices (read on their own first: see
    /// [`ModelSettings`]).
    #[serde(flatten)]
    pub llm: ModelSettings,
    /// Skip the plan review pause.
    pub yes: bool,
    /// Caps.
    pub limits: Limits,
    /// Search.
    pub search: SearchSettings,
    /// Prompt overrides.
    pub prompts: Prompts,
    /// The folder tool todos work in (created if missing). When set, `tool` todos run the
    /// model↔tool loop with the workspace tools (and search, fetch and the `mcp` servers'
    /// tools); when neither it nor `mcp` servers are, a tool todo fetches the URL named in its
    /// task.
    #[schemars(schema_with = "stategraph_registry::path_setting")]
    pub workspace: Option<PathBuf>,
    /// Pause before each `run_command`, showing it; resume with `yes`, `no` or an edited
    /// command line.
    pub approve_commands: bool,
    /// MCP servers whose tools the model↔tool loop offers beside the built-in ones
    /// (`[settings.mcp.servers.NAME]`: `command` + `args` + `env`, or `url` + `headers`/`token`).
    pub mcp: McpSettings,
    /// MCP tools whose calls pause for approval, as `SERVER.TOOL` (e.g. `fs.write_file`);
    /// resume with `yes`, `no` or the edited arguments as a JSON object.
    pub approve_tools: Vec<String>,
    /// Remembering the user's questions across threads in the long-term store (`memory.rs`).
    pub memory: super::MemorySettings,
}

impl ResearchSettings {
    /// True when `tool` todos run the model↔tool loop: a workspace is set (its tools), or MCP
    /// servers are (theirs); otherwise a tool todo fetches the URL named in its task.
    ///
    /// ```
    /// use stategraph_agents::research::ResearchSettings;
    /// // [settings] approve_tools = [...], [settings.mcp.servers.fs] command = ..., args = [...]
    /// let map = serde_json::json!({
    ///     "approve_tools": ["fs.write_file"],
    ///     "mcp": {"servers": {"fs": {"command": "mcp-server-filesystem", "args": ["/srv/notes"]}}}
    /// }).as_object().unwrap().clone();
    /// let s = ResearchSettings::from_map(&map).unwrap();
    /// assert!(s.uses_tool_loop() && s.workspace.is_none());
    /// assert_eq!(s.mcp.servers["fs"].args, ["/srv/notes"]);
    /// // An approval must name a configured server.
    /// let mut typo = map.clone();
    /// typo.insert("approve_tools".into(), serde_json::json!(["git.commit"]));
    /// assert!(ResearchSettings::from_map(&typo).unwrap_err().0.contains("git.commit"));
    /// ```
    pub fn uses_tool_loop(&self) -> bool {
        self.workspace.is_some() || !self.mcp.is_empty()
    }

    /// Reads the settings; keys the agent does not know are ignored at the top level (other
    /// tools share the table) but refused inside `limits`, `search` and `prompts`, where they
    /// are most likely typos.
    pub fn from_map(
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, SettingsError> {
        // The model's keys on their own first: read through `flatten`, a mistake in them would
        // not be named by its key.
        decode_settings::<ModelSettings>(map).map_err(SettingsError)?;
        let settings: ResearchSettings = decode_settings(map).map_err(SettingsError)?;
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), SettingsError> {
        let l = &self.limits;
        if l.max_todos == 0 {
            return Err(SettingsError(
                "`limits.max_todos` must be at least 1".into(),
            ));
        }
        if l.max_attempts_per_todo == 0 {
            return Err(SettingsError(
                "`limits.max_attempts_per_todo` must be at least 1".into(),
            ));
        }
        if l.max_rounds == 0 || l.max_rounds_per_subtask == 0 {
            return Err(SettingsError(
                "`limits.max_rounds` and `limits.max_rounds_per_subtask` must be at least 1".into(),
            ));
        }
        if self.search.max_results == 0 {
            return Err(SettingsError(
                "`search.max_results` must be at least 1".into(),
            ));
        }
        if self.search.provider == SearchProvider::Corpus && self.search.corpus.is_none() {
            return Err(SettingsError(
                "`search.provider` is `corpus` but `search.corpus` names no folder".into(),
            ));
        }
        self.mcp
            .check()
            .and_then(|()| self.mcp.check_approvals(&self.approve_tools))
            .map_err(|e| SettingsError(e.to_string()))
    }
}
