//! A thread's artifacts (not part of LangGraph's API; the web page lists and opens them): its
//! version folders and the files of one, and a file's text, served only from inside the
//! folder. The files are written by the thread's runs (see `crate::artifacts`).

use super::AppState;
use crate::artifacts::{self, content_type, file_in, LARGEST_FILE};
use crate::error::ApiError;
use crate::extract::Query;
use crate::shapes::iso;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(file))
}

/// The thread's version folders and the files of one.
#[utoipa::path(
    get,
    path = "/threads/{id}/artifacts",
    tag = "artifacts",
    summary = "A thread's artifact files",
    description = "The thread's artifact version folders (label, reason, where) and the files of \
                   one (`version`, default the current) with their sizes. Empty before a run of \
                   a graph that declares artifacts has written them.",
    params(
        ("id" = String, Path, description = "the thread's id"),
        ("version" = Option<String>, Query, description = "a version's label (`v2`) or number; default the current one"),
    ),
    responses((status = 200, description = "`{thread_id, current, version, dir, missing, versions: [{label, number, reason, created_at, dir}], files: [{path, size}]}`", body = Object),
        (status = 404, description = "no such thread, or no such version", body = Object))
)]
async fn list(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    app.threads.require(&id).await?;
    let folder = artifacts::list(&app, &id, query.get("version")).await?;
    let versions: Vec<Value> = folder
        .folders
        .iter()
        .map(|f| {
            json!({
                "label": f.label,
                "number": f.number,
                "reason": f.reason,
                "created_at": iso(f.created_at_ms),
                "dir": f.dir,
            })
        })
        .collect();
    Ok(Json(json!({
        "thread_id": id,
        "current": folder.current,
        "version": folder.shown.as_ref().map(|f| &f.label),
        "dir": folder.shown.as_ref().map(|f| &f.dir),
        "missing": folder.missing,
        "versions": versions,
        "files": folder.files,
    })))
}

/// One file of a version folder, as it is on disk.
#[utoipa::path(
    get,
    path = "/threads/{id}/artifacts/file",
    tag = "artifacts",
    summary = "One artifact file",
    description = "The file `path` (relative, as the listing names it) of the version folder \
                   `version` (default the current): Markdown as text/markdown, JSON as \
                   application/json, other text as text/plain, anything else as bytes. Nothing \
                   outside the folder is served: an absolute path, a `..` or a symlink that \
                   leads out is refused (403).",
    params(
        ("id" = String, Path, description = "the thread's id"),
        ("path" = String, Query, description = "the file, relative to the version folder"),
        ("version" = Option<String>, Query, description = "a version's label or number; default the current one"),
    ),
    responses((status = 200, description = "the file's content"),
        (status = 403, description = "the path leads outside the thread's artifact folder", body = Object),
        (status = 404, description = "no such thread, version or file", body = Object),
        (status = 413, description = "the file is larger than 16 MiB", body = Object))
)]
async fn file(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Response, ApiError> {
    app.threads.require(&id).await?;
    let relative = query
        .get("path")
        .ok_or_else(|| ApiError::invalid("path", "missing: give the file's path in the folder"))?
        .to_string();
    let folder = artifacts::list(&app, &id, query.get("version")).await?;
    let Some(shown) = folder.shown else {
        return Err(ApiError::not_found(format!(
            "thread `{id}` has no artifact folder yet: its graph writes its files when a run \
             of it ends"
        )));
    };
    let full = file_in(&shown.dir, &relative)?;
    let size = tokio::fs::metadata(&full)
        .await
        .map_err(ApiError::internal)?
        .len();
    if size > LARGEST_FILE {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "{relative} is {size} bytes, more than the 16 MiB served: open it at {}",
                full.display()
            ),
        ));
    }
    let bytes = tokio::fs::read(&full).await.map_err(ApiError::internal)?;
    let kind = content_type(&relative, std::str::from_utf8(&bytes).is_ok());
    Ok((
        [
            (header::CONTENT_TYPE, kind),
            // A file a graph wrote is never read as another type (say, HTML) by a browser.
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        bytes,
    )
        .into_response())
}
