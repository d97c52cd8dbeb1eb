//! Starting and resuming runs. Everything a run can be refused for is checked before a thread
//! is made (the input against the state, naming the field; what the graph needs to run); one
//! run per thread in this process; the run's events go out as progress notifications while it
//! runs; a run that reaches its end is judged by its graph and the verdict kept with the
//! thread, as the command line keeps it.

use crate::error::{chain, ToolError};
use crate::reply::{self, Reply, Standing};
use crate::shared::Shared;
use crate::threads::{self, checked_id, not_found};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::RoleServer;
use serde_json::Value;
use stategraph::runtime::{Event, Resume, RunError, RunOutcome, RunStatus};
use stategraph_checkpoint::{record_verdict, InterruptWhen, ThreadStatus, Verdict};
use stategraph_registry::{ErasedGraph, Resolved};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// Where a call's progress goes: the client's progress token, if it gave one, and the call's
/// cancellation (the client cancelled it, or its session ended).
pub(crate) struct Progress {
    notify: Option<(Peer<RoleServer>, ProgressToken)>,
    cancelled: CancellationToken,
    sent: u32,
}

impl Progress {
    pub fn new(context: &RequestContext<RoleServer>) -> Self {
        Progress {
            notify: context
                .meta
                .get_progress_token()
                .map(|token| (context.peer.clone(), token)),
            cancelled: context.ct.clone(),
            sent: 0,
        }
    }

    /// Sends what `event` says, if it says something a client follows.
    async fn send(&mut self, event: &Event) {
        let Some((peer, token)) = &self.notify else {
            return;
        };
        let Some(message) = message_of(event) else {
            return;
        };
        self.sent += 1;
        let param = ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
            .with_message(message);
        if let Err(e) = peer.notify_progress(param).await {
            // The client went away: the run goes on to its next checkpoint regardless.
            tracing::debug!(error = %e, "a progress notification was not delivered");
        }
    }
}

/// A run's event in words, for the root graph's steps; `None` for the rest.
fn message_of(event: &Event) -> Option<String> {
    match event {
        Event::NodeStarted {
            namespace,
            step,
            node,
            ..
        } if namespace.is_empty() => Some(format!("step {step}: {node} started")),
        Event::NodeFinished {
            namespace,
            step,
            node,
            duration_ms,
            ..
        } if namespace.is_empty() => {
            Some(format!("step {step}: {node} done in {duration_ms:.0} ms"))
        }
        Event::NodeFailed {
            namespace,
            node,
            error,
            will_retry,
            ..
        } if namespace.is_empty() => Some(match will_retry {
            true => format!("{node} failed, retrying: {error}"),
            false => format!("{node} failed: {error}"),
        }),
        Event::Custom {
            namespace,
            node,
            kind,
            payload,
            ..
        } if namespace.is_empty() && kind == stategraph::runtime::PROGRESS_EVENT => {
            let said = match payload.get("message").unwrap_or(payload) {
                Value::String(words) => words.clone(),
                other => other.to_string(),
            };
            Some(format!("{node}: {said}"))
        }
        Event::CheckpointSaved {
            namespace, step, ..
        } if namespace.is_empty() => Some(match step {
            0 => "input saved".to_string(),
            _ => format!("step {step} saved"),
        }),
        Event::Interrupted { namespace, .. } if namespace.is_empty() => {
            Some("paused for a person".to_string())
        }
        _ => None,
    }
}

/// `run_<graph>`: a new run of `name` with `input`, on a new thread.
pub(crate) async fn start(
    shared: &Shared,
    name: &str,
    input: Value,
    progress: Progress,
) -> Result<Reply, ToolError> {
    let resolved = shared.registry.resolve(name, &[])?;
    let graph = resolved.build(Some(shared.store.clone()))?;
    // Before a thread exists: an input that does not fit, or a run that cannot start, leaves
    // nothing behind.
    graph.check_update(&input, "the input")?;
    require_input(&resolved, &input)?;
    resolved.preflight()?;
    resolved.check_input(&input)?;
    let thread = uuid::Uuid::now_v7().to_string();
    let Some(_taken) = shared.take(&thread) else {
        return Err(busy(&thread));
    };
    if let Err(e) = shared.keeper.started(&thread, &resolved).await {
        // Nothing half-made stays behind.
        let _ = shared.store.delete_thread(&thread).await;
        let _ = shared.keeper.idle(&thread);
        let e: &(dyn std::error::Error + 'static) = e.as_ref();
        return Err(ToolError::new(format!(
            "thread `{thread}` could not be started: {}",
            chain(e)
        )));
    }
    let result = drive(
        shared,
        &resolved,
        graph.as_ref(),
        &thread,
        Start::Input(input),
        progress,
    )
    .await;
    if result.is_err() && matches!(shared.store.get_checkpoint(&thread, None).await, Ok(None)) {
        // It saved nothing: no thread without a checkpoint stays behind.
        let _ = shared.store.delete_thread(&thread).await;
    }
    let_go(shared, &thread, result)
}

/// `resume_thread`: `thread` continued, answering its pause with `answer`.
pub(crate) async fn resume(
    shared: &Shared,
    thread: &str,
    answer: Option<Value>,
    progress: Progress,
) -> Result<Reply, ToolError> {
    checked_id(thread)?;
    let resolved = threads::graph_of(shared, thread).await?;
    resolved.preflight()?;
    let graph = resolved.build(Some(shared.store.clone()))?;
    let Some(_taken) = shared.take(thread) else {
        return Err(busy(thread));
    };
    if let Err(e) = shared.keeper.taking(thread).await {
        let e: &(dyn std::error::Error + 'static) = e.as_ref();
        return Err(ToolError::new(format!("thread `{thread}`: {}", chain(e))));
    }
    let result = resume_taken(shared, &resolved, graph.as_ref(), thread, answer, progress).await;
    let_go(shared, thread, result)
}

/// Tells the keeper the run let `thread` go; when that fails after a run that ended well, the
/// call fails: what the run saved may not be on disk.
fn let_go(
    shared: &Shared,
    thread: &str,
    result: Result<Reply, ToolError>,
) -> Result<Reply, ToolError> {
    match (shared.keeper.idle(thread), result) {
        (Err(e), Ok(_)) => {
            let e: &(dyn std::error::Error + 'static) = e.as_ref();
            Err(ToolError::new(format!(
                "the run on thread `{thread}` ended, but its store could not be flushed: {}; \
                 read_thread shows what was kept",
                chain(e)
            )))
        }
        (Err(e), Err(failed)) => {
            tracing::warn!(thread, error = %e, "could not let the thread go");
            Err(failed)
        }
        (Ok(()), result) => result,
    }
}

async fn resume_taken(
    shared: &Shared,
    resolved: &Resolved,
    graph: &dyn ErasedGraph,
    thread: &str,
    answer: Option<Value>,
    progress: Progress,
) -> Result<Reply, ToolError> {
    let snapshot = match graph.get_state(thread, None).await {
        Ok(s) => s,
        Err(RunError::ThreadNotFound { .. }) => return Err(not_found(thread)),
        Err(e) => return Err(e.into()),
    };
    let status = reply::status_of(&snapshot);
    if status == ThreadStatus::Done {
        return Err(ToolError::new(format!(
            "thread `{thread}` is done: there is nothing to resume (read_thread shows its result)"
        )));
    }
    let asks = snapshot
        .interrupts
        .iter()
        .any(|i| i.when == InterruptWhen::Dynamic);
    if asks && answer.as_ref().is_none_or(is_empty) {
        let questions: Vec<String> = snapshot
            .interrupts
            .iter()
            .map(|i| match i.payload.get("question") {
                Some(Value::String(q)) => format!("`{}` asks: {q}", i.node),
                _ => format!("`{}` asks: {}", i.node, i.payload),
            })
            .collect();
        return Err(ToolError::argument(
            "answer",
            format!(
                "thread `{thread}` waits for an answer, and an empty one is no answer; nothing \
                 was changed. {}",
                questions.join("; ")
            ),
        ));
    }
    let resume = Resume::answering(&snapshot.interrupts, answer);
    drive(
        shared,
        resolved,
        graph,
        thread,
        Start::Resume(resume),
        progress,
    )
    .await
}

/// An answer that says nothing: none, blank text, or `null`.
fn is_empty(answer: &Value) -> bool {
    match answer {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}

/// A new run must fill the graph's input field (the CLI's `--input`).
fn require_input(resolved: &Resolved, input: &Value) -> Result<(), ToolError> {
    let Some(field) = resolved.factory.input_field() else {
        return Ok(());
    };
    let filled = match input.get(field) {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(_) => true,
    };
    match filled {
        true => Ok(()),
        false => Err(ToolError::argument(
            field,
            format!(
                "missing: graph `{}` needs it ({})",
                resolved.file.graph,
                resolved.factory.description()
            ),
        )),
    }
}

fn busy(thread: &str) -> ToolError {
    ToolError::new(format!(
        "thread `{thread}` is running a run of this server; wait for it to end (read_thread \
         shows where it stands)"
    ))
}

enum Start {
    Input(Value),
    Resume(Resume),
}

/// Runs the graph on the thread, its events as progress, and says how it ended.
async fn drive(
    shared: &Shared,
    resolved: &Resolved,
    graph: &dyn ErasedGraph,
    thread: &str,
    start: Start,
    mut progress: Progress,
) -> Result<Reply, ToolError> {
    let cancel = shared.stop.child_token();
    let config = resolved
        .file
        .run_config()
        .thread(thread.to_string())
        .cancel_on(cancel.clone());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let running = async {
        match start {
            Start::Input(input) => graph.run(input, config, Some(tx)).await,
            Start::Resume(resume) => graph.resume(thread, resume, config, Some(tx)).await,
        }
    };
    // The sender is dropped when the run ends, which ends the pump.
    let (result, ()) = tokio::join!(running, pump(rx, &mut progress, &cancel));
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(RunError::Cancelled { .. }) => {
            return Err(ToolError::new(format!(
                "the run on thread `{thread}` was stopped (the call was cancelled or the server \
                 is stopping); it keeps its last checkpoint: resume_thread goes on from there"
            )))
        }
        Err(e) => {
            return Err(ToolError::new(format!(
                "the run on thread `{thread}` failed: {}. Its finished steps are kept: \
                 resume_thread runs what failed again, read_thread shows where it stands",
                chain(&e)
            )))
        }
    };
    let failure = judge(shared, resolved, thread, &outcome).await;
    let (status, interrupts) = match &outcome.status {
        RunStatus::Done => (ThreadStatus::Done, &[][..]),
        RunStatus::Interrupted { interrupts, .. } => (ThreadStatus::Paused, &interrupts[..]),
    };
    let output = (status == ThreadStatus::Done).then(|| match resolved.factory.output_field() {
        Some(field) => outcome.state.get(field).cloned().unwrap_or(Value::Null),
        None => outcome.state.clone(),
    });
    Ok(reply::ended(Standing {
        thread,
        graph: &resolved.file.graph,
        status,
        step: outcome.step,
        interrupts,
        output,
        failure,
    }))
}

/// Sends the run's events as progress until the run ends; stops the run when the call is
/// cancelled.
async fn pump(
    mut rx: UnboundedReceiver<Event>,
    progress: &mut Progress,
    cancel: &CancellationToken,
) {
    let call = progress.cancelled.clone();
    let mut watching = true;
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => progress.send(&event).await,
                None => return,
            },
            () = call.cancelled(), if watching => {
                watching = false;
                cancel.cancel();
            }
        }
    }
}

/// A run that reached its end, judged by its graph; the verdict is kept with the thread so a
/// listing says "done (failed)" without reading its state.
async fn judge(
    shared: &Shared,
    resolved: &Resolved,
    thread: &str,
    outcome: &RunOutcome<Value>,
) -> Option<String> {
    if !matches!(outcome.status, RunStatus::Done) {
        return None;
    }
    let failure = resolved.factory.failure(&outcome.state);
    if let Some(checkpoint_id) = outcome.checkpoint_id {
        let verdict = Verdict {
            checkpoint_id,
            failure: failure.clone(),
        };
        if let Err(e) = record_verdict(shared.store.as_ref(), thread, &verdict).await {
            // Nothing is lost: without a verdict, a listing judges the state itself.
            tracing::warn!(thread, error = %e, "could not keep the run's verdict with the thread");
        }
    }
    failure
}
