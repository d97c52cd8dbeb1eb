//! Serving reads of a thread that this process is running, to other processes.
//!
//! sled lets one process open a store. While `graph run` holds a thread's store, it listens on
//! `threads/<id>/owner.sock` and answers read requests (checkpoints, pending writes, journal,
//! lease) from its own open store, so `graph state` and `graph history` work from a second
//! terminal. The protocol is one JSON request line and one JSON response per connection; it
//! moves stored records, so the reader decodes them with its own graph exactly as if it had
//! opened the store. Writes are never served: a running thread has one writer.

use crate::checkpoint::{
    CheckpointId, CheckpointRecord, Checkpointer, Lease, PendingWrite, SledCheckpointer,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// The protocol's version, checked by the server.
const VERSION: u32 = 1;
/// A request is a few hundred bytes; anything much larger is not ours.
const MAX_REQUEST: u64 = 64 * 1024;

/// A read request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    Ping,
    GetCheckpoint {
        thread: String,
        id: Option<CheckpointId>,
    },
    ListCheckpoints {
        thread: String,
        before: Option<CheckpointId>,
        limit: usize,
    },
    GetWrites {
        thread: String,
        checkpoint: CheckpointId,
    },
    GetJournal {
        thread: String,
        key: String,
    },
    GetLease {
        thread: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    v: u32,
    #[serde(flatten)]
    body: T,
}

/// The answer to a request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Response {
    Pong,
    Checkpoint(Option<Box<CheckpointRecord>>),
    Checkpoints(Vec<CheckpointRecord>),
    Writes(Vec<PendingWrite>),
    Journal(Option<serde_json::Value>),
    Lease(Option<Lease>),
    Error(String),
}

/// Answers read requests for one thread until dropped; removes its socket file then.
pub(crate) struct OwnerServer {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl OwnerServer {
    /// Listens on `path` for reads of `thread` in `store`. The caller must hold the store (so a
    /// socket file found there is a dead run's leftover and can go).
    pub(crate) fn start(
        path: PathBuf,
        thread: String,
        store: Arc<SledCheckpointer>,
    ) -> std::io::Result<OwnerServer> {
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (store, thread) = (store.clone(), thread.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, &thread, store.as_ref()).await {
                        tracing::debug!(error = %e, "a reader's request failed");
                    }
                });
            }
        });
        Ok(OwnerServer { path, task })
    }
}

impl Drop for OwnerServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn serve(conn: UnixStream, thread: &str, store: &SledCheckpointer) -> std::io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut line = String::new();
    BufReader::new(read)
        .take(MAX_REQUEST)
        .read_line(&mut line)
        .await?;
    let response = match serde_json::from_str::<Envelope<Request>>(&line) {
        Ok(req) if req.v != VERSION => {
            Response::Error(format!("protocol version {} is not {VERSION}", req.v))
        }
        Ok(req) => answer(req.body, thread, store).await,
        Err(e) => Response::Error(format!("bad request: {e}")),
    };
    let bytes = serde_json::to_vec(&response).map_err(std::io::Error::other)?;
    write.write_all(&bytes).await?;
    write.shutdown().await
}

async fn answer(request: Request, owned: &str, store: &SledCheckpointer) -> Response {
    let wrong = |thread: &str| {
        Response::Error(format!(
            "this process runs thread `{owned}`, not `{thread}`"
        ))
    };
    let result = match request {
        Request::Ping => return Response::Pong,
        Request::GetCheckpoint { thread, id } if thread == owned => store
            .get_checkpoint(&thread, id)
            .await
            .map(|r| Response::Checkpoint(r.map(Box::new))),
        Request::ListCheckpoints {
            thread,
            before,
            limit,
        } if thread == owned => store
            .list_checkpoints(&thread, before, limit)
            .await
            .map(Response::Checkpoints),
        Request::GetWrites { thread, checkpoint } if thread == owned => store
            .get_writes(&thread, checkpoint)
            .await
            .map(Response::Writes),
        Request::GetJournal { thread, key } if thread == owned => store
            .get_journal(&thread, &key)
            .await
            .map(Response::Journal),
        Request::GetLease { thread } if thread == owned => {
            store.get_lease(&thread).await.map(Response::Lease)
        }
        Request::GetCheckpoint { thread, .. }
        | Request::ListCheckpoints { thread, .. }
        | Request::GetWrites { thread, .. }
        | Request::GetJournal { thread, .. }
        | Request::GetLease { thread } => return wrong(&thread),
    };
    result.unwrap_or_else(|e| Response::Error(e.to_string()))
}

/// Sends one request to the process that owns a thread.
pub(crate) async fn request(socket: &Path, request: &Request) -> std::io::Result<Response> {
    let exchange = async {
        let mut conn = UnixStream::connect(socket).await?;
        let mut line = serde_json::to_vec(&Envelope {
            v: VERSION,
            body: request,
        })
        .map_err(std::io::Error::other)?;
        line.push(b'\n');
        conn.write_all(&line).await?;
        let mut buf = Vec::new();
        conn.read_to_end(&mut buf).await?;
        serde_json::from_slice::<Response>(&buf).map_err(std::io::Error::other)
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer within 10 s",
            ))
        })
}

/// True when a live process answers on `socket`.
pub(crate) async fn ping(socket: &Path) -> bool {
    if !socket.exists() {
        return false;
    }
    let probe = tokio::time::timeout(Duration::from_millis(500), request(socket, &Request::Ping));
    matches!(probe.await, Ok(Ok(Response::Pong)))
}
