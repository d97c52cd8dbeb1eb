//! What the web page adds to LangGraph's API, over real HTTP: a thread's cost (in listings and
//! `GET /threads/{id}/cost`), its artifact files (listed, read with their content type, and
//! nothing outside their folder: `..`, absolute paths and symlinks are refused), and a fork
//! from any checkpoint into a new thread. The graph here keeps a priced usage ledger and
//! declares two artifacts; the server writes them into a temporary folder.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError};
use stategraph::{State, StateGraph, END, START};
use stategraph_artifacts::{Artifact, ArtifactSet};
use stategraph_llm::{Pricing, Usage, UsageLedger};
use stategraph_registry::{BuildError, GraphFactory, GraphFile, Registry};
use stategraph_server::{Server, ServerConfig};
use stategraph_sled::FolderCheckpointer;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A memo: `write` notes (paying for one model call), then `finish`.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Memo {
    pub topic: String,
    pub notes: Vec<String>,
    pub done: bool,
    pub usage: UsageLedger,
}

const PRICING: Pricing = Pricing {
    input_per_million: 2.0,
    output_per_million: 10.0,
};

/// What `write`'s one call costs: 1000 tokens in, 200 out.
const WRITE_USD: f64 = (1000.0 * 2.0 + 200.0 * 10.0) / 1_000_000.0;

struct Memos;

impl GraphFactory for Memos {
    type State = Memo;
    fn name(&self) -> &str {
        "memo"
    }
    fn description(&self) -> &str {
        "Writes notes on a topic into files"
    }
    fn input_field(&self) -> Option<&str> {
        Some("topic")
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Memo>, BuildError> {
        let mut g = StateGraph::<Memo>::named("memo");
        g.add_node("write", |s: Arc<Memo>, _c: Context| async move {
            let mut usage = s.usage.clone();
            usage.record("write", Usage::new(1000, 200), Some(&PRICING));
            Ok::<_, NodeError>(
                MemoUpdate::default()
                    .notes(vec![format!("# {}", s.topic), "first note".into()])
                    .usage(usage),
            )
        });
        g.add_node("finish", |_s: Arc<Memo>, _c: Context| async move {
            Ok::<_, NodeError>(MemoUpdate::default().done(true))
        });
        g.add_edge(START, "write")
            .add_edge("write", "finish")
            .add_edge("finish", END);
        Ok(g.compile()?)
    }
    fn artifacts(&self, _file: &GraphFile) -> Option<ArtifactSet<Memo>> {
        Some(
            ArtifactSet::new()
                .with(Artifact::markdown(
                    "notes",
                    "notes.md",
                    "write",
                    |s: &Memo| s.notes.join("\n"),
                ))
                .with(Artifact::json(
                    "summary",
                    "data/summary.json",
                    "finish",
                    |s: &Memo| json!({"topic": s.topic, "done": s.done}),
                )),
        )
    }
}

struct Served {
    url: String,
    http: reqwest::Client,
    out: PathBuf,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl Served {
    /// The server over a folder store, writing new threads' artifacts under `out/`.
    async fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FolderCheckpointer::open(dir.path().join("db")).unwrap());
        let out = dir.path().join("out");
        let mut registry = Registry::new();
        registry.register(Memos);
        let releasing = store.clone();
        let server = Server::new(registry, store).on_thread_idle(move |t| {
            let _ = releasing.release(t);
        });
        let config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            artifacts_dir: Some(out.clone()),
            ..ServerConfig::default()
        };
        let bound = server.bind(config).await.unwrap();
        let url = format!("http://{}", bound.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(bound.serve(async move {
            let _ = stopped.await;
        }));
        Served {
            url,
            http: reqwest::Client::new(),
            out,
            _stop: stop,
            _dir: dir,
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.call(method, path, body).await;
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer
    }

    /// A file of the thread's artifacts: status, content type, body.
    async fn file(&self, thread: &str, path: &str) -> (u16, String, String) {
        let response = self
            .http
            .get(format!("{}/threads/{thread}/artifacts/file", self.url))
            .query(&[("path", path)])
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (status, kind, response.text().await.unwrap())
    }

    /// A thread of the memo graph, run to its end.
    async fn finished(&self, topic: &str) -> String {
        let t = self.ok("POST", "/threads", Some(json!({}))).await;
        let thread = t["thread_id"].as_str().unwrap().to_string();
        let run = json!({"assistant_id": "memo", "input": {"topic": topic}});
        let done = self
            .ok("POST", &format!("/threads/{thread}/runs/wait"), Some(run))
            .await;
        assert_eq!(done["done"], true, "{done}");
        thread
    }
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-12)
}

#[tokio::test]
async fn a_threads_cost_is_listed_and_read_in_full() {
    let s = Served::start().await;
    let thread = s.finished("rust").await;
    let one = s.ok("GET", &format!("/threads/{thread}"), None).await;
    assert!(close(&one["cost"]["usd"], WRITE_USD), "{one}");
    assert_eq!(one["cost"]["calls"], 1);
    let listed = s
        .ok("POST", "/threads/search", Some(json!({"limit": 10})))
        .await;
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread.as_str())
        .expect("the thread is listed");
    assert!(close(&row["cost"]["usd"], WRITE_USD), "{row}");

    let cost = s.ok("GET", &format!("/threads/{thread}/cost"), None).await;
    let c = &cost["cost"];
    assert!(close(&c["usd"], WRITE_USD), "{cost}");
    assert_eq!(
        (c["input_tokens"].as_u64(), c["output_tokens"].as_u64()),
        (Some(1000), Some(200))
    );
    assert!(close(&c["nodes"]["write"]["usd"], WRITE_USD), "{cost}");
    assert!(c["off_ledger"].is_null(), "nothing failed: {cost}");

    // A thread that never ran keeps no ledger: its cost is null, not zero.
    let empty = s.ok("POST", "/threads", Some(json!({}))).await;
    let id = empty["thread_id"].as_str().unwrap();
    assert!(empty["cost"].is_null(), "{empty}");
    let none = s.ok("GET", &format!("/threads/{id}/cost"), None).await;
    assert!(none["cost"].is_null(), "{none}");
    let (status, _) = s.call("GET", "/threads/nope/cost", None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_threads_artifacts_are_listed_and_read_and_nothing_outside_them() {
    let s = Served::start().await;
    let thread = s.finished("rust").await;
    let list = s
        .ok("GET", &format!("/threads/{thread}/artifacts"), None)
        .await;
    assert_eq!(list["version"], "v1", "{list}");
    assert_eq!(list["current"], "v1");
    assert_eq!(list["versions"][0]["reason"], "run");
    let dir = PathBuf::from(list["dir"].as_str().unwrap());
    assert_eq!(dir, s.out.join("memo-v1"), "under the configured folder");
    let files: Vec<(String, u64)> = list["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let on_disk = |p: &str| std::fs::metadata(dir.join(p)).unwrap().len();
    assert_eq!(
        files,
        vec![
            ("data/summary.json".into(), on_disk("data/summary.json")),
            ("notes.md".into(), on_disk("notes.md")),
        ]
    );

    let (status, kind, text) = s.file(&thread, "notes.md").await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "text/markdown; charset=utf-8")
    );
    assert_eq!(text, "# rust\nfirst note");
    assert_eq!(text, std::fs::read_to_string(dir.join("notes.md")).unwrap());
    let (status, kind, text) = s.file(&thread, "data/summary.json").await;
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"topic": "rust", "done": true})
    );

    // Nothing outside the version folder: a file beside it, one elsewhere, a link out.
    let secret = s.out.join("secret.txt");
    std::fs::write(&secret, "not an artifact").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("link.md")).unwrap();
    std::os::unix::fs::symlink(s.out.as_path(), dir.join("up")).unwrap();
    let absolute = secret.display().to_string();
    for bad in [
        "../secret.txt",
        "data/../../secret.txt",
        absolute.as_str(),
        "link.md",
        "up/secret.txt",
        "/etc/passwd",
    ] {
        let (status, _, text) = s.file(&thread, bad).await;
        assert_eq!(status, 403, "{bad}: {text}");
        assert!(
            text.contains("outside the thread's artifact folder"),
            "{text}"
        );
        assert!(!text.contains("not an artifact"));
    }
    // The links are not listed as artifacts either.
    let again = s
        .ok("GET", &format!("/threads/{thread}/artifacts"), None)
        .await;
    assert_eq!(again["files"].as_array().unwrap().len(), 2, "{again}");

    let (status, _, text) = s.file(&thread, "none.md").await;
    assert_eq!(status, 404, "{text}");
    let (status, body) = s
        .call("GET", &format!("/threads/{thread}/artifacts/file"), None)
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("path"));
    let (status, body) = s
        .call(
            "GET",
            &format!("/threads/{thread}/artifacts?version=v9"),
            None,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("versions are v1"),
        "{body}"
    );
    let (status, _) = s.call("GET", "/threads/nope/artifacts", None).await;
    assert_eq!(status, 404);

    // A thread not run yet has no folder, and says so.
    let empty = s.ok("POST", "/threads", Some(json!({}))).await;
    let id = empty["thread_id"].as_str().unwrap();
    let list = s.ok("GET", &format!("/threads/{id}/artifacts"), None).await;
    assert_eq!(list["versions"], json!([]));
    assert_eq!(list["files"], json!([]));
}

#[tokio::test]
async fn a_fork_from_a_checkpoint_is_a_new_thread_that_runs_on_from_there() {
    let s = Served::start().await;
    let source = s.finished("forks").await;
    let history = s
        .ok(
            "POST",
            &format!("/threads/{source}/history"),
            Some(json!({"limit": 10})),
        )
        .await;
    let before = history.as_array().unwrap().len();
    let after_write = history
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["next"] == json!(["finish"]))
        .expect("the checkpoint after `write`");
    let checkpoint = after_write["checkpoint"]["checkpoint_id"].as_str().unwrap();

    let fork = s
        .ok(
            "POST",
            &format!("/threads/{source}/fork"),
            Some(json!({"checkpoint_id": checkpoint, "metadata": {"why": "try again"}})),
        )
        .await;
    let new = fork["thread_id"].as_str().unwrap().to_string();
    assert_ne!(new, source);
    assert_eq!(fork["metadata"]["graph_id"], "memo", "{fork}");
    assert_eq!(fork["metadata"]["why"], "try again");
    assert_eq!(
        fork["metadata"]["forked_from"]["thread_id"],
        source.as_str()
    );
    assert_eq!(fork["metadata"]["forked_from"]["checkpoint_id"], checkpoint);
    let state = s.ok("GET", &format!("/threads/{new}/state"), None).await;
    assert_eq!(state["next"], json!(["finish"]), "{state}");
    assert_eq!(state["values"]["done"], false);
    assert_eq!(state["values"]["notes"], after_write["values"]["notes"]);
    // It paid what its source had paid up to there.
    assert!(close(&fork["cost"]["usd"], WRITE_USD), "{fork}");
    // It has a folder of its own, beside its source's, with the files of where it starts.
    let files = s
        .ok("GET", &format!("/threads/{new}/artifacts"), None)
        .await;
    assert_eq!(files["versions"][0]["reason"], format!("fork of {source}"));
    let dir = PathBuf::from(files["dir"].as_str().unwrap());
    assert_eq!(dir.parent(), Some(s.out.as_path()), "{files}");
    assert_ne!(dir, s.out.join("memo-v1"));
    let (status, _, summary) = s.file(&new, "data/summary.json").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&summary).unwrap()["done"],
        false
    );

    // Listed among the threads; the source is untouched.
    let listed = s
        .ok("POST", "/threads/search", Some(json!({"limit": 10})))
        .await;
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["thread_id"] == new.as_str()));
    let again = s
        .ok(
            "POST",
            &format!("/threads/{source}/history"),
            Some(json!({"limit": 10})),
        )
        .await;
    assert_eq!(again.as_array().unwrap().len(), before);

    // Run on, the fork finishes from where it started; `write` does not run again.
    let done = s
        .ok(
            "POST",
            &format!("/threads/{new}/runs/wait"),
            Some(json!({"assistant_id": "memo"})),
        )
        .await;
    assert_eq!(done["done"], true, "{done}");
    assert_eq!(done["usage"]["nodes"]["write"]["calls"], 1, "{done}");
    let (_, _, summary) = s.file(&new, "data/summary.json").await;
    assert_eq!(
        serde_json::from_str::<Value>(&summary).unwrap()["done"],
        true
    );

    // Refusals that say what is wrong.
    let path = format!("/threads/{source}/fork");
    let (status, body) = s
        .call("POST", &path, Some(json!({"checkpoint_id": "x"})))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("checkpoint_id"));
    let (status, body) = s.call("POST", &path, Some(json!({}))).await;
    assert_eq!(status, 422, "{body}");
    let taken = json!({"checkpoint_id": checkpoint, "thread_id": new});
    let (status, body) = s.call("POST", &path, Some(taken)).await;
    assert_eq!(status, 409, "{body}");
    let other = s.finished("other").await;
    let foreign = s.ok("GET", &format!("/threads/{other}/state"), None).await["checkpoint"]
        ["checkpoint_id"]
        .clone();
    let (status, body) = s
        .call("POST", &path, Some(json!({"checkpoint_id": foreign})))
        .await;
    assert_eq!(status, 404, "a checkpoint of another thread: {body}");
    let (status, _) = s
        .call(
            "POST",
            "/threads/nope/fork",
            Some(json!({"checkpoint_id": checkpoint})),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_additions_are_in_the_openapi_document() {
    let s = Served::start().await;
    let doc = s.ok("GET", "/openapi.json", None).await;
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/threads/{id}/cost", "get"),
        ("/threads/{id}/artifacts", "get"),
        ("/threads/{id}/artifacts/file", "get"),
        ("/threads/{id}/fork", "post"),
    ] {
        assert!(paths[path][method].is_object(), "{path} {method}");
    }
}
