//! Traces over OTLP/HTTP from the real `graph` binary: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a collector this test runs on 127.0.0.1 (an axum server decoding each
//! `/v1/traces` request with `opentelemetry-proto`'s generated types), a run arrives as a tree:
//! run > step > node > model_call / tool_call, with graph, thread, step, node, attempt and
//! tokens as attributes; a subgraph's run sits under its parent's node. The model is the
//! stand-in OpenAI-compatible server on 127.0.0.1 the agent tests use. No network, no key.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::{tool_calls, Call, FakeOpenAi};
use harness::Db;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One received span: what the tree checks need.
#[derive(Clone, Debug)]
struct Span {
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
    name: String,
    attrs: HashMap<String, String>,
    /// Its events: name and attributes.
    events: Vec<(String, HashMap<String, String>)>,
}

/// The collector: an OTLP/HTTP endpoint on 127.0.0.1 keeping every span it is sent.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    fn start() -> Collector {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
                    };
                    kept.lock().unwrap().extend(spans_of(request));
                    (axum::http::StatusCode::OK, Vec::new())
                }
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Collector {
            url,
            spans,
            _runtime: runtime,
        }
    }

    /// The spans received so far, waiting (a bounded while) until one named `name` arrives.
    fn spans_with(&self, name: &str) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if spans.iter().any(|s| s.name == name) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<Span> {
    let all = request.resource_spans.into_iter();
    let spans = all.flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
    spans
        .map(|s| Span {
            trace: s.trace_id,
            id: s.span_id,
            parent: s.parent_span_id,
            name: s.name,
            attrs: attributes(s.attributes),
            events: s
                .events
                .into_iter()
                .map(|e| (e.name, attributes(e.attributes)))
                .collect(),
        })
        .collect()
}

fn attributes(list: Vec<KeyValue>) -> HashMap<String, String> {
    list.into_iter()
        .map(|kv| {
            let value = match kv.value.and_then(|v| v.value) {
                Some(Any::StringValue(s)) => s,
                Some(Any::IntValue(i)) => i.to_string(),
                Some(Any::BoolValue(b)) => b.to_string(),
                Some(Any::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key, value)
        })
        .collect()
}

/// `span`'s chain of ancestors' names, nearest first (within its trace).
fn ancestors<'a>(spans: &'a [Span], span: &Span) -> Vec<&'a Span> {
    let mut chain = Vec::new();
    let mut parent = span.parent.clone();
    while !parent.is_empty() {
        let Some(p) = spans
            .iter()
            .find(|s| s.id == parent && s.trace == span.trace)
        else {
            break;
        };
        chain.push(p);
        parent = p.parent.clone();
    }
    chain
}

fn names(chain: &[&Span]) -> Vec<String> {
    chain.iter().map(|s| s.name.clone()).collect()
}

fn attr<'a>(span: &'a Span, key: &str) -> &'a str {
    span.attrs
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("span {} has no `{key}`: {:?}", span.name, span.attrs))
}

/// The agent's stand-in model: one todo worked with one tool call, then reviews and a report.
fn agent_model() -> FakeOpenAi {
    FakeOpenAi::answering(|call: &Call| {
        let act = call.body["tools"].is_array() && call.body.get("response_format").is_none();
        let tool_results = call.body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
            .unwrap_or(0);
        match (act, call.kind.as_str()) {
            (true, _) if tool_results == 0 => tool_calls(&[(
                "write_file",
                json!({"path": "notes.txt", "content": "traced\n"}),
            )]),
            (true, _) => "Wrote notes.txt.".to_string(),
            (false, "Plan") => json!({"todos": [{"id": "t1", "task": "write notes.txt",
                "kind": "tool", "dependencies": []}]})
            .to_string(),
            (false, "PlanUpdate") => json!({"completed_task_id": call.key, "task_outcome": "done",
                "status": "done", "new_tasks": []})
            .to_string(),
            _ => "Report: the notes are written.".to_string(),
        }
    })
}

#[test]
fn an_agent_run_arrives_as_a_tree_of_run_step_node_model_and_tool_call_spans() {
    let collector = Collector::start();
    let model = agent_model();
    let db = Db::new();
    let ws = tempfile::tempdir().unwrap();
    let workspace = format!("workspace={}", ws.path().display());
    let out = db
        .graph(&[
            "run",
            "agent",
            "--input",
            "Write notes",
            "--set",
            &workspace,
            "--set",
            "pricing.input_per_million=1000",
            "--set",
            "pricing.output_per_million=1000",
        ])
        .with_model_at(&model.base_url())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_SERVICE_NAME", "graph-traces-test")
        .expect(0);
    let thread = out.thread();
    let spans = collector.spans_with("tool_call");

    let run = spans
        .iter()
        .find(|s| s.name == "run" && s.attrs.get("graph").map(String::as_str) == Some("agent"))
        .unwrap_or_else(|| panic!("no run span of graph `agent`: {spans:#?}"));
    assert_eq!(attr(run, "thread_id"), thread);
    assert!(run.parent.is_empty(), "the run is the trace's root");

    let model_calls: Vec<&Span> = spans.iter().filter(|s| s.name == "model_call").collect();
    assert!(
        model_calls.len() >= 3,
        "plan, loop and report calls: {model_calls:#?}"
    );
    for call in &model_calls {
        let chain = ancestors(&spans, call);
        assert_eq!(
            names(&chain),
            ["node", "step", "run"],
            "model_call > node > step > run: {call:#?}"
        );
        assert_eq!(chain[2].id, run.id, "in the run's own trace");
        assert_eq!(attr(call, "input_tokens"), "20", "{call:#?}");
        assert_eq!(attr(call, "output_tokens"), "10");
        assert!(!attr(call, "model").is_empty());
        // The node and the step say which node, which step and which attempt.
        let (node, step) = (chain[0], chain[1]);
        assert!(!attr(node, "node").is_empty());
        assert_eq!(attr(node, "attempt"), "1");
        assert_eq!(attr(node, "step"), attr(step, "step"));
    }

    // A priced call's cost is an event of its node: 20 and 10 tokens at 1000 USD a million.
    let costs: Vec<&HashMap<String, String>> = spans
        .iter()
        .filter(|s| s.name == "node")
        .flat_map(|s| &s.events)
        .filter(|(name, _)| name == "model usage priced")
        .map(|(_, attrs)| attrs)
        .collect();
    assert!(!costs.is_empty(), "no cost event: {spans:#?}");
    for cost in costs {
        assert_eq!(
            cost.get("cost_usd").map(String::as_str),
            Some("0.03"),
            "{cost:?}"
        );
    }

    let tool = spans
        .iter()
        .find(|s| s.name == "tool_call")
        .unwrap_or_else(|| panic!("no tool_call span: {spans:#?}"));
    assert_eq!(attr(tool, "tool"), "write_file");
    assert_eq!(attr(tool, "replayed"), "false");
    let chain = ancestors(&spans, tool);
    assert_eq!(names(&chain), ["node", "step", "run"], "{tool:#?}");
    assert_eq!(chain[2].id, run.id);
    // The tool's node says which node and attempt ran it, like the model calls' nodes.
    let tool_node = chain[0];
    assert!(!attr(tool_node, "node").is_empty());
    assert_eq!(attr(tool_node, "attempt"), "1");
    assert_eq!(attr(tool_node, "step"), attr(chain[1], "step"));
    // The steps count up from the run's first.
    let mut steps: Vec<u64> = spans
        .iter()
        .filter(|s| s.name == "step" && s.parent == run.id)
        .map(|s| attr(s, "step").parse().unwrap())
        .collect();
    steps.sort();
    steps.dedup();
    assert!(steps.len() >= 3 && steps[0] == 1, "{steps:?}");
    assert_eq!(
        steps,
        (1..=steps.len() as u64).collect::<Vec<_>>(),
        "one span per step"
    );
}

#[test]
fn a_subgraphs_run_is_traced_under_its_parents_node() {
    let collector = Collector::start();
    let db = Db::new();
    let out = db
        .run_pipeline(1, &["--yes"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .expect(0);
    let thread = out.thread();
    let spans = collector.spans_with("run");
    let root = spans
        .iter()
        .find(|s| s.name == "run" && s.parent.is_empty())
        .unwrap_or_else(|| panic!("no root run span: {spans:#?}"));
    assert_eq!(attr(root, "graph"), "pipeline");
    assert_eq!(attr(root, "thread_id"), thread);

    let children: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "run" && !s.parent.is_empty())
        .collect();
    assert!(children.len() >= 2, "one child run per section: {spans:#?}");
    for child in &children {
        let chain = ancestors(&spans, child);
        assert_eq!(names(&chain), ["node", "step", "run"], "{child:#?}");
        assert_eq!(attr(chain[0], "node"), "draft");
        assert_eq!(chain[2].id, root.id);
        // The child's own steps and nodes hang under it.
        let nodes: Vec<String> = spans
            .iter()
            .filter(|s| s.name == "node")
            .filter(|s| ancestors(&spans, s).iter().any(|a| a.id == child.id))
            .map(|s| attr(s, "node").to_string())
            .collect();
        assert!(
            nodes.contains(&"write".to_string()) && nodes.contains(&"polish".to_string()),
            "the section's nodes under its run: {nodes:?}"
        );
    }
}
