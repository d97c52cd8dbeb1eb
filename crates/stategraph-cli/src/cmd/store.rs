//! `graph store ls|get|put|rm|search`: the long-term store beside the threads of `--db`
//! (`long_term.rs`), where agents keep what users told them across threads. A namespace is
//! written with its labels joined by `/` (`users/ada/prefs`).

use crate::error::{bad_input, EXIT_DONE, EXIT_FAILURE};
use crate::{format_time, out, Ctx};
use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};
use stategraph::checkpoint::store::{
    Item, NamespaceQuery, SearchRequest, Store, StoreError, StoreOp,
};
use std::sync::Arc;

/// `graph store`.
#[derive(Args, Debug)]
pub(crate) struct StoreArgs {
    #[command(subcommand)]
    pub action: StoreAction,
    /// Print JSON (one document on stdout).
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum StoreAction {
    /// List the namespaces holding items (under PREFIX).
    Ls {
        /// Only namespaces starting with these labels (`users/ada`; `*` matches any one label).
        prefix: Option<String>,
        /// Only namespaces ending with these labels.
        #[arg(long)]
        suffix: Option<String>,
        /// Cut longer namespaces to this many labels.
        #[arg(long)]
        depth: Option<usize>,
    },
    /// Show one item.
    Get {
        /// Its namespace (`users/ada`).
        namespace: String,
        /// Its key.
        key: String,
    },
    /// Put an item: VALUE is JSON (text that is not JSON is kept as a string).
    Put {
        /// Its namespace (`users/ada`).
        namespace: String,
        /// Its key.
        key: String,
        /// Its value.
        value: String,
        /// Remove it this long after the put (90s, 10m, 12h, 30d).
        #[arg(long, value_name = "DURATION", value_parser = parse_ttl)]
        ttl: Option<u64>,
    },
    /// Delete an item.
    Rm {
        /// Its namespace (`users/ada`).
        namespace: String,
        /// Its key.
        key: String,
    },
    /// Find items under PREFIX by field values and text, newest (or best match) first.
    Search {
        /// Only items whose namespace starts with these labels.
        prefix: Option<String>,
        /// Words to look for (by meaning when GRAPH_EMBEDDINGS_URL is set).
        #[arg(long)]
        query: Option<String>,
        /// Only items whose value has FIELD equal to VALUE (JSON, or text), or compared with it
        /// (`stars>=3`: also `!=`, `>`, `<`, `<=`; numbers as numbers, text as text); repeatable,
        /// all must hold; a dotted FIELD reaches into objects.
        #[arg(long = "filter", value_name = "FIELD=VALUE")]
        filters: Vec<String>,
        /// At most this many.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Skip this many first.
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
}

/// Milliseconds from `90s`, `10m`, `12h`, `30d`.
fn parse_ttl(text: &str) -> Result<u64, String> {
    let bad =
        || format!("`{text}` is not a duration: write a number and a unit: 90s, 10m, 12h, 30d");
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let number: u64 = t[..split].parse().map_err(|_| bad())?;
    let unit: u64 = match &t[split..] {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit) {
        Some(0) => Err(format!("`{text}` is no time at all: give a TTL above zero")),
        Some(ms) => Ok(ms),
        None => Err(bad()),
    }
}

/// `users/ada` as labels.
fn labels(text: &str) -> Vec<String> {
    text.split('/')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// JSON as given, or the text itself as a string.
/// `FIELD=VALUE`, or a comparison (`stars>=3`, `kind!=fact`): the field, the store's operator
/// (`None` for plain equality) and the value's text.
fn comparison(text: &str) -> Option<(&str, Option<&'static str>, &str)> {
    let at = text.find(['=', '!', '<', '>'])?;
    let (field, rest) = text.split_at(at);
    let (op, len) = match rest.as_bytes() {
        [b'!', b'=', ..] => (Some("$ne"), 2),
        [b'>', b'=', ..] => (Some("$gte"), 2),
        [b'<', b'=', ..] => (Some("$lte"), 2),
        [b'>', ..] => (Some("$gt"), 1),
        [b'<', ..] => (Some("$lt"), 1),
        [b'=', ..] => (None, 1),
        _ => return None,
    };
    let field = field.trim();
    (!field.is_empty()).then(|| (field, op, rest[len..].trim()))
}

/// Adds one condition on `field`: an equality alone as the plain value; conditions together in
/// one object of operators (`{"$gte": 3, "$lt": 5}`), all of which must hold.
fn add_filter(filter: &mut Map<String, Value>, field: &str, op: Option<&str>, value: Value) {
    let op = match op {
        None if !filter.contains_key(field) => {
            filter.insert(field.to_string(), value);
            return;
        }
        None => "$eq",
        Some(op) => op,
    };
    let mut ops = match filter.remove(field) {
        Some(Value::Object(ops)) if !ops.is_empty() && ops.keys().all(|k| k.starts_with('$')) => {
            ops
        }
        Some(plain) => Map::from_iter([("$eq".to_string(), plain)]),
        None => Map::new(),
    };
    ops.insert(op.to_string(), value);
    filter.insert(field.to_string(), Value::Object(ops));
}

fn value_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn item_json(item: &Item, score: Option<f32>) -> Value {
    let mut v = json!({
        "namespace": item.namespace,
        "key": item.key,
        "value": item.value,
        "created_at_ms": item.created_at_ms,
        "updated_at_ms": item.updated_at_ms,
        "expires_at_ms": item.expires_at_ms,
    });
    if let Some(score) = score {
        v["score"] = json!(score);
    }
    v
}

fn item_line(item: &Item, score: Option<f32>) -> String {
    let score = score.map(|s| format!(" ({s:.3})")).unwrap_or_default();
    let expires = item
        .expires_at_ms
        .map(|at| format!(", expires {}", format_time(at)))
        .unwrap_or_default();
    format!(
        "{}  {}{score}  {}  [updated {}{expires}]",
        item.namespace.join("/"),
        item.key,
        item.value,
        format_time(item.updated_at_ms)
    )
}

/// A refusal of what was asked (a bad namespace or key) is a usage error; the rest fail.
fn store_error(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::InvalidNamespace { .. } | StoreError::InvalidKey { .. } => {
            bad_input(e.to_string())
        }
        // A key missing or wrong is the command's configuration (exit 2), as for threads.
        StoreError::Sealed { fault, .. }
            if fault != stategraph::checkpoint::SealFault::Tampered =>
        {
            bad_input(format!(
                "{e} (keys come from GRAPH_ENCRYPTION_KEY or GRAPH_ENCRYPTION_KEY_FILE)"
            ))
        }
        other => anyhow::Error::new(other),
    }
}

pub(crate) async fn store(ctx: &Ctx, args: StoreArgs) -> anyhow::Result<u8> {
    let reading = matches!(
        args.action,
        StoreAction::Ls { .. } | StoreAction::Get { .. } | StoreAction::Search { .. }
    );
    let store = crate::long_term::open(&ctx.store, reading).map_err(store_error)?;
    let json = args.json;
    match args.action {
        StoreAction::Ls {
            prefix,
            suffix,
            depth,
        } => {
            let query = NamespaceQuery {
                prefix: prefix.as_deref().map(labels).unwrap_or_default(),
                suffix: suffix.as_deref().map(labels).unwrap_or_default(),
                max_depth: depth,
                ..NamespaceQuery::default()
            };
            let spaces = store.list_namespaces(&query).await.map_err(store_error)?;
            if json {
                out(&format!("{:#}", json!(spaces)));
            } else if spaces.is_empty() {
                say!("no items in the long-term store{}", under(&prefix));
            } else {
                spaces.iter().for_each(|ns| out(&ns.join("/")));
            }
            Ok(EXIT_DONE)
        }
        StoreAction::Get { namespace, key } => get(ctx, &store, &namespace, &key, json).await,
        StoreAction::Put {
            namespace,
            key,
            value,
            ttl,
        } => {
            let op = StoreOp::Put {
                namespace: labels(&namespace),
                key: key.clone(),
                value: value_of(&value),
                ttl_ms: ttl,
            };
            store.batch(&[op]).await.map_err(store_error)?;
            let item = store
                .get(&labels(&namespace), &key)
                .await
                .map_err(store_error)?;
            match (json, item) {
                (true, Some(item)) => out(&format!("{:#}", item_json(&item, None))),
                (false, Some(item)) => say!("put {}", item_line(&item, None)),
                (_, None) => {}
            }
            Ok(EXIT_DONE)
        }
        StoreAction::Rm { namespace, key } => {
            let ns = labels(&namespace);
            let there = store.get(&ns, &key).await.map_err(store_error)?.is_some();
            let op = StoreOp::Delete {
                namespace: ns,
                key: key.clone(),
            };
            store.batch(&[op]).await.map_err(store_error)?;
            if json {
                out(&format!("{:#}", json!({"deleted": there})));
            } else if there {
                say!("deleted `{key}` from {namespace}");
            } else {
                say!("no item `{key}` in {namespace}: nothing to delete");
            }
            Ok(EXIT_DONE)
        }
        StoreAction::Search {
            prefix,
            query,
            filters,
            limit,
            offset,
        } => {
            let mut request = SearchRequest {
                namespace_prefix: prefix.as_deref().map(labels).unwrap_or_default(),
                query,
                limit,
                offset,
                ..SearchRequest::default()
            };
            for f in &filters {
                let (field, op, value) = comparison(f).ok_or_else(|| {
                    bad_input(format!(
                        "--filter `{f}` is not FIELD=VALUE (kind=note) or a comparison (stars>=3)"
                    ))
                })?;
                add_filter(&mut request.filter, field, op, value_of(value));
            }
            let hits = store.search(&request).await.map_err(store_error)?;
            if json {
                let list: Vec<Value> = hits.iter().map(|h| item_json(&h.item, h.score)).collect();
                out(&format!("{:#}", Value::Array(list)));
            } else if hits.is_empty() {
                say!("no items match{}", under(&prefix));
            } else {
                hits.iter().for_each(|h| out(&item_line(&h.item, h.score)));
            }
            Ok(EXIT_DONE)
        }
    }
}

fn under(prefix: &Option<String>) -> String {
    prefix
        .as_deref()
        .map(|p| format!(" under {p}"))
        .unwrap_or_default()
}

async fn get(
    ctx: &Ctx,
    store: &Arc<dyn Store>,
    namespace: &str,
    key: &str,
    json: bool,
) -> anyhow::Result<u8> {
    match store
        .get(&labels(namespace), key)
        .await
        .map_err(store_error)?
    {
        Some(item) if json => out(&format!("{:#}", item_json(&item, None))),
        Some(item) => out(&format!("{:#}", item.value)),
        None => {
            if json {
                out("null");
            }
            let list = ctx.command_line(&["store", "search", namespace]);
            say!("no item `{key}` in {namespace} (list what is there: {list})");
            return Ok(EXIT_FAILURE);
        }
    }
    Ok(EXIT_DONE)
}
