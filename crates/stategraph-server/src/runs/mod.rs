//! The runs of this process: one active run per thread, the others queued behind it or refused,
//! as the request's `multitask_strategy` says; each with its stream kept in memory (`log.rs`).
//!
//! Runs live as long as the process, the newest [`KEEP_FINISHED`] finished ones with their
//! streams; what outlives the server is a thread's checkpoints and its ledger of recent runs
//! (`ledger.rs`: ids, statuses, the process running each), not their streams.

pub(crate) mod exec;
pub(crate) mod ledger;
pub(crate) mod log;
pub(crate) mod plan;

use super::error::ApiError;
use super::shapes::iso;
use log::EventLog;
use plan::Plan;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::now_ms;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Finished runs kept (with their streams) before the oldest are forgotten.
pub(crate) const KEEP_FINISHED: usize = 1000;

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
    /// What `wait` and `join` answer: the final values, with `__interrupt__` or `__error__`.
    output: Value,
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
    /// The request's run arguments, as `GET .../runs/{id}` shows them.
    pub kwargs: Value,
    /// A stateless run's thread, deleted when it ends.
    pub temporary: bool,
    pub log: Arc<EventLog>,
    pub cancel: CancellationToken,
    /// Set when its cancellation is a rollback: the checkpoints it wrote go when it ends.
    rollback: AtomicBool,
    state: Mutex<RunState>,
    plan: Mutex<Option<Plan>>,
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
            kwargs,
            temporary: plan.temporary,
            log: Arc::new(EventLog::default()),
            cancel: CancellationToken::new(),
            rollback: AtomicBool::new(false),
            state: Mutex::new(RunState {
                status: Status::Pending,
                updated_at_ms: now,
                output: Value::Null,
                cancel_reason: None,
            }),
            plan: Mutex::new(Some(plan)),
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
        s.output = output;
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
        self.state().output.clone()
    }

    pub fn take_plan(&self) -> Option<Plan> {
        self.plan.lock().unwrap_or_else(|p| p.into_inner()).take()
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
            "kwargs": self.kwargs,
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
        if next.is_none() {
            idle(&run.thread_id);
        }
        next
    }

    /// Calls `idle` with the thread unless a run has it, under the lock admissions take.
    pub fn when_idle(&self, thread: &str, idle: impl FnOnce(&str)) {
        let inner = self.lock();
        let busy = inner
            .lanes
            .get(thread)
            .is_some_and(|l| l.active.is_some() || !l.waiting.is_empty());
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

/// Forgets the oldest finished runs beyond [`KEEP_FINISHED`].
fn forget_oldest(inner: &mut Inner) {
    while inner.finished.len() > KEEP_FINISHED {
        let Some(id) = inner.finished.pop_front() else {
            break;
        };
        if let Some(run) = inner.runs.remove(&id) {
            if let Some(lane) = inner.lanes.get_mut(&run.thread_id) {
                lane.order.retain(|r| r != &id);
            }
        }
    }
}
