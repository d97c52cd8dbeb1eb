//! The tools a `tool` todo's model↔tool loop may call: the workspace tools, plus `search` and
//! `fetch` so research stays possible from inside the loop, plus the tools of the MCP servers
//! the settings name (`mcp.servers`), started and listed when the loop first needs its tools.

use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::settings::ResearchSettings;
use super::ResearchAgent;
use stategraph::runtime::NodeError;
use stategraph_mcp::McpTools;
use stategraph_prebuilt::{Approval, ToolNode};
use stategraph_tools::workspace::Workspace;
use stategraph_tools::{tool_fn, Tool, ToolFailure, Toolbox};

/// Arguments of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to search for.
    pub query: String,
}

/// Arguments of `fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchArgs {
    /// An `http://` or `https://` URL.
    pub url: String,
}

/// The approval rule behind `approve_commands = true`.
pub fn command_approval() -> Approval {
    Approval {
        tool: "run_command".into(),
        argument: "command".into(),
        setting: Some("approve_commands".into()),
    }
}

impl ResearchAgent {
    /// The tool node of the loop for these settings (made once per workspace folder and MCP
    /// settings).
    pub(crate) async fn tool_node(
        &self,
        settings: &ResearchSettings,
    ) -> Result<Arc<ToolNode>, NodeError> {
        if !settings.uses_tool_loop() {
            return Err(NodeError::new(
                "a tool todo needs a workspace or MCP servers: point the setting `workspace` at \
                 a folder, or name servers under mcp.servers",
            ));
        }
        let dir = settings.workspace.clone();
        // Keyed by everything the node is made of that a run's settings choose.
        let key = serde_json::json!([dir, settings.mcp, settings.approve_tools]).to_string();
        let mut cache = self.tool_nodes.lock().await;
        if let Some((made_for, node)) = cache.as_ref() {
            if *made_for == key {
                return Ok(node.clone());
            }
        }
        // The old node's MCP servers stop when it is dropped, before new ones start.
        *cache = None;
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        if let Some(dir) = &dir {
            let workspace = Workspace::open(dir).map_err(|e| {
                NodeError::new(format!("workspace {}: {e}", Path::new(dir).display()))
            })?;
            tools = workspace.tools();
        }
        if settings.search.uses_corpus()
            || stategraph_llm::http::non_empty_env("TAVILY_API_KEY").is_some()
            || self.search.is_some()
        {
            let (engine, _) = self.search_tool(&settings.search).await?;
            let max = settings.search.max_results;
            tools.push(tool_fn(
                "search",
                "Search for documents; returns titles, URLs and excerpts.",
                move |args: SearchArgs| {
                    let engine = engine.clone();
                    async move {
                        let hits = engine
                            .search(&args.query, max)
                            .await
                            .map_err(|e| ToolFailure(e.to_string()))?;
                        if hits.is_empty() {
                            return Ok(format!("no results for `{}`", args.query));
                        }
                        Ok::<_, ToolFailure>(
                            hits.iter()
                                .map(|h| format!("{} ({})\n{}", h.title, h.url, h.content))
                                .collect::<Vec<_>>()
                                .join("\n\n"),
                        )
                    }
                },
            ));
        }
        let fetcher = self.fetcher()?;
        tools.push(tool_fn(
            "fetch",
            "Fetch a web page and return its text.",
            move |args: FetchArgs| {
                let fetcher = fetcher.clone();
                async move {
                    let page = fetcher
                        .fetch(&args.url)
                        .await
                        .map_err(|e| ToolFailure(e.to_string()))?;
                    let hit = page.to_hit();
                    Ok::<_, ToolFailure>(format!("{} ({})\n{}", hit.title, hit.url, hit.content))
                }
            },
        ));
        let mcp = McpTools::connect(&settings.mcp)
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
        tools.extend(mcp.tools());
        let mut node = ToolNode::new(Arc::new(Toolbox::new(tools))).approve(command_approval());
        for entry in &settings.approve_tools {
            let wire = mcp
                .resolve(entry)
                .map_err(|e| NodeError::new(e.to_string()))?;
            node = node.approve(Approval::whole(wire));
        }
        let node = Arc::new(node);
        *cache = Some((key, node.clone()));
        Ok(node)
    }
}
