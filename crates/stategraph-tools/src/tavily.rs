//! Web search through Tavily's API (`POST {base}/search`, `Authorization: Bearer`).
//!
//! ```no_run
//! use stategraph_tools::{tavily::TavilySearch, SearchTool};
//! # async fn run() -> Result<(), stategraph_tools::ToolError> {
//! let web = TavilySearch::from_env()?; // TAVILY_API_KEY, optional TAVILY_BASE_URL
//! let hits = web.search("rust async runtimes", 5).await?;
//! # let _ = hits; Ok(()) }
//! ```

use async_trait::async_trait;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde::Deserialize;
use serde_json::json;

use super::{SearchHit, SearchTool, ToolError};
use stategraph_llm::http::{non_empty_env, Endpoint, HttpClient, HttpSettings, Secret};

/// Tavily's API, used when `TAVILY_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

/// How hard Tavily searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchDepth {
    /// Fast, one credit per search.
    #[default]
    Basic,
    /// Slower and more thorough, two credits per search.
    Advanced,
}

/// Settings of a [`TavilySearch`].
#[derive(Clone, Debug)]
pub struct TavilyConfig {
    /// Base URL, without `/search`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`.
    pub api_key: Secret,
    /// `basic` or `advanced`.
    pub search_depth: SearchDepth,
    /// Tavily's `topic` (`general`, `news`, `finance`); left to Tavily when `None`.
    pub topic: Option<String>,
    /// Timeouts and retries.
    pub http: HttpSettings,
}

impl TavilyConfig {
    /// Tavily's API with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        let http = HttpSettings {
            read_timeout: std::time::Duration::from_secs(60),
            ..HttpSettings::default()
        };
        TavilyConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: Secret::new(api_key),
            search_depth: SearchDepth::Basic,
            topic: None,
            http,
        }
    }

    /// Reads `TAVILY_API_KEY` (required) and `TAVILY_BASE_URL`.
    pub fn from_env() -> Result<Self, ToolError> {
        let key = non_empty_env("TAVILY_API_KEY").ok_or_else(|| {
            ToolError::NotConfigured(
                "web search needs TAVILY_API_KEY to be set (or use a local corpus instead)"
                    .to_string(),
            )
        })?;
        let mut config = TavilyConfig::new(key);
        if let Some(base) = non_empty_env("TAVILY_BASE_URL") {
            config.base_url = base;
        }
        Ok(config)
    }

    /// Talks to another server.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets timeouts and retries.
    pub fn with_http(mut self, http: HttpSettings) -> Self {
        self.http = http;
        self
    }

    /// Sets the search depth.
    pub fn with_search_depth(mut self, depth: SearchDepth) -> Self {
        self.search_depth = depth;
        self
    }
}

/// A [`SearchTool`] over Tavily.
#[derive(Clone, Debug)]
pub struct TavilySearch {
    http: HttpClient,
    url: String,
    endpoint: Endpoint,
    auth: HeaderValue,
    key: Secret,
    search_depth: SearchDepth,
    topic: Option<String>,
}

impl TavilySearch {
    /// Builds the client; fails on an invalid base URL or key.
    pub fn new(config: TavilyConfig) -> Result<Self, ToolError> {
        let base = Endpoint::checked_base("Tavily", &config.base_url).map_err(ToolError::Config)?;
        let endpoint = Endpoint::new("Tavily", base.clone()).with_key_var("TAVILY_API_KEY");
        let auth = config
            .api_key
            .auth_header("Tavily", "Bearer ")
            .map_err(ToolError::Config)?;
        Ok(TavilySearch {
            http: HttpClient::new(config.http, &endpoint)?,
            url: format!("{base}/search"),
            endpoint,
            auth,
            key: config.api_key,
            search_depth: config.search_depth,
            topic: config.topic,
        })
    }

    /// [`TavilyConfig::from_env`], then [`new`](Self::new).
    pub fn from_env() -> Result<Self, ToolError> {
        TavilySearch::new(TavilyConfig::from_env()?)
    }
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Vec<WireHit>,
}

#[derive(Deserialize)]
struct WireHit {
    #[serde(default)]
    title: Option<String>,
    url: String,
    #[serde(default)]
    content: Option<String>,
}

#[async_trait]
impl SearchTool for TavilySearch {
    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<SearchHit>, ToolError> {
        if query.trim().is_empty() {
            return Err(ToolError::Config("the search query is empty".to_string()));
        }
        // Tavily accepts 0..=20 results per search.
        let limit = max_results.clamp(1, 20);
        let mut body = json!({
            "query": query,
            "max_results": limit,
            "search_depth": match self.search_depth {
                SearchDepth::Basic => "basic",
                SearchDepth::Advanced => "advanced",
            },
            "include_answer": false,
        });
        if let Some(topic) = &self.topic {
            body["topic"] = json!(topic);
        }
        let response: Response = self
            .http
            .send_json(&self.endpoint, Some(&self.key), |client| {
                client
                    .post(&self.url)
                    .header(AUTHORIZATION, self.auth.clone())
                    .json(&body)
            })
            .await?;
        Ok(response
            .results
            .into_iter()
            .take(max_results)
            .map(|hit| SearchHit {
                title: hit
                    .title
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| hit.url.clone()),
                url: hit.url,
                content: hit.content.unwrap_or_default(),
            })
            .collect())
    }
}
