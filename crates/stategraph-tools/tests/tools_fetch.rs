//! Page fetch against a local server: readable text, content types, size and time limits.

#[path = "../../../tests/support/fake_http.rs"]
mod fake_http;

use std::time::{Duration, Instant};

use fake_http::*;
use stategraph_llm::http::HttpError;
use stategraph_tools::fetch::{FetchConfig, PageFetcher};
use stategraph_tools::ToolError;

fn fetcher() -> PageFetcher {
    PageFetcher::new(FetchConfig {
        http: fast_http(),
        ..FetchConfig::default()
    })
    .unwrap()
}

async fn serve(server: &MockServer, route: &str, response: ResponseTemplate) {
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(response)
        .mount(server)
        .await;
}

const ARTICLE: &str = r#"<!doctype html>
<html><head><title>Why the sky is blue</title>
<style>body { color: red }</style><script>track("visit")</script></head>
<body>
  <nav><a href="/">Home</a> | <a href="/about">About</a></nav>
  <article><h1>Rayleigh scattering</h1>
  <p>Short wavelengths scatter   more.</p><p>So the sky looks <em>blue</em>.</p></article>
  <noscript>Enable JavaScript</noscript>
</body></html>"#;

#[tokio::test]
async fn html_pages_are_reduced_to_readable_text() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/sky",
        ResponseTemplate::new(200).set_body_raw(ARTICLE, "text/html; charset=utf-8"),
    )
    .await;

    let page = fetcher()
        .fetch(&format!("{}/sky", server.uri()))
        .await
        .unwrap();

    assert_eq!(page.title.as_deref(), Some("Why the sky is blue"));
    assert_eq!(
        page.text,
        "Rayleigh scattering\nShort wavelengths scatter more.\nSo the sky looks blue."
    );
    assert_eq!(page.content_type, "text/html");
    assert!(!page.truncated);
    let hit = page.to_hit();
    assert_eq!(hit.title, "Why the sky is blue");
    assert!(hit.url.ends_with("/sky"));
}

#[tokio::test]
async fn plain_text_is_passed_through() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/notes.txt",
        ResponseTemplate::new(200).set_body_raw("line one\n<b>not html</b>\n", "text/plain"),
    )
    .await;

    let page = fetcher()
        .fetch(&format!("{}/notes.txt", server.uri()))
        .await
        .unwrap();

    assert_eq!(page.text, "line one\n<b>not html</b>");
    assert_eq!(page.title, None);
}

#[tokio::test]
async fn binary_content_is_refused() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/photo",
        ResponseTemplate::new(200).set_body_raw(vec![0x89u8, b'P', b'N', b'G', 0, 0], "image/png"),
    )
    .await;
    serve(
        &server,
        "/blob",
        ResponseTemplate::new(200).set_body_bytes(vec![0u8, 159, 146, 150]),
    )
    .await;

    let err = fetcher()
        .fetch(&format!("{}/photo", server.uri()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::UnsupportedContent { content_type, .. } if content_type == "image/png"),
        "{err:?}"
    );
    assert!(err.to_string().contains("not a text or HTML page"));

    // No content type at all: the NUL bytes give it away.
    let err = fetcher()
        .fetch(&format!("{}/blob", server.uri()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::UnsupportedContent { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn bodies_past_the_size_limit_are_cut() {
    let server = MockServer::start().await;
    let big = "word ".repeat(100_000);
    serve(
        &server,
        "/big",
        ResponseTemplate::new(200).set_body_raw(big, "text/plain"),
    )
    .await;
    let small = PageFetcher::new(FetchConfig {
        max_bytes: 1000,
        http: fast_http(),
        ..FetchConfig::default()
    })
    .unwrap();

    let page = small.fetch(&format!("{}/big", server.uri())).await.unwrap();

    assert!(page.truncated);
    assert!(page.text.len() <= 1000);
    assert!(page.text.starts_with("word word"));
}

#[tokio::test]
async fn slow_pages_hit_the_time_limit() {
    let server = MockServer::start().await;
    serve(
        &server,
        "/slow",
        ResponseTemplate::new(200)
            .set_body_raw("late", "text/plain")
            .set_delay(Duration::from_secs(3)),
    )
    .await;
    let quick = PageFetcher::new(FetchConfig {
        timeout: Duration::from_millis(200),
        http: fast_http(),
        ..FetchConfig::default()
    })
    .unwrap();

    let started = Instant::now();
    let err = quick
        .fetch(&format!("{}/slow", server.uri()))
        .await
        .unwrap_err();

    assert!(matches!(err, ToolError::TimedOut { .. }), "{err:?}");
    assert!(err.is_transient());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn server_errors_are_retried_and_missing_pages_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    serve(
        &server,
        "/flaky",
        ResponseTemplate::new(200).set_body_raw("fine now", "text/plain"),
    )
    .await;

    let page = fetcher()
        .fetch(&format!("{}/flaky", server.uri()))
        .await
        .unwrap();
    assert_eq!(page.text, "fine now");

    let missing = format!("{}/missing", server.uri());
    let err = fetcher().fetch(&missing).await.unwrap_err();
    assert!(
        matches!(&err, ToolError::Http(e @ HttpError::NotFound { .. }) if e.status() == Some(404)),
        "{err:?}"
    );
    assert!(err.to_string().contains(&missing), "{err}");
}

#[tokio::test]
async fn only_web_urls_are_fetched() {
    let err = fetcher().fetch("file:///etc/passwd").await.unwrap_err();
    assert!(matches!(err, ToolError::Config(_)), "{err:?}");
    assert!(fetcher().fetch("not a url").await.is_err());
}
