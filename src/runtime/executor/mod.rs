//! The superstep loop: run the frontier's tasks concurrently, merge their updates in task order,
//! advance the frontier, save a checkpoint, repeat.

mod begin;
mod interrupts;
mod save;
mod step;
mod tasks;

use super::config::RunConfig;
use super::context::{Context, Inherited};
use super::error::{NodeError, RunError};
use super::events::EventSink;
use super::namespace::ThreadPath;
use super::persist::{self, CheckpointWriter, LeaseGuard, SnapshotTracker};
use super::{Resume, RunOutcome, RunStatus};
use crate::checkpoint::{
    validate_thread_id, CheckpointId, Checkpointer, Frontier, InterruptRecord, PendingWrite,
};
use crate::graph::{Command, CompiledGraph, Goto, NodeOptions};
use crate::state::{State, WriteMarks};
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The node name input updates are attributed to.
pub(crate) const INPUT_WRITER: &str = "__input__";

/// How a run begins.
pub(crate) enum Start<S: State> {
    /// Apply this input and run from START.
    Input(S::Update),
    /// Continue the thread from a checkpoint, answering interrupts if asked.
    Resume { thread_id: String, resume: Resume },
    /// Continue with LangGraph's `Command(resume, update, goto)`: answers, an edit applied
    /// before the step, and extra tasks for it.
    Command {
        thread_id: String,
        resume: Resume,
        update: Option<S::Update>,
        goto: Vec<Goto>,
    },
}

/// One task's result.
enum Outcome<S: State> {
    Done {
        command: Command<S>,
        raw: Option<Box<RawValue>>,
        /// How long it took, all attempts included (measured only when someone listens).
        elapsed_ms: f64,
    },
    Reused {
        update: S::Update,
        raw: Box<RawValue>,
        goto: Vec<Goto>,
    },
    Failed {
        error: NodeError,
        attempts: u32,
    },
    /// The task paused: its own interrupt, or every pause of a subgraph it ran.
    Interrupted(Vec<InterruptRecord>),
}

/// One slot per frontier task, in task order.
type OutcomeSlots<S> = Vec<Option<Outcome<S>>>;

struct PreparedTask<S: State> {
    index: usize,
    node: Arc<dyn crate::graph::Node<S>>,
    name: Arc<str>,
    options: NodeOptions,
    ctx: Context,
}

pub(crate) struct Run<S: State> {
    graph: CompiledGraph<S>,
    config: RunConfig,
    thread_id: Arc<str>,
    /// The thread (or subgraph namespace) this run writes.
    path: Arc<ThreadPath>,
    /// Nested: a subgraph's run inside a parent's task (no lease of its own).
    inherit: Arc<Inherited>,
    run_id: Arc<str>,
    events: EventSink,
    settings: Arc<serde_json::Map<String, serde_json::Value>>,
    state: Arc<S>,
    step: u64,
    frontier: Frontier,
    checkpoint_id: CheckpointId,
    /// The newest checkpoint of this run known to be written (the parent for exit mode).
    persisted: Option<CheckpointId>,
    /// Results saved against `checkpoint_id` by an earlier run (resume) or this one.
    pending: Vec<PendingWrite>,
    writer: Option<CheckpointWriter>,
    snapshots: SnapshotTracker,
    before: BTreeSet<String>,
    after: BTreeSet<String>,
    skip_before: bool,
    last_writers: Vec<String>,
    unsaved: bool,
    /// What a paused run's result shows: the state with the step's finished results merged.
    shown: Option<S>,
    /// Which fields this run's steps wrote, when its caller asked (a graph used as a node of
    /// its parent's state type, run in one go from its input).
    pub(crate) marks: Option<WriteMarks>,
}

fn merged_names(graph_set: &BTreeSet<String>, run_set: &BTreeSet<String>) -> BTreeSet<String> {
    graph_set.union(run_set).cloned().collect()
}

impl<S: State> Run<S> {
    /// Prepares a run: claims the thread, loads or creates its state, applies input or answers.
    /// A nested run (a subgraph inside a parent's task) writes `nested`, a namespace of the
    /// parent's thread (its thread id is that path written out), which the parent's lease
    /// already covers.
    pub(crate) async fn start(
        graph: CompiledGraph<S>,
        start: Start<S>,
        config: RunConfig,
        events: EventSink,
        nested: Option<ThreadPath>,
    ) -> Result<(Run<S>, Option<LeaseGuard>), RunError> {
        graph.check_names(config.interrupt_before.iter().cloned(), "interrupt_before")?;
        graph.check_names(config.interrupt_after.iter().cloned(), "interrupt_after")?;
        let thread_id: String = match &start {
            Start::Resume { thread_id, .. } | Start::Command { thread_id, .. } => thread_id.clone(),
            Start::Input(_) => config
                .thread_id
                .clone()
                .unwrap_or_else(persist::new_unique_id),
        };
        let is_nested = nested.is_some();
        let path = match nested {
            Some(path) => path,
            None => {
                validate_thread_id(&thread_id)?;
                ThreadPath::root_of(thread_id.clone())
            }
        };
        let store = graph.checkpointer.clone();
        if store.is_none() && matches!(start, Start::Resume { .. } | Start::Command { .. }) {
            return Err(RunError::NoCheckpointer {
                operation: "resume",
            });
        }
        let lease = match &store {
            Some(s) if !is_nested => {
                Some(LeaseGuard::acquire(s.clone(), &thread_id, config.lease_ttl).await?)
            }
            _ => None,
        };
        let run_id: Arc<str> = persist::new_unique_id().into();
        let mut run = Run {
            before: merged_names(&graph.interrupt_before, &config.interrupt_before),
            after: merged_names(&graph.interrupt_after, &config.interrupt_after),
            writer: store
                .clone()
                .map(|s| CheckpointWriter::new(s, config.durability)),
            snapshots: SnapshotTracker::new(config.snapshots, Default::default()),
            settings: Arc::new(config.settings.clone()),
            graph,
            thread_id: thread_id.as_str().into(),
            path: Arc::new(path),
            inherit: Arc::new(Inherited::from_config(&config)),
            run_id,
            events,
            state: Arc::new(S::default()),
            step: 0,
            frontier: Frontier::default(),
            checkpoint_id: persist::new_checkpoint_id(),
            persisted: None,
            pending: Vec::new(),
            skip_before: false,
            last_writers: Vec::new(),
            unsaved: false,
            shown: None,
            marks: None,
            config,
        };
        let result = match start {
            Start::Input(input) => run.begin_with_input(input).await,
            Start::Resume { resume, .. } => run.begin_from_checkpoint(resume).await,
            Start::Command {
                resume,
                update,
                goto,
                ..
            } => run.begin_with_command(resume, update, goto).await,
        };
        match result {
            Ok(()) => Ok((run, lease)),
            Err(e) => {
                if let Some(l) = lease {
                    l.release().await;
                }
                Err(e)
            }
        }
    }

    fn store(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.writer.as_ref().map(|w| w.store())
    }

    /// The run's result. It takes the state instead of copying it: a copy of a large state
    /// (100 MB) was what a finished run peaked on.
    pub(crate) fn into_outcome(self, status: RunStatus) -> RunOutcome<S> {
        let state = match self.shown {
            Some(shown) => shown,
            None => Arc::try_unwrap(self.state).unwrap_or_else(|shared| (*shared).clone()),
        };
        RunOutcome {
            thread_id: self.thread_id.to_string(),
            run_id: self.run_id.to_string(),
            state,
            status,
            checkpoint_id: self.writer.as_ref().map(|_| self.checkpoint_id),
            step: self.step,
        }
    }

    pub(crate) fn thread_id(&self) -> &str {
        &self.thread_id
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// Runs supersteps until the graph ends, pauses, fails or is cancelled.
    pub(crate) async fn drive(&mut self) -> Result<RunStatus, RunError> {
        let mut steps_run = 0u64;
        loop {
            if self.frontier.tasks.is_empty() {
                return Ok(RunStatus::Done);
            }
            if steps_run >= self.config.recursion_limit {
                return Err(RunError::RecursionLimit {
                    limit: self.config.recursion_limit,
                    step: self.step,
                    thread_id: self.thread_id.to_string(),
                });
            }
            if !std::mem::take(&mut self.skip_before) {
                if let Some(status) = self.pause_before().await? {
                    return Ok(status);
                }
            }
            steps_run += 1;
            if let Some(status) = self.superstep().await? {
                return Ok(status);
            }
        }
    }
}
