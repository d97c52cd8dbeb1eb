//! Web search (Tavily, against a local server) and local corpus search (tantivy).

#[path = "../../../tests/support/fake_http.rs"]
mod fake_http;

use std::fs;
use std::sync::Arc;
use std::time::Duration;

use fake_http::*;
use serde_json::json;
use stategraph_llm::http::HttpError;
use stategraph_tools::corpus::CorpusSearch;
use stategraph_tools::tavily::{SearchDepth, TavilyConfig, TavilySearch};
use stategraph_tools::{SearchHit, SearchTool, ToolError};

const KEY: &str = "tvly-test-0123456789";

fn tavily(server: &MockServer) -> TavilySearch {
    TavilySearch::new(
        TavilyConfig::new(KEY)
            .with_base_url(server.uri())
            .with_http(fast_http()),
    )
    .expect("client")
}

fn tavily_results() -> serde_json::Value {
    json!({
        "query": "tides",
        "answer": null,
        "results": [
            {"title": "Tides - Wikipedia", "url": "https://en.wikipedia.org/wiki/Tide",
             "content": "Tides are the rise and fall of sea levels.", "score": 0.98, "raw_content": null},
            {"title": "", "url": "https://example.org/moon",
             "content": "The moon pulls the ocean.", "score": 0.71, "raw_content": null}
        ],
        "response_time": 0.8
    })
}

#[tokio::test]
async fn tavily_returns_title_url_and_content() {
    let server = MockServer::start().await;
    answer_post(&server, "/search", 1, json(tavily_results())).await;

    let hits = tavily(&server).search("tides", 5).await.unwrap();

    assert_eq!(
        hits,
        vec![
            SearchHit {
                title: "Tides - Wikipedia".into(),
                url: "https://en.wikipedia.org/wiki/Tide".into(),
                content: "Tides are the rise and fall of sea levels.".into(),
            },
            SearchHit {
                title: "https://example.org/moon".into(),
                url: "https://example.org/moon".into(),
                content: "The moon pulls the ocean.".into(),
            },
        ]
    );
    let sent = &requests(&server).await[0];
    assert_eq!(header(sent, "authorization"), Some(format!("Bearer {KEY}")));
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body,
        json!({"query": "tides", "max_results": 5, "search_depth": "basic", "include_answer": false})
    );
}

#[tokio::test]
async fn tavily_search_depth_and_result_cap_are_sent() {
    let server = MockServer::start().await;
    answer_post(&server, "/search", 1, json(tavily_results())).await;
    let web = TavilySearch::new(
        TavilyConfig::new(KEY)
            .with_base_url(server.uri())
            .with_search_depth(SearchDepth::Advanced)
            .with_http(fast_http()),
    )
    .unwrap();

    let hits = web.search("tides", 1).await.unwrap();

    assert_eq!(hits.len(), 1);
    let body = &bodies(&server).await[0];
    assert_eq!(body["search_depth"], "advanced");
    assert_eq!(body["max_results"], 1);
}

#[tokio::test]
async fn tavily_retries_rate_limits_and_server_errors() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        "/search",
        1,
        ResponseTemplate::new(429).insert_header("retry-after", "0"),
    )
    .await;
    answer_post(&server, "/search", 1, ResponseTemplate::new(502)).await;
    answer_post(&server, "/search", 1, json(tavily_results())).await;

    let hits = tavily(&server).search("tides", 5).await.unwrap();

    assert_eq!(hits.len(), 2);
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn tavily_unauthorized_is_clear_and_keyless() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        "/search",
        1,
        ResponseTemplate::new(401).set_body_json(
            json!({"detail": {"error": "Unauthorized: missing or invalid API key."}}),
        ),
    )
    .await;

    let err = tavily(&server).search("tides", 5).await.unwrap_err();

    let text = err.to_string();
    assert!(
        text.contains("Tavily") && text.contains("TAVILY_API_KEY"),
        "{text}"
    );
    assert!(!text.contains(KEY) && !format!("{err:?}").contains(KEY));
    assert!(!err.is_transient());
}

#[tokio::test]
async fn tavily_malformed_json_and_timeouts_are_errors() {
    let server = MockServer::start().await;
    answer_post(
        &server,
        "/search",
        1,
        ResponseTemplate::new(200).set_body_raw("{\"results\": [", "application/json"),
    )
    .await;
    let err = tavily(&server).search("tides", 5).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Http(HttpError::InvalidBody { .. })),
        "{err:?}"
    );

    let slow = MockServer::start().await;
    answer_post(
        &slow,
        "/search",
        10,
        json(tavily_results()).set_delay(Duration::from_secs(3)),
    )
    .await;
    let mut http = fast_http();
    http.read_timeout = Duration::from_millis(100);
    http.retry.max_retries = 0;
    let web = TavilySearch::new(
        TavilyConfig::new(KEY)
            .with_base_url(slow.uri())
            .with_http(http),
    )
    .unwrap();
    let err = web.search("tides", 5).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Http(HttpError::Timeout { .. })),
        "{err:?}"
    );
    assert!(err.is_transient());
}

/// A folder with one document of each kind, plus things that must not be indexed.
fn sample_corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(
        root.join("tides.md"),
        "---\nauthor: me\n---\n# Ocean tides\n\nTides are caused by the gravity of the moon and the sun.\n",
    )
    .unwrap();
    fs::create_dir(root.join("notes")).unwrap();
    fs::write(
        root.join("notes").join("volcanoes.txt"),
        "Volcanoes erupt when magma reaches the surface.",
    )
    .unwrap();
    fs::write(
        root.join("comets.html"),
        "<html><head><title>Comets</title><script>var gravity = 1;</script></head>\
         <body><nav>Home gravity nav</nav><p>A comet is an icy body that warms near the sun.</p></body></html>",
    )
    .unwrap();
    fs::write(root.join("image.png"), [0u8, 1, 2, 3]).unwrap();
    fs::create_dir(root.join(".git")).unwrap();
    fs::write(
        root.join(".git").join("HEAD.md"),
        "# gravity in a hidden folder",
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn corpus_search_finds_documents_by_content() {
    let dir = sample_corpus();
    let corpus = CorpusSearch::open(dir.path()).unwrap();
    assert_eq!(corpus.document_count(), 3);

    let hits = corpus
        .search("what is the gravity of the moon", 5)
        .await
        .unwrap();

    assert_eq!(
        hits.len(),
        1,
        "script, nav and hidden folders are not indexed: {hits:?}"
    );
    let hit = &hits[0];
    assert_eq!(hit.title, "Ocean tides");
    assert!(
        hit.url.starts_with("file://") && hit.url.ends_with("tides.md"),
        "{}",
        hit.url
    );
    assert!(
        hit.content.starts_with("# Ocean tides"),
        "no front matter: {}",
        hit.content
    );
    assert!(hit.content.contains("gravity"), "{}", hit.content);
}

#[tokio::test]
async fn corpus_titles_come_from_html_title_and_file_names() {
    let dir = sample_corpus();
    let corpus = CorpusSearch::open(dir.path()).unwrap();

    let comet = corpus.search("icy comet", 5).await.unwrap();
    assert_eq!(comet[0].title, "Comets");
    assert!(comet[0].content.contains("icy body"));
    assert!(!comet[0].content.contains("<p>"), "HTML is reduced to text");

    let volcano = corpus.search("magma", 5).await.unwrap();
    assert_eq!(volcano[0].title, "volcanoes.txt");
    assert!(volcano[0].url.ends_with("notes/volcanoes.txt"));
}

#[tokio::test]
async fn corpus_ranks_and_limits_results() {
    let dir = sample_corpus();
    let corpus = CorpusSearch::open(dir.path()).unwrap();

    let hits = corpus.search("sun", 1).await.unwrap();
    assert_eq!(hits.len(), 1);
    let all = corpus.search("sun", 10).await.unwrap();
    assert_eq!(all.len(), 2);
    // Query syntax characters in model-written queries are not errors.
    assert!(corpus.search("\"sun\" AND (moon: -", 10).await.is_ok());
    assert!(corpus
        .search("nothing-matches-this", 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn corpus_picks_up_changed_files() {
    let dir = sample_corpus();
    let corpus = CorpusSearch::open(dir.path()).unwrap();
    assert!(corpus.search("aurora", 5).await.unwrap().is_empty());

    fs::write(
        dir.path().join("aurora.md"),
        "# Aurora\nSolar wind lights the aurora.",
    )
    .unwrap();

    let hits = corpus.search("aurora", 5).await.unwrap();
    assert_eq!(hits[0].title, "Aurora");
    assert_eq!(corpus.document_count(), 4);
}

#[tokio::test]
async fn corpus_errors_for_missing_and_empty_folders() {
    let missing = CorpusSearch::open("/definitely/not/here").unwrap_err();
    assert!(matches!(missing, ToolError::CorpusMissing { .. }));
    assert!(missing.to_string().contains("/definitely/not/here"));

    let empty = tempfile::tempdir().unwrap();
    fs::write(empty.path().join("data.bin"), [1u8, 2, 3]).unwrap();
    let err = CorpusSearch::open(empty.path()).unwrap_err();
    assert!(matches!(err, ToolError::CorpusEmpty { .. }));
    assert!(err.to_string().contains(".md, .txt or .html"), "{err}");
}

#[tokio::test]
async fn searchers_are_interchangeable_behind_the_trait() {
    let server = MockServer::start().await;
    answer_post(&server, "/search", 1, json(tavily_results())).await;
    let dir = sample_corpus();
    let searchers: Vec<Arc<dyn SearchTool>> = vec![
        Arc::new(tavily(&server)),
        Arc::new(CorpusSearch::open(dir.path()).unwrap()),
    ];

    for searcher in searchers {
        let hits = searcher.search("tides", 3).await.unwrap();
        assert!(!hits.is_empty());
        assert!(hits
            .iter()
            .all(|h| !h.url.is_empty() && !h.title.is_empty()));
    }
}

/// Runs against the real API when `TAVILY_API_KEY` is set:
/// `cargo test --test tools_search -- --ignored`.
#[tokio::test]
#[ignore = "needs TAVILY_API_KEY and network"]
async fn real_tavily_api() {
    if std::env::var("TAVILY_API_KEY")
        .map(|k| k.is_empty())
        .unwrap_or(true)
    {
        eprintln!("TAVILY_API_KEY is not set; skipping");
        return;
    }
    let hits = TavilySearch::from_env()
        .unwrap()
        .search("Rust programming language", 3)
        .await
        .unwrap();
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.url.starts_with("http")));
}
