//! Text and semantic queries over real backends (memory and sled); the semantic ones against
//! a local stand-in for an OpenAI-compatible `/embeddings` endpoint on 127.0.0.1.

use serde_json::{json, Value};
use stategraph_checkpoint::store::{MemoryStore, SearchHit, SearchRequest, Store, StoreError};
use stategraph_llm::http::HttpSettings;
use stategraph_sled::SledStore;
use stategraph_store::{Embedder, IndexFields, IndexedStore};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn keys(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.item.key.as_str()).collect()
}

async fn fill(store: &dyn Store) {
    let notes = [
        ("n1", "ada", "prefers short answers without bullet points"),
        ("n2", "ada", "her cat is called Miso"),
        (
            "n3",
            "ada",
            "works on a Rust compiler; answers in Rust please",
        ),
        ("n4", "bo", "prefers long answers"),
    ];
    for (key, user, text) in notes {
        let value = json!({"text": text, "kind": "note", "by": "assistant"});
        store.put(&["users", user], key, value).await.unwrap();
    }
}

async fn text_search_ranks_within_the_selection(backend: Arc<dyn Store>) {
    let store = IndexedStore::new(backend).unwrap();
    fill(&store).await;
    let ada = SearchRequest::under(&["users", "ada"]).text("answers");
    let hits = store.search(&ada).await.unwrap();
    assert_eq!(
        keys(&hits).len(),
        2,
        "bo's note is outside the prefix: {hits:?}"
    );
    assert!(keys(&hits).contains(&"n1") && keys(&hits).contains(&"n3"));
    assert!(hits.iter().all(|h| h.score.is_some_and(|s| s > 0.0)));
    let rust = store
        .search(&SearchRequest::under(&["users"]).text("rust compiler"))
        .await
        .unwrap();
    assert_eq!(keys(&rust)[0], "n3");
    let filtered = SearchRequest::under(&["users"])
        .text("answers")
        .filter("kind", "other");
    assert!(store.search(&filtered).await.unwrap().is_empty());
    let paged = SearchRequest::under(&["users"])
        .text("answers")
        .limit(1)
        .offset(1);
    assert_eq!(store.search(&paged).await.unwrap().len(), 1);
    let none = SearchRequest::under(&["users"]).text("zebra");
    assert!(store.search(&none).await.unwrap().is_empty());

    // An update is searched as it is now; a deleted item is gone.
    store
        .put(
            &["users", "ada"],
            "n2",
            json!({"text": "her dog is called Miso"}),
        )
        .await
        .unwrap();
    let cat = SearchRequest::under(&["users"]).text("cat");
    assert!(store.search(&cat).await.unwrap().is_empty());
    let dog = SearchRequest::under(&["users"]).text("dog");
    assert_eq!(keys(&store.search(&dog).await.unwrap()), ["n2"]);
    store.delete(&["users", "ada"], "n2").await.unwrap();
    assert!(store.search(&dog).await.unwrap().is_empty());
}

#[tokio::test]
async fn text_search_over_memory() {
    text_search_ranks_within_the_selection(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn text_search_over_sled() {
    let dir = tempfile::tempdir().unwrap();
    let sled = SledStore::open(dir.path().join("items")).unwrap();
    text_search_ranks_within_the_selection(Arc::new(sled)).await;
}

#[tokio::test]
async fn only_the_chosen_fields_are_searched_and_writes_through_another_handle_are_seen() {
    let backend: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let reader = IndexedStore::new(backend.clone())
        .unwrap()
        .fields(IndexFields::only(&["text"]));
    fill(&reader).await;
    let by = SearchRequest::under(&["users"]).text("assistant");
    assert!(
        reader.search(&by).await.unwrap().is_empty(),
        "`by` is not searched"
    );
    // Another process's write, straight to the backend, after the index was built.
    backend
        .put(
            &["users", "cy"],
            "n9",
            json!({"text": "allergic to peanuts"}),
        )
        .await
        .unwrap();
    let peanuts = SearchRequest::under(&["users"]).text("peanuts");
    assert_eq!(keys(&reader.search(&peanuts).await.unwrap()), ["n9"]);
}

/// The stand-in's vectors: one dimension per concept, so texts about the same thing point
/// the same way whatever their words.
const CONCEPTS: &[&[&str]] = &[
    &["dog", "puppy", "canine", "hound"],
    &["tea", "coffee", "drink", "beverage"],
    &["rust", "compiler", "programming", "code"],
];

fn vector(text: &str) -> Vec<f32> {
    let text = text.to_lowercase();
    let mut v: Vec<f32> = CONCEPTS
        .iter()
        .map(|words| words.iter().filter(|w| text.contains(*w)).count() as f32)
        .collect();
    v.push(0.1); // no text is the zero vector
    v
}

/// Answers `POST /embeddings` as OpenAI does, counting the inputs it embedded.
struct Embeddings(Arc<AtomicUsize>);

impl Respond for Embeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        self.0.fetch_add(inputs.len(), Ordering::SeqCst);
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                json!({"object": "embedding", "index": i, "embedding": vector(text.as_str().unwrap_or(""))})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": data, "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1}
        }))
    }
}

#[tokio::test]
async fn semantic_search_finds_by_meaning_and_embeds_each_item_version_once() {
    let server = MockServer::start().await;
    let embedded = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(Embeddings(embedded.clone()))
        .mount(&server)
        .await;
    let embedder = Embedder::with_http(
        &format!("{}/v1", server.uri()),
        "stand-in-embed",
        None,
        HttpSettings::for_tests(),
    )
    .unwrap();
    let store = IndexedStore::new(Arc::new(MemoryStore::new()))
        .unwrap()
        .with_embedder(embedder);
    store
        .put(&["m"], "pet", json!({"text": "I have a hound"}))
        .await
        .unwrap();
    store
        .put(&["m"], "drink", json!({"text": "Morning coffee, black"}))
        .await
        .unwrap();
    store
        .put(&["m"], "work", json!({"text": "Writing a compiler"}))
        .await
        .unwrap();

    let hits = store
        .search(&SearchRequest::under(&["m"]).text("puppy"))
        .await
        .unwrap();
    assert_eq!(
        keys(&hits)[0],
        "pet",
        "no shared word, same meaning: {hits:?}"
    );
    assert_eq!(hits.len(), 3, "every selected item is ranked");
    assert_eq!(
        embedded.load(Ordering::SeqCst),
        4,
        "three items and the query"
    );

    let hits = store
        .search(&SearchRequest::under(&["m"]).text("a cup of tea"))
        .await
        .unwrap();
    assert_eq!(keys(&hits)[0], "drink");
    assert_eq!(
        embedded.load(Ordering::SeqCst),
        5,
        "only the new query: items are cached"
    );

    store
        .put(&["m"], "pet", json!({"text": "learning programming"}))
        .await
        .unwrap();
    let hits = store
        .search(&SearchRequest::under(&["m"]).text("code"))
        .await
        .unwrap();
    assert_eq!(
        keys(&hits)[..2].iter().filter(|k| **k != "drink").count(),
        2
    );
    assert_eq!(
        embedded.load(Ordering::SeqCst),
        7,
        "the updated item and the query"
    );
    let request = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "stand-in-embed");
}

#[tokio::test]
async fn an_embeddings_endpoint_that_is_down_is_an_error_naming_it() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let embedder = Embedder::with_http(&url, "m", None, HttpSettings::for_tests()).unwrap();
    let store = IndexedStore::new(Arc::new(MemoryStore::new()))
        .unwrap()
        .with_embedder(embedder);
    store.put(&["m"], "a", json!("text")).await.unwrap();
    let err = store
        .search(&SearchRequest::under(&["m"]).text("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Search(_)), "{err:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// A text search asked to refresh TTLs refreshes the items it returns, and only those: the
/// items it ranked but did not return (past its limit) expire as put.
#[tokio::test]
async fn a_refreshing_text_search_refreshes_only_what_it_returns() {
    use stategraph_checkpoint::store::{FakeClock, StoreOp};
    let clock = Arc::new(FakeClock::at(0));
    let store = IndexedStore::new(Arc::new(MemoryStore::with_clock(clock.clone()))).unwrap();
    let note = |key: &str, text: &str| {
        StoreOp::put(&["n"], key, json!({ "text": text })).with_ttl_ms(1_000)
    };
    store
        .batch(&[
            note("best", "otters otters otters"),
            note("second", "otters and beavers"),
            note("other", "beavers only"),
        ])
        .await
        .unwrap();
    clock.advance(600);
    let request = SearchRequest::under(&["n"])
        .text("otters")
        .limit(1)
        .refresh_ttl(true);
    let hits = store.search(&request).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].item.key, "best");
    assert_eq!(hits[0].item.expires_at_ms, Some(1_600));
    clock.advance(600);
    let ns = vec!["n".to_string()];
    assert!(store.get(&ns, "best").await.unwrap().is_some());
    assert!(
        store.get(&ns, "second").await.unwrap().is_none(),
        "ranked, not returned"
    );
    assert!(store.get(&ns, "other").await.unwrap().is_none());
}
