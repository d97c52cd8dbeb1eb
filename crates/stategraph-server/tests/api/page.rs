//! The web page and what it calls beyond LangGraph's API: `/` and its assets are served from
//! the binary (and without the token, which the page then sends with each call), and a plan a
//! graph keeps is read and edited through `/threads/{id}/plan` with the editor's checks.

use super::support::TestServer;
use serde_json::json;
use stategraph_server::ServerConfig;

#[tokio::test]
async fn the_page_and_its_assets_are_served_without_the_token_and_the_api_is_not() {
    let config = ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    };
    let s = TestServer::start_with(config, None).await;
    let get = |path: &str| s.http.get(format!("{}{path}", s.url)).send();
    let index = get("/").await.unwrap();
    assert_eq!(index.status(), 200);
    let html = index.text().await.unwrap();
    assert!(html.contains("<script src=\"/ui/app.js\">"), "{html}");
    for (path, kind, holds) in [
        ("/ui/app.js", "text/javascript", "function route()"),
        ("/ui/style.css", "text/css", "svg.graph"),
    ] {
        let asset = get(path).await.unwrap();
        assert_eq!(asset.status(), 200, "{path}");
        assert_eq!(asset.headers()["content-type"], kind, "{path}");
        assert!(asset.text().await.unwrap().contains(holds), "{path}");
    }
    let (status, _) = s.call("POST", "/threads/search", Some(json!({}))).await;
    assert_eq!(status, 401, "the API still needs the token");
}

#[tokio::test]
async fn a_paused_plan_is_edited_with_its_editors_checks_then_the_run_goes_on() {
    let s = TestServer::start().await;
    let thread = s.thread(json!({})).await;
    let run = json!({"assistant_id": "checklist", "input": {"goal": "ship"}});
    s.post(&format!("/threads/{thread}/runs/wait"), run).await;
    let plan = s.get(&format!("/threads/{thread}/plan")).await;
    assert_eq!(plan["markdown"], "- ship a\n- ship b\n- ship c\n", "{plan}");

    let path = format!("/threads/{thread}/plan");
    let bad = json!({"markdown": "- ship a\nship b\n"});
    let (status, answer) = s.call("PUT", &path, Some(bad)).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "markdown: the plan edit was refused (the plan is unchanged): line 2: an item is \
         `- what`\n    2 | ship b",
        "{answer}"
    );
    let edited = json!({"markdown": "- ship a\n- ship c\n"});
    let (status, answer) = s.call("PUT", &path, Some(edited)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["plan"], json!(["ship a", "ship c"]), "{answer}");

    let resume = json!({"assistant_id": "checklist", "command": {"resume": "approve"}});
    let done = s
        .post(&format!("/threads/{thread}/runs/wait"), resume)
        .await;
    assert_eq!(done["items"], json!(["ship a", "ship c"]), "{done}");
    assert_eq!(done["approved"], true, "{done}");

    // A graph that keeps no plan says so, and where to edit its state instead.
    let other = s.thread(json!({"graph_id": "approval"})).await;
    let (status, answer) = s.call("GET", &format!("/threads/{other}/plan"), None).await;
    assert_eq!(status, 404, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("keeps no plan"),
        "{answer}"
    );
}
