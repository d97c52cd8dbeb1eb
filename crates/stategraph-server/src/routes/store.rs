//! The long-term store (LangGraph's `/store` routes, which `langgraph-sdk`'s `client.store`
//! calls): put, get, delete an item, search items, list namespaces. They reach the store the
//! server's runs give their nodes ([`Server::with_long_term_store`](crate::Server)), so an item a
//! client puts is what a node's `ctx.store()` reads, and the reverse.
//!
//! A namespace travels as a list of labels, except in `GET /store/items`, where LangGraph's
//! clients send it as one string with `.` between labels: so a put refuses a label holding a
//! `.`, which that read could not tell from two labels.

use super::AppState;
use crate::app::App;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::shapes::iso;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::store::{
    Item, Namespace, NamespaceQuery, SearchHit, SearchRequest, Store, StoreError, StoreOp,
    FILTER_OPERATORS,
};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_item, get_item, delete_item))
        .routes(routes!(search_items))
        .routes(routes!(list_namespaces))
}

/// The server's long-term store, or why there is none.
fn long_term(app: &App) -> Result<&dyn Store, ApiError> {
    match &app.long_term {
        Some(store) => Ok(store.0.as_ref()),
        None => Err(ApiError::not_found(
            "this server keeps no long-term store: the program that serves it gave it none \
             (stategraph_server::Server::with_long_term_store)",
        )),
    }
}

/// A store's error as the API says it, naming the field at fault where one is.
fn store_error(e: StoreError) -> ApiError {
    match &e {
        StoreError::InvalidNamespace { .. } => ApiError::invalid("namespace", e),
        StoreError::InvalidKey { .. } => ApiError::invalid("key", e),
        StoreError::NeedsIndex => ApiError::invalid("query", e),
        StoreError::CannotRefresh => ApiError::invalid("refresh_ttl", e),
        // Another process has the embedded store open: it goes when that one ends.
        StoreError::Locked { .. } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_busy", e.to_string())
        }
        _ => ApiError::internal(e),
    }
}

/// LangGraph's `Item` (with `score` when a text query ranked it).
fn item_json(item: &Item, score: Option<f32>) -> Value {
    let mut shown = json!({
        "namespace": item.namespace,
        "key": item.key,
        "value": item.value,
        "created_at": iso(item.created_at_ms),
        "updated_at": iso(item.updated_at_ms),
    });
    if let Some(score) = score {
        shown["score"] = json!(score);
    }
    shown
}

#[derive(Debug, Deserialize)]
struct PutRequest {
    namespace: Namespace,
    key: String,
    value: Value,
    #[serde(default)]
    index: Option<Value>,
    /// Minutes, as LangGraph counts an item's time to live.
    #[serde(default)]
    ttl: Option<f64>,
}

/// Minutes to live as milliseconds, refusing what is no duration.
fn ttl_ms(minutes: f64) -> Result<u64, ApiError> {
    let ms = minutes * 60_000.0;
    if !ms.is_finite() || ms < 0.0 || ms > u64::MAX as f64 {
        return Err(ApiError::invalid(
            "ttl",
            format!("{minutes} is no time to live: give minutes, 0 or more"),
        ));
    }
    Ok(ms.round() as u64)
}

#[utoipa::path(
    put,
    path = "/store/items",
    tag = "store",
    summary = "Put an item",
    description = "Stores `value` (a JSON object) under `namespace` (a list of labels, none \
                   holding `.`) and `key`, replacing what was there; `ttl` in minutes (else the \
                   store's default). Nodes of the server's runs read it with `ctx.store()`.",
    request_body(content = Object, description = "namespace, key, value, ttl"),
    responses((status = 204, description = "stored"),
        (status = 404, description = "the server keeps no long-term store", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object),
        (status = 503, description = "another process has the store open; try again", body = Object))
)]
async fn put_item(
    State(app): State<AppState>,
    Body(req): Body<PutRequest>,
) -> Result<StatusCode, ApiError> {
    let store = long_term(&app)?;
    if let Some(label) = req.namespace.iter().find(|l| l.contains('.')) {
        return Err(ApiError::invalid(
            "namespace",
            format!(
                "the label `{label}` holds a `.`, which GET /store/items (namespace=a.b) could \
                 not tell from two labels: use another character"
            ),
        ));
    }
    if !req.value.is_object() {
        return Err(ApiError::invalid(
            "value",
            "an item's value is a JSON object (wrap anything else in one)",
        ));
    }
    if req.index.as_ref().is_some_and(|i| !i.is_null()) {
        return Err(ApiError::unsupported(
            "index",
            "choosing per item what a query searches (the store indexes every item the same way)",
        ));
    }
    let op = StoreOp::Put {
        namespace: req.namespace,
        key: req.key,
        value: req.value,
        ttl_ms: req.ttl.map(ttl_ms).transpose()?,
    };
    op.validate().map_err(store_error)?;
    store.batch(&[op]).await.map_err(store_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/store/items",
    tag = "store",
    summary = "Get an item",
    description = "The item, or `null` when there is none (as LangGraph answers).",
    params(("namespace" = String, Query, description = "its labels joined by `.`"),
        ("key" = String, Query, description = "its key"),
        ("refresh_ttl" = Option<bool>, Query, description = "start its time to live again (else the store's default)")),
    responses((status = 200, description = "`{namespace, key, value, created_at, updated_at}` or `null`", body = Object),
        (status = 404, description = "the server keeps no long-term store", body = Object),
        (status = 422, description = "a parameter does not fit; the message names it", body = Object),
        (status = 503, description = "another process has the store open; try again", body = Object))
)]
async fn get_item(State(app): State<AppState>, query: Query) -> Result<Json<Value>, ApiError> {
    let store = long_term(&app)?;
    let namespace: Namespace = query
        .get("namespace")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "namespace",
                "give the item's namespace, labels joined by `.`",
            )
        })?
        .split('.')
        .map(str::to_string)
        .collect();
    let key = query
        .get("key")
        .ok_or_else(|| ApiError::invalid("key", "give the item's key"))?;
    let refresh = match query.get("refresh_ttl") {
        None | Some("") => None,
        Some(_) => Some(query.flag("refresh_ttl", false)?),
    };
    let found = store
        .get_with(&namespace, key, refresh)
        .await
        .map_err(store_error)?;
    Ok(Json(
        found.map_or(Value::Null, |item| item_json(&item, None)),
    ))
}

#[derive(Debug, Deserialize)]
struct DeleteRequest {
    namespace: Namespace,
    key: String,
}

#[utoipa::path(
    delete,
    path = "/store/items",
    tag = "store",
    summary = "Delete an item",
    description = "Removes the item if there is one.",
    request_body(content = Object, description = "namespace, key"),
    responses((status = 204, description = "gone (or never there)"),
        (status = 404, description = "the server keeps no long-term store", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object),
        (status = 503, description = "another process has the store open; try again", body = Object))
)]
async fn delete_item(
    State(app): State<AppState>,
    Body(req): Body<DeleteRequest>,
) -> Result<StatusCode, ApiError> {
    let store = long_term(&app)?;
    let op = StoreOp::Delete {
        namespace: req.namespace,
        key: req.key,
    };
    op.validate().map_err(store_error)?;
    store.batch(&[op]).await.map_err(store_error)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
struct SearchBody {
    #[serde(default)]
    namespace_prefix: Namespace,
    #[serde(default)]
    filter: Option<Map<String, Value>>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default = "ten")]
    limit: usize,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    refresh_ttl: Option<bool>,
}

fn ten() -> usize {
    10
}

/// Refuses a comparison the store does not know (`{"score": {"$between": ...}}`), which would
/// otherwise be compared as a plain value and match nothing.
fn check_filter(filter: &Map<String, Value>) -> Result<(), ApiError> {
    for (field, want) in filter {
        let Some(ops) = want.as_object() else {
            continue;
        };
        for op in ops.keys().filter(|k| k.starts_with('$')) {
            if !FILTER_OPERATORS.contains(&op.as_str()) {
                return Err(ApiError::invalid(
                    &format!("filter.{field}"),
                    format!(
                        "`{op}` is no comparison this store knows: use {}",
                        FILTER_OPERATORS.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/store/items/search",
    tag = "store",
    summary = "Search items",
    description = "Items under `namespace_prefix` (`*` matches any one label) whose values have \
                   the `filter`'s fields (equal, or compared with $eq, $ne, $gt, $gte, $lt, \
                   $lte), ranked by `query` when one is given (each then with its `score`), \
                   else the most recently updated first; `limit` (10) from `offset` (0).",
    request_body(content = Object, description = "namespace_prefix, filter, query, limit, offset, refresh_ttl"),
    responses((status = 200, description = "`{items: [...]}`", body = Object),
        (status = 404, description = "the server keeps no long-term store", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object),
        (status = 503, description = "another process has the store open; try again", body = Object))
)]
async fn search_items(
    State(app): State<AppState>,
    Body(req): Body<SearchBody>,
) -> Result<Json<Value>, ApiError> {
    let store = long_term(&app)?;
    let filter = req.filter.unwrap_or_default();
    check_filter(&filter)?;
    // The store reads a limit of 0 as "all"; a client asking for none gets none.
    let hits: Vec<SearchHit> = match req.limit {
        0 => Vec::new(),
        limit => {
            let request = SearchRequest {
                namespace_prefix: req.namespace_prefix,
                filter,
                query: req.query.filter(|q| !q.trim().is_empty()),
                limit,
                offset: req.offset,
                refresh_ttl: req.refresh_ttl,
            };
            store.search(&request).await.map_err(store_error)?
        }
    };
    let items: Vec<Value> = hits.iter().map(|h| item_json(&h.item, h.score)).collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Debug, Deserialize)]
struct NamespacesBody {
    #[serde(default)]
    prefix: Namespace,
    #[serde(default)]
    suffix: Namespace,
    #[serde(default)]
    max_depth: Option<usize>,
    #[serde(default = "hundred")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

fn hundred() -> usize {
    100
}

#[utoipa::path(
    post,
    path = "/store/namespaces",
    tag = "store",
    summary = "List namespaces",
    description = "The namespaces holding items, starting with `prefix` and ending with `suffix` \
                   (`*` matches any one label), cut to `max_depth` labels, sorted; `limit` (100) \
                   from `offset` (0).",
    request_body(content = Object, description = "prefix, suffix, max_depth, limit, offset"),
    responses((status = 200, description = "`{namespaces: [[label, ...], ...]}`", body = Object),
        (status = 404, description = "the server keeps no long-term store", body = Object),
        (status = 422, description = "a field does not fit; the message names it", body = Object),
        (status = 503, description = "another process has the store open; try again", body = Object))
)]
async fn list_namespaces(
    State(app): State<AppState>,
    Body(req): Body<NamespacesBody>,
) -> Result<Json<Value>, ApiError> {
    let store = long_term(&app)?;
    let namespaces = match req.limit {
        0 => Vec::new(),
        limit => {
            let query = NamespaceQuery {
                prefix: req.prefix,
                suffix: req.suffix,
                max_depth: req.max_depth,
                limit,
                offset: req.offset,
            };
            store.list_namespaces(&query).await.map_err(store_error)?
        }
    };
    Ok(Json(json!({ "namespaces": namespaces })))
}
