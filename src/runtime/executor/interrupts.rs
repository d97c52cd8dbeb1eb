//! Pauses: breakpoints before and after nodes, and the answers a resume addresses to them.

use super::Run;
use crate::checkpoint::{waiting_interrupts, Waiting};
use crate::checkpoint::{InterruptRecord, InterruptWhen, PendingKind, PendingWrite, TaskSpec};
use crate::error::{ResumeError, RunError};
use crate::run::context::interrupt_id;
use crate::run::events::Event;
use crate::runtime::{Resume, RunStatus};
use crate::state::State;
use std::collections::BTreeMap;

impl<S: State> Run<S> {
    pub(super) async fn pause_before(&mut self) -> Result<Option<RunStatus>, RunError> {
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

    /// Breakpoints after nodes: pauses once the step's checkpoint is saved, unless the graph
    /// ended.
    pub(super) async fn pause_after(
        &mut self,
        ran: &[TaskSpec],
    ) -> Result<Option<RunStatus>, RunError> {
        if self.after.is_empty() {
            return Ok(None);
        }
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
        if records.is_empty() || self.frontier.tasks.is_empty() {
            return Ok(None);
        }
        self.pause(records).await.map(Some)
    }

    pub(super) async fn pause(
        &mut self,
        records: Vec<InterruptRecord>,
    ) -> Result<RunStatus, RunError> {
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
        // A static breakpoint shows in the updates stream only, as LangGraph's does.
        let first = records.first().map_or(0, |r| r.task);
        self.emit_pause(step, first, &records);
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
}

/// Turns a resume value into answers addressed to the pending dynamic interrupts.
pub(super) fn answer_interrupts(
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
