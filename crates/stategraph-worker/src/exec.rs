//! One claimed run: its graph resolved and built as the CLI builds it (registry, graph file with
//! the run's overrides, preflight), where it starts, heartbeats beside it, and its outcome.
//!
//! Where a run starts: the first time, from its input (a new run on the thread's newest
//! checkpoint) or its answer (a resume). A run claimed again (its worker died or drained) whose
//! thread moved on since its first start continues from the thread's last checkpoint instead,
//! so a saved step never runs again and an input is never applied twice.

use crate::shared::Shared;
use crate::stop::{StopSignal, Why};
use serde_json::Value;
use stategraph::checkpoint::{CheckpointError, CheckpointId, Checkpointer};
use stategraph::runtime::{Event, Resume, RunConfig, RunError, RunOutcome, RunStatus, StopReason};
use stategraph_postgres::queue::{Claimed, Outcome, QueueError, Start, Status, Stop};
use stategraph_registry::{ErasedGraph, EventSender, Override, Resolved};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a run left this worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Done,
    Paused,
    Failed,
    Cancelled,
    /// Given back to the queue (drain).
    Released,
    /// No longer this worker's, or the queue could not be told (its lease then lapses and
    /// another worker takes it over).
    Lost,
}

/// What the engine is asked to do.
enum Action {
    Run(Value),
    Resume(Resume),
}

/// Runs `run` to its end on this worker and records the outcome.
pub(crate) async fn execute(shared: &Shared, run: Claimed) -> Ended {
    // What an operator follows at the default level: a takeover is a warning (a worker died,
    // froze or lost the database), a claim and an end are one line each.
    match &run.taken_over_from {
        Some(from) => tracing::warn!(
            run = %run.id, thread = %run.thread, from = %from, claim = run.claims,
            "taking over a run whose worker's lease lapsed: it continues from its thread's last checkpoint"
        ),
        None => {
            tracing::info!(run = %run.id, graph = %run.graph, thread = %run.thread, claim = run.claims, "claimed a run")
        }
    }
    let signal = StopSignal::default();
    let outcome = tokio::select! {
        outcome = execute_run(shared, &run, &signal) => outcome,
        // Never ends: a lost run is abandoned, which makes `execute_run` end.
        never = watch(shared, &run, &signal) => match never {},
    };
    // What `execute_run` says, not `signal.lost()`: a heartbeat that lands just after the
    // outcome was recorded finds the run no longer running and reads as lost.
    match outcome {
        Ok(Ended::Lost) => {
            tracing::warn!(run = %run.id, "lease lost: the run was abandoned mid-step, for the worker that takes it over");
            Ended::Lost
        }
        Ok(ended) => ended,
        Err(QueueError::Lost { .. }) => {
            tracing::warn!(run = %run.id, "run taken over by another worker: nothing recorded");
            Ended::Lost
        }
        Err(e) => {
            tracing::warn!(run = %run.id, error = %e, "cannot record the run's outcome; its lease will lapse");
            Ended::Lost
        }
    }
}

/// Renews the run's lease and reads its stop, every heartbeat; hears the worker drain. Returns
/// never: a lost run is abandoned (its token cancelled) and this waits on.
async fn watch(shared: &Shared, run: &Claimed, signal: &StopSignal) -> std::convert::Infallible {
    let options = &shared.options;
    let mut last_renewed = Instant::now();
    let mut drain_heard = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(options.beat()) => {}
            _ = shared.draining.cancelled(), if !drain_heard => {
                drain_heard = true;
                signal.ask(Why::Drain);
                continue;
            }
        }
        if signal.lost() {
            continue;
        }
        // A heartbeat that hangs (a server gone from the network) must not outlast the lease
        // unnoticed.
        let beat = shared.queue.heartbeat(run.id, run.epoch, options.lease);
        let answer = tokio::time::timeout(options.lease / 2, beat).await;
        match answer.unwrap_or_else(|_| Err(QueueError::Invalid("the heartbeat timed out".into())))
        {
            Ok(stop) => {
                last_renewed = Instant::now();
                if let Some(stop) = stop {
                    signal.ask(Why::Queue(stop));
                }
            }
            Err(QueueError::Lost { .. }) => signal.abandon(),
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "cannot renew the run's lease");
                // Past its lease another worker may hold the run: stop at once.
                if last_renewed.elapsed() >= options.lease {
                    tracing::warn!(run = %run.id, "the run's lease lapsed unrenewed: abandoning it");
                    signal.abandon();
                }
            }
        }
    }
}

async fn execute_run(
    shared: &Shared,
    run: &Claimed,
    signal: &StopSignal,
) -> Result<Ended, QueueError> {
    // Where the thread was when the run first started; `None` until it started.
    let started = run.started.then_some(run.base_checkpoint);
    if let Some(stop) = run.stop {
        // Asked to stop before this claim (its worker died or drained first): never run on.
        return stopped(shared, run, started, Why::Queue(stop)).await;
    }
    let resolved = match resolve(shared, run) {
        Ok(resolved) => resolved,
        Err(why) => return finish(shared, run, started, Outcome::Failed(why)).await,
    };
    let store: Arc<dyn Checkpointer> = shared.store.clone();
    let graph = match resolved.build(Some(store.clone())) {
        Ok(graph) => graph,
        Err(e) => return finish(shared, run, started, Outcome::Failed(chain(&e))).await,
    };
    let head = store
        .get_checkpoint(&run.thread, None)
        .await
        .map_err(QueueError::Database)?
        .map(|c| c.id);
    let base = shared.queue.mark_started(run.id, run.epoch, head).await?;
    let started = Some(base);
    // Started before, and the thread moved on since: continue where it is.
    let moved_on = run.started && head != base;
    let action = match where_to_start(graph.as_ref(), run, moved_on).await {
        Ok(action) => action,
        Err(why) => return finish(shared, run, started, Outcome::Failed(why)).await,
    };
    let mut config = resolved
        .file
        .run_config()
        .thread(run.thread.clone())
        // A stop asked drains the run at its next step boundary; the token only abandons a
        // run this worker lost.
        .control(signal.control())
        .cancel_on(signal.token())
        // Workers share the database's node cache, as the CLI's runs share their store's.
        .cache(Arc::new(shared.store.node_cache()));
    config.lease_ttl = shared.options.lease;
    if let Some(store) = &shared.options.long_term {
        // The graph file's `[retention]` item settings, over the store all runs share.
        let store = stategraph_registry::RetentionPolicy::store_for_runs(
            resolved.file.retention.as_ref(),
            store,
        );
        config = config.with_store(store);
    }
    let result = drive(shared, graph.as_ref(), run, action, config, signal).await;
    if signal.lost() {
        return Ok(Ended::Lost);
    }
    let outcome = match result {
        Ok(out) => match out.status {
            RunStatus::Done => Outcome::Done,
            RunStatus::Interrupted { .. } => Outcome::Paused,
        },
        Err(RunError::Stopped {
            reason: StopReason::Drained,
            ..
        }) => match signal.asked() {
            Some(why) => return stopped(shared, run, started, why).await,
            None => Outcome::Failed("the run was drained, but no stop was asked".into()),
        },
        // The database failed mid-run (a restart, a full disk), also under a subgraph: the run
        // goes back to the queue and continues from its last checkpoint, a few claims at most.
        Err(e) if may_pass(&e) && run.claims <= shared.options.retries => {
            tracing::warn!(run = %run.id, error = %chain(&e), "the database failed under the run: it goes back to the queue");
            return give_back(shared, run).await;
        }
        Err(e) => Outcome::Failed(chain(&e)),
    };
    finish(shared, run, started, outcome).await
}

/// Whether another claim of the run may not meet what failed: the database failed under it (a
/// restart, a full disk), in the run's own steps or in a subgraph's (the engine fails the
/// parent run with the child's store error). A node's failure is not one, transient or not:
/// its retry policy already had its attempts, and the queue claiming the run again would
/// multiply them behind the graph's back.
fn may_pass(e: &RunError) -> bool {
    matches!(
        e,
        RunError::Checkpoint(CheckpointError::Storage(_) | CheckpointError::DiskFull { .. })
    )
}

/// Runs the action, waiting while another process holds the thread (up to `busy_wait`).
async fn drive(
    shared: &Shared,
    graph: &dyn ErasedGraph,
    run: &Claimed,
    action: Action,
    config: RunConfig,
    signal: &StopSignal,
) -> Result<RunOutcome<Value>, RunError> {
    let give_up = Instant::now() + shared.options.busy_wait;
    loop {
        if signal.asked().is_some() {
            // Asked before it started (or while it waited for its thread): the boundary is
            // here, and nothing of the run is saved, not even its input.
            return Err(RunError::Stopped {
                thread_id: run.thread.clone(),
                step: 0,
                reason: StopReason::Drained,
                next: Vec::new(),
                saved: false,
            });
        }
        if signal.token().is_cancelled() {
            return Err(RunError::Cancelled {
                thread_id: run.thread.clone(),
            });
        }
        let events = node_log(run);
        let result = match &action {
            Action::Run(input) => graph.run(input.clone(), config.clone(), events).await,
            Action::Resume(resume) => {
                let resume = resume.clone();
                graph
                    .resume(&run.thread, resume, config.clone(), events)
                    .await
            }
        };
        match result {
            Err(RunError::Checkpoint(CheckpointError::ThreadBusy { expires_in_ms, .. }))
                if Instant::now() < give_up && !signal.lost() =>
            {
                // A dead worker's lease on another host runs out, or a run outside the queue
                // ends; a lease whose holder died on this host is taken over at once.
                let wait = Duration::from_millis(expires_in_ms.clamp(20, 500));
                tokio::time::sleep(wait).await;
                // A worker that stalled past its lease finds its writes refused as a busy
                // thread: before it tries again, the run must still be its own.
                let lease = shared.options.lease;
                if let Err(QueueError::Lost { .. }) =
                    shared.queue.heartbeat(run.id, run.epoch, lease).await
                {
                    signal.abandon();
                }
            }
            other => return other,
        }
    }
}

/// The run's events, of which each node's start is logged (`info`, `node started` with run,
/// thread, step, node, task and attempt) under the target [`NODE_LOG`](crate::NODE_LOG): an
/// operator sees what a worker runs (`graph worker -v`), and a test counts from the log how
/// often each step of a thread was executed. Its own target, so a default level may show the
/// worker's other lines without one per node.
fn node_log(run: &Claimed) -> EventSender {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (id, thread) = (run.id, run.thread.clone());
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if let Event::NodeStarted {
                namespace,
                step,
                node,
                task,
                attempt,
                ..
            } = event
            {
                let thread = if namespace.is_empty() {
                    thread.clone()
                } else {
                    format!("{thread}/{namespace}")
                };
                tracing::info!(target: crate::NODE_LOG, run = %id, thread = %thread, step, node = %node, task, attempt, "node started");
            }
        }
    });
    Some(tx)
}

/// The graph of the run, resolved with its overrides and checked as a run's start is.
fn resolve(shared: &Shared, run: &Claimed) -> Result<Resolved, String> {
    let overrides = run
        .overrides
        .iter()
        .map(|o| o.parse::<Override>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let resolved = shared
        .registry
        .resolve(&run.graph, &overrides)
        .map_err(|e| chain(&e))?;
    resolved.preflight().map_err(|e| chain(&e))?;
    Ok(resolved)
}

/// Where the run starts: its input, its answer, or (taken over, its thread moved on since it
/// first started) the thread's last checkpoint.
async fn where_to_start(
    graph: &dyn ErasedGraph,
    run: &Claimed,
    moved_on: bool,
) -> Result<Action, String> {
    if moved_on {
        return Ok(Action::Resume(Resume::Continue));
    }
    match &run.start {
        Start::Input(input) => {
            graph
                .check_update(input, "the input")
                .map_err(|e| chain(&e))?;
            Ok(Action::Run(input.clone()))
        }
        Start::Resume(answer) => {
            let snapshot = match graph.get_state(&run.thread, None).await {
                Ok(snapshot) => snapshot,
                Err(RunError::ThreadNotFound { .. }) => {
                    return Err(format!(
                        "thread `{}` has no checkpoint: there is nothing to resume",
                        run.thread
                    ))
                }
                Err(e) => return Err(chain(&e)),
            };
            // Taken over after its answer was saved (the interrupt answered, no step since):
            // the answer is there, and the thread continues with it.
            if run.claims > 1 && snapshot.interrupts.is_empty() {
                return Ok(Action::Resume(Resume::Continue));
            }
            Ok(Action::Resume(Resume::answering(
                &snapshot.interrupts,
                answer.clone(),
            )))
        }
    }
}

/// Gives the run back to the queue, which hands it to the next worker free; a run asked to
/// cancel or interrupt meanwhile ends there, cancelled.
async fn give_back(shared: &Shared, run: &Claimed) -> Result<Ended, QueueError> {
    match shared.queue.release(run.id, run.epoch).await? {
        Status::Cancelled => {
            tracing::info!(run = %run.id, "run cancelled (asked as it was given back)");
            Ok(Ended::Cancelled)
        }
        _ => {
            tracing::info!(run = %run.id, "run given back to the queue, its step saved");
            Ok(Ended::Released)
        }
    }
}

/// A run that stopped as it was asked: cancelled, or (rolled back) with the checkpoints it saved
/// dropped first, or given back to the queue (the worker drains).
async fn stopped(
    shared: &Shared,
    run: &Claimed,
    started: Option<Option<CheckpointId>>,
    why: Why,
) -> Result<Ended, QueueError> {
    let message = match why {
        Why::Drain => return give_back(shared, run).await,
        Why::Queue(stop) => stop.message(),
    };
    finish(
        shared,
        run,
        started,
        Outcome::Cancelled(message.to_string()),
    )
    .await
}

/// Records the outcome; a rollback asked meanwhile drops the run's checkpoints first, and a
/// cancel or an interrupt asked meanwhile (after the run's last step began) holds: the queue
/// records the run cancelled. `started`: where the thread was when the run first started, if
/// it did.
async fn finish(
    shared: &Shared,
    run: &Claimed,
    started: Option<Option<CheckpointId>>,
    outcome: Outcome,
) -> Result<Ended, QueueError> {
    let rolling_back = matches!(&outcome, Outcome::Cancelled(m) if m == Stop::Rollback.message());
    let failure = match &outcome {
        Outcome::Failed(why) => Some(why.clone()),
        _ => None,
    };
    if rolling_back {
        roll_back(shared, run, started).await?;
    }
    let recorded = match shared.queue.finish(run.id, run.epoch, outcome).await {
        Err(QueueError::RollbackAsked(_)) => {
            roll_back(shared, run, started).await?;
            let message = Stop::Rollback.message().to_string();
            shared
                .queue
                .finish(run.id, run.epoch, Outcome::Cancelled(message))
                .await?
        }
        other => other?,
    };
    match (recorded, failure) {
        (Status::Failed, Some(why)) => {
            tracing::warn!(run = %run.id, thread = %run.thread, error = %why, "run failed")
        }
        (status, _) => tracing::info!(run = %run.id, thread = %run.thread, "run {status}"),
    }
    Ok(match recorded {
        Status::Done => Ended::Done,
        Status::Paused => Ended::Paused,
        Status::Failed => Ended::Failed,
        Status::Cancelled => Ended::Cancelled,
        // Not recorded by a finish; counted as given back.
        Status::Queued | Status::Running => Ended::Released,
    })
}

/// Drops the checkpoints the run saved: those after the thread's newest when it first started
/// (all of them for a thread it made); nothing for a run that never started.
async fn roll_back(
    shared: &Shared,
    run: &Claimed,
    started: Option<Option<CheckpointId>>,
) -> Result<(), QueueError> {
    let Some(base) = started else { return Ok(()) };
    let store = &shared.store;
    let mut newer: Vec<CheckpointId> = Vec::new();
    let mut before = None;
    'pages: loop {
        let page = store
            .list_checkpoints(&run.thread, before, 200)
            .await
            .map_err(QueueError::Database)?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        for record in &page {
            if Some(record.id) == base {
                break 'pages;
            }
            newer.push(record.id);
        }
    }
    store
        .delete_checkpoints(&run.thread, &newer)
        .await
        .map_err(QueueError::Database)?;
    tracing::info!(run = %run.id, thread = %run.thread, dropped = newer.len(), "rolled back");
    Ok(())
}

/// An error and its causes, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
