//! Search for stategraph's long-term store: [`IndexedStore`] wraps any
//! [`Store`](stategraph_checkpoint::store::Store) backend (memory, sled, Postgres) and answers
//! text queries, with tantivy over the fields you choose, or by meaning, through an
//! OpenAI-compatible `/embeddings` endpoint when one is configured ([`Embedder`]).
//!
//! Why a crate of its own: the store's contract and backends sit below the engine and must not
//! build tantivy or an HTTP client; a program that searches its items adds this one layer.
//!
//! # Layout
//! - `indexed.rs`: [`IndexedStore`]: the backend selects (namespace prefix, filters), this
//!   ranks what it selected, so the ranking is the same over every backend and always
//!   reflects what the backend holds now (other processes' writes included). A search asked
//!   to refresh TTLs refreshes only the page it returns. Over encrypted items, put it above
//!   `stategraph_crypt::EncryptedStore`: it then indexes opened values, in memory only.
//! - `fields.rs`: [`IndexFields`]: which text of an item is searched.
//! - `text.rs`: the tantivy index (in memory, brought up to date with the backend's items
//!   before each query, re-indexing only items updated since).
//! - `embeddings.rs`: [`Embedder`], the `/embeddings` client (over `stategraph-llm`'s HTTP
//!   layer: timeouts, retries, errors that name the endpoint), and its settings from the
//!   environment.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::sync::Arc;
//! use stategraph_checkpoint::store::{MemoryStore, SearchRequest, Store};
//! use stategraph_store::IndexedStore;
//! let store = IndexedStore::new(Arc::new(MemoryStore::new()))?;
//! store.put(&["users", "ada"], "1", serde_json::json!({"text": "I prefer short answers"})).await?;
//! store.put(&["users", "ada"], "2", serde_json::json!({"text": "My cat is called Miso"})).await?;
//! let hits = store.search(&SearchRequest::under(&["users", "ada"]).text("answers")).await?;
//! assert_eq!(hits[0].item.key, "1");
//! # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
//! ```

// Library code never prints: it returns what it has to say.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod embeddings;
mod fields;
mod indexed;
mod text;

pub use embeddings::{Embedder, EMBEDDINGS_KEY_ENV, EMBEDDINGS_MODEL_ENV, EMBEDDINGS_URL_ENV};
pub use fields::IndexFields;
pub use indexed::IndexedStore;
