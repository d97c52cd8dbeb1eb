//! Runs: created in the background, streamed (SSE), waited for; read, listed, joined (their
//! result, or their stream from where a reader left it); cancelling is `cancel.rs`. Stateless
//! runs (`/runs/...`) get a thread of their own, deleted when they end.

use super::{run_location, AppState};
use crate::app::App;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::runs::plan::{self, IfNotExists, OnCompletion, RunRequest, Start};
use crate::runs::{exec, ledger};
use crate::runs::{Admission, RunHandle};
use crate::sse::{parse_modes, respond};
use crate::threads::{self, ThreadRecord};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::{now_ms, InterruptWhen, Lease};
use stategraph::runtime::RunError;
use std::collections::BTreeSet;
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create_background))
        .routes(routes!(create_stream))
        .routes(routes!(create_wait))
        .routes(routes!(get_one, delete))
        .routes(routes!(join))
        .routes(routes!(join_stream))
        .routes(routes!(stateless_background))
        .routes(routes!(batch))
        .routes(routes!(stateless_stream))
        .routes(routes!(stateless_wait))
}

/// Checks and starts (or queues) a run on `thread`; `None`: a stateless run on a thread of its
/// own.
async fn start(
    app: &Arc<App>,
    thread: Option<&str>,
    req: RunRequest,
) -> Result<Arc<RunHandle>, ApiError> {
    let (thread, stateless) = match thread {
        Some(t) => (t.to_string(), false),
        None => (uuid::Uuid::now_v7().to_string(), true),
    };
    // A stateless run's thread is deleted when it ends, unless the request keeps it.
    let temporary = stateless && req.on_completion != Some(OnCompletion::Keep);
    threads::check_id(&thread)?;
    let plan = plan::plan(&app.assistants, &thread, temporary, &req)?;
    // Taken before it is read: the reads below and the run's go to the store the run writes
    // (the folder store would otherwise read it from a private copy first). Let go when this
    // request ends without a run having it.
    let _claim = app.claim(&thread).await?;
    let (mut record, made) = match app.threads.read(&thread).await? {
        Some(r) => (r, false),
        None if stateless || req.if_not_exists == Some(IfNotExists::Create) => {
            (ThreadRecord::new(now_ms(), Map::new()), true)
        }
        None => return Err(threads::not_found(&thread)),
    };
    if let Some(graph) = record.graph_id() {
        if app
            .assistants
            .for_graph(graph)
            .map(|a| a.id.clone())
            .as_deref()
            != Some(plan.assistant.id.as_str())
        {
            return Err(ApiError::conflict(format!(
                "thread `{thread}` belongs to graph `{graph}`: run it with assistant_id \"{graph}\", \
                 or start another thread for `{}`",
                plan.assistant.id
            )));
        }
    }
    if app.runs.busy_with(&thread).is_none() {
        check_answerable(&plan).await?;
        check_not_held(app, &thread).await?;
    }
    if record.graph_id().is_none() {
        record
            .metadata
            .insert("graph_id".into(), json!(plan.assistant.id));
        record.updated_at_ms = now_ms();
        if made {
            app.threads.create(&thread, &record).await?;
        } else {
            app.threads.write(&thread, &record).await?;
        }
    }
    let metadata = req.metadata.clone().unwrap_or_default();
    let kwargs = plan::kwargs(&req, &plan);
    let run = RunHandle::new(plan, metadata, kwargs);
    if app.runs.admit(&run)? == Admission::Start {
        exec::spawn(app.clone(), run.clone());
    }
    Ok(run)
}

/// Refuses an answer (`command.resume`) to a thread that asks nothing, and a `command.goto`
/// on a thread with no step to add tasks to, before the run starts.
async fn check_answerable(plan: &plan::Plan) -> Result<(), ApiError> {
    let Start::Continue { answer, goto, .. } = &plan.start else {
        return Ok(());
    };
    if plan.config.checkpoint_id.is_some() || (answer.is_none() && goto.is_empty()) {
        return Ok(());
    }
    let newest = match plan.assistant.graph.get_state(&plan.thread, None).await {
        Ok(s) => Some(s),
        Err(RunError::ThreadNotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    if !goto.is_empty() && newest.is_none() {
        return Err(ApiError::invalid(
            "command.goto",
            format!(
                "thread `{}` has not run yet, so there is no step to add tasks to: start it \
                 with an input",
                plan.thread
            ),
        ));
    }
    if answer.is_none() {
        return Ok(());
    }
    let asks = newest.is_some_and(|s| {
        s.interrupts
            .iter()
            .any(|i| i.when == InterruptWhen::Dynamic)
    });
    if asks {
        return Ok(());
    }
    Err(ApiError::invalid(
        "command.resume",
        format!(
            "thread `{}` has no pending question to answer; continue it without command.resume \
             (or with an input)",
            plan.thread
        ),
    ))
}

/// Refuses a thread another process is running now (its lease is live and its holder alive).
async fn check_not_held(app: &App, thread: &str) -> Result<(), ApiError> {
    let Some(lease) = app.store.get_lease(thread).await? else {
        return Ok(());
    };
    if lease.expires_at_ms <= now_ms() || holder_is_gone(&lease) {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "busy",
        format!(
            "thread `{thread}` is being run by another process (pid {} on {}): wait for it to end, \
             then run it again",
            lease.pid, lease.host
        ),
    ))
}

/// True when the lease's holder ran on this host and its process no longer exists.
fn holder_is_gone(lease: &Lease) -> bool {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    lease.host == host.trim() && !std::path::Path::new(&format!("/proc/{}", lease.pid)).exists()
}

fn located(run: &RunHandle, stream: bool) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let at = run_location(&run.thread_id, &run.id);
    if let Ok(v) = HeaderValue::from_str(&at) {
        headers.insert(header::CONTENT_LOCATION, v);
    }
    if stream {
        if let Ok(v) = HeaderValue::from_str(&format!("{at}/stream")) {
            headers.insert(header::LOCATION, v);
        }
    }
    headers
}

/// Cancels its run when dropped before the run ended: a stream whose reader went away, when
/// the reader asked for that (`on_disconnect: cancel`).
struct CancelOnDrop(Arc<RunHandle>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.0.log.is_closed() {
            self.0.request_cancel("the client disconnected");
        }
    }
}

fn stream_of(
    run: Arc<RunHandle>,
    last_seen: Option<u64>,
    modes: Option<BTreeSet<&'static str>>,
    cancel: bool,
) -> Response {
    let headers = located(&run, true);
    let log = run.log.clone();
    let guard: crate::sse::Guard = match cancel {
        true => Some(Box::new(CancelOnDrop(run))),
        false => None,
    };
    (headers, respond(log, last_seen, modes, guard)).into_response()
}

#[utoipa::path(
    post,
    path = "/threads/{id}/runs",
    tag = "runs",
    summary = "Start a run in the background",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the run", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn create_background(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, Some(&id), req).await?;
    Ok((located(&run, false), Json(run.to_json())).into_response())
}

#[utoipa::path(
    post,
    path = "/threads/{id}/runs/stream",
    tag = "runs",
    summary = "Start a run and stream it",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the run's events as Server-Sent Events", content_type = "text/event-stream"), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn create_stream(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let cancel = req.on_disconnect == Some(plan::OnDisconnect::Cancel);
    let run = start(&app, Some(&id), req).await?;
    Ok(stream_of(run, None, None, cancel))
}

#[utoipa::path(
    post,
    path = "/threads/{id}/runs/wait",
    tag = "runs",
    summary = "Start a run and answer its final values",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the final values", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn create_wait(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, Some(&id), req).await?;
    run.done().await;
    Ok((located(&run, false), Json(run.output())).into_response())
}

#[utoipa::path(
    post,
    path = "/runs",
    tag = "stateless runs",
    summary = "A run on a thread of its own, in the background",
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the run", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn stateless_background(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, None, req).await?;
    Ok((located(&run, false), Json(run.to_json())).into_response())
}

/// One run of a batch: a run request, on `thread_id` when given, else on a thread of its own.
#[derive(Debug, serde::Deserialize)]
struct BatchedRun {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(flatten)]
    run: RunRequest,
}

/// `error` as the batch's `i`th run's: `[1].stream_mode: ...` when it names a field, else
/// `[1]: ...`.
fn in_batch(mut error: ApiError, i: usize) -> ApiError {
    let names_a_field = (error.message.split_once(": "))
        .is_some_and(|(field, _)| !field.is_empty() && !field.contains(' '));
    error.message = match names_a_field {
        true => format!("[{i}].{}", error.message),
        false => format!("[{i}]: {}", error.message),
    };
    error
}

/// Several runs in the background, in the order given. Every request is checked before any
/// run starts (a graph that does not exist, a field that does not fit, changes nothing); what
/// only starting finds (a thread that does not exist, or is busy under `reject`) stops the batch
/// there, and the error names the runs already started.
#[utoipa::path(
    post,
    path = "/runs/batch",
    tag = "stateless runs",
    summary = "Several runs in the background",
    request_body(content = Object, description = "a list of run requests, each on its `thread_id` or, without one, on a thread of its own"),
    responses((status = 200, description = "the runs, in order", body = Object), (status = 422, description = "a field does not fit; the message names the request and the field (`[1].input`)", body = Object))
)]
async fn batch(
    State(app): State<AppState>,
    Body(batch): Body<Vec<BatchedRun>>,
) -> Result<Json<Value>, ApiError> {
    for (i, item) in batch.iter().enumerate() {
        // The plan is made again when the run starts, on its thread; this one only checks.
        let thread = item.thread_id.as_deref().unwrap_or("batch");
        plan::plan(&app.assistants, thread, item.thread_id.is_none(), &item.run)
            .map_err(|e| in_batch(e, i))?;
    }
    let mut started: Vec<Arc<RunHandle>> = Vec::with_capacity(batch.len());
    for (i, item) in batch.into_iter().enumerate() {
        match start(&app, item.thread_id.as_deref(), item.run).await {
            Ok(run) => started.push(run),
            Err(e) if started.is_empty() => return Err(in_batch(e, i)),
            Err(e) => {
                let ids: Vec<&str> = started.iter().map(|r| r.id.as_str()).collect();
                let mut e = in_batch(e, i);
                e.message = format!(
                    "{}; the runs before it started: {}",
                    e.message,
                    ids.join(", ")
                );
                return Err(e);
            }
        }
    }
    Ok(Json(started.iter().map(|r| r.to_json()).collect()))
}

#[utoipa::path(
    post,
    path = "/runs/stream",
    tag = "stateless runs",
    summary = "A run on a thread of its own, streamed",
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the run's events as Server-Sent Events", content_type = "text/event-stream"), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn stateless_stream(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let cancel = req.on_disconnect == Some(plan::OnDisconnect::Cancel);
    let run = start(&app, None, req).await?;
    Ok(stream_of(run, None, None, cancel))
}

#[utoipa::path(
    post,
    path = "/runs/wait",
    tag = "stateless runs",
    summary = "A run on a thread of its own, waited for",
    request_body(content = Object, description = "a run request"),
    responses((status = 200, description = "the final values", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn stateless_wait(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, None, req).await?;
    run.done().await;
    Ok((located(&run, false), Json(run.output())).into_response())
}

/// The run `run_id` of thread `thread`, or a 404 naming what is missing.
pub(super) fn find(app: &App, thread: &str, run_id: &str) -> Result<Arc<RunHandle>, ApiError> {
    app.runs
        .get(run_id)
        .filter(|r| r.thread_id == thread)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no run `{run_id}` on thread `{thread}` in this server (runs are kept while it \
                 runs; GET /threads/{thread}/runs lists them)"
            ))
        })
}

#[utoipa::path(
    get,
    path = "/threads/{id}/runs",
    tag = "runs",
    summary = "The thread's runs of this server, newest first",
    params(("id" = String, Path, description = "the thread's id"), ("limit" = Option<usize>, Query, description = "at most this many"), ("offset" = Option<usize>, Query, description = "skip this many"), ("status" = Option<String>, Query, description = "only runs in this status")),
    responses((status = 200, description = "runs", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn list(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    app.threads.require(&id).await?;
    let (limit, offset) = (query.number("limit", 10)?, query.number("offset", 0)?);
    let status = query.get("status").filter(|s| !s.is_empty());
    let runs: Vec<Value> = app
        .runs
        .of_thread(&id)
        .iter()
        .filter(|r| status.is_none_or(|s| r.status().as_str() == s))
        .skip(offset)
        .take(limit)
        .map(|r| r.to_json())
        .collect();
    Ok(Json(Value::Array(runs)))
}

#[utoipa::path(
    get,
    path = "/threads/{id}/runs/{run_id}",
    tag = "runs",
    summary = "One run",
    params(("id" = String, Path, description = "the thread's id"), ("run_id" = String, Path, description = "the run's id")),
    responses((status = 200, description = "the run", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn get_one(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    match find(&app, &id, &run_id) {
        Ok(run) => Ok(Json(run.to_json())),
        Err(e) => ledger::describe(&app, &id, &run_id)
            .await
            .map(Json)
            .ok_or(e),
    }
}

#[utoipa::path(
    delete,
    path = "/threads/{id}/runs/{run_id}",
    tag = "runs",
    summary = "Forget a finished run",
    params(("id" = String, Path, description = "the thread's id"), ("run_id" = String, Path, description = "the run's id")),
    responses((status = 204, description = "done"), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the run is still active", body = Object))
)]
async fn delete(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<axum::http::StatusCode, ApiError> {
    let run = find(&app, &id, &run_id)?;
    app.runs.remove(&run)?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Waits for the run to end and answers its result, as `wait` does.
#[utoipa::path(
    get,
    path = "/threads/{id}/runs/{run_id}/join",
    tag = "runs",
    summary = "Wait for a run and answer its final values",
    params(("id" = String, Path, description = "the thread's id"), ("run_id" = String, Path, description = "the run's id")),
    responses((status = 200, description = "the final values", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn join(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let run = match find(&app, &id, &run_id) {
        Ok(run) => run,
        // A run of another process, or of this server before it restarted: followed to its end.
        Err(e) => {
            let Some(log) = ledger::stream_of(&app, &id, &run_id, None).await else {
                return Err(e);
            };
            log.closed().await;
            return Ok(Json(ledger::joined(&log)));
        }
    };
    run.done().await;
    Ok(Json(run.output()))
}

/// The run's stream from the start, or after the `Last-Event-ID` a reader saw last; only the
/// `stream_mode`s asked for, when any are.
#[utoipa::path(
    get,
    path = "/threads/{id}/runs/{run_id}/stream",
    tag = "runs",
    summary = "A run's stream, from the start or after Last-Event-ID",
    params(("id" = String, Path, description = "the thread's id"), ("run_id" = String, Path, description = "the run's id"), ("Last-Event-ID" = Option<String>, Header, description = "the last event id seen"), ("stream_mode" = Option<String>, Query, description = "only these modes"), ("cancel_on_disconnect" = Option<bool>, Query, description = "cancel the run when this reader leaves")),
    responses((status = 200, description = "the run's events as Server-Sent Events", content_type = "text/event-stream"), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn join_stream(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
    headers: HeaderMap,
    query: Query,
) -> Result<Response, ApiError> {
    let found = find(&app, &id, &run_id);
    let last_seen = match headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("?").trim())
    {
        None | Some("") | Some("-1") => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::invalid(
                "Last-Event-ID",
                format!("`{text}` is not an event id of this run (ids are 0, 1, 2...)"),
            )
        })?),
    };
    let asked: Vec<&str> = query
        .all("stream_mode")
        .into_iter()
        .filter(|m| !m.is_empty())
        .collect();
    let modes = match asked.is_empty() {
        true => None,
        false => Some(
            parse_modes(&asked, "stream_mode")?
                .into_iter()
                .map(|m| m.name())
                .collect(),
        ),
    };
    let cancel = query.flag("cancel_on_disconnect", false)?;
    match found {
        Ok(run) => Ok(stream_of(run, last_seen, modes, cancel)),
        // A run of another process, or of this server before it restarted: from the ledger.
        Err(e) => match ledger::stream_of(&app, &id, &run_id, last_seen).await {
            Some(log) => Ok(respond(log, last_seen, modes, None).into_response()),
            None => Err(e),
        },
    }
}
