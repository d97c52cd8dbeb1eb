//! What a running node can see and do besides reading the state.

use super::config::{Durability, RunConfig};
use super::control::Heartbeat;
use super::events::EventSink;
use super::namespace::ThreadPath;
use crate::checkpoint::{CheckpointId, Checkpointer, InterruptRecord, InterruptWhen};
use crate::error::{NodeError, NodeErrorKind};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Receives text a node produces piece by piece (see [`Context::text_sink`]).
pub type TextSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A node's view of its run: ids, settings, its Send argument, events, interrupts, and a journal
/// for expensive calls. Cheap to clone.
#[derive(Clone)]
pub struct Context {
    inner: Arc<TaskContext>,
}

pub(crate) struct TaskContext {
    pub(crate) thread_id: Arc<str>,
    pub(crate) run_id: Arc<str>,
    pub(crate) step: u64,
    pub(crate) node: Arc<str>,
    pub(crate) task: usize,
    pub(crate) checkpoint_id: CheckpointId,
    pub(crate) settings: Arc<serde_json::Map<String, serde_json::Value>>,
    pub(crate) arg: Option<serde_json::Value>,
    pub(crate) events: EventSink,
    /// Answers to this task's interrupts, by ordinal.
    pub(crate) answers: Vec<Option<serde_json::Value>>,
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    pub(crate) attempt: AtomicU32,
    pub(crate) interrupts_seen: AtomicU32,
    /// Keys whose recorded results `record` handed back instead of calling again.
    pub(crate) replayed: std::sync::Mutex<Vec<String>>,
    /// Where this task's graph stores its checkpoints (its thread, or a subgraph's namespace).
    pub(crate) path: Arc<ThreadPath>,
    /// What a subgraph run by this task inherits from the run.
    pub(crate) inherit: Arc<Inherited>,
    /// Answers to interrupts of subgraphs below this task, by interrupt id.
    pub(crate) forwarded: BTreeMap<String, serde_json::Value>,
    /// Subgraph calls made by the current attempt (each gets its own namespace).
    pub(crate) subgraph_calls: AtomicU32,
    /// Pauses of graphs the node invoked itself (`invoke` inside the node): they pause this
    /// task whatever the node then returns.
    pub(crate) child_pauses: std::sync::Mutex<Vec<InterruptRecord>>,
    /// This task's journal when the run has no checkpointer: kept for the task's later
    /// attempts (its retries) in this run only.
    pub(crate) kept: std::sync::Mutex<BTreeMap<String, serde_json::Value>>,
    /// When the task last showed progress, for an idle timeout (its node's or a parent
    /// task's); `None` when nothing watches it (`control.rs`).
    pub(crate) heartbeat: Option<Heartbeat>,
}

tokio::task_local! {
    /// The task whose node is running, so a graph the node invokes runs as its child.
    static CURRENT_TASK: Context;
}

/// The task whose node is running on this tokio task, if any.
pub(crate) fn current_task() -> Option<Context> {
    CURRENT_TASK.try_with(Context::clone).ok()
}

/// Runs a node's future as `ctx`'s task (see [`current_task`]).
pub(crate) fn as_task<F: Future>(ctx: Context, fut: F) -> impl Future<Output = F::Output> {
    CURRENT_TASK.scope(ctx, fut)
}

/// What a subgraph's run takes over from the run of the task that runs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inherited {
    pub(crate) durability: Durability,
    pub(crate) recursion_limit: u64,
    pub(crate) cancel: Option<CancellationToken>,
    /// The node cache the run uses (`None` when it has none or bypasses it).
    pub(crate) cache: Option<Arc<dyn crate::checkpoint::NodeCache>>,
    /// The long-term store, shared by the run's tasks and subgraphs (`store_link.rs`).
    pub(crate) store: Option<Arc<super::store_link::StoreLink>>,
}

impl Inherited {
    pub(crate) fn from_config(config: &RunConfig) -> Self {
        Inherited {
            durability: config.durability,
            recursion_limit: config.recursion_limit,
            cancel: config.cancel.clone(),
            cache: config.cache.clone().filter(|_| !config.no_cache),
            store: config.store.as_ref().map(super::store_link::StoreLink::new),
        }
    }
}

impl Context {
    pub(crate) fn new(inner: TaskContext) -> Self {
        Context {
            inner: Arc::new(inner),
        }
    }

    /// A context outside any run, for unit-testing a node on its own.
    ///
    /// ```
    /// let ctx = stategraph::runtime::Context::detached("summarise");
    /// assert_eq!(ctx.node(), "summarise");
    /// ```
    pub fn detached(node: &str) -> Self {
        Context::new(TaskContext {
            thread_id: "detached".into(),
            run_id: "detached".into(),
            step: 0,
            node: node.into(),
            task: 0,
            checkpoint_id: CheckpointId::nil(),
            settings: Arc::default(),
            arg: None,
            events: EventSink::default(),
            answers: Vec::new(),
            checkpointer: None,
            attempt: AtomicU32::new(1),
            interrupts_seen: AtomicU32::new(0),
            replayed: Default::default(),
            path: Arc::new(ThreadPath::root_of("detached")),
            inherit: Arc::new(Inherited::from_config(&RunConfig::default())),
            forwarded: BTreeMap::new(),
            subgraph_calls: AtomicU32::new(0),
            child_pauses: Default::default(),
            kept: Default::default(),
            heartbeat: None,
        })
    }

    /// A copy with a Send argument, for unit-testing a map-reduce node.
    pub fn with_arg(self, arg: impl Serialize) -> Result<Self, serde_json::Error> {
        let i = &self.inner;
        Ok(Context::new(TaskContext {
            thread_id: i.thread_id.clone(),
            run_id: i.run_id.clone(),
            step: i.step,
            node: i.node.clone(),
            task: i.task,
            checkpoint_id: i.checkpoint_id,
            settings: i.settings.clone(),
            arg: Some(serde_json::to_value(arg)?),
            events: i.events.clone(),
            answers: i.answers.clone(),
            checkpointer: i.checkpointer.clone(),
            attempt: AtomicU32::new(i.attempt.load(Ordering::Relaxed)),
            interrupts_seen: AtomicU32::new(0),
            replayed: Default::default(),
            path: i.path.clone(),
            inherit: i.inherit.clone(),
            forwarded: i.forwarded.clone(),
            subgraph_calls: AtomicU32::new(0),
            child_pauses: Default::default(),
            kept: Default::default(),
            heartbeat: i.heartbeat.clone(),
        }))
    }

    pub(crate) fn begin_attempt(&self, attempt: u32) {
        self.inner.attempt.store(attempt, Ordering::Relaxed);
        self.inner.interrupts_seen.store(0, Ordering::Relaxed);
        self.inner.subgraph_calls.store(0, Ordering::Relaxed);
        self.take_child_pauses();
        if let (Some(link), true) = (&self.inner.inherit.store, attempt > 1) {
            link.forget(
                &self.inner.thread_id,
                self.inner.checkpoint_id,
                self.inner.task,
            );
        }
    }

    /// The pauses of graphs the node invoked itself, cleared.
    pub(crate) fn take_child_pauses(&self) -> Vec<InterruptRecord> {
        match self.inner.child_pauses.lock() {
            Ok(mut pauses) => std::mem::take(&mut *pauses),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    /// Notes a pause of a graph the node invoked itself.
    pub(crate) fn child_paused(&self, interrupts: &[InterruptRecord]) {
        match self.inner.child_pauses.lock() {
            Ok(mut pauses) => pauses.extend_from_slice(interrupts),
            Err(poisoned) => poisoned.into_inner().extend_from_slice(interrupts),
        }
    }

    pub(crate) fn task(&self) -> &TaskContext {
        &self.inner
    }

    /// The thread this run belongs to.
    pub fn thread_id(&self) -> &str {
        &self.inner.thread_id
    }

    /// This run's id (one per `invoke`/`resume` call).
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The superstep this task runs in (1 for the first).
    pub fn step(&self) -> u64 {
        self.inner.step
    }

    /// The node being run.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The attempt number, from 1 (retries count up).
    pub fn attempt(&self) -> u32 {
        self.inner.attempt.load(Ordering::Relaxed)
    }

    /// All run settings ([`RunConfig::settings`](crate::run::config::RunConfig::settings)).
    pub fn settings(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.inner.settings
    }

    /// One run setting, decoded; `None` when absent or of another type.
    pub fn setting<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.inner
            .settings
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// This task's Send argument, decoded.
    pub fn arg<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        let node = &self.inner.node;
        let arg = self.inner.arg.as_ref().ok_or_else(|| {
            NodeError::new(format!(
                "node `{node}` read a Send argument, but it was not invoked with Send"
            ))
        })?;
        serde_json::from_value(arg.clone()).map_err(|e| {
            NodeError::new(format!(
                "node `{node}` got a Send argument it cannot read: {e}"
            ))
        })
    }

    /// The raw Send argument, if this task was invoked with Send.
    pub fn raw_arg(&self) -> Option<&serde_json::Value> {
        self.inner.arg.as_ref()
    }

    /// Emits an event of the node's own into the run's stream (progress, tokens...). Free when
    /// nobody is listening. It is also a sign of life, as [`heartbeat`](Self::heartbeat) is.
    pub fn emit(&self, kind: &str, payload: impl Serialize) {
        let i = &self.inner;
        if let Some(heartbeat) = &i.heartbeat {
            heartbeat.beat();
        }
        i.events.custom(i.step, &i.node, kind, || {
            serde_json::to_value(payload).unwrap_or(serde_json::Value::Null)
        });
    }

    /// A sink for text the node produces piece by piece, such as model tokens: each piece
    /// becomes an [`Event::Custom`](crate::run::events::Event::Custom) of `kind` whose payload is the text, so a UI can show it as
    /// it arrives. `None` when nobody listens, so streaming costs nothing then; except for a
    /// node with an idle timeout, for which each piece is also a sign of life
    /// ([`heartbeat`](Self::heartbeat)): a long model stream keeps the node alive by itself,
    /// and a stalled one is cut off.
    ///
    /// Its type is the one model clients take for streaming
    /// (`ChatRequest::stream`), so `request.stream = ctx.text_sink(TOKEN_EVENT)` is all a node
    /// needs.
    ///
    /// ```
    /// use stategraph::runtime::{Context, TOKEN_EVENT};
    /// let ctx = Context::detached("answer");
    /// assert!(ctx.text_sink(TOKEN_EVENT).is_none(), "nobody listens to a detached context");
    /// ```
    pub fn text_sink(&self, kind: &str) -> Option<TextSink> {
        if !self.is_streaming() && self.inner.heartbeat.is_none() {
            return None;
        }
        // Weak: whoever keeps the sink (a client that records its requests, say) must not keep
        // the run's event channel open after the task ends, or the run's stream never closes.
        let task = Arc::downgrade(&self.inner);
        let kind = kind.to_string();
        Some(Arc::new(move |text: &str| {
            if let Some(inner) = task.upgrade() {
                Context { inner }.emit(&kind, text);
            }
        }))
    }

    /// True when someone consumes the run's events (so building a costly payload is worth it).
    pub fn is_streaming(&self) -> bool {
        self.inner.events.wants_custom()
    }

    /// Asks a person for input and pauses the run.
    ///
    /// The first time, this returns an error that the node must propagate with `?`: the run
    /// pauses and `payload` is shown to the person. When the thread is resumed with a value,
    /// **the node runs again from its start**, and this call returns that value instead. So
    /// code before the call runs twice: keep it free of side effects, or wrap expensive calls in
    /// [`Context::record`]. A node may call `interrupt` several times; each call is answered in
    /// turn.
    ///
    /// ```no_run
    /// # use stategraph::runtime::{Context, NodeError};
    /// # async fn node(ctx: Context) -> Result<(), NodeError> {
    /// let approved: bool = ctx.interrupt(serde_json::json!({"question": "ship it?"})).await?;
    /// # let _ = approved; Ok(()) }
    /// ```
    pub async fn interrupt<T: DeserializeOwned>(
        &self,
        payload: impl Serialize,
    ) -> Result<T, NodeError> {
        let i = &self.inner;
        let ordinal = i.interrupts_seen.fetch_add(1, Ordering::Relaxed);
        if let Some(Some(answer)) = i.answers.get(ordinal as usize) {
            return crate::state::from_json(answer.clone()).map_err(|why| {
                NodeError::new(format!(
                    "node `{}` cannot read the answer given to its question: it {why}",
                    i.node
                ))
            });
        }
        let payload = serde_json::to_value(payload)
            .map_err(|e| NodeError::new(format!("interrupt payload is not JSON: {e}")))?;
        let record = InterruptRecord {
            id: interrupt_id(i.checkpoint_id, i.task, ordinal),
            node: i.node.to_string(),
            when: InterruptWhen::Dynamic,
            task: i.task,
            ordinal,
            payload,
            namespace: i.path.namespace(),
        };
        Err(NodeError::with_kind(
            NodeErrorKind::Interrupted(Box::new(record)),
            format!("node `{}` is waiting for input", i.node),
        ))
    }

    /// Runs an expensive call once: its result is recorded under `key` as soon as it returns, so
    /// if the process dies before the node completes, the node's next run gets the recorded
    /// result instead of calling again. Keys are per task; use one per distinct call.
    ///
    /// Without a checkpointer the call simply runs.
    ///
    /// ```no_run
    /// # use stategraph::runtime::{Context, NodeError};
    /// # async fn ask_model(_: &str) -> Result<String, std::io::Error> { Ok(String::new()) }
    /// # async fn node(ctx: Context) -> Result<(), NodeError> {
    /// let summary: String = ctx.record("summary", || ask_model("summarise ...")).await?;
    /// # let _ = summary; Ok(()) }
    /// ```
    pub async fn record<T, E, F, Fut>(&self, key: &str, call: F) -> Result<T, NodeError>
    where
        T: Serialize + DeserializeOwned,
        E: Into<NodeError>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let i = &self.inner;
        let Some(store) = &i.checkpointer else {
            return call().await.map_err(Into::into);
        };
        let journal_key = self.journal_key(key);
        let stored = store
            .get_journal(&i.thread_id, &journal_key)
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
        if let Some(value) = stored {
            if let Ok(mut replayed) = i.replayed.lock() {
                replayed.push(key.to_string());
            }
            return serde_json::from_value(value).map_err(|e| {
                NodeError::new(format!(
                    "the recorded result `{key}` of node `{}` no longer fits its type: {e}",
                    i.node
                ))
            });
        }
        let result = call().await.map_err(Into::into)?;
        let value = serde_json::to_value(&result).map_err(|e| {
            NodeError::new(format!("result `{key}` cannot be recorded as JSON: {e}"))
        })?;
        store
            .put_journal(&i.thread_id, &journal_key, &value)
            .await
            .map_err(|e| NodeError::wrap(e, true))?;
        Ok(result)
    }
}

impl Context {
    /// Where this task's journal entry `key` is kept: per checkpoint and task, so a task run
    /// again (a retry, a resume) finds its earlier attempts' entries and no other task does.
    fn journal_key(&self, key: &str) -> String {
        task_journal_key(self.inner.checkpoint_id, self.inner.task, key)
    }

    /// This task's journal entry `key`, decoded: what an earlier attempt or run of this task
    /// kept with [`journal`](Self::journal) (or [`record`](Self::record)). `None` when there is
    /// none. Without a checkpointer, only what earlier attempts in this run kept.
    pub async fn journaled<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, NodeError> {
        let i = &self.inner;
        let stored = match &i.checkpointer {
            Some(store) => store
                .get_journal(&i.thread_id, &self.journal_key(key))
                .await
                .map_err(|e| NodeError::new(e.to_string()))?,
            None => self.kept().get(key).cloned(),
        };
        stored
            .map(|value| {
                serde_json::from_value(value).map_err(|e| {
                    NodeError::new(format!(
                        "the journal entry `{key}` of node `{}` no longer fits its type: {e}",
                        i.node
                    ))
                })
            })
            .transpose()
    }

    /// Keeps `value` under `key` in this task's journal, replacing what was there. Unlike the
    /// node's update, it survives the task failing: it is how a failed attempt hands something
    /// to the task's next attempt or run (what its model requests cost, say). Without a
    /// checkpointer it is kept in memory, for the task's later attempts in this run only.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let ctx = stategraph::runtime::Context::detached("plan");
    /// ctx.journal("tries", &2).await?;
    /// assert_eq!(ctx.journaled::<u32>("tries").await?, Some(2), "kept for the next attempt");
    /// # Ok::<(), stategraph::runtime::NodeError>(()) }).unwrap();
    /// ```
    pub async fn journal(&self, key: &str, value: &impl Serialize) -> Result<(), NodeError> {
        let i = &self.inner;
        let value = serde_json::to_value(value).map_err(|e| {
            NodeError::new(format!("journal entry `{key}` cannot be kept as JSON: {e}"))
        })?;
        let Some(store) = &i.checkpointer else {
            self.kept().insert(key.to_string(), value);
            return Ok(());
        };
        store
            .put_journal(&i.thread_id, &self.journal_key(key), &value)
            .await
            .map_err(|e| NodeError::wrap(e, true))
    }

    /// The journal kept in memory (no checkpointer).
    fn kept(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, serde_json::Value>> {
        // Entries are whole values, replaced at once: a poisoned lock holds no torn one.
        match self.inner.kept.lock() {
            Ok(kept) => kept,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// True when [`record`](Self::record) under `key` handed back a result recorded by an
    /// earlier run of this task instead of calling again: what a resume saved.
    pub fn was_replayed(&self, key: &str) -> bool {
        self.inner
            .replayed
            .lock()
            .map(|keys| keys.iter().any(|k| k == key))
            .unwrap_or(false)
    }
}

/// The thread's journal key of entry `key` of task `task` at `checkpoint`, as
/// [`Context::journal`] and [`Context::record`] keep it: for reading a task's entry from
/// outside the run (what a failed task left, say), with [`Checkpointer::get_journal`].
pub fn task_journal_key(checkpoint: CheckpointId, task: usize, key: &str) -> String {
    format!("{checkpoint}/{task}/{key}")
}

/// A short, stable id for a task's n-th interrupt at a checkpoint.
pub(crate) fn interrupt_id(checkpoint: CheckpointId, task: usize, ordinal: u32) -> String {
    let mut h = crc32fast::Hasher::new();
    h.update(checkpoint.as_bytes());
    h.update(&(task as u64).to_le_bytes());
    h.update(&ordinal.to_le_bytes());
    format!("{:08x}", h.finalize())
}

impl Context {
    /// Tells the run this node is alive. A node with an idle timeout
    /// ([`NodeSpec::idle_timeout`](crate::graph::NodeSpec::idle_timeout)) that shows no sign of
    /// life for longer than that is cancelled, as a failed attempt its retry policy sees; a
    /// node that works long without emitting events or streaming text (each of which counts)
    /// calls this as it makes progress. Free for a node nobody watches. A node of a subgraph
    /// beats for the parent's node that runs the subgraph, too.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{graph::StateGraph, runtime::{Context, NodeError}, State};
    /// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { pages: u32 }
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("crawl", |_s: Arc<S>, ctx: Context| async move {
    ///     let mut pages = 0;
    ///     for _ in 0..3 {
    ///         pages += 1; // fetch one page
    ///         ctx.heartbeat();
    ///     }
    ///     Ok::<_, NodeError>(SUpdate::default().pages(pages))
    /// })
    /// .idle_timeout(Duration::from_secs(30));
    /// ```
    pub fn heartbeat(&self) {
        if let Some(heartbeat) = &self.task().heartbeat {
            heartbeat.beat();
        }
    }

    /// Awaits `work` (a tool call, a download) that cannot beat by itself, beating for it
    /// meanwhile, at a third of the idle timeout watching this node: long work that is under
    /// way is not taken for a silent node. Only `work` itself can bound its time then (give
    /// it a timeout of its own). Without an idle timeout, just `work.await`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let ctx = stategraph::runtime::Context::detached("tools");
    /// let answer = ctx.heartbeat_during(async { 6 * 7 }).await;
    /// assert_eq!(answer, 42);
    /// # });
    /// ```
    pub async fn heartbeat_during<F: std::future::Future>(&self, work: F) -> F::Output {
        let Some(heartbeat) = self.task().heartbeat.clone() else {
            return work.await;
        };
        let Some(idle) = heartbeat.idle() else {
            return work.await;
        };
        let every = (idle / 3).max(Duration::from_millis(1));
        tokio::pin!(work);
        loop {
            heartbeat.beat();
            tokio::select! {
                biased;
                done = &mut work => return done,
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}
