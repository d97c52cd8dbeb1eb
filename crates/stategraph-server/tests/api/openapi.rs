//! `/openapi.json` says what is served: every path and method it names answers (not the "no
//! route" fallback, not 405), and every other method on those paths does not, so the document
//! and the routes cannot drift apart.

use crate::support::TestServer;
use serde_json::json;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Whether the server routes `method path` to a handler: whatever the handler answers (a 404
/// naming an unknown thread is an answer), it is not the router's own "no route" or 405.
async fn routed(server: &TestServer, method: &str, path: &str) -> bool {
    let body = matches!(method, "POST" | "PUT" | "PATCH").then(|| json!({}));
    let (status, answer) = server.call(method, path, body).await;
    let fallback = status == 404
        && answer["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no route"));
    status != 405 && !fallback
}

#[tokio::test]
async fn the_openapi_document_names_exactly_what_is_served() {
    let server = TestServer::start().await;
    let doc = server.get("/openapi.json").await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    assert_eq!(doc["info"]["title"], "stategraph");
    let paths = doc["paths"].as_object().unwrap();
    // The endpoints the README lists, a few of each resource.
    for path in [
        "/ok",
        "/openapi.json",
        "/assistants/search",
        "/threads/{id}",
        "/threads/{id}/state/{checkpoint_id}",
        "/threads/{id}/runs/{run_id}/stream",
        "/runs/wait",
    ] {
        assert!(paths.contains_key(path), "{path} is not in the document");
    }
    for (path, item) in paths {
        // Ids no thread, run or checkpoint has: each handler answers without running anything.
        let concrete = path
            .replace("{id}", "no-such-thing")
            .replace("{run_id}", "no-such-run")
            .replace("{checkpoint_id}", "00000000-0000-0000-0000-000000000000");
        for method in METHODS {
            let documented = item.get(method.to_lowercase()).is_some();
            assert_eq!(
                routed(&server, method, &concrete).await,
                documented,
                "{method} {path}: {}",
                match documented {
                    true => "documented but not served",
                    false => "served but not documented",
                }
            );
        }
        for (method, operation) in item.as_object().unwrap() {
            assert!(
                METHODS.contains(&method.to_uppercase().as_str()),
                "{method} {path}"
            );
            let parameters = operation["parameters"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for name in path.split('{').skip(1).filter_map(|p| p.split('}').next()) {
                assert!(
                    parameters
                        .iter()
                        .any(|p| p["name"] == name && p["in"] == "path"),
                    "{method} {path}: path parameter {name} is not declared"
                );
            }
        }
    }
}
