//! The runs of this process: one active run per thread, the others queued behind it or refused,
//! as the request's `multitask_strategy` says; each with its stream kept in memory (`log.rs`).
//!
//! Runs live as long as the process, the newest [`KEEP_FINISHED`] finished ones, the newest
//! [`KEEP_STREAMS`] of those with their whole streams (older ones keep how they went: see
//! `log.rs`, `EventLog::expire`); what outlives the server is a thread's checkpoints and its
//! ledger of recent runs (`ledger.rs`: ids, statuses, the process running each), not their
//! streams.

pub(crate) mod exec;
pub(crate) mod ledger;
pub(crate) mod log;
pub(crate) mod plan;

use super::error::ApiError;
use super::shapes::iso;
use log::EventLog;
use plan::Plan;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::now_ms;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Finished runs kept (with their streams) before the oldest are forgotten.
pub(crate) const KEEP_FINISHED: usize = 1000;

/// Finished runs whose streams are kept whole (a client rejoining a stream does so within
/// seconds; the steps of a finished run are in its thread's checkpoints).
pub(crate) const KEEP_STREAMS: usize = 100;

/// What a run started on a busy thread does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Strategy {
    /// Refused (409).
    #[default]
    Reject,
    /// Runs after the runs before it.
    Enqueue,
    /// Cancels the active run (which keeps its last checkpoint), then runs.
    Interrupt,
    /// Cancels the active run, drops the checkpoints it wrote, then runs.
    Rollback,
}

impl Strategy {
    fn as_str(self) -> &'static str {
        match self {
            Strategy::Reject => "reject",
            Strategy::Enqueue => "enqueue",
            Strategy::Interrupt => "interrupt",
            Strategy::Rollback => "rollback",
        }
    }
}

/// Where a run stands (LangGraph's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Pending,
    Running,
    Success,
    Error,
    /// Paused for a person, or cancelled (its `cancel_reason` says so).
    Interrupted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Success => "success",
            Status::Error => "error",
            Status::Interrupted => "interrupted",
        }
    }

    pub fn is_active(self) -> bool {
        matches!(self, Status::Pending | Status::Running)
    }
}

struct RunState {
    status: Status,
    updated_at_ms: u64,
    /// What `wait` and `join` answer: the final values, with `__interrupt__` or `__error__`;
    /// kept as JSON text, which takes a tenth of the memory of a `Value` (finished runs are
    /// kept, `KEEP_FINISHED` of them).
    output: Box<RawValue>,
    cancel_reason: Option<String>,
}

/// One run: what it was asked, where it stands, its stream.
pub(crate) struct RunHandle {
    pub id: String,
    pub thread_id: String,
    pub assistant_id: String,
    pub created_at_ms: u64,
    pub strategy: Strategy,
    pub metadata: Map<String, Value>,
    /// The request's run arguments, as `GET .../runs/{id}` shows them (as JSON text, see
    /// `RunState::output`).
    kwargs: Box<RawValue>,
    /// A stateless run's thread, deleted when it ends.
    pub temporary: bool,
    pub log: Arc<EventLog>,
    pub cancel: CancellationToken,
    /// Set when its cancellation is a rollback: the checkpoints it wrote go when it ends.
    rollback: AtomicBool,
    state: Mutex<RunState>,
    /// Boxed: most runs kept are finished, and hold none.
    plan: Mutex<Option<Box<Plan>>>,
}

impl RunHandle {
    pub fn new(plan: Plan, metadata: Map<String, Value>, kwargs: Value) -> Arc<Self> {
        let now = now_ms();
        let run = RunHandle {
            id: uuid::Uuid::now_v7().to_string(),
            thread_id: plan.thread.clone(),
            assistant_id: plan.assistant.id.clone(),
            created_at_ms: now,
            strategy: plan.strategy,
            metadata,
            kwargs: raw(&kwargs),
            temporary: plan.temporary,
            log: Arc::new(EventLog::default()),
            cancel: CancellationToken::new(),
            rollback: AtomicBool::new(false),
            state: Mutex::new(RunState {
                status: Status::Pending,
                updated_at_ms: now,
                output: Box::default(),
                cancel_reason: None,
            }),
            plan: Mutex::new(Some(Box::new(plan))),
        };
        // Every stream of the run starts with its id, also while it waits for its turn.
        run.log.push(
            "metadata",
            None,
            &json!({"run_id": run.id, "thread_id": run.thread_id, "attempt": 1}),
        );
        Arc::new(run)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status(&self) -> Status {
        self.state().status
    }

    pub fn set_running(&self) {
        let mut s = self.state();
        s.status = Status::Running;
        s.updated_at_ms = now_ms();
    }

    /// Records how the run ended (its stream is ended by the caller).
    pub fn finish(&self, status: Status, output: Value, cancel_reason: Option<String>) {
        let mut s = self.state();
        s.status = status;
        s.output = raw(&output);
        s.updated_at_ms = now_ms();
        if cancel_reason.is_some() {
            s.cancel_reason = cancel_reason;
        }
    }

    /// Asks the run to stop; `reason` is kept for its record.
    pub fn request_cancel(&self, reason: &str) {
        self.state()
            .cancel_reason
            .get_or_insert_with(|| reason.to_string());
        self.cancel.cancel();
    }

    /// Asks the run to stop and to drop the checkpoints it wrote (`rollback`).
    pub fn request_rollback(&self, reason: &str) {
        self.rollback.store(true, Ordering::SeqCst);
        self.request_cancel(reason);
    }

    /// Whether the checkpoints it wrote are to be dropped when it ends.
    pub fn rolls_back(&self) -> bool {
        self.rollback.load(Ordering::SeqCst)
    }

    pub fn cancel_reason(&self) -> Option<String> {
        self.state().cancel_reason.clone()
    }

    pub fn output(&self) -> Value {
        value(&self.state().output)
    }

    pub fn take_plan(&self) -> Option<Plan> {
        let plan = self.plan.lock().unwrap_or_else(|p| p.into_inner()).take();
        plan.map(|p| *p)
    }

    /// The run as LangGraph's `Run`.
    pub fn to_json(&self) -> Value {
        let s = self.state();
        json!({
            "run_id": self.id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": iso(self.created_at_ms),
            "updated_at": iso(s.updated_at_ms),
            "status": s.status.as_str(),
            "metadata": self.metadata,
            "multitask_strategy": self.strategy.as_str(),
            "kwargs": value(&self.kwargs),
            "cancel_reason": s.cancel_reason,
        })
    }

    /// Waits until the run has ended.
    pub async fn done(&self) {
        self.log.closed().await
    }
}

/// A thread's runs: the one running, those waiting, all of them in creation order.
#[derive(Default)]
struct Lane {
    active: Option<Arc<RunHandle>>,
    waiting: VecDeque<Arc<RunHandle>>,
    order: Vec<String>,
    /// Requests taking the thread to start a run (`App::claim`): it is not let go meanwhile.
    claims: usize,
}

impl Lane {
    /// True while a run of this server has the thread, or a request is starting one.
    fn busy(&self) -> bool {
        self.active.is_some() || !self.waiting.is_empty() || self.claims > 0
    }
}

#[derive(Default)]
struct Inner {
    runs: HashMap<String, Arc<RunHandle>>,
    lanes: HashMap<String, Lane>,
    finished: VecDeque<String>,
}

/// Whether an admitted run starts now or waits for the runs before it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    Start,
    Queued,
}

/// The runs of this process.
#[derive(Default)]
pub(crate) struct Runs {
    inner: Mutex<Inner>,
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `run` on its thread: it starts now when the thread is free, else its strategy
    /// says (409 for `reject`).
    pub fn admit(&self, run: &Arc<RunHandle>) -> Result<Admission, ApiError> {
        let mut inner = self.lock();
        let lane = inner.lanes.entry(run.thread_id.clone()).or_default();
        let admission = match lane.active.clone().or_else(|| lane.waiting.back().cloned()) {
            None => {
                lane.active = Some(run.clone());
                Admission::Start
            }
            Some(busy) => match run.strategy {
                Strategy::Reject => return Err(busy_error(&busy)),
                Strategy::Enqueue => {
                    lane.waiting.push_back(run.clone());
                    Admission::Queued
                }
                Strategy::Interrupt => {
                    if let Some(active) = &lane.active {
                        active.request_cancel(&format!("interrupted by run {}", run.id));
                    }
                    lane.waiting.push_back(run.clone());
                    Admission::Queued
                }
                Strategy::Rollback => {
                    if let Some(active) = &lane.active {
                        active.request_rollback(&format!("rolled back by run {}", run.id));
                    }
                    lane.waiting.push_back(run.clone());
                    Admission::Queued
                }
            },
        };
        lane.order.push(run.id.clone());
        inner.runs.insert(run.id.clone(), run.clone());
        Ok(admission)
    }

    /// Called when `run` has ended: the thread's next run, which is now its active one; `None`
    /// when the thread has nothing more to run, and then `idle` is called with the thread under
    /// the lock admissions take, so no run starts on it while it is let go.
    pub fn next_after(&self, run: &RunHandle, idle: impl FnOnce(&str)) -> Option<Arc<RunHandle>> {
        let mut inner = self.lock();
        inner.finished.push_back(run.id.clone());
        forget_oldest(&mut inner);
        let lane = inner.lanes.get_mut(&run.thread_id)?;
        lane.active = lane.waiting.pop_front();
        let next = lane.active.clone();
        if !lane.busy() {
            idle(&run.thread_id);
        }
        next
    }

    /// Marks the thread as being taken by a request that is about to start a run on it.
    pub fn claim(&self, thread: &str) {
        self.lock()
            .lanes
            .entry(thread.to_string())
            .or_default()
            .claims += 1;
    }

    /// Ends a [`claim`](Self::claim): `idle` is called with the thread unless a run has it (or
    /// another request is starting one), under the lock admissions take.
    pub fn unclaim(&self, thread: &str, idle: impl FnOnce(&str)) {
        let mut inner = self.lock();
        let Some(lane) = inner.lanes.get_mut(thread) else {
            return;
        };
        lane.claims = lane.claims.saturating_sub(1);
        if !lane.busy() {
            // A lane of no run (the request failed) is not kept: ids of threads that do not
            // exist would pile up.
            if lane.order.is_empty() {
                inner.lanes.remove(thread);
            }
            idle(thread);
        }
    }

    /// Calls `idle` with the thread unless a run has it, under the lock admissions take.
    pub fn when_idle(&self, thread: &str, idle: impl FnOnce(&str)) {
        let inner = self.lock();
        let busy = inner.lanes.get(thread).is_some_and(Lane::busy);
        if !busy {
            idle(thread);
        }
    }

    pub fn get(&self, run_id: &str) -> Option<Arc<RunHandle>> {
        self.lock().runs.get(run_id).cloned()
    }

    /// The thread's runs, newest first.
    pub fn of_thread(&self, thread: &str) -> Vec<Arc<RunHandle>> {
        let inner = self.lock();
        let Some(lane) = inner.lanes.get(thread) else {
            return Vec::new();
        };
        lane.order
            .iter()
            .rev()
            .filter_map(|id| inner.runs.get(id).cloned())
            .collect()
    }

    /// Every run that waits or runs, in no order.
    pub fn active(&self) -> Vec<Arc<RunHandle>> {
        let inner = self.lock();
        (inner.runs.values())
            .filter(|r| r.status().is_active())
            .cloned()
            .collect()
    }

    /// The run the thread is busy with (running, or the first waiting), if any.
    pub fn busy_with(&self, thread: &str) -> Option<Arc<RunHandle>> {
        let inner = self.lock();
        let lane = inner.lanes.get(thread)?;
        lane.active
            .clone()
            .or_else(|| lane.waiting.front().cloned())
    }

    /// Takes a waiting run out of its queue (it never starts); false when it is not waiting.
    pub fn unqueue(&self, run: &RunHandle) -> bool {
        let mut inner = self.lock();
        let Some(lane) = inner.lanes.get_mut(&run.thread_id) else {
            return false;
        };
        let before = lane.waiting.len();
        lane.waiting.retain(|r| r.id != run.id);
        let removed = lane.waiting.len() < before;
        if removed {
            inner.finished.push_back(run.id.clone());
        }
        removed
    }

    /// Forgets a finished run; 409 for one still active.
    pub fn remove(&self, run: &RunHandle) -> Result<(), ApiError> {
        if run.status().is_active() {
            return Err(ApiError::conflict(format!(
                "run `{}` is {}: cancel it first (POST .../runs/{}/cancel)",
                run.id,
                run.status().as_str(),
                run.id
            )));
        }
        let mut inner = self.lock();
        inner.runs.remove(&run.id);
        if let Some(lane) = inner.lanes.get_mut(&run.thread_id) {
            lane.order.retain(|id| id != &run.id);
        }
        drop_if_empty(&mut inner, &run.thread_id);
        Ok(())
    }

    /// Forgets a deleted thread's runs (none of which is active).
    pub fn forget_thread(&self, thread: &str) {
        let mut inner = self.lock();
        if let Some(lane) = inner.lanes.remove(thread) {
            for id in lane.order {
                inner.runs.remove(&id);
            }
        }
    }

    /// Cancels every run (the server is stopping); waiting runs are cancelled as they come up.
    pub fn cancel_all(&self) {
        let inner = self.lock();
        for run in inner.runs.values().filter(|r| r.status().is_active()) {
            run.request_cancel("the server is stopping");
        }
    }

    /// Waits until no run is active.
    pub async fn wait_all(&self) {
        let active: Vec<Arc<RunHandle>> = {
            let inner = self.lock();
            inner
                .runs
                .values()
                .filter(|r| r.status().is_active())
                .cloned()
                .collect()
        };
        for run in active {
            run.done().await;
        }
    }
}

fn busy_error(busy: &RunHandle) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "busy",
        format!(
            "thread `{}` is busy with run `{}` ({}): wait for it (GET /threads/{}/runs/{}/join), \
             cancel it, or send multitask_strategy \"enqueue\" to run after it (\"interrupt\" \
             cancels it first, \"rollback\" cancels it and drops what it wrote)",
            busy.thread_id,
            busy.id,
            busy.status().as_str(),
            busy.thread_id,
            busy.id
        ),
    )
}

/// Forgets the oldest finished runs beyond [`KEEP_FINISHED`], and expires the stream of the
/// one that has just fallen out of the newest [`KEEP_STREAMS`].
fn forget_oldest(inner: &mut Inner) {
    if let Some(id) = inner
        .finished
        .len()
        .checked_sub(KEEP_STREAMS + 1)
        .and_then(|at| inner.finished.get(at))
    {
        // Not while a reader streams it (one slow to read would miss steps): that one stays
        // whole until its run is forgotten.
        if let Some(run) = inner
            .runs
            .get(id)
            .filter(|r| Arc::strong_count(&r.log) == 1)
        {
            run.log.expire();
        }
    }
    while inner.finished.len() > KEEP_FINISHED {
        let Some(id) = inner.finished.pop_front() else {
            break;
        };
        if let Some(run) = inner.runs.remove(&id) {
            if let Some(lane) = inner.lanes.get_mut(&run.thread_id) {
                lane.order.retain(|r| r != &id);
            }
            drop_if_empty(inner, &run.thread_id);
        }
    }
}

/// Removes the thread's lane once it holds nothing: no run kept, none running or waiting, no
/// request starting one (every thread served would otherwise leave one behind).
fn drop_if_empty(inner: &mut Inner, thread: &str) {
    if inner
        .lanes
        .get(thread)
        .is_some_and(|l| l.order.is_empty() && !l.busy())
    {
        inner.lanes.remove(thread);
    }
}

/// `value` as JSON text. Serializing a `Value` cannot fail (its map keys are strings); should
/// it ever, `null` is kept rather than the request failing.
fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_default()
}

/// What `raw` kept, as a `Value` again (text it wrote always reads back).
fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}
