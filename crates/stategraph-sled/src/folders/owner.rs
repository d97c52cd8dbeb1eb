//! Serving reads of a thread this process holds, to other processes.
//!
//! sled lets one process open a store. While a process holds a thread, it listens on a Unix
//! socket and answers read requests (checkpoints, pending writes, journal, lease, the thread's
//! listing) from its own open store, so a second terminal can read a running thread. The
//! protocol is one JSON request line and one JSON response per connection; it moves stored
//! records, so the reader decodes them exactly as if it had opened the store. Writes are never
//! served: a held thread has one writer.
//!
//! The socket lives in a private directory of the user's (`$TMPDIR/stategraph-<uid>/`) under a
//! name hashed from the thread folder's path: a Unix socket's path is limited to ~100 bytes, and
//! neither a long thread id nor a deep database path may turn serving off.

use super::index::ThreadListing;
use crate::SledCheckpointer;
use serde::{Deserialize, Serialize};
use stategraph_checkpoint::root_thread;
use stategraph_checkpoint::Checkpointer;
use stategraph_checkpoint::{CheckpointId, CheckpointRecord, Lease, PendingWrite};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// The protocol's version, checked by the server.
const VERSION: u32 = 2;
/// A request is a few hundred bytes; anything much larger is not ours.
const MAX_REQUEST: u64 = 64 * 1024;
/// How long a reader waits for an answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// A read request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Request {
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
    ListJournal {
        thread: String,
    },
    ListNamespaces {
        thread: String,
    },
    GetLease {
        thread: String,
    },
    Listing {
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
pub(super) enum Response {
    Pong,
    Checkpoint(Option<Box<CheckpointRecord>>),
    Checkpoints(Vec<CheckpointRecord>),
    Writes(Vec<PendingWrite>),
    Journal(Option<serde_json::Value>),
    JournalKeys(Vec<String>),
    Namespaces(Vec<String>),
    Lease(Option<Lease>),
    Listing(Box<ThreadListing>),
    Error(String),
}

/// Where the process holding the thread folder `thread_dir` listens. The folder must exist.
pub(super) fn socket_path(thread_dir: &Path) -> std::io::Result<PathBuf> {
    let canonical = std::fs::canonicalize(thread_dir)?;
    let hash = blake3::hash(canonical.as_os_str().as_encoded_bytes());
    Ok(socket_dir().join(format!("{}.sock", &hash.to_hex()[..32])))
}

fn socket_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("stategraph-{uid}"))
}

/// Creates the socket directory, readable by this user only, and checks nobody else owns it.
fn private_socket_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = socket_dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    // SAFETY: as above.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user's",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// Answers read requests for one thread until dropped; removes its socket file then.
pub(super) struct OwnerServer {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl OwnerServer {
    /// Listens for reads of `thread` (and its subgraphs' namespaces) in `store`. The caller holds
    /// the thread, so a socket file found at the path is a dead holder's leftover and can go.
    ///
    /// The server keeps only a weak reference: the store closes when its holder lets it go.
    pub(super) fn start(
        thread_dir: &Path,
        thread: String,
        created_at_ms: Option<u64>,
        store: &Arc<SledCheckpointer>,
    ) -> std::io::Result<OwnerServer> {
        private_socket_dir()?;
        let path = socket_path(thread_dir)?;
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let store = Arc::downgrade(store);
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (store, thread) = (store.clone(), thread.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, &thread, created_at_ms, store).await {
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

async fn serve(
    conn: UnixStream,
    thread: &str,
    created_at_ms: Option<u64>,
    store: Weak<SledCheckpointer>,
) -> std::io::Result<()> {
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
        Ok(req) => match store.upgrade() {
            Some(store) => answer(req.body, thread, created_at_ms, &store).await,
            None => Response::Error(format!("thread `{thread}` was let go")),
        },
        Err(e) => Response::Error(format!("bad request: {e}")),
    };
    let bytes = serde_json::to_vec(&response).map_err(std::io::Error::other)?;
    write.write_all(&bytes).await?;
    write.shutdown().await
}

async fn answer(
    request: Request,
    owned: &str,
    created_at_ms: Option<u64>,
    store: &SledCheckpointer,
) -> Response {
    let thread = match &request {
        Request::Ping => return Response::Pong,
        Request::GetCheckpoint { thread, .. }
        | Request::ListCheckpoints { thread, .. }
        | Request::GetWrites { thread, .. }
        | Request::GetJournal { thread, .. }
        | Request::ListJournal { thread }
        | Request::ListNamespaces { thread }
        | Request::GetLease { thread }
        | Request::Listing { thread } => thread.clone(),
    };
    if root_thread(&thread) != owned {
        return Response::Error(format!(
            "this process holds thread `{owned}`, not `{thread}`"
        ));
    }
    let result = match request {
        Request::Ping => return Response::Pong,
        Request::GetCheckpoint { id, .. } => store
            .get_checkpoint(&thread, id)
            .await
            .map(|r| Response::Checkpoint(r.map(Box::new))),
        Request::ListCheckpoints { before, limit, .. } => store
            .list_checkpoints(&thread, before, limit)
            .await
            .map(Response::Checkpoints),
        Request::GetWrites { checkpoint, .. } => store
            .get_writes(&thread, checkpoint)
            .await
            .map(Response::Writes),
        Request::GetJournal { key, .. } => store
            .get_journal(&thread, &key)
            .await
            .map(Response::Journal),
        Request::ListJournal { .. } => store.list_journal(&thread).await.map(Response::JournalKeys),
        Request::ListNamespaces { .. } => store
            .list_namespaces(&thread)
            .await
            .map(Response::Namespaces),
        Request::GetLease { .. } => store.get_lease(&thread).await.map(Response::Lease),
        Request::Listing { .. } => ThreadListing::of_held(store, &thread, created_at_ms)
            .await
            .map(|l| Response::Listing(Box::new(l))),
    };
    result.unwrap_or_else(|e| Response::Error(e.to_string()))
}

/// Sends one request to the process that holds a thread.
pub(super) async fn request(socket: &Path, request: &Request) -> std::io::Result<Response> {
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
    tokio::time::timeout(ANSWER_WITHIN, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {} s", ANSWER_WITHIN.as_secs()),
            ))
        })
}

/// True when a live process answers on `socket`.
pub(super) async fn ping(socket: &Path) -> bool {
    if !socket.exists() {
        return false;
    }
    let probe = tokio::time::timeout(Duration::from_millis(500), request(socket, &Request::Ping));
    matches!(probe.await, Ok(Ok(Response::Pong)))
}
