//! The crash test: a real child process runs a graph on a sled store and is killed with SIGKILL
//! at random moments; the next child resumes the thread. After each thread finishes we check:
//!
//! - its final state equals that of an uninterrupted run, and
//! - no node ran again at a step whose checkpoint had been saved.
//!
//! The evidence lives outside the killed processes, in one log file per thread that every child
//! appends to (O_APPEND, fsync after each line):
//! - `exec NODE STEP PID` before a node's body runs;
//! - `saved STEP PID` once the run reports `CheckpointSaved` for STEP, which the engine emits
//!   only after the (sync, flushed) save returned;
//! - `done PID` when a child saw the run through to the end.
//!
//! Children are this test binary run again (`current_exe`) with the hidden `crash_child` test
//! selected and the scenario in an environment variable, the way sled's crash tests do it.

use stategraph_checkpoint_conformance::faulty_store;

use faulty_store::{FaultyStore, Op};
#[path = "support/killed_child.rs"]
mod killed_child;
use killed_child::stream_to_end;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::CheckpointError;
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_sled::SledCheckpointer;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "STATEGRAPH_CRASH_CHILD";
/// Kills per scenario; three scenarios make more than 100.
const KILLS_PER_SCENARIO: usize = 35;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Trace {
    /// `node@step` for every node execution that made it into the state.
    #[state(append)]
    done: Vec<String>,
    /// Fan-out rounds completed.
    #[state(add)]
    rounds: u32,
    /// Bulk (`LargeState` only): ~3 KB per step.
    #[state(append)]
    pages: Vec<String>,
}

#[derive(Clone, Copy, Debug)]
enum Scenario {
    /// 40 nodes in a line.
    Linear,
    /// `agent` and `tool` in a loop, 120 steps.
    Looping,
    /// `split -> w0..w4 -> join`, 12 rounds: five tasks per parallel step.
    FanOut,
    /// `agent` and `tool` in a loop, 120 steps of ~3 KB each: past 256 KiB the state's
    /// snapshots are stored as pieces shared between them, written before their checkpoint.
    LargeState,
    /// `prep -> inner -> finish`, where `inner` is a compiled graph (`agent` and `tool` in a
    /// loop, 80 steps) checkpointed under the namespace `inner:{task}` of the thread: kills land
    /// inside the child, whose steps must resume where they were.
    Subgraph,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Linear => "linear",
            Scenario::Looping => "looping",
            Scenario::FanOut => "fanout",
            Scenario::LargeState => "large",
            Scenario::Subgraph => "subgraph",
        }
    }

    fn parse(s: &str) -> Scenario {
        match s {
            "linear" => Scenario::Linear,
            "looping" => Scenario::Looping,
            "fanout" => Scenario::FanOut,
            "large" => Scenario::LargeState,
            "subgraph" => Scenario::Subgraph,
            other => panic!("unknown scenario {other}"),
        }
    }

    /// How long after a child's first node a kill may land: about half a child's run here.
    fn kill_window(self) -> Duration {
        match self {
            Scenario::Linear => Duration::from_millis(70),
            Scenario::Looping => Duration::from_millis(250),
            Scenario::FanOut => Duration::from_millis(50),
            Scenario::LargeState => Duration::from_millis(300),
            Scenario::Subgraph => Duration::from_millis(200),
        }
    }
}

/// The execution log shared by every child of one thread.
struct ExecLog(Mutex<File>);

impl ExecLog {
    fn open(path: &Path) -> ExecLog {
        ExecLog(Mutex::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap(),
        ))
    }

    /// Appends one line, durably: a line written before a kill is there after it.
    fn line(&self, text: String) {
        let file = self.0.lock().unwrap();
        (&*file).write_all(format!("{text}\n").as_bytes()).unwrap();
        file.sync_data().unwrap();
    }
}

/// A node that logs its execution (in a child), waits 0-3 ms, and appends `name@step`.
fn node(
    name: &str,
    log: &Option<Arc<ExecLog>>,
    update: fn(String) -> TraceUpdate,
) -> impl Fn(
    Arc<Trace>,
    Context,
) -> futures::future::BoxFuture<'static, Result<TraceUpdate, NodeError>>
       + Send
       + Sync
       + 'static {
    let (name, log) = (name.to_string(), log.clone());
    move |_state, ctx| {
        if let Some(log) = &log {
            let ns = namespace_of(ctx.thread_id());
            log.line(format!(
                "exec {name} {} {}{ns}",
                ctx.step(),
                std::process::id()
            ));
        }
        let entry = format!("{name}@{}", ctx.step());
        Box::pin(async move {
            let pause = rand::random::<u64>() % 4;
            if pause > 0 {
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Ok(update(entry))
        })
    }
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
        Scenario::Linear => {
            let names: Vec<String> = (0..40).map(|i| format!("n{i:02}")).collect();
            for name in &names {
                g.add_node(name.as_str(), node(name, &log, append));
            }
            g.add_edge(START, names[0].as_str());
            for pair in names.windows(2) {
                g.add_edge(pair[0].as_str(), pair[1].as_str());
            }
            g.add_edge(names[39].as_str(), END);
        }
        Scenario::Looping | Scenario::LargeState => {
            let update = match scenario {
                Scenario::LargeState => append_page,
                _ => append,
            };
            g.add_node("agent", node("agent", &log, update));
            g.add_node("tool", node("tool", &log, update));
            g.add_edge(START, "agent").add_edge("agent", "tool");
            g.add_conditional_edges(
                "tool",
                |s: &Trace| if s.done.len() < 120 { "agent" } else { END },
                ["agent", END],
            );
        }
        Scenario::Subgraph => {
            let mut inner = StateGraph::<Trace>::named("inner");
            inner.add_node("agent", node("agent", &log, append));
            inner.add_node("tool", node("tool", &log, append));
            inner.add_edge(START, "agent").add_edge("agent", "tool");
            inner.add_conditional_edges(
                "tool",
                |s: &Trace| if s.done.len() < 81 { "agent" } else { END },
                ["agent", END],
            );
            g.add_node("prep", node("prep", &log, append));
            g.add_node("inner", inner.compile().unwrap());
            g.add_node("finish", node("finish", &log, append));
            g.add_edge(START, "prep")
                .add_edge("prep", "inner")
                .add_edge("inner", "finish")
                .add_edge("finish", END);
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

/// ` NS` for a subgraph's thread (`{root}/{ns}`), empty for the root: the log's last word.
fn namespace_of(thread: &str) -> String {
    match thread.split_once('/') {
        Some((_, ns)) => format!(" {ns}"),
        None => String::new(),
    }
}

/// The namespace the child ran under, as its log lines end (` inner:{task}`).
fn namespace_of_inner(text: &str) -> String {
    text.lines()
        .find_map(|l| l.split(' ').find(|w| w.starts_with("inner:")))
        .map(|ns| format!(" {ns}"))
        .unwrap_or_else(|| " inner:?".to_string())
}

// ---------------------------------------------------------------------------------------------
// The child.

#[test]
#[ignore = "a child process of the crash tests, started by them"]
fn crash_child() {
    // Run on its own (`cargo test -- --ignored`), it has nothing to do.
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\t').collect();
    let [scenario, store, log, thread] = parts[..] else {
        panic!("bad child spec {spec:?}")
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(child(
        Scenario::parse(scenario),
        Path::new(store),
        Path::new(log),
        thread,
    ));
}

/// Runs (or resumes) the thread to its end, logging executions and saved steps.
async fn child(scenario: Scenario, store: &Path, log: &Path, thread: &str) {
    let pid = std::process::id();
    let log = Arc::new(ExecLog::open(log));
    let deadline = Instant::now() + Duration::from_secs(20);
    // The killed process may still hold the store for a moment while it dies.
    let saver = loop {
        match SledCheckpointer::open(store) {
            Ok(saver) => break saver,
            Err(CheckpointError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("cannot open the store: {e}"),
        }
    };
    // The root's saves are logged from the run's events; a subgraph's once its checkpoint was
    // written and flushed: the evidence that a child's step was durable before the kill.
    let saves = log.clone();
    let saver = Arc::new(FaultyStore::over(Arc::new(saver)).watching(move |op| {
        if let Op::PutCheckpoint {
            thread,
            step,
            flush: true,
            ..
        } = op
        {
            let ns = namespace_of(thread);
            if !ns.is_empty() {
                saves.line(format!("saved {step} {pid}{ns}"));
            }
        }
    }));
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

fn spawn_child(scenario: Scenario, store: &Path, log: &Path, thread: &str) -> std::process::Child {
    let spec = [
        scenario.name(),
        &store.display().to_string(),
        &log.display().to_string(),
        thread,
    ]
    .join("\t");
    Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the log grows past `len` bytes (the child ran a node) or the child exits.
fn wait_for_progress(child: &mut std::process::Child, log: &Path, len: u64) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        if std::fs::metadata(log).map(|m| m.len()).unwrap_or(0) > len
            || child.try_wait().unwrap().is_some()
        {
            return;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    panic!("a child made no progress in 30 s");
}

/// How one child ended.
enum Ended {
    Killed,
    Finished,
}

/// Runs children of one scenario and kills them.
struct Killer {
    scenario: Scenario,
    /// The longest a child has taken from spawn to its first node: kills timed from the spawn
    /// fall anywhere in it (opening the store, recovering, reading the thread) or just after.
    startup: Duration,
}

impl Killer {
    /// Runs one child and, unless `let_finish`, SIGKILLs it at a random moment.
    fn run_child(&mut self, store: &Path, log: &Path, thread: &str, let_finish: bool) -> Ended {
        let len_before = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let spawned = Instant::now();
        let mut child = spawn_child(self.scenario, store, log, thread);
        if !let_finish {
            // A quarter of the kills are timed from the spawn; the rest land at a random point
            // once the child is running nodes.
            let window = self.scenario.kill_window();
            if rand::random::<u8>() % 4 == 0 {
                let span = (self.startup + window).as_micros() as u64;
                std::thread::sleep(Duration::from_micros(rand::random::<u64>() % span.max(1)));
            } else {
                wait_for_progress(&mut child, log, len_before);
                self.startup = self.startup.max(spawned.elapsed());
                std::thread::sleep(Duration::from_micros(
                    rand::random::<u64>() % window.as_micros() as u64,
                ));
            }
            // SAFETY: kill(2) has no memory-safety preconditions. The child is not reaped yet,
            // so its pid cannot have been reused.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
            }
        }
        let output = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        match (output.status.success(), output.status.signal()) {
            (true, _) => Ended::Finished,
            (false, Some(libc::SIGKILL)) => Ended::Killed,
            _ => panic!(
                "a child of thread {thread} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
        }
    }
}

/// What one thread's log shows.
#[derive(Default, Debug)]
struct LogReport {
    /// Node executions, re-runs of unsaved steps included.
    executions: usize,
    /// (node, step) pairs executed more than once: each by a process killed before saving.
    reruns: usize,
    children_done: usize,
}

/// Checks that no node ran at a step already saved, and tallies the log.
fn check_log(thread: &str, text: &str) -> LogReport {
    let mut report = LogReport::default();
    // The newest saved step of the root ("") and of each subgraph namespace.
    let mut saved_at: BTreeMap<String, u64> = BTreeMap::new();
    let mut counts: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split(' ').collect();
        let (words, ns) = match words[..] {
            [.., ns] if ns.contains(':') => (&words[..words.len() - 1], ns),
            _ => (&words[..], ""),
        };
        let saved = saved_at.get(ns).copied();
        match words[..] {
            ["exec", node, step, pid] => {
                let step: u64 = step.parse().unwrap();
                if let Some(saved) = saved {
                    assert!(
                        step > saved,
                        "thread {thread}, log line {}: pid {pid} ran {node} at step {step}, but step {saved} \
                         had been saved; the log:\n{text}",
                        i + 1
                    );
                }
                report.executions += 1;
                *counts
                    .entry((ns.to_string(), node.to_string(), step))
                    .or_default() += 1;
            }
            ["saved", step, _pid] => {
                let step: u64 = step.parse().unwrap();
                saved_at.insert(ns.to_string(), saved.map_or(step, |s| s.max(step)));
            }
            ["done", _pid] => report.children_done += 1,
            _ => panic!("thread {thread}: unreadable log line {line:?}"),
        }
    }
    report.reruns = counts.values().filter(|&&n| n > 1).count();
    report
}

fn expected_state(scenario: Scenario) -> Trace {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let graph = graph(scenario, None).compile().unwrap();
    runtime
        .block_on(graph.invoke(TraceUpdate::default(), RunConfig::new()))
        .unwrap()
        .state
}

fn stored_state(scenario: Scenario, store: &Path, thread: &str) -> (Trace, Vec<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let saver = Arc::new(SledCheckpointer::open(store).unwrap());
    let graph = graph(scenario, None)
        .compile()
        .unwrap()
        .with_checkpointer(saver);
    let state = runtime.block_on(graph.get_state(thread, None)).unwrap();
    (state.values, state.next)
}

fn crash_scenario(scenario: Scenario) {
    let dir = tempfile::tempdir().unwrap();
    let store: PathBuf = dir.path().join("store");
    let expected = expected_state(scenario);
    let (mut kills, mut threads, mut executions, mut reruns) = (0, 0, 0, 0);
    let mut killer = Killer {
        scenario,
        startup: Duration::ZERO,
    };

    while kills < KILLS_PER_SCENARIO {
        let thread = format!("{}-{threads}", scenario.name());
        let log = dir.path().join(format!("{thread}.log"));
        // Kill until a child gets through; after 40 kills, let one finish.
        let mut attempt = 0;
        while let Ended::Killed = killer.run_child(&store, &log, &thread, attempt >= 40) {
            kills += 1;
            attempt += 1;
        }

        let text = std::fs::read_to_string(&log).unwrap();
        let report = check_log(&thread, &text);
        if let Scenario::Subgraph = scenario {
            assert!(
                text.lines()
                    .any(|l| l.starts_with("saved ") && l.ends_with(&namespace_of_inner(&text))),
                "thread {thread}: the child's saved steps are not in the log:\n{text}"
            );
        }
        assert!(
            report.children_done >= 1,
            "thread {thread} never finished:\n{text}"
        );
        let (state, next) = stored_state(scenario, &store, &thread);
        assert!(next.is_empty(), "thread {thread} has {next:?} left to run");
        assert_eq!(
            state, expected,
            "thread {thread} ended in another state than an uninterrupted run"
        );
        executions += report.executions;
        reruns += report.reruns;
        threads += 1;
    }
    eprintln!(
        "{}: {kills} kills over {threads} threads; {executions} node executions, {reruns} re-run after a kill \
         before their step was saved; none after",
        scenario.name()
    );
}

#[test]
fn crash_linear_graph() {
    crash_scenario(Scenario::Linear);
}

#[test]
fn crash_looping_graph() {
    crash_scenario(Scenario::Looping);
}

#[test]
fn crash_fan_out_graph() {
    crash_scenario(Scenario::FanOut);
}

#[test]
fn crash_graph_with_a_large_state() {
    let expected = expected_state(Scenario::LargeState);
    let bytes = serde_json::to_vec(&expected).unwrap().len();
    assert!(
        bytes > 256 * 1024,
        "the state ({bytes} bytes) must be stored as pieces"
    );
    crash_scenario(Scenario::LargeState);
}

#[test]
fn crash_inside_a_subgraph() {
    crash_scenario(Scenario::Subgraph);
}
