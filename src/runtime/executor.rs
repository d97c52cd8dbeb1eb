//! The superstep loop: run the frontier's tasks concurrently, merge their updates in task order,
//! advance the frontier, save a checkpoint, repeat.

use super::config::{Durability, RunConfig};
use super::context::{interrupt_id, Context, Inherited, TaskContext};
use super::error::{NodeError, NodeErrorKind, ResumeError, RunError};
use super::events::{Event, EventSink};
use super::namespace::ThreadPath;
use super::persist::{self, CheckpointWriter, LeaseGuard, SnapshotTracker};
use super::triggers::{self, Finished};
use super::{Resume, RunOutcome, RunStatus};
use crate::checkpoint::status::{waiting_interrupts, Waiting};
use crate::checkpoint::{
    now_ms, validate_thread_id, CheckpointId, CheckpointMetadata, CheckpointRecord, Checkpointer,
    Frontier, InterruptRecord, InterruptWhen, NodeWrite, PendingKind, PendingWrite, Source,
    StateData, TaskSpec,
};
use crate::graph::{Command, CompiledGraph, Goto, GraphError, NodeOptions};
use crate::state::{State, TaggedUpdate};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// The node name input updates are attributed to.
pub(crate) const INPUT_WRITER: &str = "__input__";

/// How a run begins.
pub(crate) enum Start<S: State> {
    /// Apply this input and run from START.
    Input(S::Update),
    /// Continue the thread from a checkpoint, answering interrupts if asked.
    Resume { thread_id: String, resume: Resume },
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
}

fn merged_names(graph_set: &BTreeSet<String>, run_set: &BTreeSet<String>) -> BTreeSet<String> {
    graph_set.union(run_set).cloned().collect()
}

impl<S: State> Run<S> {
    /// Prepares a run: claims the thread, loads or creates its state, applies input or answers.
    /// A nested run (a subgraph inside a parent's task) writes a namespace of the parent's
    /// thread, which the parent's lease already covers.
    pub(crate) async fn start(
        graph: CompiledGraph<S>,
        start: Start<S>,
        config: RunConfig,
        events: EventSink,
        nested: bool,
    ) -> Result<(Run<S>, Option<LeaseGuard>), RunError> {
        graph.check_names(config.interrupt_before.iter().cloned(), "interrupt_before")?;
        graph.check_names(config.interrupt_after.iter().cloned(), "interrupt_after")?;
        let thread_id: String = match &start {
            Start::Resume { thread_id, .. } => thread_id.clone(),
            Start::Input(_) => config
                .thread_id
                .clone()
                .unwrap_or_else(persist::new_unique_id),
        };
        let path = if nested {
            thread_id
                .parse::<ThreadPath>()
                .map_err(|e| RunError::InvalidInput(e.to_string()))?
        } else {
            validate_thread_id(&thread_id)?;
            ThreadPath::root_of(thread_id.clone())
        };
        let store = graph.checkpointer.clone();
        if store.is_none() && matches!(start, Start::Resume { .. }) {
            return Err(RunError::NoCheckpointer {
                operation: "resume",
            });
        }
        let lease = match &store {
            Some(s) if !nested => {
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
            config,
        };
        let result = match start {
            Start::Input(input) => run.begin_with_input(input).await,
            Start::Resume { resume, .. } => run.begin_from_checkpoint(resume).await,
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

    fn metadata(&self, source: Source, writers: Vec<String>) -> CheckpointMetadata {
        CheckpointMetadata {
            source,
            writers,
            created_at_ms: now_ms(),
            schema_version: S::VERSION,
            run_id: self.run_id.to_string(),
            graph: self.graph.name().map(str::to_string),
        }
    }

    async fn begin_with_input(&mut self, input: S::Update) -> Result<(), RunError> {
        let mut parent = None;
        if let Some(store) = self.store().cloned() {
            if let Some(latest) = store.get_checkpoint(&self.thread_id, None).await? {
                let (state, stats) = persist::load_state::<S>(store.as_ref(), &latest).await?;
                self.state = Arc::new(state);
                self.step = latest.step;
                self.snapshots = SnapshotTracker::new(self.config.snapshots, stats);
                if latest.metadata.schema_version != S::VERSION {
                    self.snapshots.force();
                }
                parent = Some(latest.id);
                self.persisted = parent;
            }
        }
        let raw = if self.writer.is_some() {
            Some(persist::to_raw(&input)?)
        } else {
            None
        };
        let mut batch = [TaggedUpdate::new(INPUT_WRITER, input)];
        Arc::make_mut(&mut self.state)
            .apply(&mut batch)
            .map_err(|e| RunError::InvalidInput(e.to_string()))?;
        self.frontier = triggers::advance(
            &self.graph.topology,
            &self.state,
            &[Finished {
                node: None,
                goto: &[],
            }],
            &Frontier::default(),
            self.step,
        )?;
        if parent.is_none() {
            self.snapshots.force();
        }
        self.emit_values(self.step);
        let writes = raw
            .map(|update| {
                vec![NodeWrite {
                    node: INPUT_WRITER.to_string(),
                    update,
                }]
            })
            .unwrap_or_default();
        self.save_checkpoint(
            parent,
            writes,
            Source::Input,
            vec![INPUT_WRITER.to_string()],
        )
        .await
    }

    async fn begin_from_checkpoint(&mut self, resume: Resume) -> Result<(), RunError> {
        let store = self.store().cloned().ok_or(RunError::NoCheckpointer {
            operation: "resume",
        })?;
        let wanted = self.config.checkpoint_id;
        let record = store
            .get_checkpoint(&self.thread_id, wanted)
            .await?
            .ok_or_else(|| match wanted {
                Some(id) => RunError::CheckpointNotFound {
                    thread_id: self.thread_id.to_string(),
                    checkpoint: id.to_string(),
                },
                None => RunError::ThreadNotFound {
                    thread_id: self.thread_id.to_string(),
                },
            })?;
        let (state, stats) = persist::load_state::<S>(store.as_ref(), &record).await?;
        self.state = Arc::new(state);
        self.step = record.step;
        self.frontier = record.frontier.clone();
        self.checkpoint_id = record.id;
        self.persisted = Some(record.id);
        self.last_writers = record.metadata.writers.clone();
        self.snapshots = SnapshotTracker::new(self.config.snapshots, stats);
        if record.metadata.schema_version != S::VERSION {
            self.snapshots.force();
        }
        self.skip_before = true;
        if wanted.is_some() {
            // Replaying an older checkpoint starts a branch: a fork checkpoint marks where, and the
            // old branch's saved results are not reused.
            let parent = Some(record.id);
            self.checkpoint_id = persist::new_checkpoint_id();
            return self
                .save_checkpoint(parent, Vec::new(), Source::Fork, Vec::new())
                .await;
        }
        self.pending = store.get_writes(&self.thread_id, record.id).await?;
        let answers = answer_interrupts(&self.thread_id, &self.pending, resume)?;
        if !answers.is_empty() {
            store
                .put_writes(&self.thread_id, record.id, &answers, true)
                .await?;
            self.pending.extend(answers);
        }
        Ok(())
    }

    /// Writes the checkpoint for the current state and frontier (or, in exit mode, notes that
    /// one is owed).
    async fn save_checkpoint(
        &mut self,
        parent: Option<CheckpointId>,
        writes: Vec<NodeWrite>,
        source: Source,
        writers: Vec<String>,
    ) -> Result<(), RunError> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        if writer.mode() == Durability::Exit {
            self.unsaved = true;
            self.last_writers = writers;
            return Ok(());
        }
        let delta_bytes: usize = writes.iter().map(|w| w.update.get().len()).sum();
        let state = if parent.is_none() || self.snapshots.wants_snapshot(delta_bytes) {
            let raw = persist::to_raw(&*self.state)?;
            let bytes = raw.get().len();
            self.snapshots
                .took_snapshot(bytes, writer.store().snapshot_cost(bytes));
            StateData::Snapshot(raw)
        } else {
            self.snapshots.took_delta(delta_bytes);
            StateData::Delta(writes)
        };
        let record = CheckpointRecord {
            thread_id: self.thread_id.to_string(),
            id: self.checkpoint_id,
            parent_id: parent,
            step: self.step,
            state,
            frontier: self.frontier.clone(),
            metadata: self.metadata(source, writers.clone()),
        };
        self.last_writers = writers;
        let next = self.events.is_active().then(|| self.frontier.next_nodes());
        if let Some(writer) = &mut self.writer {
            writer.save(record).await?;
        }
        self.persisted = Some(self.checkpoint_id);
        if let Some(next) = next {
            let (step, id) = (self.step, self.checkpoint_id.to_string());
            self.events.emit(|| Event::CheckpointSaved {
                namespace: String::new(),
                step,
                checkpoint_id: id,
                next,
            });
        }
        Ok(())
    }

    /// Saves task results against the current checkpoint.
    async fn save_pending(
        &mut self,
        writes: Vec<PendingWrite>,
        flush: bool,
    ) -> Result<(), RunError> {
        if writes.is_empty() {
            return Ok(());
        }
        if let Some(store) = self.store() {
            store
                .put_writes(&self.thread_id, self.checkpoint_id, &writes, flush)
                .await?;
        }
        self.pending.extend(writes);
        Ok(())
    }

    /// Writes what the durability mode still owes and flushes.
    pub(crate) async fn finish(&mut self) -> Result<(), RunError> {
        if self.unsaved {
            if let Some(store) = self.store().cloned() {
                let raw = persist::to_raw(&*self.state)?;
                let record = CheckpointRecord {
                    thread_id: self.thread_id.to_string(),
                    id: self.checkpoint_id,
                    parent_id: self.persisted,
                    step: self.step,
                    state: StateData::Snapshot(raw),
                    frontier: self.frontier.clone(),
                    metadata: self.metadata(Source::Loop, self.last_writers.clone()),
                };
                store.put_checkpoint(&record, true).await?;
                self.persisted = Some(self.checkpoint_id);
                self.unsaved = false;
            }
        }
        if let Some(writer) = &mut self.writer {
            writer.finish().await?;
        }
        Ok(())
    }

    pub(crate) fn outcome(&self, status: RunStatus) -> RunOutcome<S> {
        RunOutcome {
            thread_id: self.thread_id.to_string(),
            run_id: self.run_id.to_string(),
            state: (*self.state).clone(),
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

    async fn pause_before(&mut self) -> Result<Option<RunStatus>, RunError> {
        if self.before.is_empty() {
            return Ok(None);
        }
        let records: Vec<InterruptRecord> = self
            .frontier
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| self.before.contains(&t.node))
            .map(|(i, t)| InterruptRecord {
                id: interrupt_id(self.checkpoint_id, i, u32::MAX),
                node: t.node.clone(),
                when: InterruptWhen::Before,
                task: i,
                ordinal: 0,
                payload: serde_json::Value::Null,
                namespace: self.path.namespace(),
            })
            .collect();
        if records.is_empty() {
            return Ok(None);
        }
        self.pause(records).await.map(Some)
    }

    async fn pause(&mut self, records: Vec<InterruptRecord>) -> Result<RunStatus, RunError> {
        let writes = records
            .iter()
            .map(|r| PendingWrite {
                task: r.task,
                node: r.node.clone(),
                kind: PendingKind::Interrupt(r.clone()),
            })
            .collect();
        self.save_pending(writes, true).await?;
        let step = self.step;
        self.events.emit(|| Event::Interrupted {
            namespace: String::new(),
            step,
            interrupts: records.clone(),
        });
        Ok(RunStatus::Interrupted {
            interrupts: records,
            next: self.frontier.next_nodes(),
        })
    }

    /// The tasks to run, and a slot per frontier task (already filled for reused results).
    fn prepare(&self, step: u64) -> Result<(Vec<PreparedTask<S>>, OutcomeSlots<S>), RunError> {
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
            });
            prepared.push(PreparedTask {
                index,
                node: entry.node.clone(),
                name: entry.name.clone(),
                options: entry.options.clone(),
                ctx,
            });
        }
        Ok((prepared, outcomes))
    }

    /// The answers saved for task `index`: to its own interrupts (by ordinal), and to interrupts
    /// of subgraphs it runs (by id, handed down when it runs them again).
    fn answers_for(
        &self,
        index: usize,
    ) -> (
        Vec<Option<serde_json::Value>>,
        BTreeMap<String, serde_json::Value>,
    ) {
        let own = self.path.namespace();
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
            let below = self.pending.iter().any(|p| {
                matches!(&p.kind, PendingKind::Interrupt(r) if r.id == *interrupt_id && r.namespace != own)
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
    fn reuse(&self, index: usize, spec: &TaskSpec) -> Result<Option<Outcome<S>>, RunError> {
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
                        goto: goto.clone(),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// The whole state, for the values stream.
    fn emit_values(&self, step: u64) {
        if self.events.wants_values() {
            self.events.values(|| Event::Values {
                namespace: String::new(),
                step,
                values: serde_json::to_value(&*self.state).unwrap_or_default(),
            });
        }
    }

    /// The step's task results in task order, for the debug stream (a pause is reported by
    /// the run's `Interrupted` event).
    fn report_results(&self, step: u64, outcomes: &[Outcome<S>]) {
        for (index, (spec, outcome)) in self.frontier.tasks.iter().zip(outcomes).enumerate() {
            match outcome {
                Outcome::Done {
                    command,
                    elapsed_ms,
                    ..
                } => self.events.ordered(|| Event::NodeFinished {
                    namespace: String::new(),
                    step,
                    node: spec.node.clone(),
                    task: index,
                    duration_ms: *elapsed_ms,
                    update: serde_json::to_value(&command.update).unwrap_or_default(),
                }),
                Outcome::Failed { error, attempts } => self.events.ordered(|| Event::NodeFailed {
                    namespace: String::new(),
                    step,
                    node: spec.node.clone(),
                    attempt: *attempts,
                    error: error.message().to_string(),
                    will_retry: false,
                }),
                Outcome::Reused { .. } | Outcome::Interrupted(_) => {}
            }
        }
    }

    /// Runs one superstep. Returns a status when the run stops here (a pause).
    async fn superstep(&mut self) -> Result<Option<RunStatus>, RunError> {
        let step = self.step + 1;
        let (prepared, mut outcomes) = self.prepare(step)?;
        if self.events.wants_ordered() {
            for task in &prepared {
                self.events.ordered(|| Event::NodeStarted {
                    namespace: String::new(),
                    step,
                    node: task.name.to_string(),
                    task: task.index,
                    attempt: 1,
                });
            }
        }
        self.run_tasks(step, prepared, &mut outcomes).await?;
        let outcomes: Vec<Outcome<S>> = outcomes.into_iter().flatten().collect();
        if self.events.wants_ordered() {
            self.report_results(step, &outcomes);
        }

        // A failure or a pause stops the run before anything is merged; finished siblings'
        // results are saved against the current checkpoint so a resume does not redo them.
        if outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Failed { .. } | Outcome::Interrupted(_)))
        {
            return self.stop_on_failure(step, outcomes).await.map(Some);
        }

        let topology = self.graph.topology.clone();
        // Looked up once per task: names are hashed, and this is the hot path of every step.
        let nodes: Vec<Option<usize>> = self
            .frontier
            .tasks
            .iter()
            .map(|t| topology.node_index(&t.node))
            .collect();
        let mut batch = Vec::with_capacity(outcomes.len());
        let mut gotos = Vec::with_capacity(outcomes.len());
        let mut writes = Vec::new();
        let keep_raw = self
            .writer
            .as_ref()
            .is_some_and(|w| w.mode() != Durability::Exit);
        for ((spec, node), outcome) in self.frontier.tasks.iter().zip(&nodes).zip(outcomes) {
            let name = match node {
                Some(i) => topology.node_name(*i).clone(),
                None => spec.node.as_str().into(),
            };
            let (update, raw, goto) = match outcome {
                Outcome::Done { command, raw, .. } => (command.update, raw, command.goto),
                Outcome::Reused { update, raw, goto } => (update, Some(raw), goto),
                Outcome::Failed { .. } | Outcome::Interrupted(_) => continue,
            };
            if keep_raw {
                let raw = match raw {
                    Some(r) => r,
                    None => persist::to_raw(&update)?,
                };
                writes.push(NodeWrite {
                    node: spec.node.clone(),
                    update: raw,
                });
            }
            if self.events.wants_updates() {
                self.events.updates(|| Event::Updates {
                    namespace: String::new(),
                    step,
                    node: spec.node.clone(),
                    task: batch.len(),
                    update: serde_json::to_value(&update).unwrap_or_default(),
                });
            }
            batch.push(TaggedUpdate::new(name, update));
            gotos.push(goto);
        }
        Arc::make_mut(&mut self.state)
            .apply(&mut batch)
            .map_err(|source| RunError::Merge {
                step,
                thread_id: self.thread_id.to_string(),
                source,
            })?;
        let finished: Vec<Finished<'_>> = nodes
            .iter()
            .zip(&gotos)
            .map(|(node, goto)| Finished { node: *node, goto })
            .collect();
        let next = triggers::advance(&topology, &self.state, &finished, &self.frontier, step)?;
        self.emit_values(step);
        let ran = std::mem::replace(&mut self.frontier, next).tasks;

        let parent = Some(self.checkpoint_id);
        self.checkpoint_id = match &self.writer {
            Some(_) => persist::new_checkpoint_id(),
            // Unsaved checkpoints only need ids unique within the run (interrupt ids, keys).
            None => CheckpointId::from_u128(u128::from(step)),
        };
        self.step = step;
        self.pending.clear();
        if self.writer.is_some() {
            let writers = ran.iter().map(|t| t.node.clone()).collect();
            self.save_checkpoint(parent, writes, Source::Loop, writers)
                .await?;
        }

        if !self.after.is_empty() {
            let records: Vec<InterruptRecord> = ran
                .iter()
                .enumerate()
                .filter(|(_, t)| self.after.contains(&t.node))
                .map(|(i, t)| InterruptRecord {
                    id: interrupt_id(self.checkpoint_id, i, u32::MAX - 1),
                    node: t.node.clone(),
                    when: InterruptWhen::After,
                    task: i,
                    ordinal: 0,
                    payload: serde_json::Value::Null,
                    namespace: self.path.namespace(),
                })
                .collect();
            if !records.is_empty() && !self.frontier.tasks.is_empty() {
                return self.pause(records).await.map(Some);
            }
        }
        Ok(None)
    }

    async fn stop_on_failure(
        &mut self,
        step: u64,
        outcomes: Vec<Outcome<S>>,
    ) -> Result<RunStatus, RunError> {
        let exit_mode = self
            .writer
            .as_ref()
            .is_some_and(|w| w.mode() == Durability::Exit);
        let multi = outcomes.len() > 1;
        let mut writes = Vec::new();
        let mut failure: Option<RunError> = None;
        let mut interrupts = Vec::new();
        for (index, (spec, outcome)) in self.frontier.tasks.iter().zip(outcomes).enumerate() {
            match outcome {
                // Multi-task steps saved each success as it finished, except in exit mode.
                Outcome::Done { command, raw, .. } if exit_mode || !multi => {
                    let update = match raw {
                        Some(r) => r,
                        None => persist::to_raw(&command.update)?,
                    };
                    writes.push(PendingWrite {
                        task: index,
                        node: spec.node.clone(),
                        kind: PendingKind::Update {
                            update,
                            goto: command.goto,
                        },
                    });
                }
                Outcome::Done { .. } | Outcome::Reused { .. } => {}
                Outcome::Failed { error, attempts } => {
                    writes.push(PendingWrite {
                        task: index,
                        node: spec.node.clone(),
                        kind: PendingKind::Error {
                            message: error.message().to_string(),
                        },
                    });
                    if failure.is_none() {
                        let node = match &error.inner_path {
                            Some(inner) => format!("{} > {inner}", spec.node),
                            None => spec.node.clone(),
                        };
                        failure = Some(RunError::NodeFailed {
                            node,
                            step,
                            thread_id: self.thread_id.to_string(),
                            attempts,
                            message: error.message().to_string(),
                            kind: error.kind().clone(),
                        });
                    }
                }
                Outcome::Interrupted(records) => {
                    for record in records {
                        writes.push(PendingWrite {
                            task: index,
                            node: spec.node.clone(),
                            kind: PendingKind::Interrupt(record.clone()),
                        });
                        interrupts.push(record);
                    }
                }
            }
        }
        self.save_pending(writes, true).await?;
        if let Some(e) = failure {
            return Err(e);
        }
        let step_done = self.step;
        self.events.emit(|| Event::Interrupted {
            namespace: String::new(),
            step: step_done,
            interrupts: interrupts.clone(),
        });
        Ok(RunStatus::Interrupted {
            interrupts,
            next: self.frontier.next_nodes(),
        })
    }

    /// Runs the prepared tasks concurrently and fills in their outcomes by task index, so the
    /// order of results never depends on which task finished first.
    async fn run_tasks(
        &mut self,
        step: u64,
        prepared: Vec<PreparedTask<S>>,
        outcomes: &mut [Option<Outcome<S>>],
    ) -> Result<(), RunError> {
        let cancel = self.config.cancel.clone();
        let thread_id = self.thread_id.clone();
        let cancelled = move || RunError::Cancelled {
            thread_id: thread_id.to_string(),
        };
        let mut prepared = prepared;
        let single = if prepared.len() == 1 {
            prepared.pop()
        } else {
            None
        };
        if let Some(task) = single {
            // One task: run it in place; the concurrent machinery would only add overhead.
            let index = task.index;
            let fut = run_task(task, self.state.clone(), self.events.clone(), step);
            let outcome = match &cancel {
                Some(token) => tokio::select! {
                    o = fut => o,
                    _ = token.cancelled() => return Err(cancelled()),
                },
                None => fut.await,
            };
            outcomes[index] = Some(outcome);
            return Ok(());
        }
        let save_each = self
            .writer
            .as_ref()
            .is_some_and(|w| w.mode() != Durability::Exit);
        // In sync mode a finished task's result is on disk before its siblings' results are
        // used (ARCHITECTURE.md): a kill after it finished never runs it again.
        let flush_each = self
            .writer
            .as_ref()
            .is_some_and(|w| w.mode() == Durability::Sync);
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
                    j = running.next() => j,
                    _ = token.cancelled() => return Err(cancelled()),
                },
                None => running.next().await,
            };
            let Some((index, mut outcome)) = joined else {
                break;
            };
            if save_each {
                if let Outcome::Done { command, raw, .. } = &mut outcome {
                    let update = persist::to_raw(&command.update)?;
                    *raw = Some(update.clone());
                    let write = PendingWrite {
                        task: index,
                        node: self.frontier.tasks[index].node.clone(),
                        kind: PendingKind::Update {
                            update,
                            goto: command.goto.clone(),
                        },
                    };
                    // In async mode it rides along with the step's checkpoint flush, and a crash
                    // before that costs re-running this task.
                    self.save_pending(vec![write], flush_each).await?;
                }
            }
            outcomes[index] = Some(outcome);
        }
        Ok(())
    }
}

/// Runs one task with its timeout and retry policy, catching panics.
async fn run_task<S: State>(
    task: PreparedTask<S>,
    state: Arc<S>,
    events: EventSink,
    step: u64,
) -> Outcome<S> {
    let span = tracing::info_span!("node", node = %task.name, step, task = task.index);
    async move {
        let started = events.is_active().then(Instant::now);
        let max_attempts = task.options.retry.as_ref().map(|r| r.max_attempts.max(1)).unwrap_or(1);
        let mut attempt = 1u32;
        loop {
            task.ctx.begin_attempt(attempt);
            events.live(|| Event::NodeStarted {
                namespace: String::new(),
                step,
                node: task.name.to_string(),
                task: task.index,
                attempt,
            });
            let fut = AssertUnwindSafe(task.node.run(state.clone(), task.ctx.clone())).catch_unwind();
            let result = match task.options.timeout {
                Some(limit) => match tokio::time::timeout(limit, fut).await {
                    Ok(r) => r,
                    Err(_) => Ok(Err(NodeError::with_kind(
                        NodeErrorKind::Timeout(limit),
                        format!("timed out after {}", fmt_duration(limit)),
                    ))),
                },
                None => fut.await,
            };
            let error = match result {
                Ok(Ok(command)) => {
                    events.live(|| Event::NodeFinished {
                        namespace: String::new(),
                        step,
                        node: task.name.to_string(),
                        task: task.index,
                        duration_ms: started
                            .map(|t| t.elapsed().as_secs_f64() * 1000.0)
                            .unwrap_or_default(),
                        update: serde_json::to_value(&command.update).unwrap_or(serde_json::Value::Null),
                    });
                    let elapsed_ms = started
                        .map(|t| t.elapsed().as_secs_f64() * 1000.0)
                        .unwrap_or_default();
                    return Outcome::Done {
                        command,
                        raw: None,
                        elapsed_ms,
                    };
                }
                Ok(Err(e)) => e,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_string());
                    NodeError::with_kind(NodeErrorKind::Panicked, format!("panicked: {message}"))
                }
            };
            if let NodeErrorKind::Interrupted(record) = error.kind() {
                if !error.paused.is_empty() {
                    return Outcome::Interrupted(error.paused);
                }
                return Outcome::Interrupted(vec![(**record).clone()]);
            }
            let retry = task
                .options
                .retry
                .as_ref()
                .filter(|p| attempt < max_attempts && !matches!(error.kind(), NodeErrorKind::Panicked) && (p.retry_on)(&error));
            events.live(|| Event::NodeFailed {
                namespace: String::new(),
                step,
                node: task.name.to_string(),
                attempt,
                error: error.message().to_string(),
                will_retry: retry.is_some(),
            });
            match retry {
                Some(policy) => {
                    let wait = policy.backoff(attempt);
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %error, "node attempt failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                None => {
                    tracing::warn!(attempt, error = %error, "node failed");
                    return Outcome::Failed { error, attempts: attempt };
                }
            }
        }
    }
    .instrument(span)
    .await
}

fn fmt_duration(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Turns a resume value into answers addressed to the pending dynamic interrupts.
fn answer_interrupts(
    thread: &str,
    pending: &[PendingWrite],
    resume: Resume,
) -> Result<Vec<PendingWrite>, RunError> {
    let waiting: Vec<Waiting> = waiting_interrupts(pending)
        .into_iter()
        .filter(|w| w.record.when == InterruptWhen::Dynamic)
        .collect();
    let ids = || {
        waiting
            .iter()
            .map(|w| w.record.id.clone())
            .collect::<Vec<_>>()
    };
    // Addressed to the task of this graph that carries the interrupt: for a subgraph's, the
    // task that runs the subgraph, which hands the answer down.
    let answer = |w: &Waiting, value: serde_json::Value| PendingWrite {
        task: w.task,
        node: w.node.clone(),
        kind: PendingKind::Resume {
            interrupt_id: w.record.id.clone(),
            ordinal: w.record.ordinal,
            value,
        },
    };
    match resume {
        Resume::Continue => Ok(Vec::new()),
        // At a static breakpoint a value just continues the run, as in LangGraph (nothing
        // reads it).
        Resume::Value(_) if waiting.is_empty() && !waiting_interrupts(pending).is_empty() => {
            Ok(Vec::new())
        }
        Resume::Value(value) => match waiting.as_slice() {
            [] => Err(ResumeError::NothingToAnswer {
                thread: thread.to_string(),
            }
            .into()),
            [one] => Ok(vec![answer(one, value)]),
            _ => Err(ResumeError::Ambiguous {
                thread: thread.to_string(),
                ids: ids(),
            }
            .into()),
        },
        Resume::ById(map) => {
            let by_id: BTreeMap<&str, &Waiting> =
                waiting.iter().map(|w| (w.record.id.as_str(), w)).collect();
            map.into_iter()
                .map(|(id, value)| match by_id.get(id.as_str()) {
                    Some(r) => Ok(answer(r, value)),
                    None => Err(ResumeError::UnknownInterrupt {
                        thread: thread.to_string(),
                        id,
                        pending: ids(),
                    }
                    .into()),
                })
                .collect()
        }
    }
}
