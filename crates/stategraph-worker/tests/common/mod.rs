//! What the worker tests share: a real Postgres cluster (the postgres crate's fixture, included
//! by path, not a public API of that crate), the graphs the workers run, and a log of every node
//! execution.

#![allow(dead_code)]

#[path = "../../../stategraph-postgres/tests/support/pg_cluster.rs"]
pub mod pg_cluster;

use serde::{Deserialize, Serialize};
use stategraph::runtime::Context;
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_postgres::queue::{RunId, RunInfo, RunQueue, Status};
use stategraph_registry::{BuildError, GraphFactory, GraphFile, Registry};
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where a child process appends its executions (each line fsynced): `THREAD STEP PID`.
pub const LOG_ENV: &str = "STATEGRAPH_WORKER_EXEC_LOG";

/// Every node execution of this process: `(thread, step)`.
pub fn executions() -> &'static Mutex<Vec<(String, u64)>> {
    static EXECS: OnceLock<Mutex<Vec<(String, u64)>>> = OnceLock::new();
    EXECS.get_or_init(Default::default)
}

/// The executions of `thread`'s nodes, by step, in this process.
pub fn steps_run(thread: &str) -> Vec<u64> {
    let execs = executions().lock().unwrap();
    execs
        .iter()
        .filter(|(t, _)| t == thread)
        .map(|(_, s)| *s)
        .collect()
}

fn log_execution(ctx: &Context) {
    executions()
        .lock()
        .unwrap()
        .push((ctx.thread_id().to_string(), ctx.step()));
    if let Ok(path) = std::env::var(LOG_ENV) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        let line = format!(
            "{} {} {}\n",
            ctx.thread_id(),
            ctx.step(),
            std::process::id()
        );
        (&file).write_all(line.as_bytes()).unwrap();
        file.sync_data().unwrap();
    }
}

/// `steps`: one node, `tick`, run `target` times in a row, each sleeping `delay_ms`.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Steps {
    pub target: u32,
    #[state(append)]
    pub done: Vec<String>,
}

pub struct StepsGraph;

impl GraphFactory for StepsGraph {
    type State = Steps;
    fn name(&self) -> &str {
        "steps"
    }
    fn description(&self) -> &str {
        "ticks `target` times"
    }
    fn graph_file(&self) -> Option<&'static str> {
        Some("graph = \"steps\"\n[settings]\ndelay_ms = 5\n")
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Steps>, BuildError> {
        let mut g = StateGraph::<Steps>::named("steps");
        g.add_node("tick", |_s: Arc<Steps>, ctx: Context| async move {
            log_execution(&ctx);
            let delay: u64 = ctx.setting("delay_ms").unwrap_or(5);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok(StepsUpdate::default().done(vec![format!("tick@{}", ctx.step())]))
        });
        g.add_edge(START, "tick");
        g.add_conditional_edges(
            "tick",
            |s: &Steps| {
                if (s.done.len() as u32) < s.target {
                    "tick"
                } else {
                    END
                }
            },
            ["tick", END],
        );
        Ok(g.compile()?)
    }
}

/// `ask`: asks a question, then writes the answer down.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    #[state(append)]
    pub done: Vec<String>,
}

pub struct AskGraph;

impl GraphFactory for AskGraph {
    type State = Asked;
    fn name(&self) -> &str {
        "ask"
    }
    fn description(&self) -> &str {
        "asks, then writes the answer down"
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Asked>, BuildError> {
        let mut g = StateGraph::<Asked>::named("ask");
        g.add_node("ask", |_s: Arc<Asked>, ctx: Context| async move {
            let answer: String = ctx.interrupt("ship it?").await?;
            Ok(AskedUpdate::default().done(vec![format!("answer:{answer}")]))
        });
        g.add_edge(START, "ask").add_edge("ask", END);
        Ok(g.compile()?)
    }
}

/// How many more times `flaky`'s node fails, as a rate limit would (transiently).
pub static FLAKY_FAILURES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `flaky`: one node that fails transiently while [`FLAKY_FAILURES`] lasts (no retry policy of
/// its own, so the run fails with it, and the worker records that), then writes `ok`.
pub struct FlakyGraph;

impl GraphFactory for FlakyGraph {
    type State = Asked;
    fn name(&self) -> &str {
        "flaky"
    }
    fn description(&self) -> &str {
        "fails transiently a few times, then succeeds"
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Asked>, BuildError> {
        use std::sync::atomic::Ordering;
        let mut g = StateGraph::<Asked>::named("flaky");
        g.add_node("try", |_s: Arc<Asked>, _ctx: Context| async move {
            let left = FLAKY_FAILURES.load(Ordering::SeqCst);
            if left > 0 {
                FLAKY_FAILURES.store(left - 1, Ordering::SeqCst);
                return Err(stategraph::NodeError::transient("rate limited"));
            }
            Ok(AskedUpdate::default().done(vec!["ok".to_string()]))
        });
        g.add_edge(START, "try").add_edge("try", END);
        Ok(g.compile()?)
    }
}

/// Threads whose `gated` node may end (see [`open_gate`]).
fn open_gates() -> &'static Mutex<std::collections::HashSet<String>> {
    static OPEN: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

/// Lets the `wait` node of `thread` (graphs `gated` and `gated_ask`) end.
pub fn open_gate(thread: &str) {
    open_gates().lock().unwrap().insert(thread.to_string());
}

/// `gated` (`wait`, then the end) and `gated_ask` (`wait`, then `ask`'s question): the test
/// decides when `wait` ends, so it can act while a run's step is in flight.
pub struct GatedGraph {
    pub then_ask: bool,
}

impl GraphFactory for GatedGraph {
    type State = Asked;
    fn name(&self) -> &str {
        if self.then_ask {
            "gated_ask"
        } else {
            "gated"
        }
    }
    fn description(&self) -> &str {
        "waits for the test to open its thread's gate"
    }
    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Asked>, BuildError> {
        let mut g = StateGraph::<Asked>::named(self.name());
        g.add_node("wait", |_s: Arc<Asked>, ctx: Context| async move {
            log_execution(&ctx);
            let give_up = Instant::now() + Duration::from_secs(30);
            while !open_gates().lock().unwrap().contains(ctx.thread_id()) {
                if Instant::now() > give_up {
                    return Err(stategraph::NodeError::new("the gate never opened"));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(AskedUpdate::default().done(vec!["waited".to_string()]))
        });
        g.add_edge(START, "wait");
        if self.then_ask {
            g.add_node("ask", |_s: Arc<Asked>, ctx: Context| async move {
                let answer: String = ctx.interrupt("ship it?").await?;
                Ok(AskedUpdate::default().done(vec![format!("answer:{answer}")]))
            });
            g.add_edge("wait", "ask").add_edge("ask", END);
        } else {
            g.add_edge("wait", END);
        }
        Ok(g.compile()?)
    }
}

pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(StepsGraph);
    registry.register(AskGraph);
    registry.register(FlakyGraph);
    registry.register(GatedGraph { then_ask: false });
    registry.register(GatedGraph { then_ask: true });
    registry
}

/// The state an uninterrupted run of `steps` to `target` ends in.
pub async fn uninterrupted(target: u32) -> Steps {
    let graph = StepsGraph.build(&GraphFile::default()).unwrap();
    let input = StepsUpdate::default().target(target);
    graph
        .invoke(input, stategraph::runtime::RunConfig::new())
        .await
        .unwrap()
        .state
}

/// Waits until `run` is in a final state (or `timeout`), and returns it.
pub async fn wait_final(queue: &RunQueue, run: RunId, timeout: Duration) -> RunInfo {
    wait_for(queue, run, timeout, |r| r.status.is_final()).await
}

/// Waits until `run` satisfies `done`.
pub async fn wait_for(
    queue: &RunQueue,
    run: RunId,
    timeout: Duration,
    done: impl Fn(&RunInfo) -> bool,
) -> RunInfo {
    let give_up = Instant::now() + timeout;
    loop {
        let info = queue.get(run).await.unwrap().unwrap();
        if done(&info) {
            return info;
        }
        assert!(
            Instant::now() < give_up,
            "run {run} still {} after {timeout:?}: {info:?}",
            info.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn is(status: Status) -> impl Fn(&RunInfo) -> bool {
    move |r| r.status == status
}
