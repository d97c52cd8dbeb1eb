//! The crash test over Postgres, as `tests/crash.rs` of the engine runs it over sled: a real
//! child process (a worker) runs a graph and is killed with SIGKILL at random moments; the next
//! worker takes the dead one's lease over and resumes the thread. After each thread we check:
//!
//! - its final state equals that of an uninterrupted run, and
//! - no node ran again at a step whose checkpoint had been saved.
//!
//! The evidence lives outside the killed processes, in one log file per thread that every child
//! appends to (fsync after each line): `exec NODE STEP PID` before a node's body runs, `saved
//! STEP PID` once the run reports `CheckpointSaved` (sync durability: committed), `done PID`.
//! Children are this test binary run again with the hidden `crash_child` test selected.

mod support;

#[path = "../../../tests/support/killed_child.rs"]
mod killed_child;
use killed_child::stream_to_end;
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_postgres::PostgresCheckpointer;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::pg_cluster::cluster;

const CHILD_ENV: &str = "STATEGRAPH_PG_CRASH_CHILD";
const KILLS_PER_SCENARIO: usize = 20;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Trace {
    /// `node@step` for every node execution that made it into the state.
    #[state(append)]
    done: Vec<String>,
    /// Fan-out rounds completed.
    #[state(add)]
    rounds: u32,
    /// Bulk (`LargeState` only): ~3 KB per step, so the snapshots are stored as pieces.
    #[state(append)]
    pages: Vec<String>,
}

#[derive(Clone, Copy, Debug)]
enum Scenario {
    /// `agent` and `tool` in a loop, 120 steps of ~3 KB each: past 256 KiB the state's
    /// snapshots are pieces, written in the checkpoint's transaction.
    LargeState,
    /// `split -> w0..w4 -> join`, 12 rounds: five tasks per step, saved as pending writes.
    FanOut,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::LargeState => "large",
            Scenario::FanOut => "fanout",
        }
    }

    /// How long after a child's first node it may be killed: about a run's length, so kills
    /// land anywhere in it and threads still finish between kills.
    fn kill_window(self) -> Duration {
        match self {
            Scenario::LargeState => Duration::from_millis(400),
            Scenario::FanOut => Duration::from_millis(150),
        }
    }

    fn parse(s: &str) -> Scenario {
        match s {
            "large" => Scenario::LargeState,
            "fanout" => Scenario::FanOut,
            other => panic!("unknown scenario {other}"),
        }
    }
}

/// The execution log shared by every child of one thread.
struct ExecLog(Mutex<File>);

impl ExecLog {
    fn open(path: &Path) -> ExecLog {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        ExecLog(Mutex::new(file))
    }

    /// Appends one line, durably: a line written before a kill is there after it.
    fn line(&self, text: String) {
        let file = self.0.lock().unwrap();
        (&*file).write_all(format!("{text}\n").as_bytes()).unwrap();
        file.sync_data().unwrap();
    }
}

type NodeFn = Box<
    dyn Fn(
            Arc<Trace>,
            Context,
        ) -> futures::future::BoxFuture<'static, Result<TraceUpdate, NodeError>>
        + Send
        + Sync,
>;

/// A node that logs its execution (in a child), waits 0-3 ms, and appends `name@step`.
fn node(name: &str, log: &Option<Arc<ExecLog>>, update: fn(String) -> TraceUpdate) -> NodeFn {
    let (name, log) = (name.to_string(), log.clone());
    Box::new(move |_state, ctx| {
        if let Some(log) = &log {
            log.line(format!("exec {name} {} {}", ctx.step(), std::process::id()));
        }
        let entry = format!("{name}@{}", ctx.step());
        Box::pin(async move {
            let pause = rand::random::<u64>() % 4;
            if pause > 0 {
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Ok(update(entry))
        })
    })
}

fn append(entry: String) -> TraceUpdate {
    TraceUpdate::default().done(vec![entry])
}

fn append_page(entry: String) -> TraceUpdate {
    let page = entry.repeat(3000 / entry.len() + 1);
    TraceUpdate::default().done(vec![entry]).pages(vec![page])
}

fn append_round(entry: String) -> TraceUpdate {
    TraceUpdate::default().done(vec![entry]).rounds(1)
}

fn graph(scenario: Scenario, log: Option<Arc<ExecLog>>) -> StateGraph<Trace> {
    let mut g = StateGraph::<Trace>::named(scenario.name());
    match scenario {
        Scenario::LargeState => {
            g.add_node("agent", node("agent", &log, append_page));
            g.add_node("tool", node("tool", &log, append_page));
            g.add_edge(START, "agent").add_edge("agent", "tool");
            g.add_conditional_edges(
                "tool",
                |s: &Trace| if s.done.len() < 120 { "agent" } else { END },
                ["agent", END],
            );
        }
        Scenario::FanOut => {
            let workers: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
            g.add_node("split", node("split", &log, append));
            for w in &workers {
                g.add_node(w.as_str(), node(w, &log, append));
                g.add_edge("split", w.as_str());
            }
            g.add_node("join", node("join", &log, append_round));
            g.add_edge(START, "split");
            g.add_join(workers.iter().map(String::as_str), "join");
            g.add_conditional_edges(
                "join",
                |s: &Trace| if s.rounds < 12 { "split" } else { END },
                ["split", END],
            );
        }
    }
    g
}

// ---------------------------------------------------------------------------------------------
// The child: one worker.

#[test]
#[ignore = "a child process of the crash tests, started by them"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\t').collect();
    let [scenario, url, log, thread] = parts[..] else {
        panic!("bad child spec {spec:?}")
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(child(
        Scenario::parse(scenario),
        url,
        Path::new(log),
        thread,
    ));
}

/// Runs (or resumes) the thread to its end, logging executions and saved steps.
async fn child(scenario: Scenario, url: &str, log: &Path, thread: &str) {
    let pid = std::process::id();
    let log = Arc::new(ExecLog::open(log));
    let saver = Arc::new(PostgresCheckpointer::connect(url).await.unwrap());
    let graph = graph(scenario, Some(log.clone()))
        .compile()
        .unwrap()
        .with_checkpointer(saver);
    stream_to_end(&graph, thread, TraceUpdate::default, |step| {
        log.line(format!("saved {step} {pid}"))
    })
    .await;
    log.line(format!("done {pid}"));
}

// ---------------------------------------------------------------------------------------------
// The parent.

fn spawn_child(scenario: Scenario, url: &str, log: &Path, thread: &str) -> std::process::Child {
    let spec = [scenario.name(), url, &log.display().to_string(), thread].join("\t");
    Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--ignored", "--nocapture"])
        .arg("--test-threads=1")
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs one child and, unless `let_finish`, SIGKILLs it at a random moment once it runs nodes.
/// True when it was killed.
fn run_child(scenario: Scenario, url: &str, log: &Path, thread: &str, let_finish: bool) -> bool {
    let len_before = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
    let mut child = spawn_child(scenario, url, log, thread);
    if !let_finish {
        let give_up = Instant::now() + Duration::from_secs(30);
        while std::fs::metadata(log).map(|m| m.len()).unwrap_or(0) <= len_before
            && child.try_wait().unwrap().is_none()
        {
            assert!(Instant::now() < give_up, "a child made no progress in 30 s");
            std::thread::sleep(Duration::from_micros(500));
        }
        let window = scenario.kill_window().as_micros() as u64;
        std::thread::sleep(Duration::from_micros(rand::random::<u64>() % window));
        // SAFETY: kill(2) has no memory-safety preconditions. The child is not reaped yet,
        // so its pid cannot have been reused.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
        }
    }
    let output = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    match (output.status.success(), output.status.signal()) {
        (true, _) => false,
        (false, Some(libc::SIGKILL)) => true,
        _ => panic!(
            "a child of thread {thread} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

/// Checks that no node ran at a step already saved; returns the executions and how many
/// (node, step) pairs ran more than once (each by a worker killed before its step was saved).
fn check_log(thread: &str, text: &str) -> (usize, usize, usize) {
    let (mut saved_at, mut executions, mut done) = (None::<u64>, 0, 0);
    let mut counts: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["exec", node, step, pid] => {
                let step: u64 = step.parse().unwrap();
                if let Some(saved) = saved_at {
                    assert!(
                        step > saved,
                        "thread {thread}, log line {}: pid {pid} ran {node} at step {step}, but \
                         step {saved} had been saved; the log:\n{text}",
                        i + 1
                    );
                }
                executions += 1;
                *counts.entry((node.to_string(), step)).or_default() += 1;
            }
            ["saved", step, _pid] => {
                let step: u64 = step.parse().unwrap();
                saved_at = Some(saved_at.map_or(step, |s| s.max(step)));
            }
            ["done", _pid] => done += 1,
            _ => panic!("thread {thread}: unreadable log line {line:?}"),
        }
    }
    let reruns = counts.values().filter(|&&n| n > 1).count();
    (executions, reruns, done)
}

fn crash_scenario(scenario: Scenario) {
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let expected = runtime
        .block_on(
            graph(scenario, None)
                .compile()
                .unwrap()
                .invoke(TraceUpdate::default(), RunConfig::new()),
        )
        .unwrap()
        .state;
    let (mut kills, mut threads, mut executions, mut reruns) = (0, 0, 0, 0);
    while kills < KILLS_PER_SCENARIO {
        let thread = format!("{}-{threads}", scenario.name());
        let log = dir.path().join(format!("{thread}.log"));
        // Kill until a child gets through; after 30 kills, let one finish.
        let mut attempt = 0;
        while run_child(scenario, db.url(), &log, &thread, attempt >= 30) {
            kills += 1;
            attempt += 1;
        }
        let text = std::fs::read_to_string(&log).unwrap();
        let (ran, again, done) = check_log(&thread, &text);
        assert!(done >= 1, "thread {thread} never finished:\n{text}");
        let saver = runtime
            .block_on(PostgresCheckpointer::connect(db.url()))
            .unwrap();
        let graph = graph(scenario, None)
            .compile()
            .unwrap()
            .with_checkpointer(Arc::new(saver));
        let state = runtime.block_on(graph.get_state(&thread, None)).unwrap();
        assert!(
            state.next.is_empty(),
            "thread {thread} has {:?} left to run",
            state.next
        );
        assert_eq!(
            state.values, expected,
            "thread {thread} ended in another state than an uninterrupted run"
        );
        executions += ran;
        reruns += again;
        threads += 1;
    }
    if let Scenario::LargeState = scenario {
        let pieces: i64 = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let row = client
                .query_one("SELECT count(*) FROM stategraph_pieces", &[])
                .await
                .unwrap();
            row.get(0)
        });
        assert!(
            pieces > 0,
            "the large state's snapshots were not stored as pieces"
        );
    }
    eprintln!(
        "{}: {kills} kills over {threads} threads; {executions} node executions, {reruns} re-run \
         after a kill before their step was saved; none after",
        scenario.name()
    );
}

#[test]
fn crash_a_worker_writing_a_large_state() {
    crash_scenario(Scenario::LargeState);
}

#[test]
fn crash_a_worker_in_a_fan_out() {
    crash_scenario(Scenario::FanOut);
}
