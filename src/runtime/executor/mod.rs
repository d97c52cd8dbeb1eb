//! The superstep loop: run the frontier's tasks concurrently, merge their updates in task order,
//! advance the frontier, save a checkpoint, repeat.

mod begin;
mod cached;
mod interrupts;
mod on_error;
mod save;
mod step;
mod store_writes;
mod tasks;
mod timeouts;

use super::persist::{self, CheckpointWriter, LeaseGuard, SnapshotTracker};
use super::{Resume, RunOutcome, RunStatus};
use crate::checkpoint::{
    validate_thread_id, CheckpointId, Checkpointer, Frontier, InterruptRecord, PendingWrite,
};
use crate::error::{NodeError, RunError};
use crate::graph::{Command, CompiledGraph, Goto, NodeOptions};
use crate::run::config::RunConfig;
use crate::run::context::{Context, Inherited};
use crate::run::events::EventSink;
use crate::run::namespace::ThreadPath;
use crate::state::{State, WriteMarks};
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::Instrument;

/// The node name input updates are attributed to.
pub(crate) const INPUT_WRITER: &str = "__input__";

/// How a run begins.
pub(crate) enum Start<S: State> {
    /// Apply this input and run from START.
    Input(S::Update),
    /// The same on a thread known to have no checkpoint yet (a child's namespace that its
    /// caller just looked up): nothing to load, so the store is not read a second time.
    Fresh(S::Update),
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
        /// Served from the node cache: the node did not run (`runtime/cache.rs`).
        cached: bool,
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
    /// The task failed and its node's error handler takes over: `update` writes the failure
    /// into the declared field, and `handler` runs next (`on_error.rs`).
    Handled {
        update: S::Update,
        handler: String,
        error: NodeError,
        attempts: u32,
    },
}

/// One slot per frontier task, in task order.
type OutcomeSlots<S> = Vec<Option<Outcome<S>>>;

struct PreparedTask<S: State> {
    index: usize,
    node: Arc<dyn crate::graph::Node<S>>,
    name: Arc<str>,
    options: NodeOptions,
    ctx: Context,
    /// The task's entry in the run's node cache, when its node caches.
    cache: Option<crate::runtime::cache::TaskCache>,
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
    before: Arc<BTreeSet<String>>,
    after: Arc<BTreeSet<String>>,
    skip_before: bool,
    last_writers: Vec<String>,
    unsaved: bool,
    /// What a paused run's result shows: the state with the step's finished results merged.
    shown: Option<S>,
    /// Which fields this run's steps wrote, when its caller asked (a graph used as a node of
    /// its parent's state type, run in one go from its input).
    pub(crate) marks: Option<WriteMarks>,
}

/// Who a run is: where it writes, its run id, and the settings and config its tasks (and
/// the subgraphs they run) see. A subgraph's run gets its parent's, with its own path, instead
/// of setting them up again.
pub(crate) struct Identity {
    /// The thread, or for a subgraph the namespace, it writes (which the parent's lease
    /// already covers).
    pub(crate) path: ThreadPath,
    /// `path` written out.
    pub(crate) thread_id: Arc<str>,
    /// A subgraph's run has its parent's: it is part of its parent's `invoke`/`resume` call,
    /// as in LangGraph, where a subgraph runs with its parent's config (and so with the run id
    /// in that config's metadata).
    pub(crate) run_id: Arc<str>,
    pub(crate) settings: Arc<serde_json::Map<String, serde_json::Value>>,
    pub(crate) inherit: Arc<Inherited>,
}

impl Identity {
    /// A root run's: its thread (the one it resumes, the config's, or a new one), a new run id.
    fn of_root<S: State>(start: &Start<S>, config: &RunConfig) -> Result<Identity, RunError> {
        let thread_id: String = match start {
            Start::Resume { thread_id, .. } | Start::Command { thread_id, .. } => thread_id.clone(),
            Start::Input(_) | Start::Fresh(_) => config
                .thread_id
                .clone()
                .unwrap_or_else(persist::new_unique_id),
        };
        validate_thread_id(&thread_id)?;
        Ok(Identity {
            thread_id: thread_id.as_str().into(),
            path: ThreadPath::root_of(thread_id),
            run_id: persist::new_unique_id().into(),
            settings: Arc::new(config.settings.clone()),
            inherit: Arc::new(Inherited::from_config(config)),
        })
    }
}

/// The breakpoints of a run: the graph's own, shared, unless the run's config adds some.
fn merged_names(
    graph_set: &Arc<BTreeSet<String>>,
    run_set: &BTreeSet<String>,
) -> Arc<BTreeSet<String>> {
    if run_set.is_empty() {
        return graph_set.clone();
    }
    Arc::new(graph_set.union(run_set).cloned().collect())
}

impl<S: State> Run<S> {
    /// Prepares a run: claims the thread, loads or creates its state, applies input or answers.
    /// A nested run (a subgraph inside a parent's task) has the identity `nested`: it writes a
    /// namespace of the parent's thread, which the parent's lease already covers.
    pub(crate) async fn start(
        graph: CompiledGraph<S>,
        start: Start<S>,
        config: RunConfig,
        events: EventSink,
        nested: Option<Identity>,
    ) -> Result<(Run<S>, Option<LeaseGuard>), RunError> {
        graph.check_names(config.interrupt_before.iter().cloned(), "interrupt_before")?;
        graph.check_names(config.interrupt_after.iter().cloned(), "interrupt_after")?;
        let is_nested = nested.is_some();
        let own = match nested {
            Some(nested) => nested,
            None => Identity::of_root(&start, &config)?,
        };
        let store = graph.checkpointer.clone();
        if store.is_none() && matches!(start, Start::Resume { .. } | Start::Command { .. }) {
            return Err(RunError::NoCheckpointer {
                operation: "resume",
            });
        }
        let lease = match &store {
            Some(s) if !is_nested => {
                Some(LeaseGuard::acquire(s.clone(), &own.thread_id, config.lease_ttl).await?)
            }
            _ => None,
        };
        let mut run = Run {
            before: merged_names(&graph.interrupt_before, &config.interrupt_before),
            after: merged_names(&graph.interrupt_after, &config.interrupt_after),
            writer: store
                .clone()
                .map(|s| CheckpointWriter::new(s, config.durability)),
            snapshots: SnapshotTracker::new(config.snapshots, Default::default()),
            settings: own.settings,
            graph,
            thread_id: own.thread_id,
            path: Arc::new(own.path),
            inherit: own.inherit,
            run_id: own.run_id,
            events,
            state: Arc::new(S::default()),
            step: 0,
            frontier: Frontier::default(),
            // Unsaved checkpoints only need ids unique within the run, as each step's (step.rs).
            checkpoint_id: match &store {
                Some(_) => persist::new_checkpoint_id(),
                None => CheckpointId::from_u128(0),
            },
            persisted: None,
            pending: Vec::new(),
            skip_before: false,
            last_writers: Vec::new(),
            unsaved: false,
            shown: None,
            marks: None,
            config,
        };
        // As LangGraph's, a resumed run's values stream starts with the state it resumes from.
        let resumed = matches!(start, Start::Resume { .. } | Start::Command { .. });
        let result = match start {
            Start::Input(input) => run.begin_with_input(input, true).await,
            Start::Fresh(input) => run.begin_with_input(input, false).await,
            Start::Resume { resume, .. } => run.begin_from_checkpoint(resume).await,
            Start::Command {
                resume,
                update,
                goto,
                ..
            } => run.begin_with_command(resume, update, goto).await,
        };
        match result {
            Ok(()) => {
                if resumed {
                    run.emit_values(run.step);
                }
                Ok((run, lease))
            }
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
        RunOutcome {
            thread_id: self.thread_id.as_ref().to_owned(),
            run_id: self.run_id.as_ref().to_owned(),
            checkpoint_id: self.writer.as_ref().map(|_| self.checkpoint_id),
            step: self.step,
            status,
            state: self.into_state(),
        }
    }

    /// The state the run's result shows (a subgraph's caller needs only this).
    pub(crate) fn into_state(self) -> S {
        match self.shown {
            Some(shown) => shown,
            None => Arc::try_unwrap(self.state).unwrap_or_else(|shared| (*shared).clone()),
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

    /// Runs supersteps until the graph ends, pauses, fails, is cancelled, or stops at a step
    /// boundary (drained, or past its run timeout: `timeouts.rs`).
    pub(crate) async fn drive(&mut self) -> Result<RunStatus, RunError> {
        let mut steps_run = 0u64;
        let boundary = timeouts::Boundary::of(&self.config);
        loop {
            if self.frontier.tasks.is_empty() {
                return Ok(RunStatus::Done);
            }
            if let Some(stopped) = self.stop_here(boundary.as_ref()) {
                return Err(stopped);
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
            let span = tracing::info_span!("step", step = self.step + 1);
            if let Some(status) = self.superstep().instrument(span).await? {
                return Ok(status);
            }
        }
    }
}
