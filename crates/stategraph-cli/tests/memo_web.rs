//! The memo's research with web search: `graph run memo` with `TAVILY_API_KEY` set searches
//! the web once per topic, for the company and the topic, besides the data room (here a
//! stand-in Tavily on 127.0.0.1), and keeps what it finds as passages of the topic.

#[path = "../../../tests/support/fake_http.rs"]
mod fake_http;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_http::*;
use harness::Db;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_searches_the_web_per_topic_and_keeps_the_hits_as_passages() {
    let tavily = MockServer::start().await;
    let long = "x".repeat(1000);
    answer_post(
        &tavily,
        "/search",
        100,
        json(json!({"results": [
            {"title": "A page", "url": "https://example.com/a", "content": format!("From the web: {long}")},
            {"url": "https://example.org/b", "content": "Another page"}
        ]})),
    )
    .await;
    let db = Db::new();
    let base = tavily.uri();
    let out_dir = db.out();
    let research: Value = tokio::task::spawn_blocking(move || {
        db.graph(&["run", "memo", "--input", "Fernstone", "--yes"])
            .without_model()
            .env("TAVILY_API_KEY", "tvly-test")
            .env("TAVILY_BASE_URL", &base)
            .expect(0);
        let file = out_dir.join("Fernstone-v0.0.1").join("1-research.json");
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
    })
    .await
    .unwrap();

    assert_eq!(research["searched"][1], "web (Tavily)", "{research:#}");
    let topics = research["topics"].as_array().unwrap();
    let queries: Vec<String> = bodies(&tavily)
        .await
        .iter()
        .map(|b| b["query"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = topics
        .iter()
        .map(|t| format!("Fernstone {}", t["topic"].as_str().unwrap()))
        .collect();
    assert_eq!(queries, expected, "one web search per topic");

    let mut n = 0;
    for topic in topics {
        let findings = topic["findings"].as_array().unwrap();
        let web: Vec<&Value> = findings.iter().filter(|f| f["line"] == 0).collect();
        assert_eq!(web.len(), 2, "{topic:#}");
        assert_eq!(web[0]["source"], "https://example.com/a");
        let quote = web[0]["quote"].as_str().unwrap();
        assert!(quote.starts_with("From the web: ") && quote.chars().count() == 400);
        assert_eq!(web[1]["quote"], "Another page");
        // Numbered on from the room's passages, across topics.
        for f in findings {
            n += 1;
            assert_eq!(f["id"], format!("R{n}"));
        }
    }
}
