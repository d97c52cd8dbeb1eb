//! A stdio server's stderr: each line goes to the log (`tracing`, target `stategraph_mcp`, with
//! the server's name), never to the terminal, where it would tear the live progress lines; the
//! last few are kept to explain a server that failed to start or stopped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::watch;

/// Lines kept for error messages.
const TAIL_LINES: usize = 8;

/// The end of one server process's stderr, read by a task of its own.
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    closed: watch::Receiver<bool>,
}

impl StderrTail {
    /// Reads `stderr` until it closes, logging each line under `server` (and `pid`).
    pub(crate) fn forward(server: &str, pid: Option<u32>, stderr: ChildStderr) -> Arc<StderrTail> {
        let (tx, rx) = watch::channel(false);
        let tail = Arc::new(StderrTail {
            lines: Mutex::new(VecDeque::new()),
            closed: rx,
        });
        let keep = tail.clone();
        let server = server.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "stategraph_mcp::stderr", server = %server, pid = pid.unwrap_or(0), "{line}");
                if let Ok(mut kept) = keep.lines.lock() {
                    if kept.len() == TAIL_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
            let _ = tx.send(true);
        });
        tail
    }

    /// Waits (at most `limit`) for the process's stderr to close, so that a process that just
    /// exited has had its last words read.
    pub(crate) async fn settle(&self, limit: Duration) {
        let mut closed = self.closed.clone();
        let _ = tokio::time::timeout(limit, closed.wait_for(|c| *c)).await;
    }

    /// The last lines it wrote, joined with ` | `, or `None` when it wrote nothing.
    pub(crate) fn last_words(&self) -> Option<String> {
        let kept = self.lines.lock().ok()?;
        let words: Vec<&str> = kept
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        (!words.is_empty()).then(|| words.join(" | "))
    }
}
