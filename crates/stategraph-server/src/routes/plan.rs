//! A thread's plan, for graphs that keep one (the registry's `PlanEditor` capability, as
//! `graph plan` uses it): read as Markdown and JSON, and replaced by an edited Markdown with
//! the same checks and the same refusals as the command's `--edit`. Not part of LangGraph's
//! API; the web page edits a paused research plan through it.

use super::AppState;
use crate::app::App;
use crate::assistants::Assistant;
use crate::error::ApiError;
use crate::extract::Body;
use crate::threads;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use stategraph_registry::{PlanEditor, PlanError};
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_plan, put_plan))
}

/// The thread's graph and its plan editor; 404 for a thread whose graph keeps no plan.
async fn editor_of(
    app: &App,
    thread: &str,
) -> Result<(Arc<Assistant>, Arc<dyn PlanEditor>), ApiError> {
    let record = app.threads.require(thread).await?;
    let assistant = threads::graph_of(&app.assistants, &record).ok_or_else(|| {
        ApiError::not_found(format!(
            "thread `{thread}` has no graph yet, so no plan: start a run on it first"
        ))
    })?;
    let editor = assistant.resolved.factory.plan_editor().ok_or_else(|| {
        ApiError::not_found(format!(
            "graph `{}` keeps no plan (plans are kept by graphs such as research): edit this \
             thread's state with POST /threads/{thread}/state",
            assistant.id
        ))
    })?;
    Ok((assistant, editor))
}

/// A refusal of the plan editor: 422 naming the field, with the line at fault.
fn refused(field: &str, e: PlanError) -> ApiError {
    ApiError::invalid(
        field,
        format!("the plan edit was refused (the plan is unchanged): {e}"),
    )
}

async fn plan_json(
    assistant: &Assistant,
    editor: &dyn PlanEditor,
    thread: &str,
) -> Result<Value, ApiError> {
    let state = assistant.graph.get_state(thread, None).await?.values;
    let unreadable = |e: PlanError| ApiError::internal(format!("the plan cannot be read: {e}"));
    Ok(json!({
        "thread_id": thread,
        "graph_id": assistant.id,
        "markdown": editor.render(&state).map_err(unreadable)?,
        "plan": editor.plan(&state).map_err(unreadable)?,
    }))
}

#[utoipa::path(
    get,
    path = "/threads/{id}/plan",
    tag = "plan",
    summary = "The thread's plan (graphs that keep one)",
    params(("id" = String, Path, description = "the thread's id")),
    responses((status = 200, description = "thread_id, graph_id, markdown, plan", body = Object), (status = 404, description = "no such thread, or its graph keeps no plan", body = Object))
)]
async fn get_plan(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (assistant, editor) = editor_of(&app, &id).await?;
    Ok(Json(plan_json(&assistant, editor.as_ref(), &id).await?))
}

#[derive(Debug, Default, Deserialize)]
struct PlanEdit {
    #[serde(default)]
    markdown: Option<String>,
}

/// Replaces the plan with an edited Markdown (as `GET` rendered it, then changed): a new
/// checkpoint, as `graph plan --edit` saves one; the run continues where it paused.
#[utoipa::path(
    put,
    path = "/threads/{id}/plan",
    tag = "plan",
    summary = "Replace the plan with an edited Markdown",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "markdown: the edited plan"),
    responses((status = 200, description = "the plan after the edit", body = Object), (status = 404, description = "no such thread, or its graph keeps no plan", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "the edit was refused; the message names the line", body = Object))
)]
async fn put_plan(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<PlanEdit>,
) -> Result<Json<Value>, ApiError> {
    let markdown = req.markdown.ok_or_else(|| {
        ApiError::invalid(
            "markdown",
            "missing: give the edited plan (GET /threads/{id}/plan has it as Markdown)",
        )
    })?;
    let (assistant, editor) = editor_of(&app, &id).await?;
    if let Some(run) = app.runs.busy_with(&id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "busy",
            format!(
                "thread `{id}` is busy with run `{}`: edit its plan when it has paused or ended",
                run.id
            ),
        ));
    }
    let state = assistant.graph.get_state(&id, None).await?.values;
    let update = editor
        .apply_markdown(&state, &markdown)
        .map_err(|e| refused("markdown", e))?;
    let saved = assistant.graph.update_state(&id, update, None).await;
    app.thread_idle(&id);
    saved?;
    Ok(Json(plan_json(&assistant, editor.as_ref(), &id).await?))
}
