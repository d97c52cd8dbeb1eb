//! [`Embedder`]: text to vectors through an OpenAI-compatible `POST {base}/embeddings` (OpenAI,
//! Ollama, vLLM, llama.cpp's server, LM Studio), over `stategraph-llm`'s HTTP layer.

use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde::Deserialize;
use stategraph_checkpoint::store::StoreError;
use stategraph_llm::http::{non_empty_env, Endpoint, HttpClient, HttpSettings, Secret};

/// The embeddings endpoint's base URL (`https://api.openai.com/v1`); semantic search is off
/// when it is unset.
pub const EMBEDDINGS_URL_ENV: &str = "GRAPH_EMBEDDINGS_URL";
/// The embeddings model (default `text-embedding-3-small`).
pub const EMBEDDINGS_MODEL_ENV: &str = "GRAPH_EMBEDDINGS_MODEL";
/// The embeddings endpoint's key (else `OPENAI_API_KEY`; none for a local server).
pub const EMBEDDINGS_KEY_ENV: &str = "GRAPH_EMBEDDINGS_API_KEY";

const DEFAULT_MODEL: &str = "text-embedding-3-small";
const PROVIDER: &str = "OpenAI-compatible embeddings API";
/// Texts per request: endpoints cap the batch (OpenAI at 2048 inputs).
const BATCH: usize = 256;

/// An OpenAI-compatible embeddings client.
///
/// ```no_run
/// # async fn demo() -> Result<(), stategraph_checkpoint::store::StoreError> {
/// use stategraph_store::Embedder;
/// let embedder = Embedder::new("http://127.0.0.1:11434/v1", "nomic-embed-text", None)?;
/// let vectors = embedder.embed(&["I like tea".to_string()]).await?;
/// assert_eq!(vectors.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Embedder {
    http: HttpClient,
    url: String,
    endpoint: Endpoint,
    model: String,
    auth: Option<HeaderValue>,
    key: Option<Secret>,
}

#[derive(Deserialize)]
struct Reply {
    data: Vec<Embedding>,
}

#[derive(Deserialize)]
struct Embedding {
    index: usize,
    embedding: Vec<f32>,
}

impl Embedder {
    /// A client for `base_url` (without `/embeddings`) and `model`, with the default timeouts
    /// and retries.
    pub fn new(base_url: &str, model: &str, key: Option<Secret>) -> Result<Self, StoreError> {
        Self::with_http(base_url, model, key, HttpSettings::default())
    }

    /// As [`new`](Self::new), with these timeouts and retries.
    pub fn with_http(
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        http: HttpSettings,
    ) -> Result<Self, StoreError> {
        let config = |e: String| StoreError::Search(e);
        let base = Endpoint::checked_base("embeddings", base_url).map_err(config)?;
        let endpoint = Endpoint::new(PROVIDER, base.clone())
            .with_model(model)
            .with_key_var(EMBEDDINGS_KEY_ENV);
        let auth = key
            .as_ref()
            .map(|k| k.auth_header("embeddings", "Bearer "))
            .transpose()
            .map_err(config)?;
        Ok(Embedder {
            http: HttpClient::new(http, &endpoint).map_err(|e| config(e.to_string()))?,
            url: format!("{base}/embeddings"),
            endpoint,
            model: model.to_string(),
            auth,
            key,
        })
    }

    /// The embedder the environment configures ([`EMBEDDINGS_URL_ENV`] and the others), or
    /// `None` when [`EMBEDDINGS_URL_ENV`] is unset.
    pub fn from_env() -> Result<Option<Self>, StoreError> {
        let Some(url) = non_empty_env(EMBEDDINGS_URL_ENV) else {
            return Ok(None);
        };
        let model = non_empty_env(EMBEDDINGS_MODEL_ENV).unwrap_or_else(|| DEFAULT_MODEL.into());
        let key =
            Secret::from_env(EMBEDDINGS_KEY_ENV).or_else(|| Secret::from_env("OPENAI_API_KEY"));
        Self::new(&url, &model, key).map(Some)
    }

    /// The model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// One vector per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
        let body = serde_json::json!({"model": self.model, "input": texts});
        let build = |client: &reqwest::Client| {
            let builder = client.post(&self.url).json(&body);
            match &self.auth {
                Some(auth) => builder.header(AUTHORIZATION, auth.clone()),
                None => builder,
            }
        };
        let reply: Reply = self
            .http
            .send_json(&self.endpoint, self.key.as_ref(), build)
            .await
            .map_err(|e| StoreError::Search(e.to_string()))?;
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in reply.data {
            if let Some(slot) = vectors.get_mut(item.index) {
                *slot = Some(item.embedding);
            }
        }
        vectors
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| {
                    StoreError::Search(format!(
                        "{} answered without an embedding for input {i} of {}",
                        self.endpoint.target(),
                        texts.len()
                    ))
                })
            })
            .collect()
    }
}

/// How alike two vectors point: 1 the same direction, 0 unrelated; 0 for an empty or zero one.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    dot / (aa.sqrt() * bb.sqrt())
}
