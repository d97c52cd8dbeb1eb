//! The server under test: small graphs registered here, served on 127.0.0.1 at a free port
//! over a folder store in a temporary directory (the store the `graph` command uses), and a
//! client that speaks its JSON and reads its Server-Sent Events.
#![allow(dead_code)]

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, SharedStore};
use stategraph::{State, StateGraph, END, START};
use stategraph_registry::{
    BuildError, GraphFactory, GraphFile, PlanEditor, PlanError, PlanOp, Registry,
};
use stategraph_server::{Server, ServerConfig};
use stategraph_sled::{FolderCheckpointer, SledStore};
use stategraph_store::IndexedStore;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Semaphore};

/// A review that pauses to ask a person for a verdict: `draft`, then `ask` (an interrupt whose
/// answer becomes the verdict), then `finish`.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Review {
    pub item: String,
    pub draft: String,
    pub verdict: String,
    pub done: bool,
}

pub struct Approval;

impl GraphFactory for Approval {
    type State = Review;
    fn name(&self) -> &str {
        "approval"
    }
    fn description(&self) -> &str {
        "Drafts, asks a person to approve, finishes"
    }
    fn input_field(&self) -> Option<&str> {
        Some("item")
    }
    fn check_input(&self, _file: &GraphFile, input: &ReviewUpdate) -> Result<(), String> {
        match serde_json::to_value(input)
            .ok()
            .and_then(|v| v.get("item").cloned())
        {
            Some(serde_json::Value::String(item)) if item.trim().is_empty() => {
                Err("item is empty: give the thing to review".into())
            }
            _ => Ok(()),
        }
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Review>, BuildError> {
        let mut g = StateGraph::<Review>::named("approval");
        g.add_node("draft", |s: Arc<Review>, _c: Context| async move {
            Ok::<_, NodeError>(ReviewUpdate::default().draft(format!("{} looks fine", s.item)))
        });
        g.add_node("ask", |s: Arc<Review>, ctx: Context| async move {
            let verdict: String = ctx.interrupt(json!({"approve": s.draft})).await?;
            Ok::<_, NodeError>(ReviewUpdate::default().verdict(verdict))
        });
        g.add_node("finish", |_s: Arc<Review>, _c: Context| async move {
            Ok::<_, NodeError>(ReviewUpdate::default().done(true))
        });
        g.add_edge(START, "draft")
            .add_edge("draft", "ask")
            .add_edge("ask", "finish")
            .add_edge("finish", END);
        Ok(g.compile()?)
    }
}

/// Four steps, each appending its name to `log` and emitting a custom `progress` event; with a
/// gate, each step first waits for a permit of it, so a test decides when the run goes on.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Steps {
    pub topic: String,
    #[state(append)]
    pub log: Vec<String>,
}

pub const STEP_NODES: [&str; 4] = ["one", "two", "three", "four"];

pub struct Chain {
    pub name: &'static str,
    pub gate: Option<Arc<Semaphore>>,
}

impl GraphFactory for Chain {
    type State = Steps;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Four steps in a row"
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Steps>, BuildError> {
        let mut g = StateGraph::<Steps>::named(self.name);
        for node in STEP_NODES {
            let gate = self.gate.clone();
            g.add_node(node, move |_s: Arc<Steps>, ctx: Context| {
                let gate = gate.clone();
                async move {
                    if let Some(gate) = gate {
                        gate.acquire()
                            .await
                            .map_err(|e| NodeError::new(e.to_string()))?
                            .forget();
                    }
                    ctx.emit("progress", json!({"node": node}));
                    Ok::<_, NodeError>(StepsUpdate::default().log(vec![node.to_string()]))
                }
            });
        }
        g.add_edge(START, STEP_NODES[0]);
        for pair in STEP_NODES.windows(2) {
            g.add_edge(pair[0], pair[1]);
        }
        g.add_edge(STEP_NODES[3], END);
        Ok(g.compile()?)
    }
}

/// Recalls a person's preferred tone from the long-term store (`["prefs", who]`, key `tone`)
/// and notes that it did (`["seen", who]`, key `last`): what a client puts through `/store`,
/// a node reads, and the reverse.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Recalled {
    pub who: String,
    pub tone: String,
}

pub struct Recall;

impl GraphFactory for Recall {
    type State = Recalled;
    fn name(&self) -> &str {
        "recall"
    }
    fn description(&self) -> &str {
        "Reads a preference from the long-term store and notes it was read"
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Recalled>, BuildError> {
        let mut g = StateGraph::<Recalled>::named("recall");
        g.add_node("recall", |s: Arc<Recalled>, ctx: Context| async move {
            let store = ctx
                .store()
                .ok_or_else(|| NodeError::new("no long-term store"))?;
            let found = store.get(&["prefs", &s.who], "tone").await?;
            let tone = found
                .and_then(|item| item.value["tone"].as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown".into());
            store
                .put(&["seen", &s.who], "last", json!({"tone": tone}))
                .await?;
            Ok::<_, NodeError>(RecalledUpdate::default().tone(tone))
        });
        g.add_edge(START, "recall").add_edge("recall", END);
        Ok(g.compile()?)
    }
}

/// A checklist that pauses for a person to review it, and keeps its items as a plan a person
/// may edit meanwhile (the registry's `PlanEditor`): Markdown `- item` lines.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Checklist {
    pub goal: String,
    #[state(append)]
    pub items: Vec<String>,
    pub approved: bool,
}

pub struct Checklists;

struct ItemsEditor;

impl PlanEditor for ItemsEditor {
    fn plan(&self, state: &Value) -> Result<Value, PlanError> {
        Ok(state["items"].clone())
    }
    fn render(&self, state: &Value) -> Result<String, PlanError> {
        let items = state["items"].as_array().cloned().unwrap_or_default();
        Ok(items
            .iter()
            .map(|i| format!("- {}\n", i.as_str().unwrap_or_default()))
            .collect())
    }
    fn apply_markdown(&self, _state: &Value, markdown: &str) -> Result<Value, PlanError> {
        let mut items = Vec::new();
        for (n, line) in markdown.lines().enumerate() {
            match line.strip_prefix("- ") {
                Some(item) => items.push(item.to_string()),
                None if line.trim().is_empty() => {}
                None => return Err(PlanError::on_line(n + 1, line, "an item is `- what`")),
            }
        }
        Ok(json!({"items": {"$overwrite": items}}))
    }
    fn apply(&self, _state: &Value, _op: PlanOp) -> Result<Value, PlanError> {
        Err(PlanError::general("edit the Markdown"))
    }
}

impl GraphFactory for Checklists {
    type State = Checklist;
    fn name(&self) -> &str {
        "checklist"
    }
    fn description(&self) -> &str {
        "Lists three items, asks a person to review them, approves"
    }
    fn input_field(&self) -> Option<&str> {
        Some("goal")
    }
    fn plan_editor(&self) -> Option<Arc<dyn PlanEditor>> {
        Some(Arc::new(ItemsEditor))
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Checklist>, BuildError> {
        let mut g = StateGraph::<Checklist>::named("checklist");
        g.add_node("list", |s: Arc<Checklist>, _c: Context| async move {
            let items = ["a", "b", "c"].map(|i| format!("{} {i}", s.goal)).to_vec();
            Ok::<_, NodeError>(ChecklistUpdate::default().items(items))
        });
        g.add_node("review", |_s: Arc<Checklist>, ctx: Context| async move {
            let answer: String = ctx
                .interrupt(json!({"question": "approve the items?"}))
                .await?;
            Ok::<_, NodeError>(ChecklistUpdate::default().approved(answer == "approve"))
        });
        g.add_edge(START, "list")
            .add_edge("list", "review")
            .add_edge("review", END);
        Ok(g.compile()?)
    }
}

/// A server running in this test, stopped when dropped.
pub struct TestServer {
    pub url: String,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    /// Permits let the `gated` graph's steps go on, one step each.
    pub gate: Arc<Semaphore>,
    pub store: Arc<FolderCheckpointer>,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(ServerConfig::default(), None).await
    }

    /// A server with `config` (its address replaced by 127.0.0.1:0) whose requests carry
    /// `token`, when given.
    pub async fn start_with(mut config: ServerConfig, token: Option<&str>) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FolderCheckpointer::open(dir.path()).unwrap());
        let gate = Arc::new(Semaphore::new(0));
        let mut registry = Registry::new();
        registry.register(Approval);
        registry.register(Checklists);
        registry.register(Recall);
        registry.register(Chain {
            name: "steps",
            gate: None,
        });
        registry.register(Chain {
            name: "gated",
            gate: Some(gate.clone()),
        });
        // The hooks `graph serve` gives (crates/stategraph-cli/src/cmd/serve.rs).
        let (releasing, holding) = (store.clone(), store.clone());
        // The long-term store `graph serve` gives: sled beside the threads, searchable.
        let items = SledStore::open(dir.path().join("items")).unwrap();
        let long_term = IndexedStore::new(Arc::new(items)).unwrap();
        let server = Server::new(registry, store.clone())
            .with_long_term_store(SharedStore(Arc::new(long_term)))
            .on_thread_idle(move |thread| releasing.release_in_background(thread))
            .on_thread_busy(move |thread| {
                let holding = holding.clone();
                async move { holding.hold_stored(&thread).await }
            });
        config.addr = "127.0.0.1:0".parse().unwrap();
        let bound = server.bind(config).await.unwrap();
        let addr = bound.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(bound.serve(async move {
            let _ = stopped.await;
        }));
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = token {
            headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        TestServer {
            url: format!("http://{addr}"),
            addr,
            http,
            gate,
            store,
            stop: Some(stop),
            _dir: dir,
        }
    }

    /// Sends a request; answers its status and its JSON body (`null` when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        };
        (status, body)
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call("GET", path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.call("POST", path, Some(body)).await;
        assert_eq!(status, 200, "POST {path}: {answer}");
        answer
    }

    /// Creates a thread; answers its id.
    pub async fn thread(&self, metadata: Value) -> String {
        let t = self.post("/threads", json!({ "metadata": metadata })).await;
        t["thread_id"].as_str().unwrap().to_string()
    }

    /// Opens a stream (POST with `body`, or GET with `last_event_id`).
    pub async fn open(
        &self,
        path: &str,
        body: Option<Value>,
        last_event_id: Option<&str>,
    ) -> Events {
        let mut request = match body {
            Some(body) => self.http.post(format!("{}{path}", self.url)).json(&body),
            None => self.http.get(format!("{}{path}", self.url)),
        };
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let location = response
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_string());
        Events {
            location,
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.gate.add_permits(1000);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One Server-Sent Event.
#[derive(Clone, Debug, PartialEq)]
pub struct Sse {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

type ByteStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A response's events, read as they come.
pub struct Events {
    /// The stream's `Location` (where to rejoin it).
    pub location: Option<String>,
    body: ByteStream,
    buffer: String,
}

impl Events {
    /// The next event; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&block) {
                    return Some(event);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.body.next())
                .await
                .expect("no event for 20 s")?;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    }

    /// Every event to the end of the stream.
    pub async fn rest(&mut self) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

fn parse(block: &str) -> Option<Sse> {
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if event.is_empty() && data.is_empty() {
        return None; // a keep-alive comment
    }
    Some(Sse {
        id,
        event,
        data: serde_json::from_str(&data).unwrap_or(Value::Null),
    })
}

/// Event names, in order.
pub fn names(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}
