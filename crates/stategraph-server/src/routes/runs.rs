//! Runs: created in the background, streamed (SSE), waited for; read, listed, joined (their
//! result, or their stream from where a reader left it), cancelled. Stateless runs (`/runs/...`)
//! get a thread of their own, deleted when they end.

use super::{run_location, AppState};
use crate::app::App;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::runs::exec;
use crate::runs::plan::{self, IfNotExists, OnCompletion, RunRequest, Start};
use crate::runs::{Admission, RunHandle};
use crate::sse::{mode_name, parse_modes, respond};
use crate::threads::{self, ThreadRecord};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use stategraph::checkpoint::{now_ms, InterruptWhen, Lease};
use stategraph::runtime::RunError;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/threads/{id}/runs", get(list).post(create_background))
        .route("/threads/{id}/runs/stream", post(create_stream))
        .route("/threads/{id}/runs/wait", post(create_wait))
        .route("/threads/{id}/runs/{run_id}", get(get_one).delete(delete))
        .route("/threads/{id}/runs/{run_id}/join", get(join))
        .route("/threads/{id}/runs/{run_id}/stream", get(join_stream))
        .route("/threads/{id}/runs/{run_id}/cancel", post(cancel))
        .route("/runs", post(stateless_background))
        .route("/runs/stream", post(stateless_stream))
        .route("/runs/wait", post(stateless_wait))
}

/// Checks and starts (or queues) a run on `thread`; `None`: a stateless run on a thread of its
/// own.
async fn start(
    app: &Arc<App>,
    thread: Option<&str>,
    req: RunRequest,
) -> Result<Arc<RunHandle>, ApiError> {
    let (thread, temporary) = match thread {
        Some(t) => (t.to_string(), false),
        None => (
            uuid::Uuid::now_v7().to_string(),
            req.on_completion != Some(OnCompletion::Keep),
        ),
    };
    threads::check_id(&thread)?;
    let plan = plan::plan(app, &thread, temporary, &req)?;
    let mut record = match threads::read(app, &thread).await? {
        Some(r) => r,
        None if temporary || req.if_not_exists == Some(IfNotExists::Create) => {
            ThreadRecord::new(now_ms(), Map::new())
        }
        None => return Err(threads::not_found(&thread)),
    };
    if let Some(graph) = record.graph_id() {
        if app
            .assistant_for_graph(graph)
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
        threads::write(app, &thread, &record).await?;
    }
    let metadata = req.metadata.clone().unwrap_or_default();
    let kwargs = plan::kwargs(&req, &plan);
    let run = RunHandle::new(plan, metadata, kwargs);
    if app.runs.admit(&run)? == Admission::Start {
        exec::spawn(app.clone(), run.clone());
    }
    Ok(run)
}

/// Refuses an answer (`command.resume`) to a thread that asks nothing, before the run starts.
async fn check_answerable(plan: &plan::Plan) -> Result<(), ApiError> {
    let Start::Continue { answer: Some(_) } = &plan.start else {
        return Ok(());
    };
    if plan.config.checkpoint_id.is_some() {
        return Ok(());
    }
    let asks = match plan.assistant.graph.get_state(&plan.thread, None).await {
        Ok(s) => s
            .interrupts
            .iter()
            .any(|i| i.when == InterruptWhen::Dynamic),
        Err(RunError::ThreadNotFound { .. }) => false,
        Err(e) => return Err(e.into()),
    };
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

async fn create_background(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, Some(&id), req).await?;
    Ok((located(&run, false), Json(run.to_json())).into_response())
}

async fn create_stream(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let cancel = req.on_disconnect == Some(plan::OnDisconnect::Cancel);
    let run = start(&app, Some(&id), req).await?;
    Ok(stream_of(run, None, None, cancel))
}

async fn create_wait(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, Some(&id), req).await?;
    run.done().await;
    Ok((located(&run, false), Json(run.output())).into_response())
}

async fn stateless_background(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, None, req).await?;
    Ok((located(&run, false), Json(run.to_json())).into_response())
}

async fn stateless_stream(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let cancel = req.on_disconnect == Some(plan::OnDisconnect::Cancel);
    let run = start(&app, None, req).await?;
    Ok(stream_of(run, None, None, cancel))
}

async fn stateless_wait(
    State(app): State<AppState>,
    Body(req): Body<RunRequest>,
) -> Result<Response, ApiError> {
    let run = start(&app, None, req).await?;
    run.done().await;
    Ok((located(&run, false), Json(run.output())).into_response())
}

/// The run `run_id` of thread `thread`, or a 404 naming what is missing.
fn find(app: &App, thread: &str, run_id: &str) -> Result<Arc<RunHandle>, ApiError> {
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

async fn list(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    threads::require(&app, &id).await?;
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

async fn get_one(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(find(&app, &id, &run_id)?.to_json()))
}

async fn delete(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<axum::http::StatusCode, ApiError> {
    let run = find(&app, &id, &run_id)?;
    app.runs.remove(&run)?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Waits for the run to end and answers its result, as `wait` does.
async fn join(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let run = find(&app, &id, &run_id)?;
    run.done().await;
    Ok(Json(run.output()))
}

/// The run's stream from the start, or after the `Last-Event-ID` a reader saw last; only the
/// `stream_mode`s asked for, when any are.
async fn join_stream(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
    headers: HeaderMap,
    query: Query,
) -> Result<Response, ApiError> {
    let run = find(&app, &id, &run_id)?;
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
                .map(mode_name)
                .collect(),
        ),
    };
    let cancel = query.flag("cancel_on_disconnect", false)?;
    Ok(stream_of(run, last_seen, modes, cancel))
}

/// Cancels the run (`action=interrupt`: it keeps its last checkpoint); with `wait=1`, answers
/// once it has stopped.
async fn cancel(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let run = find(&app, &id, &run_id)?;
    match query.get("action").unwrap_or("interrupt") {
        "interrupt" => {}
        "rollback" => {
            return Err(ApiError::unsupported(
                "action",
                "\"rollback\" (cancel with \"interrupt\")",
            ))
        }
        other => {
            return Err(ApiError::invalid(
                "action",
                format!("`{other}`: use interrupt"),
            ))
        }
    }
    if !run.status().is_active() {
        return Err(ApiError::conflict(format!(
            "run `{run_id}` has already ended ({}): nothing to cancel",
            run.status().as_str()
        )));
    }
    run.request_cancel("cancelled by request");
    if app.runs.unqueue(&run) {
        exec::end_unstarted(&run);
    }
    if query.flag("wait", false)? {
        run.done().await;
    }
    Ok(Json(run.to_json()))
}
