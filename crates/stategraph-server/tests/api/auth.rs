//! The token: required beyond loopback, checked on every request when set.

use super::support::TestServer;
use stategraph_server::ServerConfig;

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let open = ServerConfig {
        addr: "0.0.0.0:8123".parse().unwrap(),
        ..ServerConfig::default()
    };
    let refused = open.check().unwrap_err().to_string();
    assert!(refused.contains("--token"), "{refused}");
    let with_token = ServerConfig {
        token: Some("s3cret".into()),
        ..open
    };
    assert!(with_token.check().is_ok());
}

#[tokio::test]
async fn a_set_token_is_checked_on_every_request() {
    let config = ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    };
    let s = TestServer::start_with(config, Some("s3cret")).await;
    assert_eq!(s.call("GET", "/assistants/steps", None).await.0, 200);

    let bare = reqwest::Client::new();
    let url = format!("{}/assistants/steps", s.url);
    let refused = bare.get(&url).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("Bearer"),
        "{body}"
    );
    let wrong = bare.get(&url).bearer_auth("s3cre").send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    // LangGraph's clients send their api_key as x-api-key.
    let by_key = bare
        .get(&url)
        .header("x-api-key", "s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(by_key.status().as_u16(), 200);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() {
    let config = ServerConfig {
        body_limit: 1024,
        ..ServerConfig::default()
    };
    let s = TestServer::start_with(config, None).await;
    let big = serde_json::json!({"metadata": {"blob": "x".repeat(4096)}});
    let (status, body) = s.call("POST", "/threads", Some(big)).await;
    assert_eq!(status, 413, "{body}");
}

#[tokio::test]
async fn cors_lets_in_only_the_origins_named() {
    let allowed = "http://localhost:5173";
    let preflight = |s: &TestServer, origin: &str| {
        s.http
            .request(
                reqwest::Method::OPTIONS,
                format!("{}/threads/search", s.url),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
    };
    let allow_origin = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let off = TestServer::start().await;
    assert_eq!(allow_origin(&preflight(&off, allowed).await.unwrap()), None);

    let config = ServerConfig {
        cors: vec![allowed.to_string()],
        ..ServerConfig::default()
    };
    let on = TestServer::start_with(config, None).await;
    let ok = preflight(&on, allowed).await.unwrap();
    assert_eq!(allow_origin(&ok).as_deref(), Some(allowed));
    let other = preflight(&on, "http://evil.example").await.unwrap();
    assert_eq!(allow_origin(&other), None);
}
