//! What a function sees while it runs: durable tasks, numbered in call order and journaled with
//! their names, and interrupts.

use crate::error::{NodeError, NodeErrorKind, NonDeterminism};
use crate::run::context::Context;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The [`Event::Custom`](crate::runtime::Event::Custom) kind of a task's progress; its payload
/// is a [`TaskEvent`]. Streamed in the `custom` mode, like any node's own events.
///
/// ```
/// use stategraph::runtime::Event;
/// fn is_task_event(e: &Event) -> bool {
///     matches!(e, Event::Custom { kind, .. } if kind == stategraph::functional::TASK_EVENT)
/// }
/// # let _ = is_task_event;
/// ```
pub const TASK_EVENT: &str = "task";

/// Where a task stands, as its [`TaskEvent`] says (in JSON, in snake case).
///
/// ```
/// use stategraph::functional::TaskStatus;
/// assert_eq!(serde_json::to_value(TaskStatus::Replayed).unwrap(), "replayed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// It began to run.
    Started,
    /// It had finished in an earlier run: its saved result was handed back, it did not run.
    Replayed,
    /// It finished and its result is saved.
    Done,
    /// It returned an error (nothing is saved; the function's step fails or retries).
    Failed,
}

/// The payload of a [`TASK_EVENT`] event: one task call's progress.
///
/// ```
/// use stategraph::functional::{TaskEvent, TaskStatus};
/// let event: TaskEvent = serde_json::from_value(
///     serde_json::json!({"ordinal": 0, "name": "fetch", "status": "replayed"}),
/// ).unwrap();
/// assert_eq!(event.status, TaskStatus::Replayed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEvent {
    /// The call's position in the function, from 0.
    pub ordinal: u32,
    /// The task's name.
    pub name: String,
    /// Where it stands.
    pub status: TaskStatus,
}

/// A finished task as the journal keeps it: its name (to refuse a re-execution that calls
/// another task at its position) and its result.
#[derive(Serialize, Deserialize)]
struct TaskRecord {
    name: String,
    result: serde_json::Value,
}

/// The journal entry (of the function's node task) of the task call at `ordinal`.
fn task_key(ordinal: u32) -> String {
    format!("function/task/{ordinal}")
}

/// A function's handle on its run ([`entrypoint`](super::entrypoint)): durable tasks,
/// interrupts, and the node [`Context`] beneath (settings, ids, events, the store).
///
/// Each call of [`task`](Self::task) takes the next ordinal at once, when it is called, not
/// when it is awaited: tasks started in order and awaited together (`join_all`) keep their
/// positions on every run, whichever finishes first.
#[derive(Clone)]
pub struct FunctionContext {
    ctx: Context,
    function: Arc<str>,
    calls: Arc<AtomicU32>,
}

impl FunctionContext {
    pub(crate) fn new(ctx: Context, function: Arc<str>) -> Self {
        FunctionContext {
            ctx,
            function,
            calls: Arc::new(AtomicU32::new(0)),
        }
    }

    /// A context outside any run, for unit-testing a function: tasks run (their results kept
    /// in memory), interrupts pause.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use stategraph::functional::FunctionContext;
    /// let ctx = FunctionContext::detached("shout");
    /// let n: u32 = ctx.task("count", "abc", |s: &str| async move {
    ///     Ok::<_, stategraph::runtime::NodeError>(s.len() as u32)
    /// }).await?;
    /// assert_eq!(n, 3);
    /// # Ok::<(), stategraph::runtime::NodeError>(()) }).unwrap();
    /// ```
    pub fn detached(function: &str) -> Self {
        FunctionContext::new(Context::detached(function), function.into())
    }

    /// The node context the function runs in: settings, thread and run ids, events, the store.
    ///
    /// ```
    /// let ctx = stategraph::functional::FunctionContext::detached("shout");
    /// assert_eq!(ctx.context().node(), "shout");
    /// ```
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The function's name (its graph's and its node's).
    ///
    /// ```
    /// assert_eq!(stategraph::functional::FunctionContext::detached("f").function(), "f");
    /// ```
    pub fn function(&self) -> &str {
        &self.function
    }

    /// Runs `run(args)` as a durable task named `name`. Its result is saved in the thread's
    /// journal as soon as it returns, under the call's position in the function; when the
    /// function runs again (after a kill, a failed attempt or an answered interrupt), the call
    /// at that position hands back the saved result without running. If the call at that
    /// position now names another task, the function stops with
    /// [`NodeErrorKind::NonDeterministic`] (never retried).
    ///
    /// The position is taken now, so futures of several tasks may be awaited together:
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use stategraph::functional::FunctionContext;
    /// use stategraph::runtime::NodeError;
    /// let ctx = FunctionContext::detached("lengths");
    /// let calls = ["a", "bb"].map(|w| ctx.task("len", w, |w: &str| async move { Ok::<_, NodeError>(w.len()) }));
    /// let lengths: Vec<usize> = futures::future::try_join_all(calls).await?;
    /// assert_eq!(lengths, [1, 2]);
    /// # Ok::<(), NodeError>(()) }).unwrap();
    /// ```
    ///
    /// A task's error fails the function's step as a node error does (a transient one is
    /// retried by the node's policy, finished tasks replayed); a task runs at least once, and
    /// again only if the process dies between its end and its save.
    pub fn task<A, T, E, F, Fut>(
        &self,
        name: &str,
        args: A,
        run: F,
    ) -> impl Future<Output = Result<T, NodeError>>
    where
        T: Serialize + DeserializeOwned,
        E: Into<NodeError>,
        F: FnOnce(A) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let ordinal = self.calls.fetch_add(1, Ordering::SeqCst);
        let this = self.clone();
        let name = name.to_string();
        async move {
            let key = task_key(ordinal);
            if let Some(saved) = this.ctx.journaled::<TaskRecord>(&key).await? {
                return this.replay(ordinal, name, saved);
            }
            this.event(ordinal, &name, TaskStatus::Started);
            let result = match run(args).await {
                Ok(result) => result,
                Err(e) => {
                    this.event(ordinal, &name, TaskStatus::Failed);
                    let e: NodeError = e.into();
                    return Err(NodeError::with_kind(
                        e.kind().clone(),
                        format!(
                            "task `{name}` (call {ordinal}) of function `{}` failed: {}",
                            this.function,
                            e.message()
                        ),
                    ));
                }
            };
            let value = serde_json::to_value(&result).map_err(|e| {
                NodeError::new(format!(
                    "task `{name}` of function `{}` returned a result that cannot be saved as \
                     JSON: {e}",
                    this.function
                ))
            })?;
            let record = TaskRecord {
                name: name.clone(),
                result: value,
            };
            this.ctx.journal(&key, &record).await?;
            this.event(ordinal, &name, TaskStatus::Done);
            Ok(result)
        }
    }

    /// The saved result of the task call at `ordinal`, if the function still calls the same
    /// task there.
    fn replay<T: DeserializeOwned>(
        &self,
        ordinal: u32,
        name: String,
        saved: TaskRecord,
    ) -> Result<T, NodeError> {
        if saved.name != name {
            let refusal = NonDeterminism {
                function: self.function.to_string(),
                ordinal,
                recorded: saved.name,
                called: name,
            };
            let message = refusal.to_string();
            return Err(NodeError::with_kind(
                NodeErrorKind::NonDeterministic(Box::new(refusal)),
                message,
            ));
        }
        let value = crate::state::from_json(saved.result).map_err(|why| {
            NodeError::new(format!(
                "the saved result of task `{name}` (call {ordinal}) of function `{}` no longer \
                 fits the type the function now expects: it {why}",
                self.function
            ))
        })?;
        self.event(ordinal, &name, TaskStatus::Replayed);
        Ok(value)
    }

    fn event(&self, ordinal: u32, name: &str, status: TaskStatus) {
        self.ctx.emit(
            TASK_EVENT,
            TaskEvent {
                ordinal,
                name: name.to_string(),
                status,
            },
        );
    }

    /// Asks a person for input and pauses the function, as
    /// [`Context::interrupt`](crate::runtime::Context::interrupt) does a node: propagate the
    /// error with `?`. When the thread is resumed with an answer, the function runs again from
    /// its start, its finished tasks replayed, and this call returns the answer.
    ///
    /// ```no_run
    /// # use stategraph::functional::FunctionContext;
    /// # async fn f(ctx: FunctionContext) -> Result<(), stategraph::runtime::NodeError> {
    /// let approved: String = ctx.interrupt(serde_json::json!({"question": "publish?"})).await?;
    /// # let _ = approved; Ok(()) }
    /// ```
    pub async fn interrupt<T: DeserializeOwned>(
        &self,
        payload: impl Serialize,
    ) -> Result<T, NodeError> {
        self.ctx.interrupt(payload).await
    }
}
