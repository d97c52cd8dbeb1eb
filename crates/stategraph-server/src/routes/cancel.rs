//! Cancelling runs: one (`POST /threads/{id}/runs/{run_id}/cancel`), or many at once
//! (`POST /runs/cancel`, `langgraph-sdk`'s `runs.cancel_many`): by id, or every run of this
//! server (or of one thread) that waits, runs, or either. `action=interrupt` keeps what a run
//! saved; `rollback` drops the checkpoints it wrote. A waiting run never starts.

use super::runs::find;
use super::AppState;
use crate::app::App;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::runs::{exec, RunHandle, Status};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(cancel))
        .routes(routes!(cancel_many))
}

/// `action`: whether the runs' checkpoints are dropped (`rollback`) or kept (`interrupt`).
fn rolls_back(query: &Query) -> Result<bool, ApiError> {
    match query.get("action").unwrap_or("interrupt") {
        "interrupt" => Ok(false),
        "rollback" => Ok(true),
        other => Err(ApiError::invalid(
            "action",
            format!("`{other}`: use interrupt or rollback"),
        )),
    }
}

/// Stops `run`: a running one at its next chance, a waiting one at once (it never starts).
fn stop(app: &App, run: &Arc<RunHandle>, rollback: bool) {
    match rollback {
        true => run.request_rollback("rolled back by request"),
        false => run.request_cancel("cancelled by request"),
    }
    if app.runs.unqueue(run) {
        exec::end_unstarted(run);
    }
}

/// Cancels the run (`action=interrupt`: it keeps its last checkpoint; `rollback`: the
/// checkpoints it wrote are dropped); with `wait=1`, answers once it has stopped.
#[utoipa::path(
    post,
    path = "/threads/{id}/runs/{run_id}/cancel",
    tag = "runs",
    summary = "Cancel a run",
    params(("id" = String, Path, description = "the thread's id"), ("run_id" = String, Path, description = "the run's id"), ("action" = Option<String>, Query, description = "interrupt (keep its checkpoints) or rollback (drop them)"), ("wait" = Option<bool>, Query, description = "answer once it has stopped")),
    responses((status = 200, description = "the run", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object))
)]
async fn cancel(
    State(app): State<AppState>,
    Path((id, run_id)): Path<(String, String)>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let run = find(&app, &id, &run_id)?;
    let rollback = rolls_back(&query)?;
    if !run.status().is_active() {
        return Err(ApiError::conflict(format!(
            "run `{run_id}` has already ended ({}): nothing to cancel",
            run.status().as_str()
        )));
    }
    stop(&app, &run, rollback);
    if query.flag("wait", false)? {
        run.done().await;
    }
    Ok(Json(run.to_json()))
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Which {
    Pending,
    Running,
    All,
}

impl Which {
    fn takes(self, status: Status) -> bool {
        match self {
            Which::Pending => status == Status::Pending,
            Which::Running => status == Status::Running,
            Which::All => status.is_active(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct CancelMany {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    run_ids: Option<Vec<String>>,
    #[serde(default)]
    status: Option<Which>,
}

/// The runs a bulk cancel names: by id (each must be a run of this server, of `thread_id` when
/// given), else every active run with `status` (of `thread_id` when given).
fn selected(app: &App, req: &CancelMany) -> Result<Vec<Arc<RunHandle>>, ApiError> {
    match (&req.run_ids, req.status) {
        (Some(ids), None) => ids
            .iter()
            .map(|id| match &req.thread_id {
                Some(thread) => find(app, thread, id),
                None => app.runs.get(id).ok_or_else(|| {
                    ApiError::not_found(format!(
                        "no run `{id}` in this server (runs are kept while it runs)"
                    ))
                }),
            })
            .collect(),
        (None, Some(which)) => Ok(app
            .runs
            .active()
            .into_iter()
            .filter(|r| req.thread_id.as_ref().is_none_or(|t| &r.thread_id == t))
            .filter(|r| which.takes(r.status()))
            .collect()),
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "status",
            "give run_ids or status, not both: the runs are named, or chosen by status",
        )),
        (None, None) => Err(ApiError::invalid(
            "run_ids",
            "give the runs to cancel (run_ids), or a status (pending, running or all)",
        )),
    }
}

/// Cancels several runs: those named, or all that wait or run. Runs already ended are left
/// as they are.
#[utoipa::path(
    post,
    path = "/runs/cancel",
    tag = "runs",
    summary = "Cancel several runs",
    params(("action" = Option<String>, Query, description = "interrupt (keep their checkpoints) or rollback (drop them)")),
    request_body(content = Object, description = "run_ids (with thread_id, optional), or status: pending, running or all (with thread_id: that thread's only)"),
    responses((status = 204, description = "asked to stop; waiting runs never start"),
        (status = 404, description = "a named run is not one of this server's", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn cancel_many(
    State(app): State<AppState>,
    query: Query,
    Body(req): Body<CancelMany>,
) -> Result<StatusCode, ApiError> {
    let rollback = rolls_back(&query)?;
    for run in selected(&app, &req)? {
        if run.status().is_active() {
            stop(&app, &run, rollback);
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
