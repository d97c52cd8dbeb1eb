//! The thread's recent runs as the store keeps them (journal key [`RUNS_KEY`]): which process
//! ran each, and how it ended. Runs and their streams live in the memory of the process that
//! runs them (`log.rs`); this ledger is what outlives that process, so a server that did not
//! run a run (restarted after a crash, or another server over the same database) can still
//! answer for it:
//!
//! - ended: its stream is `metadata` then `end` with the status it ended with;
//! - still running in another live process: it is followed through the store, its thread's
//!   new checkpoints streamed as `values` every [`FOLLOW_EVERY`], until the ledger says it
//!   ended (`updates`, `messages`, `custom` and `debug` exist only in the running process);
//! - running, but its process is gone (killed): `error` (`RunLost`, saying the thread kept its
//!   last checkpoint and how to continue it) then `end` with status `error`.
//!
//! Limits: a process on another host is judged alive while the thread's lease is live (a lease
//! expires when its holder stops renewing it); a run whose process died before its first
//! ledger write is unknown (404), as any run id the store never saw.

use super::log::EventLog;
use super::RunHandle;
use crate::app::App;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::checkpoint::now_ms;
use std::sync::Arc;
use std::time::Duration;

/// The journal key of a thread's recent runs.
pub(crate) const RUNS_KEY: &str = "server/runs";

/// Runs a thread's ledger keeps, newest last.
const KEEP: usize = 20;

/// How often a run of another process is looked at in the store.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// One run as the ledger keeps it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Entry {
    pub run_id: String,
    /// The assistant (graph) it runs: what reads its thread's states.
    pub assistant_id: String,
    pub status: String,
    pub pid: u32,
    pub host: String,
    pub updated_at_ms: u64,
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The thread's ledger (empty when it has none or cannot be read: the ledger only ever adds
/// answers about runs this process does not have).
pub(crate) async fn read(app: &App, thread: &str) -> Vec<Entry> {
    match app.store.get_journal(thread, RUNS_KEY).await {
        Ok(Some(value)) => serde_json::from_value(value).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Records where `run` stands now, in this process. A failure is logged: the run itself goes on.
pub(crate) async fn record(app: &App, run: &RunHandle) {
    let mut entries = read(app, &run.thread_id).await;
    entries.retain(|e| e.run_id != run.id);
    entries.push(Entry {
        run_id: run.id.clone(),
        assistant_id: run.assistant_id.clone(),
        status: run.status().as_str().to_string(),
        pid: std::process::id(),
        host: host(),
        updated_at_ms: now_ms(),
    });
    let skip = entries.len().saturating_sub(KEEP);
    let value = json!(entries[skip..]);
    if let Err(e) = app
        .store
        .put_journal(&run.thread_id, RUNS_KEY, &value)
        .await
    {
        tracing::warn!(thread = %run.thread_id, run = %run.id, error = %e, "could not record a run");
    }
}

/// True when the process that wrote `entry` no longer runs it: gone from this host, or (on
/// another host) no longer holding the thread's lease.
async fn process_gone(app: &App, thread: &str, entry: &Entry) -> bool {
    if entry.host == host() {
        return !std::path::Path::new(&format!("/proc/{}", entry.pid)).exists();
    }
    match app.store.get_lease(thread).await {
        Ok(Some(lease)) => lease.expires_at_ms <= now_ms(),
        Ok(None) => now_ms().saturating_sub(entry.updated_at_ms) > 10_000,
        Err(_) => false,
    }
}

/// The stream of a run this process does not have, from the thread's ledger; `None` when the
/// ledger does not name it. Its ids follow `last_seen`, the last id its reader saw.
pub(crate) async fn stream_of(
    app: &Arc<App>,
    thread: &str,
    run_id: &str,
    last_seen: Option<u64>,
) -> Option<Arc<EventLog>> {
    let entry = read(app, thread)
        .await
        .into_iter()
        .find(|e| e.run_id == run_id)?;
    let log = Arc::new(EventLog::starting_at(last_seen.map_or(0, |id| id + 1)));
    let head = json!({"run_id": run_id, "thread_id": thread, "attempt": 1});
    log.push("metadata", None, &head);
    tokio::spawn(follow(app.clone(), thread.to_string(), entry, log.clone()));
    Some(log)
}

/// Streams the run's thread's new states until the run ends (or its process is found gone).
async fn follow(app: Arc<App>, thread: String, mut entry: Entry, log: Arc<EventLog>) {
    // The run's own assistant: the thread's record may have been read (and kept) here before
    // the run named its graph.
    let graph = app.assistants.get(&entry.assistant_id).ok();
    let mut seen = None;
    loop {
        // Nobody reads it any more (the reader left): stop asking the store.
        if Arc::strong_count(&log) == 1 {
            return;
        }
        if let Some(graph) = &graph {
            if let Ok(state) = graph.graph.get_state(&thread, None).await {
                if seen.as_ref() != Some(&state.checkpoint_id) {
                    // The first state is the one the reader joins at; later ones are new steps.
                    seen = Some(state.checkpoint_id);
                    log.push("values", Some("values"), &state.values);
                }
            }
        }
        if !matches!(entry.status.as_str(), "pending" | "running") {
            break;
        }
        if process_gone(&app, &thread, &entry).await {
            let message = format!(
                "run `{}` ended with the server that ran it (pid {} on {} stopped before the run \
                 did): thread `{thread}` kept its last checkpoint; continue it with POST \
                 /threads/{thread}/runs",
                entry.run_id, entry.pid, entry.host
            );
            log.push(
                "error",
                None,
                &json!({"error": "RunLost", "message": message}),
            );
            entry.status = "error".into();
            break;
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
        let now = read(&app, &thread).await;
        if let Some(newer) = now.into_iter().find(|e| e.run_id == entry.run_id) {
            entry = newer;
        }
    }
    let end = json!({"run_id": entry.run_id, "status": entry.status});
    log.push("end", None, &end);
    log.close();
}

/// How a run this process does not have stands, as `GET .../runs/{id}` shows it.
pub(crate) async fn describe(app: &App, thread: &str, run_id: &str) -> Option<Value> {
    let entry = read(app, thread)
        .await
        .into_iter()
        .find(|e| e.run_id == run_id)?;
    let mut status = entry.status.clone();
    if matches!(status.as_str(), "pending" | "running") && process_gone(app, thread, &entry).await {
        status = "error".into();
    }
    Some(json!({
        "run_id": entry.run_id,
        "thread_id": thread,
        "assistant_id": entry.assistant_id,
        "status": status,
        "updated_at": crate::shapes::iso(entry.updated_at_ms),
        "metadata": {"pid": entry.pid, "host": entry.host},
    }))
}

/// What `join` answers for a followed run once its stream has closed: the last values it
/// streamed, with `__error__` when it was lost.
pub(crate) fn joined(log: &EventLog) -> Value {
    let (frames, _) = log.from(0);
    let parse = |data: &str| serde_json::from_str::<Value>(data).unwrap_or(Value::Null);
    let mut out = frames
        .iter()
        .rev()
        .find(|f| f.event() == "values")
        .map_or_else(|| json!({}), |f| parse(f.data()));
    if let Some(error) = frames.iter().find(|f| f.event() == "error") {
        if let Value::Object(map) = &mut out {
            map.insert("__error__".into(), parse(error.data()));
        }
    }
    out
}
