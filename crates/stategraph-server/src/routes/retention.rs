//! The background retention sweep's progress (`GET /retention`), when the server's owner runs
//! one: its interval, how many rounds ran, the newest round and the newest that removed
//! something. Not part of LangGraph's API.

use super::AppState;
use crate::error::ApiError;
use axum::extract::State;
use axum::Json;
use stategraph_registry::SweeperStatus;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(status))
}

#[utoipa::path(
    get,
    path = "/retention",
    tag = "system",
    summary = "The background retention sweep",
    responses(
        (status = 200, description = "every_secs, rounds, last and last_removal (each round: at_ms, graphs with what each sweep deleted, pruned and skipped, items_expired, failures)", body = Object),
        (status = 404, description = "this server runs no retention sweep", body = Object)
    )
)]
async fn status(State(app): State<AppState>) -> Result<Json<SweeperStatus>, ApiError> {
    let Some(status) = &app.retention else {
        return Err(ApiError::not_found(
            "this server runs no retention sweep: no graph it serves has a [retention] policy, \
             or its owner turned the sweep off",
        ));
    };
    let now = status.borrow().clone();
    Ok(Json(now))
}
