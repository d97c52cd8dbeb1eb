//! What a solve may look at beyond what it is given: the tree's other files (task files, and
//! plan files with the results of tasks already solved), through the workspace tools that only
//! read, rooted at the root task's folder. A solve writes nothing itself: its answer goes into
//! its plan file by the engine, so the task files stay the person's.

use stategraph_tools::workspace::Workspace;
use stategraph_tools::{ToolError, Toolbox};
use std::path::Path;

/// The workspace tools a solve is offered.
pub const READING_TOOLS: [&str; 3] = ["list_dir", "read_file", "search_files"];

/// The reading tools over the folder `root` (the root task file's folder).
pub(crate) fn reading_tools(root: &Path) -> Result<Toolbox, ToolError> {
    let workspace = Workspace::open(root)?;
    Ok(Toolbox::new(
        workspace
            .tools()
            .into_iter()
            .filter(|tool| READING_TOOLS.contains(&tool.name())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_llm::ToolCall;

    #[tokio::test]
    async fn a_solve_reads_the_tree_but_cannot_write_or_run_anything() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.md"), "# App\n").unwrap();
        let tools = reading_tools(dir.path()).unwrap();
        assert_eq!(tools.names(), READING_TOOLS);
        let call = |name: &str, arguments| ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments,
        };
        let read = tools
            .run(&call("read_file", serde_json::json!({"path": "app.md"})))
            .await;
        assert!(!read.is_error && read.content.contains("# App"), "{read:?}");
        let write = tools
            .run(&call(
                "write_file",
                serde_json::json!({"path": "app.md", "content": "x"}),
            ))
            .await;
        assert!(write.is_error, "{write:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("app.md")).unwrap(),
            "# App\n"
        );
    }
}
