//! How a run begins: from input (a new or continued thread) or from a saved checkpoint.

use super::interrupts::answer_interrupts;
use super::{Run, INPUT_WRITER};
use crate::checkpoint::{Frontier, NodeWrite, Source};
use crate::runtime::error::RunError;
use crate::runtime::persist::{self, SnapshotTracker};
use crate::runtime::triggers::{self, Finished};
use crate::runtime::Resume;
use crate::state::{State, TaggedUpdate};
use std::sync::Arc;

impl<S: State> Run<S> {
    pub(super) async fn begin_with_input(&mut self, input: S::Update) -> Result<(), RunError> {
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
}
