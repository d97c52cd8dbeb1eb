//! Assistants: the registered graphs, each an assistant whose id is its name. Search, get, the
//! graph's drawing as nodes and edges, and its schemas.

use super::AppState;
use crate::app::App;
use crate::error::ApiError;
use crate::extract::{Body, Query};
use crate::shapes::iso;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph_registry::{input_schema, DrawFormat, Resolved};
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(count))
        .routes(routes!(get_one))
        .routes(routes!(versions))
        .routes(routes!(graph))
        .routes(routes!(schemas))
        .routes(routes!(subgraphs))
}

/// LangGraph's `Assistant` for a graph as the registry lists it: `id` is its registered name,
/// or the path of a graph file of `./graphs/` that no name resolves to; `graph_id` the graph it
/// builds; `description` its graph file's, else its factory's.
fn assistant_json(app: &App, id: &str, resolved: &Resolved) -> Value {
    let at = iso(app.started_at_ms);
    let description = match resolved.file.description.as_str() {
        "" => resolved.factory.description(),
        own => own,
    };
    json!({
        "assistant_id": id,
        "graph_id": resolved.file.graph,
        "name": id,
        "description": description,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": at,
        "updated_at": at,
    })
}

#[derive(Debug, Default, Deserialize)]
struct SearchRequest {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    graph_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// What the registry lists (as `graph graphs` does: the registered graphs as their names
/// resolve here, then the other graph files of `./graphs/`), filtered. A graph file that
/// cannot be used is left out and logged; `GET /assistants/{id}` says what is wrong with it.
fn matching(app: &App, req: &SearchRequest) -> Vec<Value> {
    let listing = app.assistants.registry.listing();
    for bad in &listing.bad_files {
        tracing::warn!(file = %bad.source, error = %bad.error, "a graph file cannot be used");
    }
    listing
        .graphs
        .iter()
        .map(|g| assistant_json(app, &g.name, &g.resolved))
        .filter(|a| {
            let graph_id = a["graph_id"].as_str().unwrap_or_default();
            let name = a["name"].as_str().unwrap_or_default();
            req.graph_id
                .as_deref()
                .is_none_or(|g| g == graph_id || g == name)
                && req.name.as_deref().is_none_or(|n| name.contains(n))
        })
        .filter(|a| {
            let empty = Map::new();
            let metadata = a["metadata"].as_object().unwrap_or(&empty);
            req.metadata
                .as_ref()
                .is_none_or(|m| crate::threads::matches(metadata, m))
        })
        .collect()
}

#[utoipa::path(
    post,
    path = "/assistants/search",
    tag = "assistants",
    summary = "Registered graphs, filtered",
    request_body(content = Object, description = "graph_id, name, metadata, limit, offset"),
    responses((status = 200, description = "assistants", body = Object))
)]
async fn search(State(app): State<AppState>, Body(req): Body<SearchRequest>) -> Json<Value> {
    let (offset, limit) = (req.offset.unwrap_or(0), req.limit.unwrap_or(10));
    let found: Vec<Value> = matching(&app, &req)
        .into_iter()
        .skip(offset)
        .take(limit)
        .collect();
    Json(Value::Array(found))
}

#[utoipa::path(
    post,
    path = "/assistants/count",
    tag = "assistants",
    summary = "How many registered graphs fit",
    request_body(content = Object, description = "graph_id, name, metadata"),
    responses((status = 200, description = "a number", body = Object))
)]
async fn count(State(app): State<AppState>, Body(req): Body<SearchRequest>) -> Json<Value> {
    Json(json!(matching(&app, &req).len()))
}

#[utoipa::path(
    get,
    path = "/assistants/{id}",
    tag = "assistants",
    summary = "One assistant",
    params(("id" = String, Path, description = "the assistant's id (a registered graph's name)")),
    responses((status = 200, description = "the assistant", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn get_one(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = app.assistants.get(&id)?;
    Ok(Json(assistant_json(&app, &a.id, &a.resolved)))
}

#[derive(Debug, Default, Deserialize)]
struct VersionsRequest {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// An assistant is its graph as this binary registered it, so it has one version, the one
/// `GET /assistants/{id}` answers (LangGraph's clients list versions before pinning one).
#[utoipa::path(
    post,
    path = "/assistants/{id}/versions",
    tag = "assistants",
    summary = "An assistant's versions: its one",
    params(("id" = String, Path, description = "the assistant's id (a registered graph's name)")),
    request_body(content = Object, description = "metadata, limit, offset"),
    responses((status = 200, description = "versions: the assistant as version 1 (none when the filter or the page leaves it out)", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn versions(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<VersionsRequest>,
) -> Result<Json<Value>, ApiError> {
    let a = app.assistants.get(&id)?;
    let one = assistant_json(&app, &a.id, &a.resolved);
    let empty = Map::new();
    let metadata = one["metadata"].as_object().unwrap_or(&empty);
    let fits = req
        .metadata
        .as_ref()
        .is_none_or(|m| crate::threads::matches(metadata, m));
    let listed: Vec<Value> = std::iter::once(one)
        .filter(|_| fits)
        .skip(req.offset.unwrap_or(0))
        .take(req.limit.unwrap_or(10))
        .collect();
    Ok(Json(Value::Array(listed)))
}

/// The graph as LangGraph's drawing JSON: nodes (`__start__`, `__end__` and the graph's own)
/// and edges, conditional ones marked. With `?format=mermaid`, the Mermaid text as well.
#[utoipa::path(
    get,
    path = "/assistants/{id}/graph",
    tag = "assistants",
    summary = "The graph drawn as nodes and edges",
    params(("id" = String, Path, description = "the assistant's id (a registered graph's name)"), ("format" = Option<String>, Query, description = "mermaid adds the Mermaid text"), ("xray" = Option<String>, Query, description = "subgraph depth (or true)")),
    responses((status = 200, description = "nodes and edges", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn graph(
    State(app): State<AppState>,
    Path(id): Path<String>,
    query: Query,
) -> Result<Json<Value>, ApiError> {
    let a = app.assistants.get(&id)?;
    // LangGraph's clients send a flag or a depth.
    let xray = match query.get("xray").map(str::to_ascii_lowercase).as_deref() {
        Some("true") => 1,
        Some("false") => 0,
        _ => query.number("xray", 0)?,
    };
    let mut drawing = drawing_from_dot(&a.graph.draw(DrawFormat::Dot, 0));
    if query.get("format") == Some("mermaid") {
        drawing["mermaid"] = json!(a.graph.draw(DrawFormat::Mermaid, xray));
    }
    Ok(Json(drawing))
}

#[utoipa::path(
    get,
    path = "/assistants/{id}/schemas",
    tag = "assistants",
    summary = "Input and output schemas",
    params(("id" = String, Path, description = "the assistant's id (a registered graph's name)")),
    responses((status = 200, description = "schemas", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn schemas(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = app.assistants.get(&id)?;
    let factory = a.resolved.factory.as_ref();
    let field_schema = |field: Option<&str>, title: &str| {
        json!({
            "title": title,
            "type": "object",
            "properties": field.map(|f| json!({ f: {} })).unwrap_or_else(|| json!({})),
            "required": field.map(|f| vec![f]).unwrap_or_default(),
        })
    };
    Ok(Json(json!({
        "graph_id": a.id,
        "input_schema": input_schema(factory),
        "output_schema": field_schema(factory.output_field(), &format!("{}Output", a.id)),
        "state_schema": {"title": format!("{}State", a.id), "type": "object"},
        "config_schema": null,
        "context_schema": null,
    })))
}

#[utoipa::path(
    get,
    path = "/assistants/{id}/subgraphs",
    tag = "assistants",
    summary = "Subgraphs (none are listed)",
    params(("id" = String, Path, description = "the assistant's id (a registered graph's name)")),
    responses((status = 200, description = "an empty object", body = Object), (status = 404, description = "no such thread, assistant or run", body = Object))
)]
async fn subgraphs(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.assistants.get(&id)?;
    Ok(Json(json!({})))
}

/// Nodes and edges read back from the engine's DOT drawing (the one structured drawing it
/// makes): `"name" [shape=...];` and `"from" -> "to" [style=dashed, label="..."];` lines.
fn drawing_from_dot(dot: &str) -> Value {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for line in dot.lines().map(str::trim).filter(|l| l.starts_with('"')) {
        let Some((from, rest)) = quoted(line) else {
            continue;
        };
        if let Some(after) = rest.trim_start().strip_prefix("->") {
            let Some((to, attrs)) = quoted(after.trim_start()) else {
                continue;
            };
            let label = attrs
                .find("label=")
                .and_then(|i| quoted(&attrs[i + 6..]))
                .map(|(l, _)| l);
            edges.push(json!({
                "source": from,
                "target": to,
                "conditional": attrs.contains("style=dashed"),
                "data": label,
            }));
        } else {
            let special = from == stategraph::START || from == stategraph::END;
            let (kind, data) = match special {
                true => ("schema", json!(from)),
                false => ("runnable", json!({"name": from})),
            };
            nodes.push(json!({"id": from, "type": kind, "data": data}));
        }
    }
    json!({ "nodes": nodes, "edges": edges })
}

/// The DOT string at the start of `s` (after its opening quote) and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.extend(chars.next().map(|(_, c)| c)),
            '"' => return Some((out, &body[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dot_drawing_reads_back_as_nodes_and_edges() {
        let dot =
            "digraph \"g\" {\n\trankdir=TB;\n\t\"__start__\" [label=\"START\", shape=oval];\n\
                   \t\"a \\\"b\\\"\" [shape=box];\n\t\"__start__\" -> \"a \\\"b\\\"\";\n\
                   \t\"a \\\"b\\\"\" -> \"__end__\" [style=dashed, label=\"route\"];\n}\n";
        let d = drawing_from_dot(dot);
        assert_eq!(d["nodes"][1]["id"], "a \"b\"");
        assert_eq!(d["nodes"][0]["type"], "schema");
        assert_eq!(d["edges"][0]["conditional"], false);
        assert_eq!(d["edges"][1]["target"], "__end__");
        assert_eq!(d["edges"][1]["conditional"], true);
        assert_eq!(d["edges"][1]["data"], "route");
    }
}
