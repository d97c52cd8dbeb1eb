//! Page fetch: an HTTP GET that returns readable text, within a size and a time limit.
//!
//! HTML is reduced to its readable text (scripts, styles and navigation dropped); other
//! text (`text/plain`, Markdown, JSON, XML) is passed through; binary content (images, PDFs,
//! archives) is refused with [`ToolError::UnsupportedContent`] before its body is read.
//! Bodies are read up to [`FetchConfig::max_bytes`] and the rest is not downloaded.
//!
//! ```no_run
//! use stategraph_tools::fetch::{FetchConfig, PageFetcher};
//! # async fn run() -> Result<(), stategraph_tools::ToolError> {
//! let fetcher = PageFetcher::new(FetchConfig::default())?;
//! let page = fetcher.fetch("https://example.com/").await?;
//! println!("{:?}\n{}", page.title, page.text);
//! # Ok(()) }
//! ```

use std::time::Duration;

use super::html::extract;
use super::{SearchHit, ToolError};
use stategraph_llm::http::{body_error, Endpoint, HttpClient, HttpSettings, RetryPolicy};

/// Limits of a [`PageFetcher`].
#[derive(Clone, Debug)]
pub struct FetchConfig {
    /// Bytes of body read at most; the page is marked truncated past that.
    pub max_bytes: usize,
    /// Time for the whole fetch, retries and body included.
    pub timeout: Duration,
    /// Connect/read timeouts and retries of each attempt.
    pub http: HttpSettings,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            max_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(20),
            http: HttpSettings {
                connect_timeout: Duration::from_secs(10),
                read_timeout: Duration::from_secs(15),
                retry: RetryPolicy {
                    max_retries: 1,
                    ..RetryPolicy::default()
                },
                ..HttpSettings::default()
            },
        }
    }
}

/// A fetched page.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchedPage {
    /// The final URL, after redirects.
    pub url: String,
    /// The HTML `<title>` (or first `<h1>`), when there is one.
    pub title: Option<String>,
    /// The readable text.
    pub text: String,
    /// The content type the server sent (or the one guessed when it sent none).
    pub content_type: String,
    /// True when the body was longer than the size limit and was cut.
    pub truncated: bool,
}

impl FetchedPage {
    /// The page as a search hit (title falling back to the URL).
    pub fn to_hit(&self) -> SearchHit {
        SearchHit {
            title: self.title.clone().unwrap_or_else(|| self.url.clone()),
            url: self.url.clone(),
            content: self.text.clone(),
        }
    }
}

/// Fetches pages. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PageFetcher {
    http: HttpClient,
    max_bytes: usize,
    timeout: Duration,
}

enum Kind {
    Html,
    Text,
}

impl PageFetcher {
    /// A fetcher with these limits.
    pub fn new(config: FetchConfig) -> Result<Self, ToolError> {
        let http = HttpClient::new(config.http, &Endpoint::new("page fetch", "(any)"))?;
        Ok(PageFetcher {
            http,
            max_bytes: config.max_bytes,
            timeout: config.timeout,
        })
    }

    /// Fetches `url` (http or https) and returns its readable text.
    pub async fn fetch(&self, url: &str) -> Result<FetchedPage, ToolError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| ToolError::Config(format!("`{url}` is not a valid URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ToolError::Config(format!(
                "`{url}` is not an http(s) URL; only web pages can be fetched"
            )));
        }
        match tokio::time::timeout(self.timeout, self.fetch_inner(parsed)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::TimedOut {
                url: url.to_string(),
                seconds: self.timeout.as_secs_f64(),
            }),
        }
    }

    async fn fetch_inner(&self, url: reqwest::Url) -> Result<FetchedPage, ToolError> {
        let endpoint = Endpoint::new("page fetch", url.as_str());
        let mut response = self
            .http
            .send(&endpoint, None, |client| {
                client.get(url.clone()).header(
                    reqwest::header::ACCEPT,
                    "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
                )
            })
            .await?;
        let final_url = response.url().to_string();
        let declared = declared_type(&response);
        let declared_kind = match declared.as_deref() {
            Some(ct) => Some(kind_of(ct).ok_or_else(|| ToolError::UnsupportedContent {
                url: final_url.clone(),
                content_type: ct.to_string(),
            })?),
            None => None,
        };
        let (body, truncated) = read_body(&mut response, &endpoint, self.max_bytes).await?;
        let (kind, content_type) = match (declared_kind, declared) {
            (Some(kind), Some(ct)) => (kind, ct),
            _ => sniff(&body).ok_or_else(|| ToolError::UnsupportedContent {
                url: final_url.clone(),
                content_type: "application/octet-stream (no content type sent)".to_string(),
            })?,
        };
        let (title, text) = readable(kind, body).await?;
        Ok(FetchedPage {
            url: final_url,
            title,
            text,
            content_type,
            truncated,
        })
    }
}

/// The response's content type without its parameters, lowercase; `None` when it sent none.
fn declared_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
}

/// The body, read up to `max_bytes`, and whether it was cut there.
async fn read_body(
    response: &mut reqwest::Response,
    endpoint: &Endpoint,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool), ToolError> {
    let mut body = Vec::new();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| ToolError::Http(body_error(endpoint, &e, None)))?;
        let Some(chunk) = chunk else { break };
        let room = max_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            // The caller drops the response, which closes the connection: the rest is never
            // read.
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The page's title and readable text.
async fn readable(kind: Kind, body: Vec<u8>) -> Result<(Option<String>, String), ToolError> {
    Ok(match kind {
        // Parsing is CPU work (and grows quadratically with nesting depth in html5ever),
        // so it runs off the async worker threads, still inside the fetch's time limit.
        Kind::Html => tokio::task::spawn_blocking(move || extract(&String::from_utf8_lossy(&body)))
            .await
            .map_err(|e| ToolError::Config(format!("reading the page failed: {e}")))?,
        Kind::Text => (None, String::from_utf8_lossy(&body).trim().to_string()),
    })
}

/// How a declared content type is read; `None` for binary types.
fn kind_of(content_type: &str) -> Option<Kind> {
    match content_type {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        ct if ct.starts_with("text/") => Some(Kind::Text),
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-yaml"
        | "application/yaml"
        | "application/toml" => Some(Kind::Text),
        ct if ct.ends_with("+json") || ct.ends_with("+xml") => Some(Kind::Text),
        _ => None,
    }
}

/// A guess for a body sent without a content type: NUL bytes mean binary.
fn sniff(body: &[u8]) -> Option<(Kind, String)> {
    let head = &body[..body.len().min(1024)];
    if head.contains(&0) {
        return None;
    }
    let start = String::from_utf8_lossy(head)
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<body")
    {
        Some((Kind::Html, "text/html".to_string()))
    } else {
        Some((Kind::Text, "text/plain".to_string()))
    }
}
