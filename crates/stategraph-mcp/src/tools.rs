//! The servers' tools as [`Tool`]s: [`McpTools::connect`] starts every configured server, lists
//! its tools and makes each an [`McpTool`] a [`Toolbox`](stategraph_tools::Toolbox) can hold
//! beside the built-in ones.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use stategraph_tools::{Tool, ToolFailure};

use crate::connection::Connection;
use crate::content::render;
use crate::error::McpError;
use crate::names::{display_name, wire_name};
use crate::settings::McpSettings;

/// One tool of one server, called by its wire name (`fs__read_file`).
pub struct McpTool {
    server: Arc<Connection>,
    /// The tool's name as the server knows it.
    tool: String,
    wire: String,
    display: String,
    description: String,
    parameters: Value,
}

impl McpTool {
    /// The server's name.
    pub fn server(&self) -> &str {
        self.server.name()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.wire
    }

    fn display_name(&self) -> &str {
        &self.display
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(&self, arguments: Value) -> Result<String, ToolFailure> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolFailure(format!(
                    "the arguments of {} must be a JSON object matching its schema, not `{}`",
                    self.display,
                    other.to_string().chars().take(200).collect::<String>()
                )))
            }
        };
        // Said before the call is sent (`graph -v`): what a kill from here on may interrupt.
        tracing::info!("calling MCP tool {}", self.display);
        let result = self
            .server
            .call(&self.tool, arguments)
            .await
            .map_err(|e| ToolFailure(e.to_string()))?;
        let text = render(&result);
        if result.is_error == Some(true) {
            return Err(ToolFailure(format!("{} failed: {text}", self.display)));
        }
        Ok(text)
    }
}

/// The tools of every configured server, started and listed.
///
/// ```no_run
/// use stategraph_mcp::{McpSettings, McpTools, ServerSettings};
/// use stategraph_tools::Toolbox;
/// # async fn run() -> Result<(), stategraph_mcp::McpError> {
/// let mut settings = McpSettings::default();
/// settings.servers.insert("fs".into(), ServerSettings::stdio("mcp-server-filesystem", ["./ws"]));
/// let mcp = McpTools::connect(&settings).await?;
/// let toolbox = Toolbox::new(mcp.tools());
/// assert!(toolbox.get("fs__read_file").is_some());
/// let approve = mcp.resolve("fs.write_file")?; // the wire name, for an approval rule
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct McpTools {
    tools: Vec<Arc<McpTool>>,
    servers: BTreeSet<String>,
}

impl McpTools {
    /// Starts every server of `settings` (at once), initializes each and lists its tools. The
    /// first server that fails is the error, naming it and saying why (with its last stderr
    /// lines for a child process).
    pub async fn connect(settings: &McpSettings) -> Result<McpTools, McpError> {
        settings.preflight()?;
        let starts = settings
            .servers
            .iter()
            .map(|(name, server)| Connection::start(name, server.clone()));
        let started = futures::future::try_join_all(starts).await?;
        let mut tools = Vec::new();
        for (connection, listed) in started {
            let connection = Arc::new(connection);
            let mut taken = HashSet::new();
            for info in listed {
                let tool = info.name.to_string();
                let mut wire = wire_name(connection.name(), &tool);
                // Two names that differ only in characters the wire cannot carry.
                let base = wire.clone();
                let mut n = 2;
                while !taken.insert(wire.clone()) {
                    wire = format!("{}_{n}", &base[..base.len().min(60)]);
                    n += 1;
                }
                let description = info
                    .description
                    .as_deref()
                    .map(str::to_string)
                    .or_else(|| info.title.clone())
                    .unwrap_or_else(|| {
                        format!("{tool} (from the MCP server {})", connection.name())
                    });
                tools.push(Arc::new(McpTool {
                    server: connection.clone(),
                    display: display_name(connection.name(), &tool),
                    tool,
                    wire,
                    description,
                    parameters: Value::Object((*info.input_schema).clone()),
                }));
            }
        }
        Ok(McpTools {
            tools,
            servers: settings.servers.keys().cloned().collect(),
        })
    }

    /// Every tool, in server order then the server's own order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect()
    }

    /// Every tool's `(display name, wire name)`.
    pub fn names(&self) -> Vec<(&str, &str)> {
        self.tools
            .iter()
            .map(|t| (t.display.as_str(), t.wire.as_str()))
            .collect()
    }

    /// The name people read for a wire name, when it is one of these tools.
    pub fn display_name(&self, wire: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t.wire == wire)
            .map(|t| t.display.as_str())
    }

    /// The wire name of `entry` (an `approve_tools` entry: `fs.write_file`, or the wire form
    /// `fs__write_file`). A server that is not configured, or a tool it does not offer, is an
    /// error naming it and what there is: an approval must never silently match nothing.
    pub fn resolve(&self, entry: &str) -> Result<String, McpError> {
        if let Some(tool) = self
            .tools
            .iter()
            .find(|t| t.display == entry || t.wire == entry)
        {
            return Ok(tool.wire.clone());
        }
        let server = entry.split('.').next().unwrap_or(entry);
        if !self.servers.contains(server) {
            return Err(unknown_server(entry, &self.servers));
        }
        let offered: Vec<&str> = self
            .tools
            .iter()
            .filter(|t| t.server() == server)
            .map(|t| t.display.as_str())
            .collect();
        Err(McpError::Approval {
            entry: entry.to_string(),
            message: format!(
                "names a tool the MCP server `{server}` does not offer (its tools: {})",
                if offered.is_empty() {
                    "none".to_string()
                } else {
                    offered.join(", ")
                }
            ),
        })
    }
}

fn unknown_server(entry: &str, servers: &BTreeSet<String>) -> McpError {
    McpError::Approval {
        entry: entry.to_string(),
        message: format!(
            "is not `SERVER.TOOL` of a configured MCP server (servers: {})",
            if servers.is_empty() {
                "none; add one under [settings.mcp.servers.NAME]".to_string()
            } else {
                servers.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        ),
    }
}

impl McpSettings {
    /// Checks `approve_tools` entries without starting a server: each must be `SERVER.TOOL` of
    /// a configured server (whether the tool exists is known once the server lists its tools).
    ///
    /// ```
    /// use stategraph_mcp::{McpSettings, ServerSettings};
    /// let mut s = McpSettings::default();
    /// s.servers.insert("fs".into(), ServerSettings::stdio("sh", Vec::<String>::new()));
    /// assert!(s.check_approvals(&["fs.write_file".into()]).is_ok());
    /// assert!(s.check_approvals(&["git.commit".into()]).is_err());
    /// ```
    pub fn check_approvals(&self, entries: &[String]) -> Result<(), McpError> {
        let servers: BTreeSet<String> = self.servers.keys().cloned().collect();
        for entry in entries {
            let fits = entry
                .split_once('.')
                .or_else(|| entry.split_once(crate::names::WIRE_SEPARATOR))
                .is_some_and(|(server, tool)| servers.contains(server) && !tool.is_empty());
            if !fits {
                return Err(unknown_server(entry, &servers));
            }
        }
        Ok(())
    }
}
