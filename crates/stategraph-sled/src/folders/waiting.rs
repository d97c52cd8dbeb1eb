//! How a take waits: file work moved off the async threads onto tokio's blocking pool, and a
//! wait for a thread someone else has, said once.

use stategraph_checkpoint::CheckpointError;

/// Runs `work`, which blocks on the file system, on tokio's blocking threads when there is a
/// runtime (its async threads go on serving other tasks meanwhile), else here.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CheckpointError> + Send + 'static,
) -> Result<T, CheckpointError> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => match runtime.spawn_blocking(work).await {
            Ok(done) => done,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(CheckpointError::Storage(
                "the store's work was cancelled: the program is shutting down; nothing was \
                 changed by it"
                    .to_string(),
            )),
        },
        Err(_) => work(),
    }
}

/// A wait for a thread that another process has, said once (at info level: `graph -v` shows
/// it), so that a command that pauses for it says why.
///
/// Every wait of a take sleeps between tries, holding at most the thread's lock: its future
/// dropped there (a caller's timeout, a stop of the `graph` command) lets go of the lock and
/// leaves the thread as a failed wait would have.
#[derive(Default)]
pub(super) struct Waiting {
    said: bool,
}

impl Waiting {
    pub(super) fn say(&mut self, root: &str, why: &str) {
        if !std::mem::replace(&mut self.said, true) {
            tracing::info!(thread = %root, "waiting for the thread: {why}");
        }
    }
}
