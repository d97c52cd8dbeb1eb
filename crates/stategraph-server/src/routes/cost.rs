//! What a thread paid for model calls (not part of LangGraph's API; the web page shows it):
//! the ledger its state keeps, by node, with what no step's ledger holds, as `graph state`
//! tells it (see `crate::cost`). A listing's threads carry their ledger's total in `cost`.

use super::threads::newest_state;
use super::AppState;
use crate::cost;
use crate::error::ApiError;
use crate::threads;
use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_cost))
}

/// The thread's cost at its newest checkpoint.
#[utoipa::path(
    get,
    path = "/threads/{id}/cost",
    tag = "threads",
    summary = "What a thread paid for model calls",
    description = "`cost` is `null` for a thread whose state keeps no usage ledger (`usage`); \
                   else its sum (`usd`: `null` when no call had a price; prices come from the \
                   graph file's `[settings.pricing]`), by node (`nodes`), what the ledger holds \
                   (`ledger`) and what it does not (`off_ledger`: failed attempts, results an \
                   edit or a rerun set aside, a fork's source's).",
    params(("id" = String, Path, description = "the thread's id")),
    responses((status = 200, description = "`{thread_id, cost: {usd, calls, input_tokens, output_tokens, unpriced_calls, nodes, ledger, off_ledger} | null}`", body = Object),
        (status = 404, description = "no such thread", body = Object))
)]
async fn get_cost(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = app.threads.require(&id).await?;
    let mut shown = Value::Null;
    if let (Some(assistant), Some(state)) = (
        threads::graph_of(&app.assistants, &record),
        newest_state(&app, &id, &record).await?,
    ) {
        let settings = &assistant.resolved.file.settings;
        let readout = cost::readout(
            app.store.as_ref(),
            &id,
            state.checkpoint_id,
            &state.values,
            settings,
        );
        shown = json!(readout.await);
    }
    Ok(Json(json!({"thread_id": id, "cost": shown})))
}
