//! The background retention sweep of the long-running commands, through real processes:
//! `graph serve --retention-every 1` over a folder of threads and `graph worker
//! --retention-every 1` over a throwaway Postgres, each in a folder whose
//! `graphs/pipeline.toml` says `[retention] keep_days = 0` (any thread not updated since it
//! was last written goes, a paused one excepted). A finished thread goes within seconds; a
//! paused thread stays, and so does a thread while a run writes it (it goes once the run has
//! ended). And a node of a run the server started reaches the long-term store (`ctx.store()`),
//! as `graph run`'s nodes do.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
mod queue_support;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;

use harness::{built_in_graph, Db, Project};
use queue_support::pg_cluster::cluster;
use queue_support::{wait_until, Graph};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Long enough for a sweep every second to have run a few times on a loaded machine.
const WITHIN: Duration = Duration::from_secs(30);

/// The built-in pipeline's graph file with a policy that deletes any thread not being written
/// (paused ones excepted), whole days being the policy's unit: 0 days is "at once".
fn pipeline_with_retention(built_in: &str) -> String {
    format!("{built_in}\n[retention]\nkeep_days = 0\n")
}

/// One HTTP/1.1 request; its status and JSON body.
fn http(addr: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect to the server");
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_default())
}

fn announced_addr(stderr: &str) -> String {
    stderr
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the address it serves on")
        .to_string()
}

/// The thread ids of `GET /retention`'s newest round that removed something.
fn swept_by_server(addr: &str) -> Vec<String> {
    let (status, body) = http(addr, "GET", "/retention", &json!({}));
    assert_eq!(status, 200, "{body}");
    let graphs = body["last_removal"]["graphs"].as_array().cloned();
    graphs
        .unwrap_or_default()
        .iter()
        .flat_map(|g| {
            g["report"]["deleted"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|d| d["thread"].as_str().unwrap().to_string())
        .collect()
}

fn run_status(addr: &str, thread: &str, run: &str) -> String {
    let (status, body) = http(
        addr,
        "GET",
        &format!("/threads/{thread}/runs/{run}"),
        &json!({}),
    );
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap().to_string()
}

#[test]
fn the_server_sweeps_finished_threads_and_leaves_paused_and_running_ones() {
    let db = Db::new();
    let project = Project::new();
    project.graph_file("pipeline", pipeline_with_retention);
    let here = |args: &[&str]| db.graph(args).current_dir(project.path());
    let paused = here(&["run", "pipeline", "--input", "sled", "--set", "step_ms=1"])
        .expect(3)
        .thread();

    let mut server = here(&["serve", "--addr", "127.0.0.1:0", "--retention-every", "1"]).spawn();
    server.wait_for("serving");
    let addr = announced_addr(&server.stderr());
    assert!(
        server
            .stderr()
            .contains("retention: sweeping every 1s by the [retention] policies of pipeline"),
        "{}",
        server.stderr()
    );
    // A slow run, in the background: the thread is written for several seconds.
    let slow_run = json!({
        "assistant_id": "pipeline",
        "input": {"topic": "slow"},
        "config": {"configurable": {"step_ms": 1500, "yes": true}},
    });
    let (status, started) = http(&addr, "POST", "/threads", &json!({"thread_id": "slow"}));
    assert_eq!(status, 200, "{started}");
    let (status, started) = http(&addr, "POST", "/threads/slow/runs", &slow_run);
    assert_eq!(status, 200, "{started}");
    let slow = started["run_id"].as_str().unwrap().to_string();
    // A quick run to its end.
    let quick_run = json!({
        "assistant_id": "pipeline",
        "input": {"topic": "quick"},
        "config": {"configurable": {"step_ms": 1, "yes": true}},
    });
    http(&addr, "POST", "/threads", &json!({"thread_id": "quick"}));
    let (status, out) = http(&addr, "POST", "/threads/quick/runs/wait", &quick_run);
    assert_eq!(status, 200, "{out}");

    let started = Instant::now();
    wait_until(WITHIN, "the finished thread swept", || {
        swept_by_server(&addr).contains(&"quick".to_string())
    });
    // Seen gone while the slow run still writes its thread, which is still there.
    assert_eq!(run_status(&addr, "slow", &slow), "running");
    let ids = db.thread_ids();
    assert!(!ids.contains(&"quick".to_string()), "{ids:?}");
    assert!(ids.contains(&"slow".to_string()), "{ids:?}");
    assert!(ids.contains(&paused), "{ids:?}");
    let took = started.elapsed();

    // Once its run has ended, the slow thread goes too; the paused one never does.
    wait_until(WITHIN, "the slow run to end", || {
        run_status(&addr, "slow", &slow) == "success"
    });
    wait_until(WITHIN, "the slow thread swept once finished", || {
        !db.thread_ids().contains(&"slow".to_string())
    });
    assert!(db.thread_ids().contains(&paused));

    server.signal(libc::SIGTERM);
    let out = server.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("retention: pipeline: deleted 1 thread(s) (quick)"),
        "{}",
        out.stderr
    );
    eprintln!("the finished thread was swept {took:?} after its run ended");
}

#[test]
fn the_server_does_not_sweep_with_0_or_without_a_policy() {
    for (policy, every) in [(true, "0"), (false, "1")] {
        let db = Db::new();
        let project = Project::new();
        if policy {
            project.graph_file("pipeline", pipeline_with_retention);
        }
        let args = [
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=1",
        ];
        let done = db
            .graph(&args)
            .current_dir(project.path())
            .expect(0)
            .thread();
        let mut server = db
            .graph(&["serve", "--addr", "127.0.0.1:0", "--retention-every", every])
            .current_dir(project.path())
            .spawn();
        server.wait_for("serving");
        let addr = announced_addr(&server.stderr());
        let (status, body) = http(&addr, "GET", "/retention", &json!({}));
        assert_eq!(status, 404, "{body}");
        std::thread::sleep(Duration::from_secs(2));
        assert!(db.thread_ids().contains(&done));
        server.signal(libc::SIGTERM);
        let out = server.finish();
        assert!(!out.stderr.contains("retention:"), "{}", out.stderr);
    }
}

#[test]
fn a_worker_sweeps_finished_threads_and_leaves_paused_and_running_ones() {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("graphs")).unwrap();
    std::fs::write(
        dir.path().join("graphs/pipeline.toml"),
        pipeline_with_retention(&built_in_graph("pipeline")),
    )
    .unwrap();
    let graph = Graph::new(db.url(), dir.path());
    let submit = |thread: &str, extra: &[&str]| {
        let mut args = vec!["submit", "pipeline", "--input", thread, "--thread", thread];
        args.extend_from_slice(extra);
        graph.ok(&args).trim().to_string()
    };
    submit("paused", &["--set", "step_ms=1"]);
    let slow = submit("slow", &["--yes", "--set", "step_ms=1500"]);
    submit("quick", &["--yes", "--set", "step_ms=1"]);
    let threads = || -> Vec<String> {
        let listed: Value = serde_json::from_str(&graph.ok(&["threads", "--json"])).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_string())
            .collect()
    };
    let status_of = |run: &str| -> String {
        let runs = graph.runs();
        let found = runs.iter().find(|r| r["run_id"] == run).cloned();
        found.unwrap()["status"].as_str().unwrap().to_string()
    };

    let mut worker = graph.worker("w1", &["--concurrency", "3", "--retention-every", "1"]);
    wait_until(WITHIN, "the finished thread swept", || {
        worker.count("retention: pipeline: deleted") > 0
    });
    let log = worker.log();
    assert!(
        log.contains("retention: sweeping every 1s by the [retention] policies of pipeline"),
        "{log}"
    );
    assert!(log.contains("deleted 1 thread(s) (quick)"), "{log}");
    assert_eq!(status_of(&slow), "running", "{log}");
    let ids = threads();
    assert!(!ids.contains(&"quick".to_string()), "{ids:?}");
    assert!(ids.contains(&"slow".to_string()), "{ids:?}");
    assert!(ids.contains(&"paused".to_string()), "{ids:?}");

    wait_until(WITHIN, "the slow thread swept once its run ended", || {
        !threads().contains(&"slow".to_string())
    });
    assert_eq!(status_of(&slow), "done");
    assert!(threads().contains(&"paused".to_string()));
    worker.signal(libc::SIGTERM);
    worker.wait(WITHIN);
}

#[test]
fn a_node_of_a_run_the_server_started_reaches_the_long_term_store() {
    let r = research::Research::new();
    // The server builds its graphs from their files at start: the corpus and the memory
    // setting go in `graphs/research.toml`.
    let project = Project::new();
    let corpus = r.docs.path().display().to_string();
    project.graph_file("research", |text| {
        let text = text.replace("# corpus = \"docs/\"", &format!("corpus = {corpus:?}"));
        format!("{text}\n[settings.memory]\nenabled = true\nuser = \"ada\"\n")
    });
    let mut server = r
        .graph(&["serve", "--addr", "127.0.0.1:0", "--retention-every", "0"])
        .current_dir(project.path())
        .spawn();
    server.wait_for("serving");
    let addr = announced_addr(&server.stderr());
    let run = json!({
        "assistant_id": "research",
        "input": {"question": research::QUESTION},
        "config": {"configurable": {"yes": true}},
    });
    http(
        &addr,
        "POST",
        "/threads",
        &json!({"thread_id": "remembered"}),
    );
    let (status, out) = http(&addr, "POST", "/threads/remembered/runs/wait", &run);
    assert_eq!(status, 200, "{out}");
    assert!(out.get("__error__").is_none(), "{out}");
    // The server has the store open (one process at a time): read it once it has stopped.
    server.signal(libc::SIGTERM);
    let stopped = server.finish();
    assert_eq!(stopped.code, Some(0), "{}", stopped.stderr);
    let kept = r
        .graph(&["store", "search", "memories/ada", "--json"])
        .expect(0)
        .json();
    let keys: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["remembered"], "{kept:#}");
}

#[test]
fn a_node_of_a_run_a_worker_took_reaches_the_long_term_store() {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let graph = Graph::new(db.url(), dir.path());
    let model = fake_openai::FakeOpenAi::start(research::three_todos(), |_| research::done());
    let docs = research::corpus();
    let with_model = |mut cmd: std::process::Command| {
        for var in [
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "GRAPH_PROVIDER",
            "TAVILY_API_KEY",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("OPENAI_BASE_URL", model.base_url())
            .env("OPENAI_API_KEY", "sk-test")
            .env("GRAPH_MODEL", "fake-model");
        cmd
    };
    let corpus = format!("search.corpus={}", docs.path().display());
    let args = [
        "submit",
        "research",
        "--input",
        research::QUESTION,
        "--thread",
        "remembered",
        "--yes",
        "--set",
        &corpus,
        "--set",
        "memory.enabled=true",
        "--set",
        "memory.user=ada",
    ];
    let out = with_model(graph.cmd(&args)).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let worker = with_model(graph.cmd(&["worker", "--retention-every", "0"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut worker = Reaped(Some(worker));
    let status = || {
        let runs = graph.runs();
        let found = runs.iter().find(|r| r["run_id"] == run.as_str()).cloned();
        found.unwrap()["status"].as_str().unwrap().to_string()
    };
    wait_until(WITHIN, "the research run to end", || {
        !matches!(status().as_str(), "queued" | "running")
    });
    let worker = worker.0.take().unwrap();
    // SAFETY: kill(2) on the pid of a child this test started and has not waited for.
    unsafe { libc::kill(worker.id() as i32, libc::SIGTERM) };
    let ended = worker.wait_with_output().unwrap();
    assert_eq!(
        status(),
        "done",
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    let kept: Value =
        serde_json::from_str(&graph.ok(&["store", "search", "memories/ada", "--json"])).unwrap();
    let keys: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["remembered"], "{kept:#}");
}

/// A child process killed if the test fails before it has ended.
struct Reaped(Option<std::process::Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
