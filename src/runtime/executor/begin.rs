//! How a run begins: from input (a new or continued thread) or from a saved checkpoint.

use super::interrupts::answer_interrupts;
use super::{Run, INPUT_WRITER};
use crate::checkpoint::{Frontier, NodeWrite, Source};
use crate::checkpoint::{PendingKind, PendingWrite};
use crate::error::RunError;
use crate::graph::{goto_records, gotos_of};
use crate::graph::{Goto, GraphError};
use crate::runtime::persist::{self, SnapshotTracker};
use crate::runtime::saved::{add_command_tasks, COMMAND_TASK};
use crate::runtime::triggers::{self, Finished};
use crate::runtime::Resume;
use crate::state::{State, TaggedUpdate, Update};
use std::sync::Arc;

impl<S: State> Run<S> {
    /// Applies `input` on top of the thread's newest checkpoint, if it has one; `look_up` is
    /// false when the caller already knows it has none (a fresh child's namespace it just
    /// read). A subgraph's input checkpoint is written without waiting for the disk.
    pub(super) async fn begin_with_input(
        &mut self,
        input: S::Update,
        look_up: bool,
    ) -> Result<(), RunError> {
        let mut parent = None;
        let store = self.store().filter(|_| look_up).cloned();
        if let Some(store) = store {
            if let Some(latest) = store.get_checkpoint(&self.thread_id, None).await? {
                let (state, stats) = persist::load_state::<S>(store.as_ref(), &latest).await?;
                self.state = Arc::new(state);
                // The input's checkpoint is one step on, as LangGraph's is (and as an edit
                // standing for the input is): a thread's steps grow by one per checkpoint.
                self.step = latest.step + 1;
                self.snapshots = SnapshotTracker::new(self.config.snapshots, stats);
                if latest.metadata.schema_version != S::VERSION {
                    self.snapshots.force();
                }
                parent = Some(latest.id);
                self.persisted = parent;
                self.replay_store_writes(latest.id).await?;
            }
        }
        // Only a delta keeps the input as a write: the first checkpoint of a thread is always a
        // snapshot (see save_checkpoint), and a fresh same-type child's input is a whole state.
        let raw = if self.writer.is_some() && parent.is_some() {
            Some(persist::to_raw(&input)?)
        } else {
            None
        };
        // As LangGraph, an input that writes nothing shows no state in the values stream.
        let wrote = self.events.wants_values() && !input.is_empty();
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
        if wrote {
            self.emit_values(self.step);
        }
        let writes = raw
            .map(|update| {
                vec![NodeWrite {
                    node: INPUT_WRITER.to_string(),
                    update,
                }]
            })
            .unwrap_or_default();
        // A fresh subgraph's input is written without a flush of its own: until something
        // after it is flushed (its first step's checkpoint, a result or pause saved in that
        // step) a crash costs nothing, as the parent's task, run again, gives the same input to
        // a child that has no checkpoint. One flush fewer per child on a disk store.
        let flush = self.path.is_root();
        self.save_checkpoint(
            parent,
            writes,
            Source::Input,
            vec![INPUT_WRITER.to_string()],
            flush,
        )
        .await
    }

    pub(super) async fn begin_from_checkpoint(&mut self, resume: Resume) -> Result<(), RunError> {
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
                .save_checkpoint(parent, Vec::new(), Source::Fork, Vec::new(), true)
                .await;
        }
        self.pending = store.get_writes(&self.thread_id, record.id).await?;
        self.replay_store_writes(record.id).await?;
        let commands: Vec<PendingWrite> = self
            .pending
            .iter()
            .filter(|w| w.task == COMMAND_TASK)
            .cloned()
            .collect();
        for command in &commands {
            self.apply_command(command)?;
        }
        let answers = answer_interrupts(&self.thread_id, &self.pending, resume)?;
        if !answers.is_empty() {
            store
                .put_writes(&self.thread_id, record.id, &answers, true)
                .await?;
            self.pending.extend(answers);
        }
        Ok(())
    }

    /// Resumes with an edit and extra tasks (LangGraph's `Command(resume, update, goto)`):
    /// saved as a write of no task against the checkpoint, so a failed step or a crash keeps
    /// them, and applied before the step: the update merged into the state (as input), the
    /// gotos added to the step's tasks.
    pub(super) async fn begin_with_command(
        &mut self,
        resume: Resume,
        update: Option<S::Update>,
        goto: Vec<Goto>,
    ) -> Result<(), RunError> {
        for g in &goto {
            let node = match g {
                Goto::Node(n) => n,
                Goto::Send(s) => &s.node,
                Goto::End => continue,
            };
            if self.graph.topology.node_index(node).is_none() {
                return Err(GraphError::UnknownNode {
                    name: node.clone(),
                    context: "a resume command's goto",
                    known: self.graph.node_names().join(", "),
                }
                .into());
            }
        }
        self.begin_from_checkpoint(resume).await?;
        if update.is_none() && goto.is_empty() {
            return Ok(());
        }
        let write = PendingWrite {
            task: COMMAND_TASK,
            node: INPUT_WRITER.to_string(),
            kind: PendingKind::Update {
                update: persist::to_raw(&update.unwrap_or_default())?,
                goto: goto_records(&goto),
            },
        };
        self.save_pending(vec![write.clone()], true).await?;
        self.apply_command(&write)
    }

    /// Applies a saved resume command to the state and the step's tasks.
    fn apply_command(&mut self, write: &PendingWrite) -> Result<(), RunError> {
        let PendingKind::Update { update, goto } = &write.kind else {
            return Ok(());
        };
        let decoded = persist::decode_named::<S::Update>(update.get()).map_err(|message| {
            RunError::StateMismatch {
                thread_id: self.thread_id.to_string(),
                checkpoint: self.checkpoint_id,
                message: format!("a resume command's update: {message}"),
            }
        })?;
        let mut batch = [TaggedUpdate::new(INPUT_WRITER, decoded)];
        Arc::make_mut(&mut self.state)
            .apply(&mut batch)
            .map_err(|e| RunError::InvalidInput(e.to_string()))?;
        add_command_tasks(&mut self.frontier, &gotos_of(goto));
        // The step's checkpoint stores the whole state: its delta would hold only the tasks'
        // writes, not this one.
        self.snapshots.force();
        Ok(())
    }
}
