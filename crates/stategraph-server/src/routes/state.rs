//! A thread's state: read (newest, or at a checkpoint; with subgraphs), edited as if a node
//! wrote it (`as_node`), and its history of checkpoints, newest first.

use super::AppState;
use crate::app::App;
use crate::assistants::Assistant;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::shapes::{checkpoint, empty_state, thread_state};
use crate::threads;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::CheckpointId;
use stategraph::runtime::{HistoryQuery, RunError};
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(state_newest, update))
        .routes(routes!(state_at_body))
        .routes(routes!(state_at))
        .routes(routes!(history_get, history_post))
}

/// A checkpoint as a request names it: its id, and a subgraph's namespace.
#[derive(Debug, Default, Deserialize)]
struct CheckpointRef {
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint_ns: Option<String>,
}

fn parse_id(text: &str, field: &str) -> Result<CheckpointId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::invalid(
            field,
            format!("`{text}` is not a checkpoint id (a UUID from the thread's history)"),
        )
    })
}

/// The thread id a namespace addresses: the root's, or `{root}/{ns}` for a subgraph's.
fn addressed(thread: &str, ns: Option<&str>) -> String {
    match ns.filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{thread}/{}", ns.replace('|', "/")),
        None => thread.to_string(),
    }
}

/// The thread's graph, or `None` (with the thread's existence checked) when it has none yet.
async fn graph_of(app: &App, thread: &str) -> Result<Option<Arc<Assistant>>, ApiError> {
    let record = app.threads.require(thread).await?;
    Ok(threads::graph_of(&app.assistants, &record))
}

async fn read_state(
    app: &App,
    thread: &str,
    at: Option<CheckpointId>,
    ns: Option<&str>,
    subgraphs: bool,
) -> Result<Value, ApiError> {
    let Some(assistant) = graph_of(app, thread).await? else {
        return Ok(empty_state(thread));
    };
    let target = addressed(thread, ns);
    let graph = &assistant.graph;
    let read = match subgraphs {
        true => graph.get_state_with_subgraphs(&target, at).await,
        false => graph.get_state(&target, at).await,
    };
    match read {
        Ok(s) => Ok(thread_state(&target, &s)),
        Err(RunError::ThreadNotFound { .. }) if at.is_none() => Ok(empty_state(thread)),
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(
    get,
    path = "/threads/{id}/state",
    tag = "state",
    summary = "The thread's newest state",
    params(("id" = String, Path, description = "the thread's id"), ("subgraphs" = Option<bool>, Query, description = "nest the children's states")),
    responses((status = 200, description = "the state", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn state_newest(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let subgraphs = query.flag("subgraphs", false)?;
    Ok(Json(read_state(&app, &id, None, None, subgraphs).await?))
}

#[utoipa::path(
    get,
    path = "/threads/{id}/state/{checkpoint_id}",
    tag = "state",
    summary = "The state at a checkpoint",
    params(("id" = String, Path, description = "the thread's id"), ("checkpoint_id" = String, Path, description = "a checkpoint id from the thread's history"), ("subgraphs" = Option<bool>, Query, description = "nest the children's states")),
    responses((status = 200, description = "the state", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn state_at(
    State(app): State<AppState>,
    Path((id, checkpoint_id)): Path<(String, String)>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let at = parse_id(&checkpoint_id, "checkpoint_id")?;
    let subgraphs = query.flag("subgraphs", false)?;
    Ok(Json(
        read_state(&app, &id, Some(at), None, subgraphs).await?,
    ))
}

#[derive(Debug, Default, Deserialize)]
struct StateAtRequest {
    #[serde(default)]
    checkpoint: CheckpointRef,
    #[serde(default)]
    subgraphs: bool,
}

#[utoipa::path(
    post,
    path = "/threads/{id}/state/checkpoint",
    tag = "state",
    summary = "The state at a checkpoint",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "checkpoint (checkpoint_id, checkpoint_ns), subgraphs"),
    responses((status = 200, description = "the state", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn state_at_body(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<StateAtRequest>,
) -> Result<Json<Value>, ApiError> {
    let at = match &req.checkpoint.checkpoint_id {
        Some(text) => Some(parse_id(text, "checkpoint.checkpoint_id")?),
        None => None,
    };
    let ns = req.checkpoint.checkpoint_ns.as_deref();
    Ok(Json(read_state(&app, &id, at, ns, req.subgraphs).await?))
}

#[derive(Debug, Default, Deserialize)]
struct UpdateRequest {
    #[serde(default)]
    values: Option<Value>,
    #[serde(default)]
    as_node: Option<String>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
}

/// Edits the thread's newest state as if `as_node` had written `values`: a new checkpoint,
/// whose outgoing edges decide what runs next.
#[utoipa::path(
    post,
    path = "/threads/{id}/state",
    tag = "state",
    summary = "Edit the state as a node would",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "values, as_node, checkpoint_id"),
    responses((status = 200, description = "the new checkpoint", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn update(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<UpdateRequest>,
) -> Result<Json<Value>, ApiError> {
    let assistant = graph_of(&app, &id).await?.ok_or_else(|| {
        ApiError::conflict(format!(
            "thread `{id}` has no graph yet: start a run on it first, or create it with \
             metadata.graph_id naming its graph"
        ))
    })?;
    if let Some(run) = app.runs.busy_with(&id) {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "busy",
            format!(
                "thread `{id}` is busy with run `{}`: edit it when the run has ended",
                run.id
            ),
        ));
    }
    let ns = req
        .checkpoint
        .as_ref()
        .and_then(|c| c.checkpoint_ns.as_deref());
    let target = addressed(&id, ns);
    let given = req.checkpoint_id.as_deref().or(req
        .checkpoint
        .as_ref()
        .and_then(|c| c.checkpoint_id.as_deref()));
    if let Some(text) = given {
        let at = parse_id(text, "checkpoint_id")?;
        let newest = assistant.graph.get_state(&target, None).await?;
        if newest.checkpoint_id != at {
            return Err(ApiError::unsupported(
                "checkpoint_id",
                "editing a checkpoint other than the newest (run from it with checkpoint_id, or copy the thread)",
            ));
        }
    }
    let values = req.values.unwrap_or_else(|| json!({}));
    let saved = assistant
        .graph
        .update_state(&target, values, req.as_node.as_deref())
        .await;
    app.thread_idle(&id);
    let saved = saved.map_err(|e| match &e {
        RunError::Graph(_) => ApiError::from(e).in_field("as_node"),
        RunError::InvalidInput(_) => ApiError::from(e).in_field("values"),
        _ => ApiError::from(e),
    })?;
    Ok(Json(
        json!({ "checkpoint": checkpoint(&target, Some(saved)) }),
    ))
}

#[derive(Debug, Default, Deserialize)]
struct HistoryRequest {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    before: Option<Before>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    checkpoint: Option<CheckpointRef>,
}

/// `before` as an id, or as a checkpoint object (LangGraph's clients send either).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Before {
    Id(String),
    Checkpoint(CheckpointRef),
}

#[utoipa::path(
    post,
    path = "/threads/{id}/history",
    tag = "state",
    summary = "Checkpoints, newest first, filtered",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "limit, before, metadata, checkpoint"),
    responses((status = 200, description = "states", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn history_post(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<HistoryRequest>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(history(&app, &id, req).await?))
}

#[utoipa::path(
    get,
    path = "/threads/{id}/history",
    tag = "state",
    summary = "Checkpoints, newest first",
    params(("id" = String, Path, description = "the thread's id"), ("limit" = Option<usize>, Query, description = "at most this many"), ("before" = Option<String>, Query, description = "older than this checkpoint id")),
    responses((status = 200, description = "states", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn history_get(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let req = HistoryRequest {
        limit: Some(query.number("limit", 10)?),
        before: query.get("before").map(|b| Before::Id(b.to_string())),
        ..HistoryRequest::default()
    };
    Ok(Json(history(&app, &id, req).await?))
}

/// The thread's states, newest first: at most `limit`, older than `before`, those whose
/// metadata holds `metadata`.
async fn history(app: &App, thread: &str, req: HistoryRequest) -> Result<Value, ApiError> {
    let Some(assistant) = graph_of(app, thread).await? else {
        return Ok(json!([]));
    };
    let limit = req.limit.unwrap_or(10);
    let target = addressed(
        thread,
        req.checkpoint
            .as_ref()
            .and_then(|c| c.checkpoint_ns.as_deref()),
    );
    let mut before = match &req.before {
        None => None,
        Some(Before::Id(text)) => Some(parse_id(text, "before")?),
        Some(Before::Checkpoint(c)) => match &c.checkpoint_id {
            Some(text) => Some(parse_id(text, "before.checkpoint_id")?),
            None => None,
        },
    };
    let mut out = Vec::new();
    while out.len() < limit {
        let query = HistoryQuery {
            limit: 100,
            before,
            ..HistoryQuery::default()
        };
        let page = match assistant.graph.history(&target, query).await {
            Ok(page) => page,
            Err(RunError::ThreadNotFound { .. }) => break,
            Err(e) => return Err(e.into()),
        };
        let Some(last) = page.last() else { break };
        before = Some(last.checkpoint_id);
        for entry in page {
            let s = assistant
                .graph
                .get_state(&target, Some(entry.checkpoint_id))
                .await?;
            let state = thread_state(&target, &s);
            let empty = Map::new();
            let metadata = state["metadata"].as_object().unwrap_or(&empty);
            if req
                .metadata
                .as_ref()
                .is_none_or(|m| threads::matches(metadata, m))
            {
                out.push(state);
            }
            if out.len() == limit {
                break;
            }
        }
    }
    Ok(Value::Array(out))
}
