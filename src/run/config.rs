//! Per-run settings.

use super::control::RunControl;
use super::events::StreamMode;
use crate::checkpoint::CheckpointId;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// When a run's checkpoints reach the disk, and so what a `kill -9` can lose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Each superstep's checkpoint is flushed to disk before the next step starts. A kill loses
    /// at most the step in flight (whose finished tasks' results are usually saved as pending
    /// writes too).
    #[default]
    Sync,
    /// Checkpoints are written in the background while the next step runs; flushed at the end,
    /// on an interrupt and on an error. A kill can lose the steps not yet flushed (sled flushes
    /// on its own every 500 ms).
    Async,
    /// Only the last checkpoint is written, when the run ends, pauses or fails. A kill loses the
    /// whole run since its last pause.
    Exit,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sync" => Ok(Durability::Sync),
            "async" => Ok(Durability::Async),
            "exit" => Ok(Durability::Exit),
            other => Err(format!(
                "unknown durability `{other}`: use sync, async or exit"
            )),
        }
    }
}

/// When a checkpoint stores the whole state instead of the step's writes.
///
/// Deltas keep storage proportional to what changed; a snapshot bounds how much a read replays.
/// A snapshot is taken when the delta bytes since the last one reach `ratio` times its cost, or
/// when there have been `max_chain` deltas and their bytes reach `min_ratio` times its cost; and
/// never before they reach 1/16 of the state, which every snapshot encodes whole. Its cost is
/// what the store says storing it takes ([`Checkpointer::snapshot_cost`]): the state's size for
/// a store that keeps snapshots whole, about what changed for one that shares their pieces (both
/// built-in stores do, from 256 KiB).
///
/// Because a snapshot is only ever paid for by deltas worth a fixed fraction of its cost, the
/// snapshots of a thread add up to a constant multiple of its final state (5x with the
/// defaults), never to one copy per step; and a read replays at most about one state's worth of
/// deltas on top of its snapshot, far fewer where snapshots share pieces.
///
/// [`Checkpointer::snapshot_cost`]: crate::checkpoint::Checkpointer::snapshot_cost
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotPolicy {
    /// Deltas after which a smaller batch of delta bytes (`min_ratio`) is enough for a snapshot.
    pub max_chain: u32,
    /// Delta bytes since the last snapshot, relative to its size, that always trigger a new one.
    pub ratio: f64,
    /// Delta bytes, relative to the last snapshot, that trigger one once `max_chain` is reached.
    pub min_ratio: f64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            max_chain: 256,
            ratio: 1.0,
            min_ratio: 0.25,
        }
    }
}

/// Settings of one run (an `invoke`, `stream` or `resume` call).
///
/// ```
/// use stategraph::runtime::{Durability, RunConfig};
/// let config = RunConfig::new()
///     .thread("review-42")
///     .durability(Durability::Sync)
///     .recursion_limit(200)
///     .setting("model", "gpt-4o-mini");
/// assert_eq!(config.thread_id.as_deref(), Some("review-42"));
/// ```
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The thread to run on; a new UUID v7 when `None`.
    pub thread_id: Option<String>,
    /// Most supersteps this call may run before failing with
    /// [`RunError::RecursionLimit`](crate::error::RunError::RecursionLimit).
    pub recursion_limit: u64,
    /// When checkpoints reach the disk.
    pub durability: Durability,
    /// Extra nodes to pause before, for this run only.
    pub interrupt_before: BTreeSet<String>,
    /// Extra nodes to pause after, for this run only.
    pub interrupt_after: BTreeSet<String>,
    /// Free-form settings nodes can read ([`Context::setting`](crate::run::context::Context::setting)).
    pub settings: serde_json::Map<String, serde_json::Value>,
    /// Cancels the run: the in-flight step is abandoned and the last checkpoint kept.
    pub cancel: Option<CancellationToken>,
    /// How long a crashed run's claim on the thread outlives it.
    pub lease_ttl: Duration,
    /// Start from this checkpoint instead of the thread's newest (replay / time travel).
    pub checkpoint_id: Option<CheckpointId>,
    /// When checkpoints store the whole state.
    pub snapshots: SnapshotPolicy,
    /// What a stream of this run yields ([`StreamMode`]); empty: the root graph's lifecycle and
    /// custom events as they happen.
    pub stream: BTreeSet<StreamMode>,
    /// Where cached node results are looked up and stored
    /// ([`CachePolicy`](crate::graph::CachePolicy)); `None`: nothing is cached. Subgraphs the
    /// run starts use it too.
    pub cache: Option<std::sync::Arc<dyn crate::checkpoint::NodeCache>>,
    /// Runs every node, looking nothing up in `cache` and storing nothing (`--no-cache`).
    pub no_cache: bool,
    /// The run stops at the first step boundary past this long (counted from its first step):
    /// the step that passes it finishes and is saved, and the run ends with
    /// [`RunError::Stopped`](crate::error::RunError::Stopped); resuming continues it.
    pub run_timeout: Option<Duration>,
    /// A handle that stops the run at its next step boundary ([`RunControl::request_drain`]).
    pub control: Option<RunControl>,
    /// The long-term store nodes reach through
    /// [`Context::store`](crate::run::context::Context::store); none by default.
    pub store: Option<super::store_link::SharedStore>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            thread_id: None,
            recursion_limit: 10_000,
            durability: Durability::Sync,
            interrupt_before: BTreeSet::new(),
            interrupt_after: BTreeSet::new(),
            settings: serde_json::Map::new(),
            cancel: None,
            lease_ttl: Duration::from_secs(15),
            checkpoint_id: None,
            snapshots: SnapshotPolicy::default(),
            stream: BTreeSet::new(),
            cache: None,
            no_cache: false,
            run_timeout: None,
            control: None,
            store: None,
        }
    }
}

impl RunConfig {
    /// Default settings: a new thread, sync durability, a limit of 10,000 supersteps.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives the run's nodes a long-term store ([`Context::store`](crate::run::context::Context::store)).
    pub fn with_store(mut self, store: super::store_link::SharedStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Runs on this thread.
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread_id = Some(id.into());
        self
    }

    /// Sets the recursion limit.
    pub fn recursion_limit(mut self, limit: u64) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// Sets the durability mode.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// Pauses before these nodes too.
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Pauses after these nodes too.
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Adds a setting nodes can read.
    pub fn setting(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.settings.insert(key.into(), value.into());
        self
    }

    /// Lets `token` cancel the run.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Streams these modes (see [`StreamMode`]) instead of the plain events.
    ///
    /// ```
    /// use stategraph::runtime::{RunConfig, StreamMode};
    /// let config = RunConfig::new().stream_modes([StreamMode::Updates, StreamMode::Messages]);
    /// assert_eq!(config.stream.len(), 2);
    /// ```
    pub fn stream_modes(mut self, modes: impl IntoIterator<Item = StreamMode>) -> Self {
        self.stream.extend(modes);
        self
    }

    /// Stops the run at the first step boundary past `limit`: the step in flight when it passes
    /// finishes and is saved, no later step starts, and the run ends with
    /// [`RunError::Stopped`](crate::error::RunError::Stopped) (reason
    /// [`StopReason::RunTimeout`](crate::error::StopReason::RunTimeout)). Resuming the thread
    /// continues it, with a timeout of its own. A step is never cut short: a node that may hang
    /// needs its own [`timeout`](crate::graph::NodeSpec::timeout) or
    /// [`idle_timeout`](crate::graph::NodeSpec::idle_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph::runtime::RunConfig;
    /// let config = RunConfig::new().run_timeout(Duration::from_secs(600));
    /// assert_eq!(config.run_timeout, Some(Duration::from_secs(600)));
    /// ```
    pub fn run_timeout(mut self, limit: Duration) -> Self {
        self.run_timeout = Some(limit);
        self
    }

    /// Lets `control` drain the run: stop it at its next step boundary, the step in flight
    /// finished and saved ([`RunControl::request_drain`]).
    ///
    /// ```
    /// use stategraph::runtime::{RunConfig, RunControl};
    /// let control = RunControl::new();
    /// let config = RunConfig::new().control(&control);
    /// control.request_drain();
    /// assert!(config.control.unwrap().drain_requested());
    /// ```
    pub fn control(mut self, control: &RunControl) -> Self {
        self.control = Some(control.clone());
        self
    }

    /// Starts from this checkpoint instead of the newest.
    pub fn from_checkpoint(mut self, id: CheckpointId) -> Self {
        self.checkpoint_id = Some(id);
        self
    }
}
