//! Tools that work in one folder, the workspace: `list_dir`, `read_file`, `write_file`,
//! `edit_file`, `search_files` and `run_command`.
//!
//! Every path is relative to the workspace root; a path that resolves outside it (`..`, an
//! absolute path, a symbolic link that leads out) is refused with an error the model reads.
//! Writes are atomic. `run_command` runs `sh -c` in the root, in its own process group, so a
//! timeout kills everything the command started; its output is capped keeping the tail, and
//! the exit code is always reported. The tool and argument names are a contract: people's
//! prompts name them.
//!
//! ```
//! use stategraph_llm::ToolCall;
//! use stategraph_tools::workspace::Workspace;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let tools = Workspace::open(dir.path().join("ws")).unwrap().toolbox();
//! let call = |name: &str, arguments| ToolCall { id: "1".into(), name: name.into(), arguments };
//! tools.run(&call("write_file", serde_json::json!({"path": "a.txt", "content": "hi\n"}))).await;
//! let out = tools.run(&call("run_command", serde_json::json!({"command": "cat a.txt"}))).await;
//! assert_eq!(out.content, "exit code: 0\nhi\n");
//! assert!(tools.run(&call("read_file", serde_json::json!({"path": "../x"}))).await.is_error);
//! # });
//! ```

mod command;
mod files;
mod paths;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use command::RunCommandArgs;
pub use files::{EditFileArgs, ListDirArgs, ReadFileArgs, WriteFileArgs};
pub use search::SearchFilesArgs;

use super::{tool_fn, Tool, ToolError, ToolFailure, Toolbox};

/// The names of the workspace tools, in the order they are offered.
pub const TOOL_NAMES: [&str; 6] = [
    "list_dir",
    "read_file",
    "write_file",
    "edit_file",
    "search_files",
    "run_command",
];

/// Caps that keep a tool's answer within a model's context and a command within its time.
#[derive(Clone, Debug)]
pub struct WorkspaceLimits {
    /// Bytes `read_file` returns at most (it says where it cut and how to read on).
    pub max_read_bytes: usize,
    /// Bytes of a command's output kept (the tail, where errors are).
    pub max_output_bytes: usize,
    /// A command's timeout when the call gives none.
    pub default_timeout_s: u64,
    /// The longest timeout a call may ask for.
    pub max_timeout_s: u64,
    /// Matching lines `search_files` lists at most.
    pub max_search_results: usize,
    /// Entries `list_dir` lists at most.
    pub max_list_entries: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        WorkspaceLimits {
            max_read_bytes: 100_000,
            max_output_bytes: 16_000,
            default_timeout_s: 120,
            max_timeout_s: 1_800,
            max_search_results: 200,
            max_list_entries: 500,
        }
    }
}

/// One folder the tools are confined to.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
    limits: WorkspaceLimits,
}

impl Workspace {
    /// The workspace at `dir`, created if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, ToolError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| ToolError::Io {
            path: dir.to_path_buf(),
            detail: format!("cannot create the workspace folder: {e}"),
        })?;
        let root = dir.canonicalize().map_err(|e| ToolError::Io {
            path: dir.to_path_buf(),
            detail: e.to_string(),
        })?;
        if !root.is_dir() {
            return Err(ToolError::Config(format!(
                "the workspace {} is not a folder",
                root.display()
            )));
        }
        Ok(Workspace {
            root,
            limits: WorkspaceLimits::default(),
        })
    }

    /// The same workspace with other caps.
    pub fn with_limits(mut self, limits: WorkspaceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The root folder (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The caps.
    pub fn limits(&self) -> &WorkspaceLimits {
        &self.limits
    }

    /// The six tools, in [`TOOL_NAMES`] order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let ws = Arc::new(self.clone());
        vec![
            blocking_tool(
                "list_dir",
                "List a folder of the workspace: its files (with sizes) and subfolders (ending in /).",
                &ws,
                files::list_dir,
            ),
            blocking_tool(
                "read_file",
                "Read a text file of the workspace, optionally only lines start_line..end_line (1-based, inclusive).",
                &ws,
                files::read_file,
            ),
            blocking_tool(
                "write_file",
                "Write a whole file in the workspace (created with its folders, or replaced).",
                &ws,
                files::write_file,
            ),
            blocking_tool(
                "edit_file",
                "Replace the exact text `old` by `new` in a workspace file; `old` must occur exactly once.",
                &ws,
                files::edit_file,
            ),
            blocking_tool(
                "search_files",
                "Search the workspace's files (honouring .gitignore) for lines matching a regular expression.",
                &ws,
                search::search_files,
            ),
            {
                let ws = ws.clone();
                tool_fn(
                    "run_command",
                    "Run a shell command line (sh -c) in the workspace root; returns its exit code and the end of its output.",
                    move |args: RunCommandArgs| {
                        let ws = ws.clone();
                        async move { command::run_command(&ws, args).await }
                    },
                )
            },
        ]
    }

    /// The six tools in a [`Toolbox`].
    pub fn toolbox(&self) -> Toolbox {
        Toolbox::new(self.tools())
    }
}

/// A tool whose work is blocking file I/O, run off the async threads.
fn blocking_tool<A>(
    name: &str,
    description: &str,
    ws: &Arc<Workspace>,
    run: fn(&Workspace, A) -> Result<String, ToolFailure>,
) -> Arc<dyn Tool>
where
    A: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static,
{
    let ws = ws.clone();
    tool_fn(name, description, move |args: A| {
        let ws = ws.clone();
        async move {
            tokio::task::spawn_blocking(move || run(&ws, args))
                .await
                .map_err(|e| ToolFailure(format!("the tool stopped unexpectedly: {e}")))?
        }
    })
}
