//! The HTTP routes, one file per resource, and the layers around them (token, CORS, body limit).
//!
//! Every route is registered through `utoipa_axum`'s `routes!`, from the `#[utoipa::path]` that
//! documents its handler, so the OpenAPI document served at `/openapi.json` is made from the
//! routes themselves and cannot name a path or method that is not served, or leave one out.

mod artifacts;
mod assistants;
mod cancel;
mod cost;
mod fork;
mod plan;
mod retention;
mod runs;
mod state;
mod store;
mod threads;

use crate::app::App;
use crate::auth::{require_token, Token};
use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::ServerError;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::{Extension, Json, Router};
use serde_json::Value;
use std::sync::Arc;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::openapi::{InfoBuilder, OpenApi, OpenApiBuilder};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(crate) type AppState = Arc<App>;

/// Every route, with `config`'s layers.
pub(crate) fn router(app: Arc<App>, config: &ServerConfig) -> Result<Router, ServerError> {
    let (router, api) = documented().split_for_parts();
    let api = Arc::new(api);
    let mut router: Router = router
        .fallback(not_found)
        .with_state(app)
        .layer(Extension(api))
        .layer(DefaultBodyLimit::max(config.body_limit));
    if let Some(token) = config.token.as_deref().filter(|t| !t.is_empty()) {
        let token = Token(Arc::from(token));
        router = router.layer(axum::middleware::from_fn_with_state(token, require_token));
    }
    if !config.cors.is_empty() {
        router = router.layer(cors(&config.cors)?);
    }
    // The page and its assets are outside the token's layer: they hold no data, and a browser
    // cannot send a header with a page it opens; the page sends the token with each API call.
    Ok(crate::page::routes().merge(router))
}

/// CORS for the given origins only: a browser page from elsewhere cannot call the API.
fn cors(origins: &[String]) -> Result<CorsLayer, ServerError> {
    let allowed = origins
        .iter()
        .map(|o| {
            HeaderValue::from_str(o.trim_end_matches('/'))
                .map_err(|_| ServerError::BadOrigin { origin: o.clone() })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CorsLayer::new()
        .allow_origin(AllowOrigin::list(allowed))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static("x-api-key"),
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([header::LOCATION, header::CONTENT_LOCATION]))
}

/// Every route, with the OpenAPI document its handlers' annotations make.
fn documented() -> OpenApiRouter<AppState> {
    let about = InfoBuilder::new()
        .title("stategraph")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The registered graphs and the threads of a store, in the shape of LangGraph's \
             Agent Server API. Off loopback every request carries the server's token \
             (Authorization: Bearer TOKEN, or x-api-key: TOKEN).",
        ))
        .build();
    OpenApiRouter::with_openapi(OpenApiBuilder::new().info(about).build())
        .routes(routes!(ok))
        .routes(routes!(info))
        .routes(routes!(openapi))
        .merge(assistants::routes())
        .merge(threads::routes())
        .merge(state::routes())
        .merge(runs::routes())
        .merge(cancel::routes())
        .merge(plan::routes())
        .merge(retention::routes())
        .merge(artifacts::routes())
        .merge(cost::routes())
        .merge(fork::routes())
        .merge(store::routes())
}

#[utoipa::path(get, path = "/ok", tag = "system", summary = "Health",
    responses((status = 200, description = "`{\"ok\": true}`", body = Object)))]
async fn ok() -> Json<Value> {
    Json(serde_json::json!({"ok": true}))
}

#[utoipa::path(get, path = "/openapi.json", tag = "system", summary = "This document",
    responses((status = 200, description = "the OpenAPI document of what is served", body = Object)))]
async fn openapi(Extension(api): Extension<Arc<OpenApi>>) -> Json<OpenApi> {
    Json(api.as_ref().clone())
}

#[utoipa::path(get, path = "/info", tag = "system", summary = "Version and what is served",
    responses((status = 200, description = "version and flags", body = Object)))]
async fn info() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "stategraph",
        "flags": {"assistants": true, "crons": false, "langsmith": false},
    }))
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route {method} {}: this server serves LangGraph's assistants, threads, runs and \
         store endpoints (see the stategraph-server README)",
        uri.path()
    ))
}

/// A response's `Content-Location` (and, for a stream, `Location`) naming a run, which
/// LangGraph's clients read to find the run and to rejoin its stream.
pub(crate) fn run_location(thread: &str, run: &str) -> String {
    format!("/threads/{thread}/runs/{run}")
}
