//! A program of one's own (not the `graph` CLI): `init_from_env` with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a collector on 127.0.0.1 exports stategraph's
//! spans, parent and child, once the guard drops, and leaves other crates' spans out. One
//! test in this binary: it sets the process's environment.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use std::sync::{Arc, Mutex};

/// A received span: its name, id and parent's id.
type Received = (String, Vec<u8>, Vec<u8>);

#[test]
fn the_guard_flushes_stategraphs_spans_to_the_endpoint_and_only_those() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).unwrap();
                let all = request.resource_spans.into_iter();
                let got = all.flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
                let mut kept = kept.lock().unwrap();
                kept.extend(got.map(|s| (s.name, s.span_id, s.parent_span_id)));
            }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });

    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", &url);
    let guard = stategraph_otel::init_from_env("own-binary")
        .unwrap()
        .expect("the endpoint is set");
    {
        let run = tracing::info_span!(target: "stategraph::runtime", "run", graph = "mine");
        let _run = run.enter();
        let node = tracing::info_span!(target: "stategraph::runtime", "node", node = "a");
        let _node = node.enter();
        let _other = tracing::info_span!(target: "hyper::client", "connect").entered();
    }
    assert!(spans.lock().unwrap().is_empty(), "batched until flushed");
    drop(guard);

    let spans = spans.lock().unwrap().clone();
    let names: Vec<&str> = spans.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let run = spans.iter().find(|(n, _, _)| n == "run").unwrap();
    let node = spans.iter().find(|(n, _, _)| n == "node").unwrap();
    assert_eq!(node.2, run.1, "the node is the run's child");
    assert!(run.2.is_empty());
}
