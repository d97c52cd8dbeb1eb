//! Threads: create (with the caller's id and metadata), get, search, count, patch metadata,
//! copy, delete, prune (delete several, or keep their newest checkpoints). A thread's status
//! and values come from its newest checkpoint, and `busy` from the runs of this server.

use super::AppState;
use crate::app::App;
use crate::error::ApiError;
use crate::extract::Body;
use crate::shapes::{interrupts_by_task, iso};
use crate::threads::{self, ThreadRecord};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::now_ms;
use stategraph::runtime::{RunError, StateSnapshot};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(search))
        .routes(routes!(count))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(copy))
        .routes(routes!(prune))
}

/// The thread's newest state, read with its graph; `None` when it has no checkpoint or no
/// known graph.
pub(crate) async fn newest_state(
    app: &App,
    thread: &str,
    record: &ThreadRecord,
) -> Result<Option<StateSnapshot<Value>>, ApiError> {
    let Some(assistant) = threads::graph_of(&app.assistants, record) else {
        return Ok(None);
    };
    match assistant.graph.get_state(thread, None).await {
        Ok(s) => Ok(Some(s)),
        Err(RunError::ThreadNotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// LangGraph's `Thread`: `busy` while a run of this server has it, else `interrupted` (paused
/// for a person), `error` (a task failed) or `idle`.
pub(crate) async fn thread_json(
    app: &App,
    thread: &str,
    record: &ThreadRecord,
) -> Result<Value, ApiError> {
    let newest = newest_state(app, thread, record).await?;
    let status = match &newest {
        _ if app.runs.busy_with(thread).is_some() => "busy",
        Some(s) if !s.interrupts.is_empty() => "interrupted",
        Some(s) if !s.errors.is_empty() => "error",
        _ => "idle",
    };
    let changed = newest.as_ref().map_or(0, |s| s.metadata.created_at_ms);
    Ok(json!({
        "thread_id": thread,
        "created_at": iso(record.created_at_ms),
        "updated_at": iso(record.updated_at_ms.max(changed)),
        "metadata": record.metadata,
        "status": status,
        "values": newest.as_ref().map(|s| s.values.clone()),
        // Not LangGraph's: the steps the thread has taken, for a listing (the web page's).
        "step": newest.as_ref().map(|s| s.step),
        // Not LangGraph's: what its state's usage ledger says it paid (`null`: it keeps none);
        // GET /threads/{id}/cost adds what no ledger holds.
        "cost": newest.as_ref().and_then(|s| crate::cost::listed(&s.values)),
        "interrupts": newest.as_ref().map_or(json!({}), interrupts_by_task),
        "config": {},
    }))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum IfExists {
    #[default]
    Raise,
    DoNothing,
}

#[derive(Debug, Default, Deserialize)]
struct CreateRequest {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    if_exists: Option<IfExists>,
    #[serde(default)]
    supersteps: Option<Value>,
    #[serde(default)]
    ttl: Option<Value>,
}

#[utoipa::path(
    post,
    path = "/threads",
    tag = "threads",
    summary = "Create a thread",
    request_body(content = Object, description = "thread_id, metadata, if_exists"),
    responses((status = 200, description = "the thread", body = Object), (status = 409, description = "the thread exists", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn create(
    State(app): State<AppState>,
    Body(req): Body<CreateRequest>,
) -> Result<Json<Value>, ApiError> {
    if req.supersteps.is_some() {
        return Err(ApiError::unsupported(
            "supersteps",
            "creating a thread from supersteps",
        ));
    }
    if req.ttl.is_some() {
        return Err(ApiError::unsupported("ttl", "a thread that deletes itself"));
    }
    let metadata = req.metadata.unwrap_or_default();
    if let Some(graph) = metadata.get("graph_id") {
        let graph = graph.as_str().unwrap_or_default();
        app.assistants
            .get(graph)
            .map_err(|e| e.in_field("metadata.graph_id"))?;
    }
    let id = req
        .thread_id
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    if let Some(existing) = app.threads.read(&id).await? {
        return match req.if_exists.unwrap_or_default() {
            IfExists::DoNothing => Ok(Json(thread_json(&app, &id, &existing).await?)),
            IfExists::Raise => Err(ApiError::conflict(format!(
                "thread `{id}` already exists: send if_exists \"do_nothing\" to get it instead, \
                 or create a thread with another id"
            ))),
        };
    }
    let record = ThreadRecord::new(now_ms(), metadata);
    app.threads.create(&id, &record).await?;
    // Kept a moment for its first run, which clients start right after making a thread.
    app.idle_later(&id);
    Ok(Json(thread_json(&app, &id, &record).await?))
}

#[utoipa::path(
    get,
    path = "/threads/{id}",
    tag = "threads",
    summary = "One thread: status, values, interrupts",
    params(("id" = String, Path, description = "the thread's id")),
    responses((status = 200, description = "the thread", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn get_one(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = app.threads.require(&id).await?;
    Ok(Json(thread_json(&app, &id, &record).await?))
}

#[derive(Debug, Default, Deserialize)]
struct SearchRequest {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    values: Option<Map<String, Value>>,
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    sort_by: Option<String>,
    #[serde(default)]
    sort_order: Option<String>,
    #[serde(default)]
    select: Option<Vec<String>>,
}

/// Every thread that fits the request's filters, sorted as it asks.
async fn matching(app: &App, req: &SearchRequest) -> Result<Vec<Value>, ApiError> {
    if let Some(s) = req.status.as_deref() {
        if !matches!(s, "idle" | "busy" | "interrupted" | "error") {
            return Err(ApiError::invalid(
                "status",
                format!("`{s}` is not a thread status: use idle, busy, interrupted or error"),
            ));
        }
    }
    let mut ids = match &req.ids {
        Some(ids) => ids.clone(),
        None => {
            let listed = app.store.list_threads().await?;
            app.threads.listed(&listed);
            listed
        }
    };
    if req.ids.is_none() {
        ids.extend(app.threads.unlisted());
    }
    ids.sort();
    ids.dedup();
    let mut found = Vec::new();
    for id in ids {
        let Ok(Some(record)) = app.threads.read(&id).await else {
            continue;
        };
        if !req
            .metadata
            .as_ref()
            .is_none_or(|m| threads::matches(&record.metadata, m))
        {
            continue;
        }
        let thread = thread_json(app, &id, &record).await?;
        let values_fit = req.values.as_ref().is_none_or(|want| {
            thread["values"]
                .as_object()
                .is_some_and(|v| threads::matches(v, want))
        });
        if values_fit && req.status.as_deref().is_none_or(|s| thread["status"] == s) {
            found.push(thread);
        }
    }
    sort(&mut found, req)?;
    Ok(found)
}

fn sort(threads: &mut [Value], req: &SearchRequest) -> Result<(), ApiError> {
    let key = req.sort_by.as_deref().unwrap_or("created_at");
    if !matches!(key, "thread_id" | "status" | "created_at" | "updated_at") {
        return Err(ApiError::invalid(
            "sort_by",
            format!("cannot sort by `{key}`: use thread_id, status, created_at or updated_at"),
        ));
    }
    let descending = match req.sort_order.as_deref().unwrap_or("desc") {
        "desc" => true,
        "asc" => false,
        other => {
            return Err(ApiError::invalid(
                "sort_order",
                format!("`{other}`: use asc or desc"),
            ))
        }
    };
    // ISO times sort as text; the id breaks ties so pages do not shuffle.
    threads.sort_by(|a, b| {
        let by = |t: &Value| {
            (
                t[key].as_str().unwrap_or("").to_string(),
                t["thread_id"].as_str().unwrap_or("").to_string(),
            )
        };
        let order = by(a).cmp(&by(b));
        if descending {
            order.reverse()
        } else {
            order
        }
    });
    Ok(())
}

#[utoipa::path(
    post,
    path = "/threads/search",
    tag = "threads",
    summary = "Threads, filtered and sorted",
    request_body(content = Object, description = "metadata, values, status, ids, sort_by, sort_order, limit, offset, select"),
    responses((status = 200, description = "threads", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn search(
    State(app): State<AppState>,
    Body(req): Body<SearchRequest>,
) -> Result<Json<Value>, ApiError> {
    let (offset, limit) = (req.offset.unwrap_or(0), req.limit.unwrap_or(10));
    let page = matching(&app, &req)
        .await?
        .into_iter()
        .skip(offset)
        .take(limit);
    let page: Vec<Value> = match &req.select {
        None => page.collect(),
        Some(fields) => page
            .map(|mut t| {
                if let Value::Object(m) = &mut t {
                    m.retain(|k, _| fields.contains(k));
                }
                t
            })
            .collect(),
    };
    Ok(Json(Value::Array(page)))
}

#[utoipa::path(
    post,
    path = "/threads/count",
    tag = "threads",
    summary = "How many threads fit",
    request_body(content = Object, description = "metadata, values, status, ids"),
    responses((status = 200, description = "a number", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn count(
    State(app): State<AppState>,
    Body(req): Body<SearchRequest>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(matching(&app, &req).await?.len())))
}

#[derive(Debug, Default, Deserialize)]
struct PatchRequest {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

/// Merges the given metadata into the thread's (a key given as null is kept as null, as
/// LangGraph does).
#[utoipa::path(
    patch,
    path = "/threads/{id}",
    tag = "threads",
    summary = "Merge metadata into the thread's",
    params(("id" = String, Path, description = "the thread's id")),
    request_body(content = Object, description = "metadata"),
    responses((status = 200, description = "the thread", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn patch(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<PatchRequest>,
) -> Result<Json<Value>, ApiError> {
    let mut record = app.threads.require(&id).await?;
    record.metadata.extend(req.metadata.unwrap_or_default());
    record.updated_at_ms = now_ms();
    app.threads.write(&id, &record).await?;
    app.thread_idle(&id);
    Ok(Json(thread_json(&app, &id, &record).await?))
}

#[utoipa::path(
    delete,
    path = "/threads/{id}",
    tag = "threads",
    summary = "Delete a thread",
    params(("id" = String, Path, description = "the thread's id")),
    responses((status = 204, description = "done"), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object))
)]
async fn delete(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.threads.require(&id).await?;
    refuse_busy(&app, &id)?;
    delete_one(&app, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 409 naming the run when a run of this server has the thread.
fn refuse_busy(app: &App, id: &str) -> Result<(), ApiError> {
    match app.runs.busy_with(id) {
        Some(run) => Err(ApiError::conflict(format!(
            "thread `{id}` is busy with run `{}`: cancel it first (POST /threads/{id}/runs/{}/cancel)",
            run.id, run.id
        ))),
        None => Ok(()),
    }
}

/// Deletes a thread no run of this server has, and forgets it. Deleted before it is let go: a
/// thread let go is closed in the background (flushed, indexed), work a deletion throws away,
/// and requests would copy it to read it meanwhile (see `runs/exec.rs`).
async fn delete_one(app: &App, id: &str) -> Result<(), ApiError> {
    let deleted = app.store.delete_thread(id).await;
    app.thread_idle(id);
    deleted?;
    app.threads.forget(id);
    app.runs.forget_thread(id);
    Ok(())
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PruneStrategy {
    #[default]
    Delete,
    KeepLatest,
}

#[derive(Debug, Deserialize)]
struct PruneRequest {
    thread_ids: Vec<String>,
    #[serde(default)]
    strategy: PruneStrategy,
}

/// Deletes threads, or keeps only their newest checkpoint (`keep_latest`, as `graph prune
/// --keep 1`). Every thread is checked before any is touched: naming one that does not exist
/// or that a run has changes nothing.
#[utoipa::path(
    post,
    path = "/threads/prune",
    tag = "threads",
    summary = "Delete threads, or all but their newest checkpoint",
    request_body(content = Object, description = "thread_ids, strategy: delete (default) or keep_latest"),
    responses((status = 200, description = "`{pruned_count}`: how many threads", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object), (status = 409, description = "the thread is busy", body = Object), (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn prune(
    State(app): State<AppState>,
    Body(req): Body<PruneRequest>,
) -> Result<Json<Value>, ApiError> {
    let mut ids = req.thread_ids;
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    let mut records = Vec::with_capacity(ids.len());
    for id in &ids {
        records.push(app.threads.require(id).await?);
        refuse_busy(&app, id)?;
    }
    for (id, record) in ids.iter().zip(&records) {
        match req.strategy {
            PruneStrategy::Delete => delete_one(&app, id).await?,
            PruneStrategy::KeepLatest => {
                // A thread never run has no checkpoint to prune.
                if let Some(assistant) = threads::graph_of(&app.assistants, record) {
                    let pruned = assistant.graph.prune(id, 1).await;
                    app.thread_idle(id);
                    pruned?;
                }
            }
        }
    }
    Ok(Json(json!({ "pruned_count": ids.len() })))
}

/// A new thread holding a copy of the thread's newest checkpoint and its metadata.
#[utoipa::path(
    post,
    path = "/threads/{id}/copy",
    tag = "threads",
    summary = "A new thread holding the newest checkpoint",
    params(("id" = String, Path, description = "the thread's id")),
    responses((status = 200, description = "the new thread", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn copy(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = app.threads.require(&id).await?;
    let new_id = uuid::Uuid::now_v7().to_string();
    if let (Some(assistant), Some(newest)) = (
        threads::graph_of(&app.assistants, &record),
        newest_state(&app, &id, &record).await?,
    ) {
        assistant
            .graph
            .fork(&id, newest.checkpoint_id, Some(new_id.clone()))
            .await?;
    }
    let copied = ThreadRecord::new(now_ms(), record.metadata.clone());
    app.threads.write(&new_id, &copied).await?;
    app.thread_idle(&new_id);
    Ok(Json(thread_json(&app, &new_id, &copied).await?))
}
