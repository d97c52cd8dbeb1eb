//! The long-term store over `/store` (LangGraph's routes): what a client puts a node reads and
//! the reverse; items got, searched (filters with comparisons, a text query that ranks),
//! namespaces listed, items deleted and expired; and each bad field refused by name.

use super::support::TestServer;
use serde_json::{json, Value};
use std::time::Duration;

async fn put(s: &TestServer, body: Value) {
    let (status, answer) = s.call("PUT", "/store/items", Some(body.clone())).await;
    assert_eq!(status, 204, "PUT /store/items {body}: {answer}");
}

/// A 422 whose message starts with `field`.
async fn refused(s: &TestServer, method: &str, path: &str, body: Option<Value>, field: &str) {
    let (status, answer) = s.call(method, path, body.clone()).await;
    assert_eq!(status, 422, "{method} {path} {body:?}: {answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("{field}: ")), "{message}");
}

fn keys(found: &Value) -> Vec<&str> {
    found["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_client_and_a_node_share_the_long_term_store() {
    let s = TestServer::start().await;
    put(
        &s,
        json!({"namespace": ["prefs", "ada"], "key": "tone", "value": {"tone": "brief"}}),
    )
    .await;
    let run = json!({"assistant_id": "recall", "input": {"who": "ada"}});
    let done = s.post("/runs/wait", run).await;
    assert_eq!(done["tone"], "brief", "the node read what the client put");
    // What the node put is there once its step was saved.
    let seen = s.get("/store/items?namespace=seen.ada&key=last").await;
    assert_eq!(seen["namespace"], json!(["seen", "ada"]));
    assert_eq!(seen["value"], json!({"tone": "brief"}));
}

#[tokio::test]
async fn items_are_put_got_searched_listed_and_deleted() {
    let s = TestServer::start().await;
    let missing = s.get("/store/items?namespace=docs.ada&key=nope").await;
    assert_eq!(
        missing,
        Value::Null,
        "no item is null, as LangGraph answers"
    );

    let docs = [
        (
            "a",
            json!({"title": "tea notes", "stars": 5, "kind": "note"}),
        ),
        (
            "b",
            json!({"title": "sled internals", "stars": 3, "kind": "note"}),
        ),
        (
            "c",
            json!({"title": "tea shops", "stars": 4, "kind": "list"}),
        ),
    ];
    for (key, value) in &docs {
        let body = json!({"namespace": ["docs", "ada"], "key": key, "value": value});
        put(&s, body).await;
    }
    put(
        &s,
        json!({"namespace": ["docs", "bo", "old"], "key": "z", "value": {"title": "x"}}),
    )
    .await;

    let first = s.get("/store/items?namespace=docs.ada&key=a").await;
    assert_eq!(first["value"]["title"], "tea notes");
    assert_eq!(first["created_at"], first["updated_at"]);
    put(
        &s,
        json!({"namespace": ["docs", "ada"], "key": "a", "value": {"title": "tea notes", "stars": 2, "kind": "note"}}),
    )
    .await;
    let again = s.get("/store/items?namespace=docs.ada&key=a").await;
    assert_eq!(again["value"]["stars"], 2);
    assert_eq!(again["created_at"], first["created_at"], "kept on update");

    // Filters: equal fields and comparisons.
    let notes = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["docs", "ada"], "filter": {"kind": "note"}}),
        )
        .await;
    let mut found = keys(&notes);
    found.sort();
    assert_eq!(found, ["a", "b"]);
    let good = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["docs"], "filter": {"stars": {"$gte": 3, "$lt": 5}}}),
        )
        .await;
    let mut found = keys(&good);
    found.sort();
    assert_eq!(found, ["b", "c"]);
    // A text query ranks, and says each item's score.
    let tea = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["docs"], "query": "tea", "limit": 5}),
        )
        .await;
    let mut found = keys(&tea);
    found.sort();
    assert_eq!(found, ["a", "c"], "{tea}");
    assert!(tea["items"][0]["score"].is_number(), "{tea}");
    // Paging, and a limit of none.
    let page = s
        .post(
            "/store/items/search",
            json!({"namespace_prefix": ["docs"], "limit": 2, "offset": 1}),
        )
        .await;
    assert_eq!(keys(&page).len(), 2);
    let none = s.post("/store/items/search", json!({"limit": 0})).await;
    assert_eq!(none, json!({"items": []}));

    let listed = s
        .post(
            "/store/namespaces",
            json!({"prefix": ["docs"], "max_depth": 2}),
        )
        .await;
    assert_eq!(
        listed,
        json!({"namespaces": [["docs", "ada"], ["docs", "bo"]]})
    );
    let by_end = s
        .post("/store/namespaces", json!({"suffix": ["old"]}))
        .await;
    assert_eq!(by_end, json!({"namespaces": [["docs", "bo", "old"]]}));

    let (status, _) = s
        .call(
            "DELETE",
            "/store/items",
            Some(json!({"namespace": ["docs", "ada"], "key": "a"})),
        )
        .await;
    assert_eq!(status, 204);
    let gone = s.get("/store/items?namespace=docs.ada&key=a").await;
    assert_eq!(gone, Value::Null);
}

#[tokio::test]
async fn an_item_with_a_time_to_live_expires() {
    let s = TestServer::start().await;
    // 0.002 minutes: 120 ms.
    put(
        &s,
        json!({"namespace": ["tmp"], "key": "k", "value": {"v": 1}, "ttl": 0.002}),
    )
    .await;
    put(
        &s,
        json!({"namespace": ["tmp"], "key": "kept", "value": {"v": 2}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let expired = s.get("/store/items?namespace=tmp&key=k").await;
    assert_eq!(expired, Value::Null);
    let kept = s.get("/store/items?namespace=tmp&key=kept").await;
    assert_eq!(kept["value"], json!({"v": 2}));
}

#[tokio::test]
async fn each_bad_field_is_refused_by_name() {
    let s = TestServer::start().await;
    let put_with = |namespace: Value, key: &str, value: Value| {
        Some(json!({"namespace": namespace, "key": key, "value": value}))
    };
    let body = put_with(json!(["a.b"]), "k", json!({}));
    refused(&s, "PUT", "/store/items", body, "namespace").await;
    let body = put_with(json!([]), "k", json!({}));
    refused(&s, "PUT", "/store/items", body, "namespace").await;
    let body = put_with(json!(["a"]), "", json!({}));
    refused(&s, "PUT", "/store/items", body, "key").await;
    let body = put_with(json!(["a"]), "k", json!("text"));
    refused(&s, "PUT", "/store/items", body, "value").await;
    let body = json!({"namespace": ["a"], "key": "k", "value": {}, "ttl": -1});
    refused(&s, "PUT", "/store/items", Some(body), "ttl").await;
    let body = json!({"namespace": ["a"], "key": "k", "value": {}, "index": ["title"]});
    refused(&s, "PUT", "/store/items", Some(body), "index").await;
    let body = json!({"namespace": "a", "key": "k", "value": {}});
    refused(&s, "PUT", "/store/items", Some(body), "namespace").await;
    refused(&s, "GET", "/store/items?key=k", None, "namespace").await;
    refused(&s, "GET", "/store/items?namespace=a", None, "key").await;
    let path = "/store/items?namespace=a&key=k&refresh_ttl=maybe";
    refused(&s, "GET", path, None, "refresh_ttl").await;
    let body = json!({"filter": {"stars": {"$between": [1, 2]}}});
    refused(
        &s,
        "POST",
        "/store/items/search",
        Some(body),
        "filter.stars",
    )
    .await;
    let body = json!({"namespace": ["a"], "key": ""});
    refused(&s, "DELETE", "/store/items", Some(body), "key").await;
    let (status, answer) = s
        .call("DELETE", "/store/items", Some(json!({"namespace": ["a"]})))
        .await;
    assert_eq!(status, 422);
    assert_eq!(answer["message"], "body: missing field `key`");
}
