//! What the research and tool agents remember of a user across threads, when the settings
//! turn it on (`[settings.memory]`, `enabled = true`): each run's question is kept in the
//! long-term store (`ctx.store()`) under `memories/{user}`, one item per thread, and a new
//! plan is written knowing the user's earlier questions that best match this one.
//!
//! The item is written by `generate_plan` and so saved with its step: a plan step killed and
//! run again leaves one item, not two. Without a store (a run given none) memory is off.
//!
//! ```toml
//! [settings.memory]
//! enabled = true
//! user = "ada"     # whose memories (default "default")
//! recall = 5       # how many earlier questions the planner sees
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::store::SearchRequest;
use stategraph::runtime::{Context, NodeError};

/// `[settings.memory]`: what the agent remembers of a user across threads.
///
/// ```
/// use stategraph_agents::research::ResearchSettings;
/// let mut map = serde_json::Map::new();
/// map.insert("memory".into(), serde_json::json!({"enabled": true, "user": "ada"}));
/// let s = ResearchSettings::from_map(&map).unwrap();
/// assert!(s.memory.enabled);
/// assert_eq!((s.memory.user.as_str(), s.memory.recall), ("ada", 5));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySettings {
    /// Keep each run's question and show the planner the user's earlier ones (needs a run
    /// given a long-term store: the `graph` command gives every run one).
    pub enabled: bool,
    /// Whose memories: the namespace `memories/{user}`.
    pub user: String,
    /// How many earlier questions the planner is shown (the best matches).
    pub recall: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            enabled: false,
            user: "default".into(),
            recall: 5,
        }
    }
}

/// The user's earlier questions that best match `question`, as a paragraph for the planner's
/// prompt (empty when memory is off or there are none).
pub(crate) async fn recall(
    ctx: &Context,
    memory: &MemorySettings,
    question: &str,
) -> Result<String, NodeError> {
    let Some(store) = ctx.store().filter(|_| memory.enabled) else {
        return Ok(String::new());
    };
    let request = SearchRequest::under(&["memories", &memory.user])
        .text(question)
        .limit(memory.recall);
    let earlier: Vec<String> = store
        .search(&request)
        .await?
        .into_iter()
        .filter(|hit| hit.item.key != ctx.thread_id())
        .filter_map(|hit| hit.item.value["question"].as_str().map(str::to_string))
        .collect();
    if earlier.is_empty() {
        return Ok(String::new());
    }
    let lines: Vec<String> = earlier.iter().map(|q| format!("- {q}")).collect();
    Ok(format!(
        "What this user asked in earlier conversations:\n{}\n\n",
        lines.join("\n")
    ))
}

/// Keeps this thread's question under the user's memories.
pub(crate) async fn remember(
    ctx: &Context,
    memory: &MemorySettings,
    question: &str,
) -> Result<(), NodeError> {
    let Some(store) = ctx.store().filter(|_| memory.enabled) else {
        return Ok(());
    };
    let value = serde_json::json!({"question": question, "thread": ctx.thread_id()});
    store
        .put(&["memories", &memory.user], ctx.thread_id(), value)
        .await
}
