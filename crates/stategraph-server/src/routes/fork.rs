//! A fork (not part of LangGraph's API, which copies only a thread's newest checkpoint): a new
//! thread that starts from any checkpoint of another, as `graph fork` makes it. The source is
//! untouched; the fork takes along what its source's history paid off the ledger (so its cost
//! reads right) and gets an artifact folder of its own beside its source's.

use super::threads::thread_json;
use super::AppState;
use crate::error::ApiError;
use crate::extract::Body;
use crate::threads::{self, ThreadRecord};
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::{now_ms, validate_thread_id, CheckpointId};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(fork))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkRequest {
    checkpoint_id: String,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

/// A new thread whose first checkpoint is `checkpoint_id` of the thread `id`.
#[utoipa::path(
    post,
    path = "/threads/{id}/fork",
    tag = "threads",
    summary = "A new thread from a checkpoint",
    description = "Copies the checkpoint `checkpoint_id` of the thread (one its history lists) \
                   into a new thread (`thread_id`, default a new id), with the writes its tasks \
                   left against it: a fork of a paused checkpoint is paused there. Its metadata \
                   is the source's, with `metadata` over it and `forked_from` \
                   (`{thread_id, checkpoint_id}`). Run it to go on from there.",
    params(("id" = String, Path, description = "the source thread's id")),
    request_body(content = Object, description = "checkpoint_id, thread_id (optional), metadata (optional)"),
    responses((status = 200, description = "the new thread", body = Object),
        (status = 404, description = "no such thread or checkpoint", body = Object),
        (status = 409, description = "a thread `thread_id` exists", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object))
)]
async fn fork(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<ForkRequest>,
) -> Result<Json<Value>, ApiError> {
    let record = app.threads.require(&id).await?;
    let checkpoint: CheckpointId = req.checkpoint_id.parse().map_err(|_| {
        ApiError::invalid(
            "checkpoint_id",
            format!(
                "`{}` is not a checkpoint id: take one from POST /threads/{id}/history",
                req.checkpoint_id
            ),
        )
    })?;
    let assistant = threads::graph_of(&app.assistants, &record).ok_or_else(|| {
        ApiError::not_found(format!(
            "thread `{id}` has no graph, so no checkpoint to fork: start a run on it first"
        ))
    })?;
    let new_id = match req.thread_id {
        Some(t) => {
            validate_thread_id(&t).map_err(|e| ApiError::invalid("thread_id", e))?;
            t
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    if app.threads.read(&new_id).await?.is_some() {
        return Err(ApiError::conflict(format!(
            "thread `{new_id}` already exists: fork into a new thread id"
        )));
    }
    // The engine refuses a thread that has checkpoints, and copies nothing then.
    assistant
        .graph
        .fork(&id, checkpoint, Some(new_id.clone()))
        .await
        .map_err(|e| match e {
            stategraph::runtime::RunError::InvalidInput(m) if m.contains("already exists") => {
                ApiError::conflict(m)
            }
            other => other.into(),
        })?;
    let pricing = stategraph_spend::pricing_of(&assistant.resolved.file.settings);
    let carried = stategraph_spend::carry_into_fork(
        app.store.as_ref(),
        &id,
        checkpoint,
        &new_id,
        pricing.as_ref(),
    );
    if let Err(e) = carried.await {
        // The fork is made; only its cost readout leaves out what its source's failed
        // attempts paid.
        tracing::warn!(thread = %new_id, error = %e, "cannot carry the source's spend into the fork");
    }
    crate::artifacts::start_fork(&app, &assistant.id, &id, &new_id).await;
    let mut metadata = record.metadata.clone();
    metadata.extend(req.metadata.unwrap_or_default());
    metadata.insert(
        "forked_from".into(),
        json!({"thread_id": id, "checkpoint_id": checkpoint.to_string()}),
    );
    let forked = ThreadRecord::new(now_ms(), metadata);
    app.threads.write(&new_id, &forked).await?;
    app.thread_idle(&new_id);
    Ok(Json(thread_json(&app, &new_id, &forked).await?))
}
