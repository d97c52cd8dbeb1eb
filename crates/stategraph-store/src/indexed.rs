//! [`IndexedStore`]: any backend, with text and semantic queries.

use crate::embeddings::{cosine, Embedder};
use crate::fields::IndexFields;
use crate::text::TextIndex;
use async_trait::async_trait;
use stategraph_checkpoint::store::{
    Item, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Item id -> (its update time, its vector).
type Vectors = HashMap<String, (u64, Arc<Vec<f32>>)>;

/// A backend with search: writes and structural reads go to the backend; a search with a
/// query asks the backend for what the namespace prefix and filters select, then ranks those
/// by the query, best first: by meaning with an [`Embedder`], else by words (tantivy's BM25
/// over [`IndexFields`], where an item without any of the query's words is no match).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{MemoryStore, SearchRequest, Store};
/// use stategraph_store::{IndexFields, IndexedStore};
/// let store = IndexedStore::new(Arc::new(MemoryStore::new()))?.fields(IndexFields::only(&["text"]));
/// store.put(&["notes"], "a", serde_json::json!({"text": "the deploy key rotates monthly", "by": "tea"})).await?;
/// let hits = store.search(&SearchRequest::under(&["notes"]).text("tea")).await?;
/// assert!(hits.is_empty(), "`by` is not a searched field");
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
pub struct IndexedStore {
    inner: Arc<dyn Store>,
    fields: IndexFields,
    embedder: Option<Embedder>,
    // std Mutexes: held only between awaits, never across one.
    text: Mutex<TextIndex>,
    vectors: Mutex<Vectors>,
}

fn id_of(item: &Item) -> String {
    format!("{}\u{1e}{}", item.namespace.join("\u{1f}"), item.key)
}

impl IndexedStore {
    /// `inner` with text search over every string of an item's value.
    pub fn new(inner: Arc<dyn Store>) -> Result<Self, StoreError> {
        Ok(IndexedStore {
            inner,
            fields: IndexFields::all(),
            embedder: None,
            text: Mutex::new(TextIndex::new()?),
            vectors: Mutex::default(),
        })
    }

    /// Searches only these fields.
    pub fn fields(mut self, fields: IndexFields) -> Self {
        self.fields = fields;
        self
    }

    /// Ranks queries by meaning through `embedder`.
    pub fn with_embedder(mut self, embedder: Embedder) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The backend.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn poisoned() -> StoreError {
        StoreError::Search("an earlier search panicked; open the store again".into())
    }

    fn rank_by_words(&self, query: &str, items: &[Item]) -> Result<Vec<(String, f32)>, StoreError> {
        let ids: Vec<String> = items.iter().map(id_of).collect();
        let mut text = self.text.lock().map_err(|_| Self::poisoned())?;
        text.update(items.iter().zip(&ids).map(|(item, id)| {
            (
                id.as_str(),
                item.updated_at_ms,
                self.fields.text_of(&item.value),
            )
        }))?;
        let among: HashSet<&str> = ids.iter().map(String::as_str).collect();
        text.rank(query, &among)
    }

    async fn rank_by_meaning(
        &self,
        embedder: &Embedder,
        query: &str,
        items: &[Item],
    ) -> Result<Vec<(String, f32)>, StoreError> {
        let ids: Vec<String> = items.iter().map(id_of).collect();
        let missing: Vec<usize> = {
            let vectors = self.vectors.lock().map_err(|_| Self::poisoned())?;
            (0..items.len())
                .filter(|&i| {
                    vectors.get(&ids[i]).map(|(at, _)| *at) != Some(items[i].updated_at_ms)
                })
                .collect()
        };
        let mut texts: Vec<String> = missing
            .iter()
            .map(|&i| self.fields.text_of(&items[i].value))
            .collect();
        texts.push(query.to_string());
        let mut fresh = embedder.embed(&texts).await?;
        let asked = fresh.pop().unwrap_or_default();
        let mut vectors = self.vectors.lock().map_err(|_| Self::poisoned())?;
        for (i, vector) in missing.into_iter().zip(fresh) {
            vectors.insert(ids[i].clone(), (items[i].updated_at_ms, Arc::new(vector)));
        }
        let mut ranked: Vec<(String, f32)> = ids
            .into_iter()
            .filter_map(|id| {
                let score = vectors.get(&id).map(|(_, v)| cosine(&asked, v))?;
                Some((id, score))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(ranked)
    }
}

#[async_trait]
impl Store for IndexedStore {
    async fn batch(&self, ops: &[StoreOp]) -> Result<(), StoreError> {
        self.inner.batch(ops).await
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.inner.get(namespace, key).await
    }

    async fn get_with(
        &self,
        namespace: &[String],
        key: &str,
        refresh_ttl: Option<bool>,
    ) -> Result<Option<Item>, StoreError> {
        self.inner.get_with(namespace, key, refresh_ttl).await
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        let query = match request.query.as_deref().map(str::trim) {
            Some(q) if !q.is_empty() => q.to_string(),
            _ => {
                let plain = SearchRequest {
                    query: None,
                    ..request.clone()
                };
                return self.inner.search(&plain).await;
            }
        };
        // Every selected item is ranked, but only the page returned is refreshed (below).
        let selected = SearchRequest {
            query: None,
            limit: 0,
            offset: 0,
            refresh_ttl: Some(false),
            ..request.clone()
        };
        let items: Vec<Item> = self
            .inner
            .search(&selected)
            .await?
            .into_iter()
            .map(|hit| hit.item)
            .collect();
        let ranked = match &self.embedder {
            Some(embedder) => self.rank_by_meaning(embedder, &query, &items).await?,
            None => self.rank_by_words(&query, &items)?,
        };
        let mut by_id: HashMap<String, Item> = items.into_iter().map(|i| (id_of(&i), i)).collect();
        let limit = if request.limit == 0 {
            usize::MAX
        } else {
            request.limit
        };
        let hits: Vec<SearchHit> = ranked
            .into_iter()
            .filter_map(|(id, score)| {
                by_id.remove(&id).map(|item| SearchHit {
                    item,
                    score: Some(score),
                })
            })
            .skip(request.offset)
            .take(limit)
            .collect();
        stategraph_checkpoint::store::refresh_page(self.inner.as_ref(), hits, request.refresh_ttl)
            .await
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        self.inner.list_namespaces(query).await
    }

    async fn sweep_expired(&self) -> Result<usize, StoreError> {
        self.inner.sweep_expired().await
    }
}
