//! The tantivy index behind text queries: in memory, one document per item (its id and the
//! text [`IndexFields`](crate::IndexFields) picked), brought up to date before each query with
//! the items the backend selected, re-indexing only those updated since they were indexed.
//!
//! Why in memory and rebuilt from the backend rather than kept on disk beside it: the backend
//! is the truth (other processes write it: a Postgres store is shared by many workers), and an
//! index on disk could disagree with it after a crash; an index rebuilt from it cannot.

use stategraph_checkpoint::store::StoreError;
use std::collections::{HashMap, HashSet};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{Field, Schema, Value, STORED, STRING, TEXT};
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// The writer's memory budget: tantivy's smallest; the documents are short texts.
const WRITER_BYTES: usize = 15_000_000;

pub(crate) struct TextIndex {
    index: Index,
    reader: IndexReader,
    writer: IndexWriter,
    id: Field,
    text: Field,
    /// Item id -> the update time of the version indexed.
    indexed: HashMap<String, u64>,
}

fn failed(e: tantivy::TantivyError) -> StoreError {
    StoreError::Search(format!("the text index failed: {e}"))
}

impl TextIndex {
    pub(crate) fn new() -> Result<Self, StoreError> {
        let mut schema = Schema::builder();
        let id = schema.add_text_field("id", STRING | STORED);
        let text = schema.add_text_field("text", TEXT);
        let index = Index::create_in_ram(schema.build());
        let writer = index
            .writer_with_num_threads(1, WRITER_BYTES)
            .map_err(failed)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(failed)?;
        Ok(TextIndex {
            index,
            reader,
            writer,
            id,
            text,
            indexed: HashMap::new(),
        })
    }

    /// Indexes the items (id, updated, text) not indexed at that version yet.
    pub(crate) fn update<'a>(
        &mut self,
        items: impl IntoIterator<Item = (&'a str, u64, String)>,
    ) -> Result<(), StoreError> {
        let mut changed = false;
        for (id, updated, text) in items {
            if self.indexed.get(id) == Some(&updated) {
                continue;
            }
            self.writer.delete_term(Term::from_field_text(self.id, id));
            self.writer
                .add_document(doc!(self.id => id, self.text => text))
                .map_err(failed)?;
            self.indexed.insert(id.to_string(), updated);
            changed = true;
        }
        if changed {
            self.writer.commit().map_err(failed)?;
            self.reader.reload().map_err(failed)?;
        }
        Ok(())
    }

    /// The items among `among` that match `query`, best first, with their scores.
    pub(crate) fn rank(
        &self,
        query: &str,
        among: &HashSet<&str>,
    ) -> Result<Vec<(String, f32)>, StoreError> {
        let searcher = self.reader.searcher();
        let parser = QueryParser::for_index(&self.index, vec![self.text]);
        // Lenient: people's and models' queries hold quotes and colons not meant as syntax.
        let (query, _ignored) = parser.parse_query_lenient(query);
        let limit = self.indexed.len().max(1);
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit))
            .map_err(failed)?;
        let mut ranked = Vec::new();
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
            let Some(id) = doc.get_first(self.id).and_then(|v| v.as_str()) else {
                continue;
            };
            // Items the backend no longer holds (or the request did not select) stay in the
            // index until they change; they are never answered.
            if among.contains(id) {
                ranked.push((id.to_string(), score));
            }
        }
        Ok(ranked)
    }
}
