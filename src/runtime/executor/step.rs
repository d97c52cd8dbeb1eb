//! One superstep: run the frontier, stop on a failure or pause (saving finished siblings),
//! or merge the updates in task order, advance the frontier and save a checkpoint.

use super::{on_error, Outcome, Run};
use crate::checkpoint::{
    CheckpointId, InterruptRecord, NodeWrite, PendingKind, PendingWrite, Source, TaskSpec,
};
use crate::error::{NodeError, RunError};
use crate::graph::goto_records;
use crate::graph::Goto;
use crate::run::config::Durability;
use crate::run::events::{Event, INTERRUPT};
use crate::runtime::persist;
use crate::runtime::saved::with_saved_results;
use crate::runtime::triggers::{self, Finished};
use crate::runtime::RunStatus;
use crate::state::{State, TaggedUpdate, Update};
use std::sync::Arc;

impl<S: State> Run<S> {
    /// The whole state, for the values stream.
    pub(super) fn emit_values(&self, step: u64) {
        self.emit_state(step, &self.state, &[]);
    }

    /// `state` for the values stream, with what waits when the run pauses there.
    pub(super) fn emit_state(&self, step: u64, state: &S, interrupts: &[InterruptRecord]) {
        if self.events.wants_values() {
            self.events.values(|| Event::Values {
                namespace: String::new(),
                step,
                values: serde_json::to_value(state).unwrap_or_default(),
                interrupts: interrupts.to_vec(),
            });
        }
    }

    /// A pause for the updates stream, as LangGraph's `{"__interrupt__": [...]}`: what waits
    /// at task `task` (the first paused task, for a static breakpoint's).
    pub(super) fn emit_pause(&self, step: u64, task: usize, interrupts: &[InterruptRecord]) {
        if self.events.wants_updates() {
            self.events.updates(|| Event::Updates {
                namespace: String::new(),
                step,
                node: INTERRUPT.to_string(),
                task,
                update: serde_json::to_value(interrupts).unwrap_or_default(),
                cached: false,
            });
        }
    }

    /// The step's task results in task order, for the debug stream (a pause is reported by
    /// the run's `Interrupted` event).
    pub(super) fn report_results(&self, step: u64, outcomes: &[Outcome<S>]) {
        for (index, (spec, outcome)) in self.frontier.tasks.iter().zip(outcomes).enumerate() {
            match outcome {
                Outcome::Done {
                    command,
                    elapsed_ms,
                    cached,
                    ..
                } => self.events.ordered(|| Event::NodeFinished {
                    namespace: String::new(),
                    step,
                    node: spec.node.clone(),
                    task: index,
                    duration_ms: *elapsed_ms,
                    update: serde_json::to_value(&command.update).unwrap_or_default(),
                    cached: *cached,
                }),
                Outcome::Failed { error, attempts }
                | Outcome::Handled {
                    error, attempts, ..
                } => self.events.ordered(|| Event::NodeFailed {
                    namespace: String::new(),
                    step,
                    node: spec.node.clone(),
                    task: index,
                    attempt: *attempts,
                    error: error.message().to_string(),
                    will_retry: false,
                }),
                Outcome::Reused { .. } | Outcome::Interrupted(_) => {}
            }
        }
    }

    /// Runs one superstep. Returns a status when the run stops here (a pause).
    pub(super) async fn superstep(&mut self) -> Result<Option<RunStatus>, RunError> {
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
        let outcomes = self.divert_failures(step, outcomes);
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
        let ran = self.merge_and_advance(step, outcomes).await?;
        self.pause_after(&ran).await
    }

    /// The barrier: merges the step's updates in task order, lets routers and edges choose the
    /// next frontier and saves the step's checkpoint. Returns the tasks that ran.
    async fn merge_and_advance(
        &mut self,
        step: u64,
        outcomes: Vec<Outcome<S>>,
    ) -> Result<Vec<TaskSpec>, RunError> {
        let topology = self.graph.topology.clone();
        // Looked up once per task: names are hashed, and this is the hot path of every step.
        let nodes: Vec<Option<usize>> = self
            .frontier
            .tasks
            .iter()
            .map(|t| topology.node_index(&t.node))
            .collect();
        let store_ops = self.staged_store_writes(&outcomes).await?;
        let handlers = on_error::handlers_of(&outcomes);
        let collected = self.collect_updates(step, &nodes, outcomes)?;
        let Collected {
            mut batch,
            gotos,
            writes,
        } = collected;
        if let Some(marks) = &mut self.marks {
            marks.record_all(batch.iter().map(|w| &w.update));
        }
        // As LangGraph, the values stream shows the state after a step that wrote it.
        let wrote = self.events.wants_values() && batch.iter().any(|w| !w.update.is_empty());
        Arc::make_mut(&mut self.state)
            .apply(&mut batch)
            .map_err(|source| RunError::Merge {
                step,
                thread_id: self.thread_id.to_string(),
                source,
            })?;
        // What was merged is in the state now; a large update is not kept beside it.
        drop(batch);
        // A handled failure's node did not finish: its edges are not followed.
        let finished: Vec<Finished<'_>> = nodes
            .iter()
            .zip(&gotos)
            .zip(&handlers)
            .filter(|(_, handler)| handler.is_none())
            .map(|((node, goto), _)| Finished { node: *node, goto })
            .collect();
        let mut next = triggers::advance(&topology, &self.state, &finished, &self.frontier, step)?;
        on_error::add_handlers(&topology, &mut next, &handlers);
        if wrote {
            self.emit_values(step);
        }
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
            self.keep_store_writes(&store_ops).await?;
            self.save_checkpoint(parent, writes, Source::Loop, writers, true)
                .await?;
            self.apply_store_writes(self.checkpoint_id, &store_ops)
                .await?;
        }
        Ok(ran)
    }

    /// The step's updates tagged with their nodes in task order, their gotos, and (when
    /// checkpoints keep deltas) their serialized form.
    fn collect_updates(
        &self,
        step: u64,
        nodes: &[Option<usize>],
        outcomes: Vec<Outcome<S>>,
    ) -> Result<Collected<S>, RunError> {
        let topology = &self.graph.topology;
        let mut batch = Vec::with_capacity(outcomes.len());
        let mut gotos = Vec::with_capacity(outcomes.len());
        let mut writes = Vec::new();
        let keep_raw = self
            .writer
            .as_ref()
            .is_some_and(|w| w.mode() != Durability::Exit);
        for ((spec, node), outcome) in self.frontier.tasks.iter().zip(nodes).zip(outcomes) {
            let name = match node {
                Some(i) => topology.node_name(*i).clone(),
                None => spec.node.as_str().into(),
            };
            let (update, raw, goto, cached) = match outcome {
                Outcome::Done {
                    command,
                    raw,
                    cached,
                    ..
                } => (command.update, raw, command.goto, cached),
                Outcome::Reused { update, raw, goto } => (update, Some(raw), goto, false),
                // Its handler is added to the frontier instead of its edges (`on_error.rs`).
                Outcome::Handled { update, .. } => (update, None, Vec::new(), false),
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
                    cached,
                });
            }
            batch.push(TaggedUpdate::new(name, update));
            gotos.push(goto);
        }
        Ok(Collected {
            batch,
            gotos,
            writes,
        })
    }

    /// Stops the step on a failure or a pause: saves the failed and paused tasks' records, and
    /// (where they were not saved as they finished) the finished siblings' results.
    pub(super) async fn stop_on_failure(
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
        // Each paused task's place in `interrupts`, for the updates stream.
        let mut paused = Vec::new();
        for (index, (spec, outcome)) in self.frontier.tasks.iter().zip(outcomes).enumerate() {
            let write = |kind| PendingWrite {
                task: index,
                node: spec.node.clone(),
                kind,
            };
            match outcome {
                // Multi-task steps saved each success as it finished, except in exit mode.
                Outcome::Done { command, raw, .. } if exit_mode || !multi => {
                    let update = match raw {
                        Some(r) => r,
                        None => persist::to_raw(&command.update)?,
                    };
                    self.supersede_stale_staging(index).await?;
                    writes.push(write(PendingKind::Update {
                        update,
                        goto: goto_records(&command.goto),
                    }));
                }
                // A handled failure is not saved: the task runs again on resume (`on_error.rs`).
                Outcome::Done { .. } | Outcome::Reused { .. } | Outcome::Handled { .. } => {}
                Outcome::Failed { error, attempts } => {
                    writes.push(write(PendingKind::Error {
                        message: error.message().to_string(),
                    }));
                    if failure.is_none() {
                        failure = Some(self.node_failed(&spec.node, step, &error, attempts));
                    }
                }
                Outcome::Interrupted(records) => {
                    paused.push((index, interrupts.len()..interrupts.len() + records.len()));
                    for record in records {
                        writes.push(write(PendingKind::Interrupt(record.clone())));
                        interrupts.push(record);
                    }
                }
            }
        }
        self.save_pending(writes, true).await?;
        if let Some(e) = failure {
            return Err(e);
        }
        for (task, range) in paused {
            self.emit_pause(step, task, &interrupts[range]);
        }
        let step_done = self.step;
        self.events.emit(|| Event::Interrupted {
            namespace: String::new(),
            step: step_done,
            interrupts: interrupts.clone(),
        });
        // The result shows the finished siblings' results merged, as `get_state` does.
        let (shown, next) = with_saved_results(&*self.state, &self.frontier, &self.pending);
        self.shown = shown;
        self.emit_state(
            step_done,
            self.shown.as_ref().unwrap_or(&*self.state),
            &interrupts,
        );
        Ok(RunStatus::Interrupted { interrupts, next })
    }

    /// The run's error for a task that failed, naming the path into a subgraph if it failed there.
    fn node_failed(&self, node: &str, step: u64, error: &NodeError, attempts: u32) -> RunError {
        // The store failed under the node (a subgraph's run, its journal): the run fails as
        // for its own store's failure, once the node's retry policy gave up.
        let source = error.source();
        let child =
            source.and_then(|e| e.downcast_ref::<crate::runtime::subgraph::ChildStoreFailed>());
        let store = child.map(|c| &c.error).or_else(|| {
            source.and_then(|e| e.downcast_ref::<crate::checkpoint::CheckpointError>())
        });
        if let Some(store) = store {
            return RunError::Checkpoint(store.clone());
        }
        let cancelled =
            source.and_then(|e| e.downcast_ref::<crate::runtime::subgraph::ChildCancelled>());
        if cancelled.is_some() {
            return RunError::Cancelled {
                thread_id: self.thread_id.to_string(),
            };
        }
        let node = match &error.inner_path {
            Some(inner) => format!("{node} > {inner}"),
            None => node.to_string(),
        };
        RunError::NodeFailed {
            node,
            step,
            thread_id: self.thread_id.to_string(),
            attempts,
            message: error.message().to_string(),
            kind: error.kind().clone(),
        }
    }
}

/// A step's successful results, ready to merge.
struct Collected<S: State> {
    batch: Vec<TaggedUpdate<S::Update>>,
    gotos: Vec<Vec<Goto>>,
    writes: Vec<NodeWrite>,
}
