//! What a search or a namespace listing selects: one definition every backend applies to the
//! items it scanned, so filters, order and paging agree across backends.

use super::{Item, Namespace, NamespaceQuery, SearchHit, Store, StoreError};
use std::collections::BTreeSet;

/// True when `namespace` starts with `prefix` (`"*"` in the prefix matches any one label).
///
/// ```
/// # use stategraph_checkpoint::store::namespace_matches;
/// let ns = vec!["users".to_string(), "ada".to_string()];
/// assert!(namespace_matches(&ns, &["users".into()]));
/// assert!(namespace_matches(&ns, &["*".into(), "ada".into()]));
/// assert!(!namespace_matches(&ns, &["teams".into()]));
/// ```
pub fn namespace_matches(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len()
        && namespace
            .iter()
            .zip(prefix)
            .all(|(label, want)| want == "*" || label == want)
}

/// True when `value` has every field of `filter` with an equal value. A dotted name reaches
/// into nested objects; a filter on a field whose value is an array also matches an array
/// holding the wanted value. A wanted value that is an object of comparisons (`$eq`, `$ne`,
/// `$gt`, `$gte`, `$lt`, `$lte`, as LangGraph's stores take them) holds when each does:
/// numbers compare as numbers, text as text, anything else only for (in)equality; a missing
/// field meets only `$ne`.
///
/// ```
/// # use stategraph_checkpoint::store::filter_matches;
/// let value = serde_json::json!({"kind": "pref", "user": {"name": "ada"}, "tags": ["a", "b"], "score": 4.5});
/// let filter = serde_json::json!({"user.name": "ada", "tags": "b"});
/// assert!(filter_matches(&value, filter.as_object().unwrap()));
/// let filter = serde_json::json!({"score": {"$gt": 4, "$lte": 4.5}, "kind": {"$ne": "fact"}});
/// assert!(filter_matches(&value, filter.as_object().unwrap()));
/// let filter = serde_json::json!({"score": {"$lt": 4}});
/// assert!(!filter_matches(&value, filter.as_object().unwrap()));
/// ```
pub fn filter_matches(
    value: &serde_json::Value,
    filter: &serde_json::Map<String, serde_json::Value>,
) -> bool {
    filter.iter().all(|(field, want)| {
        let mut at = Some(value);
        for part in field.split('.') {
            at = at.and_then(|v| v.get(part));
        }
        match comparisons(want) {
            Some(ops) => ops.iter().all(|(op, operand)| compares(at, op, operand)),
            None => at.is_some_and(|found| equals(found, want)),
        }
    })
}

/// The comparisons a filter may ask of a field ([`filter_matches`]) beside plain equality.
pub const FILTER_OPERATORS: [&str; 6] = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"];

/// The comparisons a filter's wanted value asks for, when it is an object of nothing else.
fn comparisons(want: &serde_json::Value) -> Option<&serde_json::Map<String, serde_json::Value>> {
    want.as_object()
        .filter(|ops| !ops.is_empty() && ops.keys().all(|k| FILTER_OPERATORS.contains(&k.as_str())))
}

/// Plain equality, or an array holding the wanted value.
fn equals(found: &serde_json::Value, want: &serde_json::Value) -> bool {
    found == want || found.as_array().is_some_and(|items| items.contains(want))
}

/// Whether `found` (absent: `None`) meets one comparison.
fn compares(found: Option<&serde_json::Value>, op: &str, operand: &serde_json::Value) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let Some(found) = found else {
        return op == "$ne";
    };
    let order = match (found, operand) {
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (serde_json::Value::String(a), serde_json::Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match op {
        "$eq" => equals(found, operand) || order == Some(Equal),
        "$ne" => !(equals(found, operand) || order == Some(Equal)),
        "$gt" => order == Some(Greater),
        "$gte" => matches!(order, Some(Greater | Equal)),
        "$lt" => order == Some(Less),
        "$lte" => matches!(order, Some(Less | Equal)),
        _ => false,
    }
}

/// Items in a listing's order (most recently updated first, then by namespace and key), one
/// page of them.
pub fn page(mut items: Vec<Item>, offset: usize, limit: usize) -> Vec<SearchHit> {
    items.sort_by(|a, b| {
        b.updated_at_ms
            .cmp(&a.updated_at_ms)
            .then_with(|| a.namespace.cmp(&b.namespace))
            .then_with(|| a.key.cmp(&b.key))
    });
    let limit = if limit == 0 { usize::MAX } else { limit };
    items
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|item| SearchHit { item, score: None })
        .collect()
}

/// The namespaces `query` selects from those holding live items: matched by prefix and suffix,
/// cut to its depth, sorted, without repeats, one page.
pub fn select_namespaces<'a>(
    namespaces: impl IntoIterator<Item = &'a Namespace>,
    query: &NamespaceQuery,
) -> Vec<Namespace> {
    let mut out = BTreeSet::new();
    for ns in namespaces {
        if !namespace_matches(ns, &query.prefix) {
            continue;
        }
        if !query.suffix.is_empty() {
            let reversed: Vec<String> = ns.iter().rev().cloned().collect();
            let suffix: Vec<String> = query.suffix.iter().rev().cloned().collect();
            if !namespace_matches(&reversed, &suffix) {
                continue;
            }
        }
        let cut = match query.max_depth {
            Some(depth) => ns.iter().take(depth).cloned().collect(),
            None => ns.clone(),
        };
        out.insert(cut);
    }
    let limit = if query.limit == 0 {
        usize::MAX
    } else {
        query.limit
    };
    out.into_iter().skip(query.offset).take(limit).collect()
}

/// The TTLs of a page of hits refreshed as `refresh_ttl` (or, when `None`, `inner`'s default)
/// says, by reading each again through `inner` with that choice: a wrapper that selects more
/// than it returns (ranking, filtering after opening) refreshes only what it returns. An item
/// gone meanwhile is kept as it was read.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use stategraph_checkpoint::store::{refresh_page, FakeClock, MemoryStore, SearchRequest, Store, StoreOp};
/// let clock = Arc::new(FakeClock::at(0));
/// let store = MemoryStore::with_clock(clock.clone());
/// store.batch(&[StoreOp::put(&["n"], "k", 1.into()).with_ttl_ms(100)]).await?;
/// let hits = store.search(&SearchRequest::under(&["n"]).refresh_ttl(false)).await?;
/// clock.advance(50);
/// let hits = refresh_page(&store, hits, Some(true)).await?;
/// assert_eq!(hits[0].item.expires_at_ms, Some(150));
/// # Ok::<(), stategraph_checkpoint::store::StoreError>(()) }).unwrap();
/// ```
pub async fn refresh_page(
    inner: &dyn Store,
    mut hits: Vec<SearchHit>,
    refresh_ttl: Option<bool>,
) -> Result<Vec<SearchHit>, StoreError> {
    if refresh_ttl == Some(false) {
        return Ok(hits);
    }
    for hit in &mut hits {
        if hit.item.ttl_ms.is_none() {
            continue;
        }
        if let Some(fresh) = inner
            .get_with(&hit.item.namespace, &hit.item.key, refresh_ttl)
            .await?
        {
            hit.item.expires_at_ms = fresh.expires_at_ms;
        }
    }
    Ok(hits)
}
