//! Where agents look things up and act: web search ([`tavily`]), search over a local folder of
//! documents ([`corpus`]), reading a page ([`fetch`]), and tools a model calls ([`tool`]:
//! the [`Tool`] trait, typed tools from functions, a [`Toolbox`] that turns every failure into
//! a result the model reads), and the tools confined to one folder ([`workspace`]).
//!
//! Both searchers implement [`SearchTool`] and return [`SearchHit`]s of the same shape, so an
//! agent written against the trait runs online (Tavily) or offline (a user's own folder)
//! unchanged. HTTP timeouts, retries and error rules are shared with the model clients
//! ([`stategraph_llm::http`]).
//!
//! ```no_run
//! use stategraph_tools::{corpus::CorpusSearch, SearchTool};
//! # async fn run() -> Result<(), stategraph_tools::ToolError> {
//! let docs = CorpusSearch::open("./notes")?;
//! for hit in docs.search("checkpoint format", 5).await? {
//!     println!("{} ({})\n  {}", hit.title, hit.url, hit.content);
//! }
//! # Ok(()) }
//! ```

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod corpus;
pub mod fetch;
mod html;
pub mod tavily;
pub mod tool;
pub mod workspace;

use std::path::PathBuf;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use stategraph_llm::http::HttpError;

pub use html::html_to_text;
pub use tool::{tool_fn, Tool, ToolFailure, ToolResult, Toolbox};

/// One search result: what it is, where it is, and the relevant text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    /// The page or document title.
    pub title: String,
    /// Where it is: a web URL, or a `file://` URL for a local document.
    pub url: String,
    /// A relevant excerpt.
    pub content: String,
}

/// A search engine: a query in, ranked hits out.
#[async_trait]
pub trait SearchTool: Send + Sync {
    /// Returns at most `max_results` hits for `query`, best first.
    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<SearchHit>, ToolError>;
}

/// Why a tool failed. Messages never contain an API key.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ToolError {
    /// The tool needs settings that are missing (e.g. `TAVILY_API_KEY`).
    #[error("{0}")]
    NotConfigured(String),
    /// Invalid settings or arguments.
    #[error("{0}")]
    Config(String),
    /// The HTTP exchange failed.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The corpus folder does not exist or is not a folder.
    #[error("corpus folder {} does not exist or is not a folder", path.display())]
    CorpusMissing {
        /// The folder.
        path: PathBuf,
    },
    /// The corpus folder has no .md, .markdown, .txt, .html or .htm files.
    #[error("corpus folder {} has no .md, .txt or .html files to index", path.display())]
    CorpusEmpty {
        /// The folder.
        path: PathBuf,
    },
    /// Reading a file failed.
    #[error("could not read {}: {detail}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        detail: String,
    },
    /// The full-text index failed.
    #[error("search index error: {0}")]
    Index(String),
    /// A fetched page is not text (an image, a PDF, an archive...).
    #[error("{url} is `{content_type}`, not a text or HTML page")]
    UnsupportedContent {
        /// The page.
        url: String,
        /// Its content type.
        content_type: String,
    },
    /// A fetch did not finish within its time limit.
    #[error("fetching {url} took longer than {seconds:.1}s")]
    TimedOut {
        /// The page.
        url: String,
        /// The limit.
        seconds: f64,
    },
}

impl ToolError {
    /// True when trying again later may succeed (rate limits, server errors, timeouts,
    /// connection failures).
    pub fn is_transient(&self) -> bool {
        match self {
            ToolError::Http(e) => e.is_transient(),
            ToolError::TimedOut { .. } => true,
            _ => false,
        }
    }

    /// True when the caller (a node's retry policy) should try again: transient, and not an
    /// HTTP error the client has already retried (see
    /// [`LlmError::should_retry`](stategraph_llm::LlmError::should_retry)).
    pub fn should_retry(&self) -> bool {
        !matches!(self, ToolError::Http(_)) && self.is_transient()
    }
}
