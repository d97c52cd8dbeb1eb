//! Declaring artifacts: a named view of part of the state, the file (or folder of files) it is
//! written to, how it is rendered, how an edit is read back, and the node that produces it.

use super::error::EditError;
use super::pattern::FilePattern;
use serde::de::DeserializeOwned;
use serde::Serialize;
use stategraph::state::State;
use std::sync::Arc;

/// How an artifact's files are written (for listings; rendering is the artifact's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Pretty-printed JSON.
    Json,
    /// Markdown.
    Markdown,
    /// Plain text.
    Text,
}

/// One file of a folder artifact: its slug (the `{slug}` of the pattern) and its bytes. When an
/// edited folder is read back, `index` and `path` say where the file was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The `{index}` of the file: its position from 1 (written zero-padded: `01`).
    pub index: usize,
    /// The `{slug}` part of the file name.
    pub slug: String,
    /// The file's path relative to the run folder (empty when rendering).
    pub path: String,
    /// The file's content.
    pub bytes: Vec<u8>,
}

impl Entry {
    /// An entry to write: its slug and content (its index is its position in the list).
    pub fn new(slug: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Entry {
            index: 0,
            slug: slug.into(),
            path: String::new(),
            bytes: bytes.into(),
        }
    }

    /// The content as text; a byte that is not UTF-8 is an error naming its line.
    pub fn text(&self) -> Result<&str, EditError> {
        utf8(&self.bytes).map_err(|e| e.in_file(self.path.clone()))
    }
}

/// The content of a file as UTF-8, or an error naming the line of the first bad byte.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, EditError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        EditError::new("the file is not UTF-8 text").at_line(line)
    })
}

type RenderFn<S> = dyn Fn(&S) -> Result<Vec<Entry>, String> + Send + Sync;
type ParseFn<S> = dyn Fn(&S, Vec<Entry>) -> Result<<S as State>::Update, EditError> + Send + Sync;

/// A part of the state as a file (or a folder of files) people can read and, when the artifact
/// has a parser, edit.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph_artifacts::{Artifact, EditError, Entry, Format};
/// use stategraph::State;
///
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Memo { research: Vec<String>, sections: Vec<(String, String)>, memo: String }
///
/// // `1-research.json`, pretty JSON, written by node `research`; an edit must be a list of strings.
/// let research = Artifact::json("research", "1-research.json", "research", |s: &Memo| s.research.clone())
///     .parse_json(|_s: &Memo, notes: Vec<String>| {
///         if notes.is_empty() { return Err(EditError::new("keep at least one note")); }
///         Ok(MemoUpdate::default().research(notes))
///     });
/// // One Markdown file per section: `2-sections/01-intro.md`, `2-sections/02-team.md`...
/// let sections = Artifact::folder("sections", "2-sections/{index}-{slug}.md", "draft", Format::Markdown,
///     |s: &Memo| s.sections.iter().map(|(slug, text)| Entry::new(slug.clone(), text.clone())).collect());
/// // Read-only text.
/// let memo = Artifact::markdown("memo", "4-final-draft.md", "finalize", |s: &Memo| s.memo.clone());
/// assert!(research.is_editable() && !sections.is_editable() && !memo.is_editable());
/// ```
pub struct Artifact<S: State> {
    pub(crate) name: String,
    pub(crate) pattern: FilePattern,
    pub(crate) node: String,
    pub(crate) format: Format,
    pub(crate) render: Arc<RenderFn<S>>,
    pub(crate) parse: Option<Arc<ParseFn<S>>>,
}

impl<S: State> Clone for Artifact<S> {
    fn clone(&self) -> Self {
        Artifact {
            name: self.name.clone(),
            pattern: self.pattern.clone(),
            node: self.node.clone(),
            format: self.format,
            render: self.render.clone(),
            parse: self.parse.clone(),
        }
    }
}

impl<S: State> Artifact<S> {
    fn single(
        name: &str,
        path: &str,
        node: &str,
        format: Format,
        render: impl Fn(&S) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Self {
        Artifact {
            name: name.to_string(),
            pattern: FilePattern::new(path),
            node: node.to_string(),
            format,
            render: Arc::new(move |s| Ok(vec![Entry::new("", render(s)?)])),
            parse: None,
        }
    }

    /// A value of the state as pretty JSON in one file. `view` picks the value; a view that
    /// is `null` (an `Option` that is `None`) means the artifact is not produced yet.
    pub fn json<T: Serialize>(
        name: &str,
        path: &str,
        node: &str,
        view: impl Fn(&S) -> T + Send + Sync + 'static,
    ) -> Self {
        Self::single(name, path, node, Format::Json, move |s| {
            let value = serde_json::to_value(view(s)).map_err(|e| e.to_string())?;
            if value.is_null() {
                return Ok(Vec::new());
            }
            let mut bytes = serde_json::to_vec_pretty(&value).map_err(|e| e.to_string())?;
            bytes.push(b'\n');
            Ok(bytes)
        })
    }

    /// Text of the state as a Markdown file (none while the text is empty).
    pub fn markdown(
        name: &str,
        path: &str,
        node: &str,
        view: impl Fn(&S) -> String + Send + Sync + 'static,
    ) -> Self {
        Self::single(name, path, node, Format::Markdown, move |s| {
            Ok(view(s).into_bytes())
        })
    }

    /// Text of the state as a plain text file (none while the text is empty).
    pub fn text(
        name: &str,
        path: &str,
        node: &str,
        view: impl Fn(&S) -> String + Send + Sync + 'static,
    ) -> Self {
        Self::single(name, path, node, Format::Text, move |s| {
            Ok(view(s).into_bytes())
        })
    }

    /// A file rendered by `render` (state → bytes, or why it cannot be; no bytes: no file yet).
    pub fn custom(
        name: &str,
        path: &str,
        node: &str,
        format: Format,
        render: impl Fn(&S) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Self {
        Self::single(name, path, node, format, render)
    }

    /// A folder of files, one per [`Entry`], named by `pattern`: a path whose file name holds
    /// `{index}` (the entry's position from 1, zero-padded to two digits) and/or `{slug}` (the
    /// entry's slug, made safe for a file name), e.g. `2-sections/{index}-{slug}.md`.
    pub fn folder(
        name: &str,
        pattern: &str,
        node: &str,
        format: Format,
        entries: impl Fn(&S) -> Vec<Entry> + Send + Sync + 'static,
    ) -> Self {
        Artifact {
            name: name.to_string(),
            pattern: FilePattern::new(pattern),
            node: node.to_string(),
            format,
            render: Arc::new(move |s| Ok(entries(s))),
            parse: None,
        }
    }

    /// Makes a JSON artifact editable: the file is read as `T` (a syntax or shape error names
    /// its line), then `update` validates it against the current state and makes the update.
    /// Use the update's `overwrite_*` setters for fields whose reducer appends or adds.
    pub fn parse_json<T: DeserializeOwned>(
        self,
        update: impl Fn(&S, T) -> Result<S::Update, EditError> + Send + Sync + 'static,
    ) -> Self {
        self.parse_bytes(move |s, bytes| {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let mut err = EditError::from_json(&inner);
                // In the words of JSON: "the integer 5 is not a text", not "expected a string".
                if inner.is_data() {
                    err.message = stategraph::state::in_words(&err.message);
                }
                // A syntax error inside a key has no field yet (`?`): no path then.
                if path != "." && !path.is_empty() && !path.contains('?') {
                    err.message = format!("field `{path}`: {}", err.message);
                }
                err
            })?;
            de.end().map_err(|e| EditError::from_json(&e))?;
            update(s, value)
        })
    }

    /// Makes a text or Markdown artifact editable: `update` reads the file's text.
    pub fn parse_text(
        self,
        update: impl Fn(&S, &str) -> Result<S::Update, EditError> + Send + Sync + 'static,
    ) -> Self {
        self.parse_bytes(move |s, bytes| update(s, utf8(bytes)?))
    }

    /// Makes a one-file artifact editable with a parser of the raw bytes.
    pub fn parse_bytes(
        mut self,
        update: impl Fn(&S, &[u8]) -> Result<S::Update, EditError> + Send + Sync + 'static,
    ) -> Self {
        self.parse = Some(Arc::new(move |s, entries: Vec<Entry>| {
            match entries.first() {
                Some(entry) => update(s, &entry.bytes),
                None => Err(EditError::new("the file is missing")),
            }
        }));
        self
    }

    /// Makes a folder artifact editable: `update` gets every file that matches the pattern, in
    /// `{index}` order (then by name).
    pub fn parse_entries(
        mut self,
        update: impl Fn(&S, Vec<Entry>) -> Result<S::Update, EditError> + Send + Sync + 'static,
    ) -> Self {
        self.parse = Some(Arc::new(update));
        self
    }

    /// The artifact's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its path, or its folder pattern, relative to the run folder.
    pub fn path(&self) -> &str {
        self.pattern.as_str()
    }

    /// The node that produces it; an edit counts as this node's output.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// How it is written.
    pub fn format(&self) -> Format {
        self.format
    }

    /// True when an edit of it can be read back.
    pub fn is_editable(&self) -> bool {
        self.parse.is_some()
    }

    /// True for a folder of files.
    pub fn is_folder(&self) -> bool {
        self.pattern.is_folder()
    }

    /// What an edit of its files means for `state`, as the update that reads them back;
    /// `None` for an artifact that is not editable.
    pub fn read_edit(
        &self,
        state: &S,
        entries: Vec<Entry>,
    ) -> Option<Result<S::Update, EditError>> {
        self.parse.as_ref().map(|parse| parse(state, entries))
    }

    /// The files for `state`: (path relative to the run folder, bytes).
    pub fn render(&self, state: &S) -> Result<Vec<(String, Vec<u8>)>, String> {
        let entries = (self.render)(state)?;
        if !self.pattern.is_folder() {
            let bytes = entries
                .into_iter()
                .next()
                .map(|e| e.bytes)
                .unwrap_or_default();
            // A one-file artifact that renders no bytes is not produced yet: no file.
            if bytes.is_empty() {
                return Ok(Vec::new());
            }
            return Ok(vec![(self.pattern.as_str().to_string(), bytes)]);
        }
        Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| (self.pattern.fill(i + 1, &e.slug), e.bytes))
            .collect())
    }
}
