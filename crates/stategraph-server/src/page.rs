//! The web page at `/`: plain HTML, JavaScript and CSS from `ui/`, compiled into the binary
//! (`include_str!`), so there is no build step and nothing is fetched from elsewhere. The page
//! calls the same JSON API LangGraph's clients call (and `/threads/{id}/plan`), sending the
//! server's token when one is set.

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/style.css");

/// `/` and the page's assets under `/ui/`.
pub(crate) fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { Html(INDEX) }))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route("/ui/style.css", get(|| async { asset("text/css", STYLE) }))
}

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            // The assets change with the binary only; a browser may keep them a minute.
            (header::CACHE_CONTROL, "max-age=60"),
        ],
        body,
    )
}
