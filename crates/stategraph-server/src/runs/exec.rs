//! Running a run: its graph on its thread, its engine events into its stream, then how it ended
//! (`error` if it failed, `end` always), and the thread's next run, or the thread let go.

use super::plan::{Plan, Start};
use super::{RunHandle, Status};
use crate::app::App;
use crate::shapes::interrupts;
use crate::sse::Mapper;
use serde_json::{json, Value};
use stategraph::checkpoint::{CheckpointError, CheckpointId};
use stategraph::runtime::{Resume, RunError, RunOutcome, RunStatus};
use std::sync::Arc;

/// Runs `run`, then the runs queued behind it on its thread, in a task of their own.
pub(crate) fn spawn(app: Arc<App>, run: Arc<RunHandle>) {
    tokio::spawn(async move {
        let mut run = run;
        loop {
            execute(&app, &run).await;
            // A stateless run's thread is deleted while this server still holds it: let go
            // first, its store would be closed (flushed, indexed) only to be deleted, and
            // other requests would copy it to read it meanwhile.
            let temporary = run.temporary;
            match app.runs.next_after(&run, |t| {
                if !temporary {
                    app.release(t)
                }
            }) {
                Some(next) => run = next,
                None => break,
            }
        }
        let thread = run.thread_id.clone();
        if run.temporary {
            // A stateless run's thread goes with it; its stream and record stay readable.
            if let Err(e) = app.store.delete_thread(&thread).await {
                tracing::warn!(thread, error = %e, "could not delete a stateless run's thread");
            }
            app.threads.forget(&thread);
            // Let go, should the deletion have failed.
            app.thread_idle(&thread);
        }
    });
}

/// Ends a run that never started (cancelled while it waited).
pub(crate) fn end_unstarted(run: &RunHandle) {
    let reason = run.cancel_reason().unwrap_or_else(|| "cancelled".into());
    run.take_plan();
    run.finish(Status::Interrupted, json!({}), Some(reason));
    end_stream(run);
}

async fn execute(app: &App, run: &RunHandle) {
    let Some(plan) = run.take_plan() else { return };
    if run.cancel.is_cancelled() {
        end_unstarted(run);
        return;
    }
    run.set_running();
    // The ledger is what outlives this process: another server (or this one, restarted)
    // answers for the run from it.
    if !run.temporary {
        super::ledger::record(app, run).await;
    }
    let before = newest_checkpoint(app, &run.thread_id).await;
    let mut plan = plan;
    if let Some(store) = &app.long_term {
        // The graph file's `[retention]` item settings, over the store all runs share.
        let store = stategraph_registry::RetentionPolicy::store_for_runs(
            plan.assistant.resolved.file.retention.as_ref(),
            store,
        );
        plan.config = plan.config.with_store(store);
    }
    let result = drive(run, plan).await;
    if run.rolls_back() {
        if let Err(e) = roll_back(app, &run.thread_id, before).await {
            tracing::warn!(thread = %run.thread_id, run = %run.id, error = %e, "could not roll back a run");
            let error = json!({"error": "RollbackFailed", "message": e.to_string()});
            run.log.push("error", None, &error);
        }
    }
    // The files of the graph's artifacts, for the state the run left (before the thread is let
    // go, so no other process writes it meanwhile); a stateless run's thread keeps none.
    if !run.temporary {
        crate::artifacts::write_after_run(app, &run.assistant_id, &run.thread_id).await;
    }
    match result {
        Ok(outcome) => {
            let (status, output) = match &outcome.status {
                RunStatus::Done => (Status::Success, outcome.state),
                RunStatus::Interrupted {
                    interrupts: waits, ..
                } => (Status::Interrupted, with_interrupts(outcome.state, waits)),
            };
            // A run that ran has written its thread's first checkpoint: a listing names it now.
            app.threads.listed([&run.thread_id]);
            run.finish(status, output, None);
        }
        Err(RunError::Cancelled { .. }) => {
            let reason = run.cancel_reason().unwrap_or_else(|| "cancelled".into());
            let values = last_values(app, run).await;
            run.finish(Status::Interrupted, values, Some(reason));
        }
        Err(e) => {
            let error = json!({"error": error_kind(&e), "message": e.to_string()});
            run.log.push("error", None, &error);
            run.finish(Status::Error, json!({ "__error__": error }), None);
        }
    }
    if !run.temporary {
        super::ledger::record(app, run).await;
    }
    end_stream(run);
}

fn end_stream(run: &RunHandle) {
    let end = json!({"run_id": run.id, "status": run.status().as_str()});
    run.log.push("end", None, &end);
    run.log.close();
}

/// Runs the plan, its events into the run's stream as they come.
async fn drive(run: &RunHandle, plan: Plan) -> Result<RunOutcome<Value>, RunError> {
    let graph = plan.assistant.graph.clone();
    let thread = plan.thread.as_str();
    let mut config = plan.config;
    let mut mapper = Mapper::new(plan.modes, plan.subgraphs);
    config.stream = mapper.engine_modes();
    config.cancel = Some(run.cancel.clone());
    let newest = match graph.get_state(thread, None).await {
        Ok(s) => Some(s),
        Err(RunError::ThreadNotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let running = async {
        match plan.start {
            Start::Input(input) => graph.run(input, config, Some(tx)).await,
            // A thread never run starts from an empty input (or the command's update), as
            // LangGraph's does.
            Start::Continue { update, .. }
                if newest.is_none() && config.checkpoint_id.is_none() =>
            {
                let input = update.unwrap_or_else(|| json!({}));
                graph.run(input, config, Some(tx)).await
            }
            Start::Continue {
                answer,
                update,
                goto,
            } => {
                let waiting = newest.as_ref().map_or(&[][..], |s| &s.interrupts[..]);
                let resume = Resume::answering(waiting, answer);
                match update.is_none() && goto.is_empty() {
                    true => graph.resume(thread, resume, config, Some(tx)).await,
                    false => {
                        let events = Some(tx);
                        graph
                            .resume_command(thread, resume, update, goto, config, events)
                            .await
                    }
                }
            }
        }
    };
    // The sender is dropped when the run ends: every event is in the stream before `end`.
    let pump = async {
        while let Some(event) = rx.recv().await {
            mapper.push(event, &run.log);
        }
    };
    let (result, ()) = tokio::join!(running, pump);
    result
}

/// The id of the thread's newest checkpoint (what a run starts from); `None` for a thread that
/// has none.
async fn newest_checkpoint(app: &App, thread: &str) -> Option<CheckpointId> {
    match app.store.get_checkpoint(thread, None).await {
        Ok(newest) => newest.map(|c| c.id),
        Err(e) => {
            tracing::warn!(thread, error = %e, "cannot read the newest checkpoint");
            None
        }
    }
}

/// Drops the checkpoints a rolled-back run wrote: every one newer than `before` (ids are
/// ordered by time), with their pending writes. What it saved against the checkpoint it started
/// from (tasks of a step cut short) stays, as it does for a run cancelled with `interrupt`.
async fn roll_back(
    app: &App,
    thread: &str,
    before: Option<CheckpointId>,
) -> Result<(), CheckpointError> {
    let mut doomed = Vec::new();
    let mut older_than = None;
    loop {
        let page = app.store.list_checkpoints(thread, older_than, 100).await?;
        let Some(last) = page.last() else { break };
        older_than = Some(last.id);
        let newer = page
            .iter()
            .map(|c| c.id)
            .take_while(|id| before.is_none_or(|b| *id > b));
        let count = doomed.len();
        doomed.extend(newer);
        if doomed.len() - count < page.len() {
            break;
        }
    }
    if doomed.is_empty() {
        return Ok(());
    }
    app.store.delete_checkpoints(thread, &doomed).await
}

/// A paused run's result: its values with `__interrupt__`, as LangGraph's `wait` answers.
fn with_interrupts(values: Value, waits: &[stategraph::checkpoint::InterruptRecord]) -> Value {
    let mut out = match values {
        Value::Object(m) => m,
        other => {
            let mut m = serde_json::Map::new();
            m.insert("values".into(), other);
            m
        }
    };
    out.insert("__interrupt__".into(), interrupts(waits));
    Value::Object(out)
}

/// The thread's values now (what a cancelled run leaves).
async fn last_values(app: &App, run: &RunHandle) -> Value {
    let Ok(assistant) = app.assistants.get(&run.assistant_id) else {
        return json!({});
    };
    match assistant.graph.get_state(&run.thread_id, None).await {
        Ok(s) => s.values,
        Err(_) => json!({}),
    }
}

/// A short name for what went wrong, as LangGraph's `error` events carry the exception's.
fn error_kind(e: &RunError) -> &'static str {
    match e {
        RunError::NodeFailed { .. } => "NodeFailed",
        RunError::Merge { .. } => "MergeConflict",
        RunError::RecursionLimit { .. } => "RecursionLimit",
        RunError::Checkpoint(_) => "CheckpointError",
        RunError::ThreadNotFound { .. } | RunError::CheckpointNotFound { .. } => "NotFound",
        RunError::InvalidInput(_) => "InvalidInput",
        RunError::Resume(_) => "ResumeError",
        RunError::Cancelled { .. } => "Cancelled",
        _ => "RunError",
    }
}
