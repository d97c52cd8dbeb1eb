//! `[mcp.servers.NAME]`: which MCP servers a run uses and how to reach each, as read from the
//! run settings (a graph file's `[settings.mcp.servers.NAME]` table or
//! `--set mcp.servers.NAME.command=...`).
//!
//! ```
//! use stategraph_mcp::McpSettings;
//! let settings: McpSettings = serde_json::from_value(serde_json::json!({
//!     "servers": {
//!         "fs": {"command": "mcp-server-filesystem", "args": ["./ws"]},
//!         "issues": {"url": "https://mcp.example.com/mcp", "token_env": "ISSUES_TOKEN"}
//!     }
//! })).unwrap();
//! assert!(settings.servers["fs"].is_stdio());
//! assert_eq!(settings.servers["issues"].timeout_secs, 120);
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::McpError;
use crate::names::check_server_name;

/// Seconds a tool call may take by default before the model is told it timed out.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;

/// Seconds a server may take to start and list its tools by default.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 30;

/// The MCP servers of a run (`[settings.mcp]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// The servers, by name; the name prefixes each of its tools (`fs.read_file`). A name is
    /// letters, digits, `-` and single `_` inside it.
    pub servers: BTreeMap<String, ServerSettings>,
}

/// One server (`[settings.mcp.servers.NAME]`): `command` (+ `args`, `env`) starts it as a child
/// process speaking MCP over stdio; `url` (+ `headers`, `token` or `token_env`) reaches it over
/// streamable HTTP. Exactly one of `command` and `url`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// The program to start (found on `PATH` unless it holds a `/`).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the environment it inherits.
    pub env: BTreeMap<String, String>,
    /// The server's streamable HTTP endpoint (`http://` or `https://`).
    pub url: Option<String>,
    /// HTTP headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// A bearer token sent as `Authorization: Bearer ...`. Settings are recorded with the
    /// thread: prefer `token_env`.
    pub token: Option<String>,
    /// The environment variable holding the bearer token.
    pub token_env: Option<String>,
    /// Seconds one tool call may take before the model is told it timed out.
    pub timeout_secs: u64,
    /// Seconds the server may take to start and list its tools.
    pub startup_timeout_secs: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            token: None,
            token_env: None,
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            startup_timeout_secs: DEFAULT_STARTUP_TIMEOUT_SECS,
        }
    }
}

impl ServerSettings {
    /// A stdio server: `command` with `args`.
    ///
    /// ```
    /// use stategraph_mcp::ServerSettings;
    /// let fs = ServerSettings::stdio("mcp-server-filesystem", ["./ws"]);
    /// assert!(fs.is_stdio());
    /// ```
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerSettings {
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            ..ServerSettings::default()
        }
    }

    /// A streamable HTTP server at `url`.
    ///
    /// ```
    /// use stategraph_mcp::ServerSettings;
    /// assert!(!ServerSettings::http("http://127.0.0.1:3001/mcp").is_stdio());
    /// ```
    pub fn http(url: impl Into<String>) -> Self {
        ServerSettings {
            url: Some(url.into()),
            ..ServerSettings::default()
        }
    }

    /// True when the server is a child process (`command`), false for a URL.
    pub fn is_stdio(&self) -> bool {
        self.command.is_some()
    }

    /// The bearer token: `token`, else the variable `token_env` names (which must then be set).
    pub(crate) fn bearer(&self, server: &str) -> Result<Option<String>, McpError> {
        if let Some(token) = &self.token {
            return Ok(Some(token.clone()));
        }
        let Some(var) = &self.token_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Ok(Some(value)),
            _ => Err(McpError::Setting {
                server: server.to_string(),
                message: format!("`token_env` names the variable {var}, which is not set"),
            }),
        }
    }

    /// Checks what can be checked without starting the server.
    fn check(&self, server: &str) -> Result<(), McpError> {
        let bad = |message: String| McpError::Setting {
            server: server.to_string(),
            message,
        };
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "set `command` (a stdio server) or `url` (streamable HTTP), not both".into(),
                ))
            }
            (None, None) => {
                return Err(bad(
                    "set `command` (a stdio server, with `args`) or `url` (streamable HTTP)".into(),
                ))
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(bad("`command` is empty".into()));
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(format!(
                        "`url` must start with http:// or https://, not `{url}`"
                    )));
                }
            }
        }
        for (name, value) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value).is_err()
            {
                return Err(bad(format!("header `{name}` is not a valid HTTP header")));
            }
        }
        if self.timeout_secs == 0 || self.startup_timeout_secs == 0 {
            return Err(bad(
                "`timeout_secs` and `startup_timeout_secs` must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Checks what this machine must have: the command, the token's variable.
    fn preflight(&self, server: &str) -> Result<(), McpError> {
        if let Some(command) = &self.command {
            if find_program(command).is_none() {
                return Err(McpError::CommandNotFound {
                    server: server.to_string(),
                    command: command.clone(),
                });
            }
        }
        self.bearer(server).map(|_| ())
    }
}

impl McpSettings {
    /// True when no server is named.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Checks every server's settings as written: a name fit for tool names, one of `command`
    /// or `url`, headers, timeouts. It looks at nothing outside the settings, so a stored
    /// thread stays readable on a machine without the servers.
    ///
    /// ```
    /// use stategraph_mcp::{McpSettings, ServerSettings};
    /// let mut s = McpSettings::default();
    /// s.servers.insert("fs.local".into(), ServerSettings::stdio("sh", Vec::<String>::new()));
    /// assert!(s.check().unwrap_err().to_string().contains("fs.local"));
    /// ```
    pub fn check(&self) -> Result<(), McpError> {
        for (name, server) in &self.servers {
            check_server_name(name)?;
            server.check(name)?;
        }
        Ok(())
    }

    /// [`check`](Self::check), and what a run needs of this machine, without starting a
    /// server: each command found (a file, or a program on `PATH`), each `token_env` set. For
    /// a graph's checks before a run.
    ///
    /// ```
    /// use stategraph_mcp::{McpSettings, ServerSettings};
    /// let mut s = McpSettings::default();
    /// s.servers.insert("fs".into(), ServerSettings::stdio("/no/such/server", Vec::<String>::new()));
    /// assert!(s.check().is_ok());
    /// assert!(s.preflight().unwrap_err().to_string().contains("/no/such/server"));
    /// ```
    pub fn preflight(&self) -> Result<(), McpError> {
        self.check()?;
        for (name, server) in &self.servers {
            server.preflight(name)?;
        }
        Ok(())
    }
}

/// Where `command` is: itself when it names a path (holds a `/`), else the first executable
/// file of that name on `PATH`.
pub(crate) fn find_program(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        return path.is_file().then(|| path.to_path_buf());
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(server: Value) -> Result<(), McpError> {
        let settings: McpSettings =
            serde_json::from_value(json!({"servers": {"fs": server}})).unwrap();
        settings.preflight()
    }

    use serde_json::Value;

    #[test]
    fn a_server_is_a_command_or_a_url_and_never_both() {
        assert!(one(json!({"command": "sh"})).is_ok());
        assert!(one(json!({"url": "http://127.0.0.1:1/mcp"})).is_ok());
        let both = one(json!({"command": "sh", "url": "http://x"})).unwrap_err();
        assert!(both.to_string().contains("not both"), "{both}");
        let neither = one(json!({"args": ["x"]})).unwrap_err();
        assert!(neither.to_string().contains("server `fs`"), "{neither}");
        let scheme = one(json!({"url": "ftp://x"})).unwrap_err();
        assert!(scheme.to_string().contains("http://"), "{scheme}");
        let missing = one(json!({"command": "no-such-mcp-server-here"})).unwrap_err();
        assert!(
            missing.to_string().contains("no-such-mcp-server-here"),
            "{missing}"
        );
        let token =
            one(json!({"url": "http://x", "token_env": "NO_SUCH_VAR_FOR_MCP_TEST"})).unwrap_err();
        assert!(
            token.to_string().contains("NO_SUCH_VAR_FOR_MCP_TEST"),
            "{token}"
        );
    }

    #[test]
    fn a_typo_in_a_server_table_is_refused_by_name() {
        let err =
            serde_json::from_value::<McpSettings>(json!({"servers": {"fs": {"comand": "sh"}}}))
                .unwrap_err();
        assert!(err.to_string().contains("comand"), "{err}");
    }
}
