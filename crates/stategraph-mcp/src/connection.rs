//! One server's connection: started (a child process over stdio, or a streamable HTTP session),
//! initialized, its tools listed; each call sent with the server's time limit; a server found
//! stopped restarted once per call.
//!
//! A call is sent once, never again: a server that stops while it runs a call is restarted for
//! the next call, and the model is told the call may or may not have taken effect, because a
//! tool that writes a file or opens an issue must not run twice behind the model's back. Only a
//! server found stopped *before* the call is sent is restarted and then called.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool as McpToolInfo};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use std::sync::Arc;

use crate::error::McpError;
use crate::handler::Client;
use crate::settings::{find_program, ServerSettings};
use crate::stderr::StderrTail;

/// How long a stopped process's last stderr lines are waited for, to quote them.
const LAST_WORDS_WAIT: Duration = Duration::from_millis(500);

/// A running session with the server.
struct Live {
    service: RunningService<RoleClient, Client>,
    /// Counts starts, so two calls that both saw the server stop restart it once.
    generation: u64,
    pid: Option<u32>,
    stderr: Option<Arc<StderrTail>>,
}

impl Live {
    fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// How it ended, for a message: its pid and its last stderr lines.
    async fn how_it_ended(&self) -> String {
        let mut detail = match self.pid {
            Some(pid) => format!("process {pid}, its connection closed"),
            None => "its connection closed".to_string(),
        };
        if let Some(stderr) = &self.stderr {
            stderr.settle(LAST_WORDS_WAIT).await;
            if let Some(words) = stderr.last_words() {
                detail.push_str(&format!("; its last stderr lines: {words}"));
            }
        }
        detail
    }
}

/// One configured server and its session, if started.
pub(crate) struct Connection {
    name: String,
    settings: ServerSettings,
    // A tokio Mutex: a restart awaits the new process's initialization while holding it, so
    // concurrent calls wait for that one restart instead of each starting a process.
    live: tokio::sync::Mutex<Option<Live>>,
}

impl Connection {
    /// Starts the server and lists its tools.
    pub(crate) async fn start(
        name: &str,
        settings: ServerSettings,
    ) -> Result<(Connection, Vec<McpToolInfo>), McpError> {
        let connection = Connection {
            name: name.to_string(),
            settings,
            live: tokio::sync::Mutex::new(None),
        };
        let live = connection.open(1).await?;
        let listed =
            tokio::time::timeout(connection.startup(), live.service.list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(connection.not_started(format!("listing its tools failed: {e}")))
            }
            Err(_) => {
                return Err(connection.not_started(format!(
                    "it did not list its tools within {}s (`startup_timeout_secs`)",
                    connection.settings.startup_timeout_secs
                )))
            }
        };
        tracing::info!(server = %name, pid = live.pid.unwrap_or(0), tools = tools.len(), "MCP server started");
        *connection.live.lock().await = Some(live);
        Ok((connection, tools))
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn startup(&self) -> Duration {
        Duration::from_secs(self.settings.startup_timeout_secs)
    }

    fn not_started(&self, detail: String) -> McpError {
        McpError::NotStarted {
            server: self.name.clone(),
            detail,
        }
    }

    /// Calls `tool` with `arguments`: once, within the server's `timeout_secs`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let secs = self.settings.timeout_secs;
        let mut stale = None;
        let mut restarted = false;
        let (peer, generation, outcome) = loop {
            let (peer, generation, fresh) = self.peer_for(tool, stale).await?;
            restarted |= fresh;
            let params =
                CallToolRequestParams::new(tool.to_string()).with_arguments(arguments.clone());
            // On timeout the call's future is dropped, which sends MCP's cancellation.
            let outcome =
                tokio::time::timeout(Duration::from_secs(secs), peer.call_tool(params)).await;
            match outcome {
                // The request could not be written to the child's stdin: it never reached the
                // server, which had stopped before its pipe said so. Start it again and send the
                // call to the new one, once.
                Ok(Err(ServiceError::TransportSend(_)))
                    if self.settings.is_stdio() && !restarted =>
                {
                    stale = Some(generation);
                }
                outcome => break (peer, generation, outcome),
            }
        };
        match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => Err(McpError::Protocol {
                server: self.name.clone(),
                tool: tool.to_string(),
                message: format!("{} (code {})", error.message, error.code.0),
            }),
            Ok(Err(error)) if peer.is_transport_closed() || is_closed_error(&error) => {
                Err(self.stopped_during(tool, generation, &error).await)
            }
            Ok(Err(error)) => Err(McpError::Protocol {
                server: self.name.clone(),
                tool: tool.to_string(),
                message: error.to_string(),
            }),
            Err(_) => Err(McpError::TimedOut {
                server: self.name.clone(),
                tool: tool.to_string(),
                secs,
            }),
        }
    }

    /// The session to call `tool` on: the running one, or, when the server stopped since the
    /// last call (or session `stale` was found unable to take a request), a new one; true when
    /// it is new (the one restart a call gets).
    async fn peer_for(
        &self,
        tool: &str,
        stale: Option<u64>,
    ) -> Result<(Peer<RoleClient>, u64, bool), McpError> {
        let mut live = self.live.lock().await;
        let (ended, generation) = match live.as_ref() {
            Some(current) if !current.is_closed() && stale != Some(current.generation) => {
                return Ok((current.service.peer().clone(), current.generation, false))
            }
            Some(current) => (current.how_it_ended().await, current.generation),
            None => ("it was not running".to_string(), 0),
        };
        tracing::warn!(server = %self.name, tool, "MCP server stopped ({ended}); restarting it");
        *live = None;
        let fresh = self
            .open(generation + 1)
            .await
            .map_err(|e| McpError::Unavailable {
                server: self.name.clone(),
                tool: tool.to_string(),
                detail: format!("it had stopped ({ended}); starting it again failed: {e}"),
            })?;
        tracing::info!(server = %self.name, pid = fresh.pid.unwrap_or(0), "MCP server restarted");
        let peer = fresh.service.peer().clone();
        let generation = fresh.generation;
        *live = Some(fresh);
        Ok((peer, generation, true))
    }

    /// The error of a call whose server stopped while it ran it; the server is restarted for
    /// the next call (unless another call already did).
    async fn stopped_during(&self, tool: &str, generation: u64, error: &ServiceError) -> McpError {
        let mut live = self.live.lock().await;
        let detail = match live.as_ref() {
            Some(current) if current.generation == generation => current.how_it_ended().await,
            _ => error.to_string(),
        };
        let after = match live.as_ref() {
            Some(current) if current.generation != generation && !current.is_closed() => {
                "it was restarted for the next call".to_string()
            }
            _ => {
                *live = None;
                match self.open(generation + 1).await {
                    Ok(fresh) => {
                        tracing::info!(server = %self.name, pid = fresh.pid.unwrap_or(0), "MCP server restarted");
                        *live = Some(fresh);
                        "it was restarted for the next call".to_string()
                    }
                    Err(e) => format!("restarting it failed ({e}); the next call tries again"),
                }
            }
        };
        tracing::warn!(server = %self.name, tool, "MCP server stopped during a call ({detail})");
        McpError::Crashed {
            server: self.name.clone(),
            tool: tool.to_string(),
            detail,
            after,
        }
    }

    /// Starts a session: the process or the HTTP session, through MCP's initialization.
    async fn open(&self, generation: u64) -> Result<Live, McpError> {
        match (&self.settings.command, &self.settings.url) {
            (Some(command), _) => self.open_stdio(command, generation).await,
            (None, Some(url)) => self.open_http(url, generation).await,
            (None, None) => Err(McpError::Setting {
                server: self.name.clone(),
                message: "set `command` (a stdio server) or `url` (streamable HTTP)".into(),
            }),
        }
    }

    async fn open_stdio(&self, command: &str, generation: u64) -> Result<Live, McpError> {
        let program = find_program(command).ok_or_else(|| McpError::CommandNotFound {
            server: self.name.clone(),
            command: command.to_string(),
        })?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&self.settings.args).envs(&self.settings.env);
        // Its own process group: Ctrl-C at the terminal stops the run at a step boundary
        // (the CLI's handling) instead of killing the server under a running call.
        #[cfg(unix)]
        cmd.process_group(0);
        let (process, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.not_started(format!("could not run `{command}`: {e}")))?;
        let pid = process.id();
        let stderr = stderr.map(|s| StderrTail::forward(&self.name, pid, s));
        match tokio::time::timeout(self.startup(), Client.serve(process)).await {
            Ok(Ok(service)) => Ok(Live {
                service,
                generation,
                pid,
                stderr,
            }),
            Ok(Err(e)) => {
                let mut detail = format!("`{command}` did not complete MCP's initialization ({e})");
                if let Some(stderr) = &stderr {
                    stderr.settle(LAST_WORDS_WAIT).await;
                    if let Some(words) = stderr.last_words() {
                        detail.push_str(&format!("; its last stderr lines: {words}"));
                    }
                }
                Err(self.not_started(detail))
            }
            Err(_) => Err(self.not_started(format!(
                "`{command}` did not complete MCP's initialization within {}s \
                 (`startup_timeout_secs`)",
                self.settings.startup_timeout_secs
            ))),
        }
    }

    async fn open_http(&self, url: &str, generation: u64) -> Result<Live, McpError> {
        // rmcp's HTTP client is rustls without a built-in provider: use ring, as the rest of
        // the workspace does. Fails only when a provider is installed already, which serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut headers = HashMap::new();
        for (name, value) in &self.settings.headers {
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                http::HeaderValue::from_str(value),
            ) else {
                return Err(McpError::Setting {
                    server: self.name.clone(),
                    message: format!("header `{name}` is not a valid HTTP header"),
                });
            };
            headers.insert(name, value);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
        if let Some(token) = self.settings.bearer(&self.name)? {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        match tokio::time::timeout(self.startup(), Client.serve(transport)).await {
            Ok(Ok(service)) => Ok(Live {
                service,
                generation,
                pid: None,
                stderr: None,
            }),
            Ok(Err(e)) => {
                Err(self.not_started(format!("{url} did not complete MCP's initialization ({e})")))
            }
            Err(_) => Err(self.not_started(format!(
                "{url} did not complete MCP's initialization within {}s (`startup_timeout_secs`)",
                self.settings.startup_timeout_secs
            ))),
        }
    }
}

fn is_closed_error(error: &ServiceError) -> bool {
    matches!(
        error,
        ServiceError::TransportClosed | ServiceError::TransportSend(_)
    )
}
