//! The shared workloads of `../shared/bench/WORKLOADS.md`, run on stategraph: the same work as
//! `langgraph_peer.py`, printing the same one-line JSON, so `compare.py` can run both.
//!
//! ```text
//! cargo bench --bench workloads -- WORKLOAD [--saver memory|sled] [--durability sync|async|exit]
//!                                           [--db PATH] [--steps N] [--quick] [--concurrency N]
//! ```
//!
//! - `chain`: 100 nodes in a line, 50 threads (5000 node steps).
//! - `loop`: `agent` and `tool` appending 100-byte messages until there are 1000 (or `--steps N`),
//!   one thread named `loop`; its `db_bytes` shows how storage grows.
//! - `fanout`: `split`, ten parallel workers, a `join`; 200 threads (2400 node steps).
//! - `resume`: a fresh process opens the store `loop --db PATH` wrote and reads the thread's
//!   latest state (`--steps N` must match the loop's). `seconds` is open + read; the split goes
//!   to stderr.
//! - `open` (ours only): a fresh process opens the sled store at `--db PATH`, a new empty one if
//!   nothing is there, and reads nothing: run on an empty path, the floor under `resume`'s open.
//!
//! `--quick` does a tenth of the work (CI checks the output's shape with it, never its speed).
//! Only the JSON line goes to stdout. `tests/workloads_quick.rs` includes this file as a module.
//!
//! `--concurrency N` (chain and fanout only; default 1): up to N threads' runs in flight at once
//! in this one process, each its own task on the multi-thread runtime, so that a run blocked in
//! a flush does not hold up the others and runs on one store can share flushes. With 1 the
//! threads run one after another, as `langgraph_peer.py` runs them. `loop` and `resume` are one
//! thread each, so they refuse N > 1 rather than silently ignore it. The JSON line is the same
//! either way (it does not record N).

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{Checkpointer, MemoryCheckpointer};
use stategraph::runtime::{Context, Durability, NodeError, RunConfig};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_sled::SledCheckpointer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[path = "support/workload_graphs.rs"]
mod workload_graphs;

use workload_graphs::{CountUpdate, Fan, FanUpdate};

type Error = Box<dyn std::error::Error>;

/// The 100-byte message every `loop` step appends.
fn payload() -> String {
    "x".repeat(100)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    Chain,
    Loop,
    Fanout,
    Resume,
    Open,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Chain => "chain",
            Workload::Loop => "loop",
            Workload::Fanout => "fanout",
            Workload::Resume => "resume",
            Workload::Open => "open",
        }
    }
}

/// What to run, from the command line.
#[derive(Clone, Debug)]
pub struct Options {
    pub workload: Workload,
    /// `true` for sled, `false` for memory.
    pub sled: bool,
    pub durability: Durability,
    pub db: Option<PathBuf>,
    /// Messages the `loop` thread ends with (and `resume` expects).
    pub steps: Option<usize>,
    pub quick: bool,
    /// How many threads' runs may be in flight at once (chain and fanout).
    pub concurrency: usize,
}

impl Options {
    /// Parses `WORKLOAD [options]`; `--bench`, which cargo adds, is ignored.
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut workload = None;
        let mut options = Options {
            workload: Workload::Chain,
            sled: false,
            durability: Durability::Sync,
            db: None,
            steps: None,
            quick: false,
            concurrency: 1,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match arg.as_str() {
                "--bench" => {}
                "--quick" => options.quick = true,
                "--saver" => {
                    options.sled = match value("--saver")?.as_str() {
                        "sled" => true,
                        "memory" => false,
                        other => {
                            return Err(format!("unknown saver `{other}`: use memory or sled"))
                        }
                    }
                }
                "--durability" => options.durability = value("--durability")?.parse()?,
                "--db" => options.db = Some(PathBuf::from(value("--db")?)),
                "--steps" => {
                    let n = value("--steps")?;
                    options.steps = Some(
                        n.parse()
                            .map_err(|_| format!("--steps takes a number, not `{n}`"))?,
                    );
                }
                "--concurrency" => {
                    let n = value("--concurrency")?;
                    options.concurrency =
                        n.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                            format!("--concurrency takes a number >= 1, not `{n}`")
                        })?;
                }
                "chain" | "loop" | "fanout" | "resume" | "open" if workload.is_none() => {
                    workload = Some(match arg.as_str() {
                        "chain" => Workload::Chain,
                        "loop" => Workload::Loop,
                        "fanout" => Workload::Fanout,
                        "open" => Workload::Open,
                        _ => Workload::Resume,
                    })
                }
                other => return Err(format!("unexpected argument `{other}`")),
            }
        }
        options.workload =
            workload.ok_or("name a workload: chain, loop, fanout, resume or open")?;
        if options.concurrency > 1
            && !matches!(options.workload, Workload::Chain | Workload::Fanout)
        {
            return Err(format!(
                "--concurrency applies to chain and fanout; {} runs one thread",
                options.workload.name()
            ));
        }
        Ok(options)
    }

    /// `full` normally, a tenth of it with `--quick`.
    fn scaled(&self, full: usize) -> usize {
        if self.quick {
            full / 10
        } else {
            full
        }
    }

    fn loop_len(&self) -> usize {
        self.steps.unwrap_or_else(|| self.scaled(1000))
    }
}

/// The result line.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub workload: &'static str,
    pub saver: &'static str,
    pub durability: &'static str,
    pub steps: usize,
    pub seconds: f64,
    pub db_bytes: Option<u64>,
}

impl Report {
    /// The line WORKLOADS.md specifies, spaced as the peer's `json.dumps` prints it.
    pub fn to_json_line(&self) -> String {
        let seconds = (self.seconds * 1e6).round() / 1e6;
        let rate = (self.steps as f64 / self.seconds * 10.0).round() / 10.0;
        let fields: [(&str, serde_json::Value); 8] = [
            ("workload", self.workload.into()),
            ("engine", "stategraph".into()),
            ("saver", self.saver.into()),
            ("durability", self.durability.into()),
            ("steps", self.steps.into()),
            ("seconds", seconds.into()),
            ("steps_per_s", rate.into()),
            ("db_bytes", self.db_bytes.into()),
        ];
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        format!("{{{}}}", body.join(", "))
    }
}

// --- The graphs, as WORKLOADS.md defines them (chain and fanout: `support/workload_graphs.rs`). ---

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Messages {
    #[state(append)]
    messages: Vec<String>,
}

/// When each `loop` step started, to compare the first 100 steps with the last 100.
type StepClock = Arc<std::sync::Mutex<Vec<Instant>>>;

fn loop_graph(len: usize, clock: StepClock) -> StateGraph<Messages> {
    let mut g = StateGraph::<Messages>::named("loop");
    for name in ["agent", "tool"] {
        let clock = clock.clone();
        g.add_node(name, move |_s: Arc<Messages>, _c: Context| {
            if let Ok(mut starts) = clock.lock() {
                starts.push(Instant::now());
            }
            async { Ok::<_, NodeError>(MessagesUpdate::default().messages(vec![payload()])) }
        });
    }
    g.add_edge(START, "agent").add_edge("agent", "tool");
    g.add_conditional_edges(
        "tool",
        move |s: &Messages| {
            if s.messages.len() >= len {
                END
            } else {
                "agent"
            }
        },
        ["agent", END],
    );
    g
}

// --- Running them. ---

/// The store a run writes to, and what is needed to measure it afterwards.
struct Store {
    saver: Arc<dyn Checkpointer>,
    dir: Option<PathBuf>,
    _temp: Option<tempfile::TempDir>,
}

impl Store {
    fn open(options: &Options) -> Result<Store, Error> {
        if !options.sled {
            return Ok(Store {
                saver: Arc::new(MemoryCheckpointer::new()),
                dir: None,
                _temp: None,
            });
        }
        let (dir, temp) = match &options.db {
            Some(path) => (path.clone(), None),
            None => {
                let temp = tempfile::tempdir()?;
                (temp.path().join("store"), Some(temp))
            }
        };
        Ok(Store {
            saver: Arc::new(SledCheckpointer::open(&dir)?),
            dir: Some(dir),
            _temp: temp,
        })
    }

    /// Closes the store (every graph holding it must be gone) and measures it on disk.
    fn close(self) -> Result<Option<u64>, Error> {
        let Store { saver, dir, _temp } = self;
        drop(saver);
        dir.map(|d| dir_bytes(&d)).transpose()
    }
}

/// The total size of the files under `dir`.
fn dir_bytes(dir: &Path) -> Result<u64, Error> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

fn config(options: &Options, thread: String) -> RunConfig {
    RunConfig::new()
        .thread(thread)
        .durability(options.durability)
}

/// Runs `graph` once per thread name, checking each final state, with up to
/// `options.concurrency` runs in flight; returns the seconds taken.
async fn run_threads<S: State>(
    graph: &CompiledGraph<S>,
    input: fn() -> S::Update,
    threads: impl Iterator<Item = String>,
    options: &Options,
    check: fn(&S) -> bool,
) -> Result<f64, Error> {
    let started = Instant::now();
    if options.concurrency <= 1 {
        for thread in threads {
            let config = config(options, thread.clone());
            run_one(graph, input(), config, &thread, check).await?;
        }
        return Ok(started.elapsed().as_secs_f64());
    }
    let mut running = tokio::task::JoinSet::new();
    for thread in threads {
        if running.len() >= options.concurrency {
            if let Some(done) = running.join_next().await {
                joined(done)?;
            }
        }
        let (graph, config) = (graph.clone(), config(options, thread.clone()));
        running.spawn(async move { run_one(&graph, input(), config, &thread, check).await });
    }
    while let Some(done) = running.join_next().await {
        joined(done)?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// One thread's run, checked for its final state. The error is a `String` so that it can leave
/// a spawned task.
async fn run_one<S: State>(
    graph: &CompiledGraph<S>,
    input: S::Update,
    config: RunConfig,
    thread: &str,
    check: fn(&S) -> bool,
) -> Result<(), String> {
    let out = graph
        .invoke(input, config)
        .await
        .map_err(|e| e.to_string())?;
    if !check(&out.state) {
        return Err(format!("thread {thread} ended in the wrong state"));
    }
    Ok(())
}

fn joined(done: Result<Result<(), String>, tokio::task::JoinError>) -> Result<(), Error> {
    Ok(done.map_err(|e| format!("a run's task failed: {e}"))??)
}

async fn run_async(options: &Options) -> Result<Report, Error> {
    let store = Store::open(options)?;
    let (steps, seconds) = run_workload(options, &store.saver).await?;
    Ok(Report {
        workload: options.workload.name(),
        saver: if options.sled { "sled" } else { "memory" },
        durability: durability_name(options.durability),
        steps,
        seconds,
        db_bytes: store.close()?,
    })
}

/// Runs chain, loop or fanout on a checkpointer the caller opened: the entry of the benches of
/// stores that are not the engine's dev-dependencies (`benches/workloads_postgres.rs`, declared
/// by `stategraph-postgres`). The report names `saver`; its `db_bytes` is left for the caller,
/// which knows how to measure its store.
#[allow(dead_code)] // used by workloads_postgres.rs only
pub async fn run_on(
    options: &Options,
    saver: Arc<dyn Checkpointer>,
    saver_name: &'static str,
) -> Result<Report, Error> {
    if matches!(options.workload, Workload::Resume | Workload::Open) {
        return Err(format!("{} is timed on sled only", options.workload.name()).into());
    }
    let (steps, seconds) = run_workload(options, &saver).await?;
    Ok(Report {
        workload: options.workload.name(),
        saver: saver_name,
        durability: durability_name(options.durability),
        steps,
        seconds,
        db_bytes: None,
    })
}

/// Runs chain, loop or fanout on `saver`; returns the node steps and the seconds they took.
async fn run_workload(
    options: &Options,
    saver: &Arc<dyn Checkpointer>,
) -> Result<(usize, f64), Error> {
    let (steps, seconds) = match options.workload {
        Workload::Chain => {
            let graph = workload_graphs::chain("chain", 100)
                .compile()?
                .with_checkpointer(saver.clone());
            let threads = options.scaled(50);
            let seconds = run_threads(
                &graph,
                || CountUpdate::default().count(0),
                (0..threads).map(|t| format!("t{t}")),
                options,
                |s| s.count == 100,
            )
            .await?;
            (threads * 100, seconds)
        }
        Workload::Loop => {
            let len = options.loop_len();
            let clock = StepClock::default();
            let graph = loop_graph(len, clock.clone())
                .compile()?
                .with_checkpointer(saver.clone());
            let started = Instant::now();
            let out = graph
                .invoke(
                    MessagesUpdate::default(),
                    config(options, "loop".into()).recursion_limit(len as u64 + 10),
                )
                .await?;
            let finished = Instant::now();
            let seconds = (finished - started).as_secs_f64();
            if out.state.messages.len() != len {
                return Err(format!(
                    "the loop ended with {} messages, not {len}",
                    out.state.messages.len()
                )
                .into());
            }
            report_first_and_last_steps(&clock, finished);
            (len, seconds)
        }
        Workload::Fanout => {
            let graph = workload_graphs::fanout()
                .compile()?
                .with_checkpointer(saver.clone());
            let threads = options.scaled(200);
            let check = |s: &Fan| s.results.len() == 11 && s.results.last() == Some(&10);
            let seconds = run_threads(
                &graph,
                FanUpdate::default,
                (0..threads).map(|t| format!("f{t}")),
                options,
                check,
            )
            .await?;
            (threads * 12, seconds)
        }
        Workload::Resume | Workload::Open => {
            return Err(format!("{} is timed from the open", options.workload.name()).into())
        }
    };
    Ok((steps, seconds))
}

/// Prints (to stderr) how long the loop's first and last 100 steps took, each with its
/// checkpoints, in total and as the median step: storage that slowed down as the thread grew
/// would show here. (A window's total also holds the snapshots taken in it.)
fn report_first_and_last_steps(clock: &StepClock, finished: Instant) {
    let mut starts = clock.lock().map(|s| s.clone()).unwrap_or_default();
    starts.push(finished);
    let window = 100.min(starts.len() / 2);
    if window == 0 {
        return;
    }
    let stats = |steps: &[Instant]| {
        let mut each: Vec<f64> = steps
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
            .collect();
        each.sort_by(f64::total_cmp);
        (each.iter().sum::<f64>(), each[each.len() / 2])
    };
    let (first, first_median) = stats(&starts[..=window]);
    let (last, last_median) = stats(&starts[starts.len() - 1 - window..]);
    eprintln!(
        "loop: first {window} steps {first:.3} ms (median step {first_median:.3} ms), \
         last {window} steps {last:.3} ms (median step {last_median:.3} ms)"
    );
}

/// `resume`: open the store and read the loop thread's latest state, timed together.
async fn resume(options: &Options) -> Result<Report, Error> {
    let dir = match (&options.db, options.sled) {
        (Some(dir), true) => dir.clone(),
        _ => return Err("resume reads the store `loop --saver sled --db PATH` wrote: pass --saver sled --db PATH".into()),
    };
    let len = options.loop_len();
    let started = Instant::now();
    let saver = Arc::new(SledCheckpointer::open(&dir)?);
    let opened = started.elapsed();
    let graph = loop_graph(len, StepClock::default())
        .compile()?
        .with_checkpointer(saver);
    let read_started = Instant::now();
    let state = graph.get_state("loop", None).await?;
    let read = read_started.elapsed();
    let seconds = started.elapsed().as_secs_f64();
    if state.values.messages.len() != len {
        return Err(format!(
            "the loop thread holds {} messages, not {len}",
            state.values.messages.len()
        )
        .into());
    }
    eprintln!(
        "resume: open {:.3} ms, read {:.3} ms",
        opened.as_secs_f64() * 1e3,
        read.as_secs_f64() * 1e3
    );
    drop(graph);
    Ok(Report {
        workload: "resume",
        saver: "sled",
        durability: durability_name(options.durability),
        steps: 1,
        seconds,
        db_bytes: Some(dir_bytes(&dir)?),
    })
}

/// `open`: open the store and close it, timed.
fn open(options: &Options) -> Result<Report, Error> {
    let dir = match (&options.db, options.sled) {
        (Some(dir), true) => dir.clone(),
        _ => return Err("open times opening a sled store: pass --saver sled --db PATH".into()),
    };
    let started = Instant::now();
    let saver = SledCheckpointer::open(&dir)?;
    let seconds = started.elapsed().as_secs_f64();
    drop(saver);
    Ok(Report {
        workload: "open",
        saver: "sled",
        durability: durability_name(options.durability),
        steps: 1,
        seconds,
        db_bytes: Some(dir_bytes(&dir)?),
    })
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "sync",
        Durability::Async => "async",
        Durability::Exit => "exit",
    }
}

/// Runs one workload as `options` say.
pub fn run(options: &Options) -> Result<Report, Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match options.workload {
            Workload::Resume => resume(options).await,
            Workload::Open => open(options),
            _ => run_async(options).await,
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = Options::parse(&args)
        .map_err(Error::from)
        .and_then(|options| run(&options));
    match result {
        Ok(report) => println!("{}", report.to_json_line()),
        Err(e) => {
            eprintln!("workloads: {e}");
            std::process::exit(2);
        }
    }
}
