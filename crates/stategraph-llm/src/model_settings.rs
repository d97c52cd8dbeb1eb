//! The model settings an agent reads from its run settings (a graph file's `[settings]` and
//! `--set`s), declared once for every agent: which server and model, how to sample, what it costs.

use super::accounting::Pricing;
use super::provider::ProviderSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The model keys of an agent's settings, meant to be `#[serde(flatten)]`ed into them so they sit
/// at the top level of `[settings]` (`model = "..."`, `[settings.pricing]`).
///
/// `flatten` hides where in the table a bad value was from `serde_path_to_error`, so an agent
/// decodes these keys on their own first (`decode_settings::<ModelSettings>` in the registry),
/// and a mistake in them is named by its key.
///
/// ```
/// use stategraph_llm::ModelSettings;
/// let s: ModelSettings = serde_json::from_value(serde_json::json!({
///     "model": "gpt-4o-mini", "temperature": 0.2, "unrelated": true
/// })).unwrap();
/// assert_eq!(s.provider_settings().model.as_deref(), Some("gpt-4o-mini"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ModelSettings {
    /// The model name (else `GRAPH_MODEL`, else the provider's default).
    pub model: Option<String>,
    /// `openai` (or any OpenAI-compatible server) or `anthropic`; else detected from the
    /// environment.
    pub provider: Option<String>,
    /// The model server's base URL (e.g. a local Ollama).
    pub base_url: Option<String>,
    /// Sampling temperature for every call.
    pub temperature: Option<f32>,
    /// Model prices, so progress and the usage ledger show a cost.
    pub pricing: Option<Pricing>,
}

impl ModelSettings {
    /// Where the model comes from; what is not set here comes from the environment.
    pub fn provider_settings(&self) -> ProviderSettings {
        ProviderSettings {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            ..ProviderSettings::default()
        }
    }
}
