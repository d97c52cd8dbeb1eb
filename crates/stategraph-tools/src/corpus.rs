//! Full-text search over a local folder of `.md`, `.txt` and `.html` files, with tantivy.
//!
//! The index lives in memory. Before each search the folder's file list, sizes and
//! modification times are compared with those indexed, and the index is rebuilt when they
//! differ, so edits to the documents show up without a restart. Hidden files and folders
//! (`.git`, ...) and files over 10 MiB are skipped.
//!
//! Hits use `file://` URLs, a title (the first Markdown heading, the HTML `<title>`, else the
//! file name), and a snippet around the matched words as content.
//!
//! ```
//! use stategraph_tools::{corpus::CorpusSearch, SearchTool};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("tides.md"), "# Tides\nThe moon drives the tides.").unwrap();
//! let corpus = CorpusSearch::open(dir.path())?;
//! let hits = corpus.search("moon", 3).await?;
//! assert_eq!(hits[0].title, "Tides");
//! assert!(hits[0].url.starts_with("file://"));
//! # Ok::<(), stategraph_tools::ToolError>(()) });
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};

use super::html::extract;
use super::{SearchHit, SearchTool, ToolError};

/// Files larger than this are not indexed: they are rarely prose, and would dominate memory.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Characters in a snippet.
const SNIPPET_CHARS: usize = 300;
/// The analyzer of title and body: English stop words dropped and words stemmed, because
/// queries are usually natural-language questions ("what causes the tides") and should
/// rank documents by their content words ("tide", "cause"), not by "the".
const ANALYZER: &str = "corpus_en";

fn analyzer() -> TextAnalyzer {
    let base = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser);
    match StopWordFilter::new(Language::English) {
        Some(stop_words) => base
            .filter(stop_words)
            .filter(Stemmer::new(Language::English))
            .build(),
        None => base.filter(Stemmer::new(Language::English)).build(),
    }
}

/// A [`SearchTool`] over a folder of documents.
#[derive(Clone, Debug)]
pub struct CorpusSearch {
    root: PathBuf,
    // A std Mutex: it is only taken inside `spawn_blocking`, never across an await, and
    // serialises rebuilds so two searches do not index the folder twice.
    state: Arc<Mutex<Built>>,
}

/// One file's identity for change detection.
type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

struct Built {
    fingerprint: Fingerprint,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    documents: usize,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("documents", &self.documents)
            .finish()
    }
}

#[derive(Clone, Copy)]
struct Fields {
    url: Field,
    title: Field,
    body: Field,
}

impl CorpusSearch {
    /// Indexes the folder at `root`. Fails if it is missing or has no indexable files.
    ///
    /// This reads and indexes every file before it returns: call it at startup, or inside
    /// `tokio::task::spawn_blocking` from async code with a large folder.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, ToolError> {
        let given = root.as_ref();
        let root = fs::canonicalize(given).map_err(|_| ToolError::CorpusMissing {
            path: given.to_path_buf(),
        })?;
        if !root.is_dir() {
            return Err(ToolError::CorpusMissing {
                path: given.to_path_buf(),
            });
        }
        let built = build(&root)?;
        Ok(CorpusSearch {
            root,
            state: Arc::new(Mutex::new(built)),
        })
    }

    /// The (canonical) folder searched.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How many documents the index holds now.
    pub fn document_count(&self) -> usize {
        match self.state.lock() {
            Ok(state) => state.documents,
            Err(poisoned) => poisoned.into_inner().documents,
        }
    }

    fn search_blocking(
        &self,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchHit>, ToolError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| ToolError::Index("a previous search panicked".to_string()))?;
        let current = fingerprint(&self.root)?;
        if current != state.fingerprint {
            tracing::debug!(root = %self.root.display(), "corpus changed; re-indexing");
            *state = build(&self.root)?;
        }
        state.search(query, max_results)
    }
}

#[async_trait]
impl SearchTool for CorpusSearch {
    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<SearchHit>, ToolError> {
        if query.trim().is_empty() {
            return Err(ToolError::Config("the search query is empty".to_string()));
        }
        let this = self.clone();
        let query = query.to_string();
        // Walking the folder and (re)indexing are blocking file work.
        tokio::task::spawn_blocking(move || this.search_blocking(&query, max_results))
            .await
            .map_err(|e| ToolError::Index(format!("the search task failed: {e}")))?
    }
}

impl Built {
    fn search(&self, query: &str, max_results: usize) -> Result<Vec<SearchHit>, ToolError> {
        let searcher = self.reader.searcher();
        let mut parser =
            QueryParser::for_index(&self.index, vec![self.fields.title, self.fields.body]);
        parser.set_field_boost(self.fields.title, 2.0);
        // Lenient: user and model queries contain quotes, colons and dashes that are not
        // meant as query syntax.
        let (query, _ignored) = parser.parse_query_lenient(query);
        let top = searcher
            .search(&query, &TopDocs::with_limit(max_results.max(1)))
            .map_err(index_error)?;
        let mut snippets =
            SnippetGenerator::create(&searcher, &*query, self.fields.body).map_err(index_error)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (_score, address) in top.into_iter().take(max_results) {
            let document: TantivyDocument = searcher.doc(address).map_err(index_error)?;
            let text = |field: Field| {
                document
                    .get_first(field)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            let snippet = snippets.snippet_from_doc(&document);
            let content = if snippet.fragment().trim().is_empty() {
                // The match was in the title only: show the document's opening instead.
                text(self.fields.body).chars().take(SNIPPET_CHARS).collect()
            } else {
                snippet.fragment().to_string()
            };
            hits.push(SearchHit {
                title: text(self.fields.title),
                url: text(self.fields.url),
                content: content.split_whitespace().collect::<Vec<_>>().join(" "),
            });
        }
        Ok(hits)
    }
}

fn index_error(e: tantivy::TantivyError) -> ToolError {
    ToolError::Index(e.to_string())
}

fn is_indexable(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .is_some_and(|e| matches!(e.as_str(), "md" | "markdown" | "txt" | "html" | "htm"))
}

/// The indexable files under `root`, sorted, with size and modification time.
fn fingerprint(root: &Path) -> Result<Fingerprint, ToolError> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| ToolError::Io {
            path: dir.clone(),
            detail: e.to_string(),
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            // `file_type` does not follow symlinks, so a link back up the tree cannot loop.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !is_indexable(&path) {
                continue;
            }
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.is_file() && meta.len() <= MAX_FILE_BYTES {
                files.push((path, meta.len(), meta.modified().ok()));
            }
        }
    }
    files.sort();
    Ok(files)
}

fn build(root: &Path) -> Result<Built, ToolError> {
    let fingerprint = fingerprint(root)?;
    if fingerprint.is_empty() {
        return Err(ToolError::CorpusEmpty {
            path: root.to_path_buf(),
        });
    }
    let mut schema = Schema::builder();
    let text = TextOptions::default().set_stored().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        url: schema.add_text_field("url", STRING | STORED),
        title: schema.add_text_field("title", text.clone()),
        body: schema.add_text_field("body", text),
    };
    let index = Index::create_in_ram(schema.build());
    index.tokenizers().register(ANALYZER, analyzer());
    // One indexing thread with tantivy's minimum budget: the machine is shared with the
    // graph being run, and corpora are small.
    let mut writer: IndexWriter = index
        .writer_with_num_threads(1, 15_000_000)
        .map_err(index_error)?;
    let mut documents = 0;
    for (path, _, _) in &fingerprint {
        // A file deleted or unreadable since the scan is skipped, not fatal; the next
        // search notices the change and re-indexes.
        let Ok(bytes) = fs::read(path) else { continue };
        let raw = String::from_utf8_lossy(&bytes);
        let (title, body) = document_text(path, &raw);
        writer
            .add_document(doc!(
                fields.url => file_url(path),
                fields.title => title,
                fields.body => body,
            ))
            .map_err(index_error)?;
        documents += 1;
    }
    writer.commit().map_err(index_error)?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(index_error)?;
    Ok(Built {
        fingerprint,
        index,
        reader,
        fields,
        documents,
    })
}

/// Title and searchable text of one file.
fn document_text(path: &Path, raw: &str) -> (String, String) {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => {
            let (title, text) = extract(raw);
            (title.unwrap_or(file_name), text)
        }
        "md" | "markdown" => (
            markdown_title(raw).unwrap_or(file_name),
            strip_front_matter(raw).to_string(),
        ),
        _ => (file_name, raw.to_string()),
    }
}

/// Markdown without its YAML front matter (metadata, not prose to search or quote).
fn strip_front_matter(text: &str) -> &str {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return &rest[offset..];
        }
    }
    text
}

/// The first ATX heading (`# Title`), outside any YAML front matter and code blocks.
fn markdown_title(text: &str) -> Option<String> {
    let mut in_code = false;
    for line in strip_front_matter(text).lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) {
            let rest = &trimmed[hashes..];
            if rest.starts_with(' ') || rest.starts_with('\t') {
                let title = rest.trim().trim_end_matches('#').trim();
                if !title.is_empty() {
                    return Some(title.to_string());
                }
            }
        }
    }
    None
}

fn file_url(path: &Path) -> String {
    reqwest::Url::from_file_path(path)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_titles_skip_front_matter_and_code() {
        assert_eq!(
            markdown_title("---\ntitle: x\n---\n```\n# not this\n```\n## Real one ##\n").as_deref(),
            Some("Real one")
        );
        assert_eq!(markdown_title("#hashtag\nplain"), None);
        assert_eq!(strip_front_matter("---\na: 1\n---\nbody"), "body");
        assert_eq!(
            strip_front_matter("--- not front matter"),
            "--- not front matter"
        );
    }
}
