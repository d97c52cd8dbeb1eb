//! The [`Checkpointer`] contract over the per-thread stores: writes take the thread for this
//! process, reads go where [`FolderCheckpointer::source`] says.

use super::owner::{Request, Response};
use super::{FolderCheckpointer, Slot, Source};
use crate::SledCheckpointer;
use async_trait::async_trait;
use stategraph_checkpoint::root_thread;
use stategraph_checkpoint::CheckpointError;
use stategraph_checkpoint::Checkpointer;
use stategraph_checkpoint::{CheckpointId, CheckpointRecord, Lease, PendingWrite};
use std::sync::Arc;

fn unexpected(response: Response) -> CheckpointError {
    CheckpointError::Storage(format!(
        "the process holding this thread answered out of turn: {response:?}"
    ))
}

#[async_trait]
impl Checkpointer for FolderCheckpointer {
    async fn put_checkpoint(
        &self,
        record: &CheckpointRecord,
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.writable(&record.thread_id)
            .await?
            .put_checkpoint(record, flush)
            .await
    }

    async fn get_checkpoint(
        &self,
        thread: &str,
        id: Option<CheckpointId>,
    ) -> Result<Option<CheckpointRecord>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(None),
            Some(Source::Local(s)) => s.get_checkpoint(thread, id).await,
            Some(Source::Copy(c)) => match (&c.damage, id) {
                // Its newest checkpoint was lost: an older one is not "the newest".
                (Some(d), None) if d.lost_checkpoints => Err(CheckpointError::Damaged {
                    thread: root_thread(thread).to_string(),
                    file: d.file.clone(),
                    reason: d.reason.clone(),
                }),
                _ => c.reads(thread)?.get_checkpoint(thread, id).await,
            },
            Some(Source::Remote(socket)) => {
                let request = Request::GetCheckpoint {
                    thread: thread.into(),
                    id,
                };
                match self.remote(&socket, request).await? {
                    Response::Checkpoint(r) => Ok(r.map(|b| *b)),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn list_checkpoints(
        &self,
        thread: &str,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(Vec::new()),
            Some(Source::Local(s)) => s.list_checkpoints(thread, before, limit).await,
            Some(Source::Copy(c)) => {
                c.reads(thread)?
                    .list_checkpoints(thread, before, limit)
                    .await
            }
            Some(Source::Remote(socket)) => {
                let request = Request::ListCheckpoints {
                    thread: thread.into(),
                    before,
                    limit,
                };
                match self.remote(&socket, request).await? {
                    Response::Checkpoints(r) => Ok(r),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn put_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        writes: &[PendingWrite],
        flush: bool,
    ) -> Result<(), CheckpointError> {
        self.writable(thread)
            .await?
            .put_writes(thread, checkpoint, writes, flush)
            .await
    }

    async fn get_writes(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
    ) -> Result<Vec<PendingWrite>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(Vec::new()),
            Some(Source::Local(s)) => s.get_writes(thread, checkpoint).await,
            Some(Source::Copy(c)) => c.reads(thread)?.get_writes(thread, checkpoint).await,
            Some(Source::Remote(socket)) => {
                let request = Request::GetWrites {
                    thread: thread.into(),
                    checkpoint,
                };
                match self.remote(&socket, request).await? {
                    Response::Writes(w) => Ok(w),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn get_journal(
        &self,
        thread: &str,
        key: &str,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(None),
            Some(Source::Local(s)) => s.get_journal(thread, key).await,
            Some(Source::Copy(c)) => c.reads(thread)?.get_journal(thread, key).await,
            Some(Source::Remote(socket)) => {
                let request = Request::GetJournal {
                    thread: thread.into(),
                    key: key.into(),
                };
                match self.remote(&socket, request).await? {
                    Response::Journal(v) => Ok(v),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn list_journal(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(Vec::new()),
            Some(Source::Local(s)) => s.list_journal(thread).await,
            Some(Source::Copy(c)) => c.reads(thread)?.list_journal(thread).await,
            Some(Source::Remote(socket)) => {
                let request = Request::ListJournal {
                    thread: thread.into(),
                };
                match self.remote(&socket, request).await? {
                    Response::JournalKeys(keys) => Ok(keys),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn list_namespaces(&self, thread: &str) -> Result<Vec<String>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(Vec::new()),
            Some(Source::Local(s)) => s.list_namespaces(thread).await,
            Some(Source::Copy(c)) => c.reads(thread)?.list_namespaces(thread).await,
            Some(Source::Remote(socket)) => {
                let request = Request::ListNamespaces {
                    thread: thread.into(),
                };
                match self.remote(&socket, request).await? {
                    Response::Namespaces(found) => Ok(found),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn put_journal(
        &self,
        thread: &str,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.writable(thread)
            .await?
            .put_journal(thread, key, value)
            .await
    }

    async fn list_threads(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(self
            .threads()
            .await?
            .into_iter()
            .filter(|t| t.summary.is_some())
            .map(|t| t.thread_id)
            .collect())
    }

    async fn delete_thread(&self, thread: &str) -> Result<(), CheckpointError> {
        if root_thread(thread) != thread {
            // A subgraph's namespace: its records live in the root's store.
            return self.writable(thread).await?.delete_thread(thread).await;
        }
        self.delete_folder(thread).await
    }

    async fn delete_checkpoints(
        &self,
        thread: &str,
        ids: &[CheckpointId],
    ) -> Result<(), CheckpointError> {
        self.writable(thread)
            .await?
            .delete_checkpoints(thread, ids)
            .await
    }

    async fn get_lease(&self, thread: &str) -> Result<Option<Lease>, CheckpointError> {
        match self.source(thread).await? {
            None => Ok(None),
            Some(Source::Local(s)) => s.get_lease(thread).await,
            Some(Source::Copy(c)) => c.reads(thread)?.get_lease(thread).await,
            Some(Source::Remote(socket)) => {
                let request = Request::GetLease {
                    thread: thread.into(),
                };
                match self.remote(&socket, request).await? {
                    Response::Lease(l) => Ok(l),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    async fn swap_lease(
        &self,
        thread: &str,
        expected: Option<&Lease>,
        new: Option<&Lease>,
    ) -> Result<Result<(), Option<Lease>>, CheckpointError> {
        self.writable(thread)
            .await?
            .swap_lease(thread, expected, new)
            .await
    }

    async fn flush(&self) -> Result<(), CheckpointError> {
        let held: Vec<Arc<SledCheckpointer>> = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(|s| match s {
                Slot::Held(h) => Some(h.store.clone()),
                _ => None,
            })
            .collect();
        for store in held {
            store.flush().await?;
        }
        Ok(())
    }

    fn snapshot_cost(&self, state_bytes: usize) -> usize {
        SledCheckpointer::shared_snapshot_cost(state_bytes)
    }
}
