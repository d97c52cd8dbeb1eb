//! The task-tree agent's settings, read from the run settings (the graph file's `[settings]`
//! table plus `--set` overrides) with defaults for everything.
//!
//! ```
//! use stategraph_agents::tree::TreeSettings;
//! let mut map = serde_json::Map::new();
//! map.insert("max_nodes".into(), serde_json::json!(8));
//! let s = TreeSettings::from_map(&map).unwrap();
//! assert_eq!((s.max_nodes, s.max_children), (8, 6));
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph_llm::provider::ProviderSettings;
use stategraph_llm::ModelSettings;
use stategraph_registry::decode_settings;

/// Settings that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("task-tree settings: {0}")]
pub struct SettingsError(pub String);

/// System prompts, each replacing a built-in one of [`prompts`](super::prompts) when set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TreePrompts {
    /// For decomposing a task into children.
    pub decompose: Option<String>,
    /// For solving one task.
    pub solve: Option<String>,
}

/// Bounds on a solve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TreeLimits {
    /// Model calls one solve may make: all but the last may read files of the tree
    /// (`list_dir`, `read_file`, `search_files`); 1 offers no tools at all.
    pub max_rounds: u32,
}

impl Default for TreeLimits {
    fn default() -> Self {
        TreeLimits { max_rounds: 6 }
    }
}

/// Everything the agent reads from the run settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TreeSettings {
    /// The model: which server and model, sampling, prices (read on their own first: see
    /// [`ModelSettings`]).
    #[serde(flatten)]
    pub llm: ModelSettings,
    /// Most decomposition calls one `decompose` makes (`--max-nodes` overrides it).
    pub max_nodes: u32,
    /// Most children one decomposition may create.
    pub max_children: usize,
    /// Most characters of each child's or dependency's result shown to a solve (the rest is
    /// in that task's plan file).
    pub max_result_chars: usize,
    /// Bounds on a solve.
    pub limits: TreeLimits,
    /// Prompt overrides.
    pub prompts: TreePrompts,
}

impl Default for TreeSettings {
    fn default() -> Self {
        TreeSettings {
            llm: ModelSettings::default(),
            max_nodes: 5,
            max_children: 6,
            max_result_chars: 6000,
            limits: TreeLimits::default(),
            prompts: TreePrompts::default(),
        }
    }
}

impl TreeSettings {
    /// Reads the settings; keys the agent does not know are ignored at the top level (other
    /// tools share the table) but refused inside `prompts`, where they are most likely typos.
    pub fn from_map(
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, SettingsError> {
        // The model's keys on their own first: read through `flatten`, a mistake in them would
        // not be named by its key.
        decode_settings::<ModelSettings>(map).map_err(SettingsError)?;
        let settings: TreeSettings = decode_settings(map).map_err(SettingsError)?;
        if settings.max_nodes == 0 {
            return Err(SettingsError("`max_nodes` must be at least 1".into()));
        }
        if settings.limits.max_rounds == 0 {
            return Err(SettingsError(
                "`limits.max_rounds` must be at least 1".into(),
            ));
        }
        if settings.max_children == 0 {
            return Err(SettingsError("`max_children` must be at least 1".into()));
        }
        Ok(settings)
    }

    /// Where the model comes from.
    pub fn provider(&self) -> ProviderSettings {
        self.llm.provider_settings()
    }
}
