//! What can go wrong turning state into files and files back into state.

use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::RunError;
use std::fmt;
use std::path::PathBuf;

/// Why an edited artifact cannot become a state update: where (file, line) and what is wrong.
///
/// Parsers return it; the engine fills in the file when the parser did not.
///
/// ```
/// use stategraph_artifacts::EditError;
/// let e = EditError::new("`score` must be between 0 and 10").at_line(4);
/// assert_eq!(e.to_string(), "line 4: `score` must be between 0 and 10");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EditError {
    /// The file, relative to the run folder.
    pub file: Option<String>,
    /// The line (from 1), when the problem has one.
    pub line: Option<usize>,
    /// What is wrong, and what would be right.
    pub message: String,
    /// Restoring the thread's files from its checkpoint mends it (the file is damaged, or is
    /// as written for an older state): [`ThreadArtifacts::restore`](crate::ThreadArtifacts::restore)
    /// writes it again, and a front end may offer that as the way out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restore_mends: bool,
}

impl EditError {
    /// An error with no position yet.
    pub fn new(message: impl Into<String>) -> Self {
        EditError {
            file: None,
            line: None,
            message: message.into(),
            restore_mends: false,
        }
    }

    /// Marks it as one that restoring the files from the checkpoint mends.
    ///
    /// ```
    /// use stategraph_artifacts::EditError;
    /// let e = EditError::new("truncated; restoring the files writes it again").mended_by_restore();
    /// assert!(e.restore_mends);
    /// ```
    pub fn mended_by_restore(mut self) -> Self {
        self.restore_mends = true;
        self
    }

    /// Places it on a line (from 1).
    pub fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// Names the file (relative to the run folder).
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    /// A JSON syntax or shape error, with serde's line.
    pub fn from_json(e: &serde_json::Error) -> Self {
        let message = e.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        // Column 0: serde stopped on a line break, which ends the line before (a string cut
        // off by it, say); that line is the one to fix.
        let line = match (e.line(), e.column()) {
            (line, 0) if line > 1 => line - 1,
            (line, _) => line,
        };
        let mut out = EditError::new(message);
        if line > 0 {
            out = out.at_line(line);
        }
        out
    }
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for EditError {}

/// An artifact operation that failed. Nothing in the thread changed unless the variant says so.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// A file or folder could not be read or written. Why is its [`source`](std::error::Error::source)
    /// (printed after it by an error chain, so once).
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done ("cannot write", "cannot read"...).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading the thread's state or storing an edit failed.
    #[error(transparent)]
    Run(Box<RunError>),
    /// The thread's store failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A renderer could not turn the state into its file.
    #[error("artifact `{artifact}` cannot be written from the state: {message}")]
    Render {
        /// The artifact.
        artifact: String,
        /// Why.
        message: String,
    },
    /// The run folder's name cannot be made from the state.
    #[error("the run folder's name `{pattern}` cannot be made: {message}")]
    FolderName {
        /// The folder pattern.
        pattern: String,
        /// Why.
        message: String,
    },
    /// Edited files that do not parse or validate; nothing was applied.
    #[error("{} edited artifact(s) refused, nothing changed:\n  {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    InvalidEdits(Vec<EditError>),
    /// A version was asked for that the thread does not have.
    #[error("thread `{thread}` has no artifact version `{label}`; its versions: {known}")]
    UnknownVersion {
        /// The thread.
        thread: String,
        /// The version asked for.
        label: String,
        /// The versions it has.
        known: String,
    },
    /// The thread's artifact records (kept in its store) do not decode.
    #[error("thread `{thread}`: the artifact record `{key}` is damaged ({message}); restoring the thread's artifacts writes the files and records again from the checkpoint")]
    Record {
        /// The thread.
        thread: String,
        /// The journal key.
        key: String,
        /// Why.
        message: String,
    },
    /// The graph declares two artifacts on the same path, or a path that leaves the run folder.
    #[error("artifact `{artifact}`: {message}")]
    Declaration {
        /// The artifact.
        artifact: String,
        /// What is wrong.
        message: String,
    },
}

impl From<RunError> for ArtifactError {
    fn from(e: RunError) -> Self {
        ArtifactError::Run(Box::new(e))
    }
}

impl ArtifactError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        ArtifactError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
