//! Tasks: preparing each frontier task (its context, reused results, answers), running them
//! concurrently with timeouts, retries and panics caught, and saving each result as it finishes.

use super::{cached, timeouts, Outcome, OutcomeSlots, PreparedTask, Run};
use crate::checkpoint::{InterruptRecord, PendingKind, PendingWrite, TaskSpec};
use crate::error::{NodeError, NodeErrorKind, RunError};
use crate::graph::{goto_records, gotos_of};
use crate::graph::{Command, GraphError};
use crate::run::config::Durability;
use crate::run::context::{as_task, Context, TaskContext};
use crate::run::control::Heartbeat;
use crate::run::events::{Event, EventSink};
use crate::runtime::persist::{self};
use crate::state::State;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

impl<S: State> Run<S> {
    /// The tasks to run, and a slot per frontier task (already filled for reused results).
    pub(super) fn prepare(
        &self,
        step: u64,
    ) -> Result<(Vec<PreparedTask<S>>, OutcomeSlots<S>), RunError> {
        let topology = &self.graph.topology;
        let mut prepared = Vec::new();
        let mut outcomes: Vec<Option<Outcome<S>>> = Vec::with_capacity(self.frontier.tasks.len());
        for (index, spec) in self.frontier.tasks.iter().enumerate() {
            let Some(node_index) = topology.node_index(&spec.node) else {
                return Err(RunError::Graph(GraphError::UnknownNode {
                    name: spec.node.clone(),
                    context: "a saved or sent task",
                    known: self.graph.node_names().join(", "),
                }));
            };
            if let Some(reused) = self.reuse(index, spec)? {
                outcomes.push(Some(reused));
                continue;
            }
            outcomes.push(None);
            let entry = &topology.builder.nodes[node_index];
            let (answers, forwarded) = self.answers_for(index);
            let ctx = Context::new(TaskContext {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
                step,
                node: entry.name.clone(),
                task: index,
                checkpoint_id: self.checkpoint_id,
                settings: self.settings.clone(),
                arg: spec.arg.clone(),
                events: self.events.clone(),
                answers,
                checkpointer: self.store().cloned(),
                attempt: AtomicU32::new(1),
                interrupts_seen: AtomicU32::new(0),
                replayed: Default::default(),
                path: self.path.clone(),
                inherit: self.inherit.clone(),
                forwarded,
                subgraph_calls: AtomicU32::new(0),
                child_pauses: Default::default(),
                kept: Default::default(),
                heartbeat: Heartbeat::for_task(
                    entry.options.idle_timeout,
                    timeouts::parent_heartbeat(&self.path),
                ),
            });
            prepared.push(PreparedTask {
                index,
                node: entry.node.clone(),
                name: entry.name.clone(),
                options: entry.options.clone(),
                ctx,
                cache: self.task_cache(index, spec, &entry.options),
            });
        }
        Ok((prepared, outcomes))
    }

    /// The answers saved for task `index`: to its own interrupts (by ordinal), and to interrupts
    /// of subgraphs it runs (by id, handed down when it runs them again).
    pub(super) fn answers_for(
        &self,
        index: usize,
    ) -> (
        Vec<Option<serde_json::Value>>,
        BTreeMap<String, serde_json::Value>,
    ) {
        // Only needed when the task has answers; building it for every task of a child's
        // every step was most of what a subgraph run cost beyond its steps.
        let mut own: Option<String> = None;
        let mut answers: Vec<Option<serde_json::Value>> = Vec::new();
        let mut forwarded = BTreeMap::new();
        for w in &self.pending {
            let PendingKind::Resume {
                interrupt_id,
                ordinal,
                value,
            } = &w.kind
            else {
                continue;
            };
            if w.task != index {
                continue;
            }
            let own = own.get_or_insert_with(|| self.path.namespace());
            let below = self.pending.iter().any(|p| {
                matches!(&p.kind, PendingKind::Interrupt(r) if r.id == *interrupt_id && r.namespace != *own)
            });
            if below {
                forwarded.insert(interrupt_id.clone(), value.clone());
                continue;
            }
            let at = *ordinal as usize;
            if answers.len() <= at {
                answers.resize(at + 1, None);
            }
            answers[at] = Some(value.clone());
        }
        (answers, forwarded)
    }

    /// A task whose result an earlier run already saved against this checkpoint.
    pub(super) fn reuse(
        &self,
        index: usize,
        spec: &TaskSpec,
    ) -> Result<Option<Outcome<S>>, RunError> {
        for w in &self.pending {
            if let PendingKind::Update { update, goto } = &w.kind {
                if w.task == index && w.node == spec.node {
                    let decoded =
                        persist::decode_named::<S::Update>(update.get()).map_err(|message| {
                            RunError::StateMismatch {
                                thread_id: self.thread_id.to_string(),
                                checkpoint: self.checkpoint_id,
                                message: format!("a saved update of `{}`: {message}", w.node),
                            }
                        })?;
                    return Ok(Some(Outcome::Reused {
                        update: decoded,
                        raw: update.clone(),
                        goto: gotos_of(goto),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// Runs the prepared tasks concurrently and fills in their outcomes by task index, so the
    /// order of results never depends on which task finished first.
    pub(super) async fn run_tasks(
        &mut self,
        step: u64,
        mut prepared: Vec<PreparedTask<S>>,
        outcomes: &mut [Option<Outcome<S>>],
    ) -> Result<(), RunError> {
        let cancel = self.config.cancel.clone();
        let thread_id = self.thread_id.clone();
        let cancelled = move || RunError::Cancelled {
            thread_id: thread_id.to_string(),
        };
        if prepared.len() == 1 {
            if let Some(task) = prepared.pop() {
                // One task: run it in place; the concurrent machinery would only add overhead.
                let index = task.index;
                let fut = run_task(task, self.state.clone(), self.events.clone(), step);
                let outcome = match &cancel {
                    // The token first: a subgraph run by the task sees the same token and
                    // may end at the same moment, and its end is the cancellation's.
                    Some(token) => tokio::select! {
                        biased;
                        _ = token.cancelled() => return Err(cancelled()),
                        o = fut => o,
                    },
                    None => fut.await,
                };
                outcomes[index] = Some(outcome);
                return Ok(());
            }
        }
        // The step's tasks run concurrently inside this task rather than spawned: node work is
        // mostly waiting on I/O, and spawning costs more than the nodes of a fast graph. A node
        // with heavy CPU work can move it to `tokio::task::spawn_blocking` itself.
        let mut running: FuturesUnordered<_> = prepared
            .into_iter()
            .map(|task| {
                let index = task.index;
                run_task(task, self.state.clone(), self.events.clone(), step)
                    .map(move |o| (index, o))
            })
            .collect();
        loop {
            let joined = match &cancel {
                Some(token) => tokio::select! {
                    biased;
                    _ = token.cancelled() => return Err(cancelled()),
                    j = running.next() => j,
                },
                None => running.next().await,
            };
            let Some(first) = joined else {
                break;
            };
            // Siblings that have finished by now are saved with it, in one write: a fan-out's
            // tasks that end together cost one commit, not one each, and every result is still
            // on disk before any is used.
            let mut finished = vec![first];
            while let Some(Some(more)) = running.next().now_or_never() {
                finished.push(more);
            }
            self.save_finished(&mut finished).await?;
            for (index, outcome) in finished {
                outcomes[index] = Some(outcome);
            }
        }
        Ok(())
    }

    /// Saves finished tasks' results of a multi-task step as soon as they finish (not in exit
    /// mode), keeping each one's serialized form for the step's checkpoint.
    async fn save_finished(
        &mut self,
        finished: &mut [(usize, Outcome<S>)],
    ) -> Result<(), RunError> {
        let Some(mode) = self.writer.as_ref().map(|w| w.mode()) else {
            return Ok(());
        };
        if mode == Durability::Exit {
            return Ok(());
        }
        let mut writes = Vec::with_capacity(finished.len());
        for (index, outcome) in finished.iter_mut() {
            let Outcome::Done { command, raw, .. } = outcome else {
                continue;
            };
            let update = persist::to_raw(&command.update)?;
            *raw = Some(update.clone());
            self.supersede_stale_staging(*index).await?;
            writes.push(PendingWrite {
                task: *index,
                node: self.frontier.tasks[*index].node.clone(),
                kind: PendingKind::Update {
                    update,
                    goto: goto_records(&command.goto),
                },
            });
        }
        // In sync mode a finished task's result is on disk before its siblings' results are
        // used (ARCHITECTURE.md): a kill after it finished never runs it again. In async mode
        // it rides along with the step's checkpoint flush, and a crash before that costs
        // re-running this task.
        self.save_pending(writes, mode == Durability::Sync).await
    }
}

/// Runs one task with its timeout and retry policy, catching panics.
async fn run_task<S: State>(
    task: PreparedTask<S>,
    state: Arc<S>,
    events: EventSink,
    step: u64,
) -> Outcome<S> {
    // `attempt` is recorded as each attempt begins (the exported span keeps the last one).
    let span = tracing::info_span!(
        "node",
        node = %task.name,
        step,
        task = task.index,
        attempt = tracing::field::Empty,
        cached = tracing::field::Empty
    );
    async move {
        // The clock is read only when events are streamed: durations only feed them.
        let started = events.is_active().then(Instant::now);
        let max_attempts = task
            .options
            .retry
            .as_ref()
            .map(|r| r.max_attempts.max(1))
            .unwrap_or(1);
        if let Some(hit) = cached::served(&task, &events, step, started).await {
            tracing::Span::current().record("cached", true);
            return hit;
        }
        let mut attempt = 1u32;
        loop {
            task.ctx.begin_attempt(attempt);
            tracing::Span::current().record("attempt", attempt);
            events.live(|| Event::NodeStarted {
                namespace: String::new(),
                step,
                node: task.name.to_string(),
                task: task.index,
                attempt,
            });
            let result = attempt_once(&task, state.clone()).await;
            let error = match settle_attempt(&task, &events, step, started, result) {
                Ok(outcome) => {
                    cached::keep(&task, &outcome).await;
                    return outcome;
                }
                Err(error) => error,
            };
            match retry_or_fail(&task, &events, step, attempt, max_attempts, error) {
                ControlFlow::Continue(wait) => tokio::time::sleep(wait).await,
                ControlFlow::Break(failed) => return failed,
            }
            attempt += 1;
        }
    }
    .instrument(span)
    .await
}

/// Milliseconds since `started` (0 when no events are streamed and the clock was not read).
fn elapsed_ms(started: Option<Instant>) -> f64 {
    started
        .map(|t| t.elapsed().as_secs_f64() * 1000.0)
        .unwrap_or_default()
}

/// What an attempt came to: the task's outcome (done or paused), or the error of a failed
/// attempt, which the retry policy may give another go.
fn settle_attempt<S: State>(
    task: &PreparedTask<S>,
    events: &EventSink,
    step: u64,
    started: Option<Instant>,
    result: Result<Command<S>, NodeError>,
) -> Result<Outcome<S>, NodeError> {
    // A graph the node invoked itself paused: the task pauses, whatever the node made
    // of it; it runs again on resume and the graph continues where it paused.
    let mut pauses = task.ctx.take_child_pauses();
    if !pauses.is_empty() {
        if let Err(e) = result {
            pauses.extend(own_pauses(e));
        }
        return Ok(Outcome::Interrupted(pauses));
    }
    let error = match result {
        Ok(command) => {
            events.live(|| Event::NodeFinished {
                namespace: String::new(),
                step,
                node: task.name.to_string(),
                task: task.index,
                duration_ms: elapsed_ms(started),
                update: serde_json::to_value(&command.update).unwrap_or(serde_json::Value::Null),
                cached: false,
            });
            return Ok(Outcome::Done {
                command,
                raw: None,
                elapsed_ms: elapsed_ms(started),
                cached: false,
            });
        }
        Err(e) => e,
    };
    if matches!(error.kind(), NodeErrorKind::Interrupted(_)) {
        return Ok(Outcome::Interrupted(own_pauses(error)));
    }
    Err(error)
}

/// After attempt `attempt` failed with `error`: the wait before the next one if the retry
/// policy allows it (never after a panic), else the task's failure. Either way the failure
/// is reported, saying whether it will be retried.
fn retry_or_fail<S: State>(
    task: &PreparedTask<S>,
    events: &EventSink,
    step: u64,
    attempt: u32,
    max_attempts: u32,
    error: NodeError,
) -> ControlFlow<Outcome<S>, Duration> {
    let retry = task.options.retry.as_ref().filter(|p| {
        attempt < max_attempts
            && !matches!(error.kind(), NodeErrorKind::Panicked)
            && (p.retry_on)(&error)
    });
    events.live(|| Event::NodeFailed {
        namespace: String::new(),
        step,
        node: task.name.to_string(),
        task: task.index,
        attempt,
        error: error.message().to_string(),
        will_retry: retry.is_some(),
    });
    let Some(policy) = retry else {
        tracing::warn!(attempt, error = %error, "node failed");
        return ControlFlow::Break(Outcome::Failed {
            error,
            attempts: attempt,
        });
    };
    let wait = policy.backoff(attempt);
    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %error, "node attempt failed; retrying");
    ControlFlow::Continue(wait)
}

/// The pauses an error carries: a subgraph's (all of them) or the node's own.
fn own_pauses(error: NodeError) -> Vec<InterruptRecord> {
    match error.kind() {
        NodeErrorKind::Interrupted(_) if !error.paused.is_empty() => error.paused,
        NodeErrorKind::Interrupted(record) => vec![(**record).clone()],
        _ => Vec::new(),
    }
}

/// One attempt of a task under its timeout, a panic turned into an error.
async fn attempt_once<S: State>(
    task: &PreparedTask<S>,
    state: Arc<S>,
) -> Result<Command<S>, NodeError> {
    let run = as_task(task.ctx.clone(), task.node.run(state, task.ctx.clone()));
    let fut = AssertUnwindSafe(run).catch_unwind();
    let fut = timeouts::idle_guard(&task.ctx, &task.name, task.options.idle_timeout, fut);
    let result = match task.options.timeout {
        Some(limit) => match tokio::time::timeout(limit, fut).await {
            Ok(r) => r,
            Err(_) => {
                return Err(NodeError::with_kind(
                    NodeErrorKind::Timeout(limit),
                    format!("timed out after {}", fmt_duration(limit)),
                ))
            }
        },
        None => fut.await,
    };
    result.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(NodeError::with_kind(
            NodeErrorKind::Panicked,
            format!("panicked: {message}"),
        ))
    })
}

fn fmt_duration(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}
