//! The model the registered agent calls, built from the settings and the environment on its
//! first call, so building the graph (to list, draw or inspect threads) needs no key.

use crate::llm::provider::{self, ProviderSettings};
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError};
use async_trait::async_trait;
use std::sync::{Arc, OnceLock};

/// A [`ChatModel`] made by [`provider::from_env`] on first use. Without a configured provider
/// every call fails with [`LlmError::NotConfigured`], which is not transient, so a node fails
/// at once instead of retrying; the CLI's preflight reports the same error before a run starts.
pub(crate) struct LazyModel {
    settings: ProviderSettings,
    model: OnceLock<Arc<dyn ChatModel>>,
}

impl LazyModel {
    pub(crate) fn new(settings: ProviderSettings) -> Self {
        LazyModel {
            settings,
            model: OnceLock::new(),
        }
    }

    fn get(&self) -> Result<Arc<dyn ChatModel>, LlmError> {
        if let Some(model) = self.model.get() {
            return Ok(model.clone());
        }
        let built = provider::from_env(self.settings.clone())?;
        // Two first calls racing may both build one; either is fine, the first is kept.
        Ok(self.model.get_or_init(|| built).clone())
    }
}

#[async_trait]
impl ChatModel for LazyModel {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.get()?.chat(request).await
    }
}
