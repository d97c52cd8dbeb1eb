//! `run_command`: a shell command line run with `sh -c` in the workspace, in its own process
//! group so a timeout kills everything it started, with its output capped to the tail.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::Workspace;
use crate::ToolFailure;

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// A shell command line, run with `sh -c` in the workspace root.
    pub command: String,
    /// Seconds before the command and everything it started are killed (default 120).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

/// The last `cap` bytes of a stream, and how many were dropped before them.
struct Tail {
    bytes: Vec<u8>,
    cut: u64,
    cap: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > self.cap {
            let drop = self.bytes.len() - self.cap;
            self.bytes.drain(..drop);
            self.cut += drop as u64;
        }
    }

    fn text(&self) -> String {
        let body = String::from_utf8_lossy(&self.bytes);
        if self.cut > 0 {
            format!("[... {} earlier bytes cut ...]\n{body}", self.cut)
        } else {
            body.into_owned()
        }
    }
}

async fn pump<R: tokio::io::AsyncRead + Unpin>(mut from: R, into: Arc<Mutex<Tail>>) {
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut tail) = into.lock() {
                    tail.push(&buf[..n]);
                }
            }
        }
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals the process group we created for the
        // command (process_group(0) made its leader's pid the group id); no memory involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

pub(crate) async fn run_command(
    ws: &Workspace,
    args: RunCommandArgs,
) -> Result<String, ToolFailure> {
    if args.command.trim().is_empty() {
        return Err(ToolFailure("`command` is empty".into()));
    }
    let limits = ws.limits();
    let seconds = args
        .timeout_s
        .unwrap_or(limits.default_timeout_s)
        .clamp(1, limits.max_timeout_s);
    let mut child = start(ws, &args.command)?;
    let pid = child.id();
    let tail = Arc::new(Mutex::new(Tail {
        bytes: Vec::new(),
        cut: 0,
        cap: limits.max_output_bytes,
    }));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(out, tail.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(err, tail.clone())));
    }
    let status = wait_or_kill(&mut child, pid, seconds).await?;
    drain(readers, pid).await;
    let output = tail.lock().map(|t| t.text()).unwrap_or_default();
    match status {
        None => Err(ToolFailure(format!(
            "timed out after {seconds}s; the command and everything it started were killed. \
             Output so far:\n{output}"
        ))),
        Some(status) => Ok(reply(status, &output)),
    }
}

/// Starts `sh -c command` in the workspace root, as the leader of a process group of its own
/// (so a kill reaches everything it starts), with its output piped.
fn start(ws: &Workspace, command: &str) -> Result<tokio::process::Child, ToolFailure> {
    tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(ws.root())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolFailure(format!("cannot start `sh -c`: {e}")))
}

/// Waits `seconds` for the command to end: its exit status, or `None` when it ran out of time
/// and its group was killed.
async fn wait_or_kill(
    child: &mut tokio::process::Child,
    pid: Option<u32>,
    seconds: u64,
) -> Result<Option<std::process::ExitStatus>, ToolFailure> {
    let waited = tokio::time::timeout(Duration::from_secs(seconds), child.wait()).await;
    match waited {
        Ok(status) => Ok(Some(status.map_err(|e| {
            ToolFailure(format!("waiting for the command failed: {e}"))
        })?)),
        Err(_) => {
            kill_group(pid);
            let _ = child.wait().await;
            Ok(None)
        }
    }
}

/// Lets the output readers finish once the command has ended.
async fn drain(mut readers: Vec<tokio::task::JoinHandle<()>>, pid: Option<u32>) {
    // Something it left running in the background may hold the pipes open: give the readers
    // a moment, then end the group so they finish.
    let drained = tokio::time::timeout(
        Duration::from_secs(2),
        futures::future::join_all(readers.iter_mut()),
    )
    .await;
    if drained.is_err() {
        kill_group(pid);
        for r in &readers {
            r.abort();
        }
    }
}

/// The tool's reply for a command that ended: its exit code, then its output.
fn reply(status: std::process::ExitStatus, output: &str) -> String {
    let code = match status.code() {
        Some(code) => format!("exit code: {code}"),
        None => "exit code: none (killed by a signal)".to_string(),
    };
    if output.is_empty() {
        format!("{code}\n(no output)")
    } else {
        format!("{code}\n{output}")
    }
}
