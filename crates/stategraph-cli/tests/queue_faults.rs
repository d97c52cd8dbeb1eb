//! The run queue under faults, with real processes: four `graph worker` processes serve runs
//! of the keyless pipeline (some of which pause for an answer, given through the queue), while
//! the test SIGKILLs workers at random moments and starts new ones, freezes one with SIGSTOP
//! past its lease and wakes it, restarts Postgres as a crash would (`pg_ctl restart -m
//! immediate`), and cancels runs queued and running. Then:
//!
//! - every run ended once, as asked: done, paused (then its resume done), or cancelled; none
//!   failed, and a run cancelled before its claim never ran;
//! - every thread's state is what an uninterrupted run ends with;
//! - every thread's checkpoints form one chain, one per step (no two workers wrote it, the
//!   frozen one included);
//! - no saved step ran again: when a node's task of a step ran twice (the workers' `node
//!   started` log lines, kept by the test as they come, killed workers' included), the worker
//!   that ran it first had begun no later step of that thread in between (so it had not saved
//!   it: it was its step in flight when it was killed, frozen or cut off by the restart).
//!
//! A test binary of its own: the restart cuts every connection of its cluster. The bounded test
//! runs 48 submissions (about 58 runs with the answers); the longer scenario (200, or
//! `STATEGRAPH_QUEUE_RUNS`) is `benches/queue_faults.rs`, which includes this file (`cargo bench
//! -p stategraph-cli --bench queue_faults`), or `many_runs_under_faults` here (ignored: `cargo
//! test -p stategraph-cli --test queue_faults -- --ignored --nocapture`).
//! `STATEGRAPH_QUEUE_SEED` repeats a run's random choices.

mod queue_support;

use queue_support::pg_cluster::cluster;
use queue_support::*;
use serde_json::{json, Value};
use stategraph::checkpoint::{Checkpointer, MemoryCheckpointer};
use stategraph::runtime::Resume;
use stategraph_postgres::queue::{RunFilter, RunInfo, RunQueue, Start, Status};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_registry::{Override, Registry};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOPIC: &str = "durable agents";
const WORKERS: usize = 4;
/// Each pipeline node works this long.
const STEP_MS: u32 = 300;
/// The workers' lease, in seconds: a killed worker's runs are taken over this long after.
const LEASE: &str = "1";
/// How long the frozen worker stays stopped: past its lease.
const FROZEN: Duration = Duration::from_secs(3);

#[test]
fn runs_under_kills_a_frozen_worker_and_a_postgres_restart_end_as_uninterrupted() {
    scenario(48, 4);
}

/// Workers killed in the longer scenario (`benches/queue_faults.rs`, or the ignored test).
pub(crate) const KILLS_MANY: usize = 12;

#[test]
#[ignore = "the issue's 200 runs (about 40 s on two cores); STATEGRAPH_QUEUE_RUNS sets another number"]
fn many_runs_under_faults() {
    let runs = std::env::var("STATEGRAPH_QUEUE_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    scenario(runs, KILLS_MANY);
}

/// A small random source whose seed is printed, so a failing run can be repeated.
struct Dice(u64);

impl Dice {
    fn new() -> Dice {
        let seed = std::env::var("STATEGRAPH_QUEUE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                now.map_or(7, |d| d.as_nanos() as u64) | 1
            });
        eprintln!("STATEGRAPH_QUEUE_SEED={seed}");
        Dice(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What a submission was, and what its thread must end as.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    /// Runs to its end (`--yes`).
    Through,
    /// Pauses at its review; the test queues the answer `yes`.
    Pauses,
    /// Cancelled before any worker runs.
    CancelledQueued,
}

struct Fleet<'a> {
    graph: &'a Graph,
    live: Vec<Option<WorkerProc>>,
    done: Vec<WorkerProc>,
    generation: usize,
    killed: usize,
}

impl Fleet<'_> {
    fn start(&mut self, slot: usize) {
        self.generation += 1;
        let id = format!("w{slot}-{}", self.generation);
        let args = ["--concurrency", "2", "--lease", LEASE, "--retries", "50"];
        self.live[slot] = Some(self.graph.worker(&id, &args));
    }

    fn kill(&mut self, slot: usize) {
        if let Some(mut w) = self.live[slot].take() {
            w.kill();
            self.killed += 1;
            self.done.push(w);
        }
        self.start(slot);
    }

    fn slot_of(&self, id: &str) -> Option<usize> {
        (0..self.live.len()).find(|s| self.live[*s].as_ref().is_some_and(|w| w.id == id))
    }

    fn executions(&self) -> Vec<Execution> {
        let all = self.done.iter().chain(self.live.iter().flatten());
        all.flat_map(|w| w.executions()).collect()
    }
}

/// The submissions: what each is, its thread, its first run.
struct Plan {
    kinds: Vec<Kind>,
    threads: Vec<String>,
    first_runs: Vec<String>,
}

/// What the faults phase did, for the checks after it.
#[derive(Default)]
struct Faults {
    /// Thread -> the run that answers it.
    resumes: HashMap<String, String>,
    /// Runs cancelled while running (the cancel took).
    cancelled_running: Vec<String>,
    /// The frozen worker, and the runs it held when it was frozen.
    frozen_id: String,
    frozen_runs: Vec<String>,
    ran_for: Duration,
}

/// The whole scenario: `submissions` runs submitted, `kills` workers killed; prints its counts,
/// fails on any broken promise. Also `benches/queue_faults.rs`'s.
pub(crate) fn scenario(submissions: usize, kills: usize) {
    let started = Instant::now();
    let mut dice = Dice::new();
    let db = cluster().database();
    let dir = tempfile::tempdir().unwrap();
    let graph = Graph::new(db.url(), dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let queue = runtime.block_on(RunQueue::connect(db.url())).unwrap();
    let plan = submit_all(&graph, submissions);
    eprintln!(
        "{submissions} submitted in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut fleet = Fleet {
        graph: &graph,
        live: (0..WORKERS).map(|_| None).collect(),
        done: Vec::new(),
        generation: 0,
        killed: 0,
    };
    for slot in 0..WORKERS {
        fleet.start(slot);
    }
    let faults = run_under_faults(&runtime, &queue, &mut fleet, &plan, kills, &mut dice);
    // SIGTERM drains each worker left: exit 143.
    for slot in 0..WORKERS {
        let mut w = fleet.live[slot].take().unwrap();
        w.signal(libc::SIGTERM);
        let code = w.wait(Duration::from_secs(30));
        assert_eq!(
            code.code(),
            Some(143),
            "worker {} on SIGTERM:\n{}",
            w.id,
            w.log()
        );
        fleet.done.push(w);
    }
    let (runs, takeovers, executions, again) =
        check_end(&runtime, &queue, db.url(), &fleet, &plan, &faults);
    eprintln!(
        "{runs} runs ({submissions} submitted, {} answers), {} workers killed, 1 frozen for \
         {FROZEN:?}, Postgres restarted once; {takeovers} takeovers, {executions} node \
         executions, {again} tasks run again (each a step in flight, never saved); faults phase \
         {:.1} s, all {:.1} s",
        faults.resumes.len(),
        fleet.killed,
        faults.ran_for.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        fleet.killed >= 2.min(kills),
        "too few kills happened: {}",
        fleet.killed
    );
    assert!(takeovers > 0, "no run was taken over");
}

/// Submits through the CLI, a few at a time; every fourth pauses for an answer, and the last
/// two are cancelled before any worker starts.
fn submit_all(graph: &Graph, submissions: usize) -> Plan {
    let kinds: Vec<Kind> = (0..submissions)
        .map(|i| match i {
            i if i + 2 >= submissions => Kind::CancelledQueued,
            i if i % 4 == 3 => Kind::Pauses,
            _ => Kind::Through,
        })
        .collect();
    let threads: Vec<String> = (0..submissions).map(|i| format!("q-{i}")).collect();
    let first_runs: Vec<String> = std::thread::scope(|s| {
        let batches: Vec<_> = (0..4)
            .map(|b| {
                let (kinds, threads) = (&kinds, &threads);
                s.spawn(move || {
                    let mine = (0..submissions).filter(|i| i % 4 == b);
                    mine.map(|i| {
                        let step_ms = format!("step_ms={STEP_MS}");
                        let mut args = vec!["submit", "pipeline", "--input", TOPIC];
                        args.extend(["--thread", &threads[i], "--set", &step_ms]);
                        if kinds[i] != Kind::Pauses {
                            args.push("--yes");
                        }
                        (i, graph.ok(&args).trim().to_string())
                    })
                    .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, String)> = batches
            .into_iter()
            .flat_map(|b| b.join().unwrap())
            .collect();
        all.sort();
        all.into_iter().map(|(_, run)| run).collect()
    });
    for (i, kind) in kinds.iter().enumerate() {
        if *kind == Kind::CancelledQueued {
            graph.ok(&["cancel", &first_runs[i]]);
        }
    }
    Plan {
        kinds,
        threads,
        first_runs,
    }
}

/// Answers paused threads, cancels two running runs, freezes a worker, restarts Postgres and
/// kills workers, until every run has ended.
fn run_under_faults(
    runtime: &tokio::runtime::Runtime,
    queue: &RunQueue,
    fleet: &mut Fleet,
    plan: &Plan,
    kills: usize,
    dice: &mut Dice,
) -> Faults {
    let submissions = plan.kinds.len();
    let faults_from = Instant::now();
    let mut next_kill = faults_from + Duration::from_millis(800 + dice.below(800));
    let freeze_at = faults_from + Duration::from_millis(1200);
    let restart_at = faults_from + Duration::from_millis(2500);
    // The frozen worker's slot, since when, and the runs it held.
    let mut frozen: Option<(usize, Instant, Vec<String>)> = None;
    let (mut froze, mut restarted) = (false, false);
    let mut faults = Faults::default();
    let give_up = Instant::now() + Duration::from_secs(60 + 2 * submissions as u64);
    loop {
        assert!(Instant::now() < give_up, "runs left unfinished");
        let Ok(runs) = runtime.block_on(queue.list(&RunFilter::default().limit(100_000))) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        answer_and_cancel(fleet.graph, &runs, &mut faults, faults_from);
        let now = Instant::now();
        if !froze && now >= freeze_at {
            // A worker running a run, frozen past its lease.
            let holder = runs
                .iter()
                .filter(|r| r.status == Status::Running && !r.lapsed)
                .find_map(|r| fleet.slot_of(r.worker.as_deref()?));
            if let Some(slot) = holder {
                let w = fleet.live[slot].as_ref().unwrap();
                w.signal(libc::SIGSTOP);
                // What it holds is read once it is frozen (a run listed before may have ended
                // since), after a statement it had sent has had time to commit.
                std::thread::sleep(Duration::from_millis(100));
                let listed = runtime.block_on(queue.list(&RunFilter::default().limit(100_000)));
                let held: Vec<String> = (listed.iter().flatten())
                    .filter(|r| r.status == Status::Running && r.worker.as_deref() == Some(&w.id))
                    .map(|r| r.id.to_string())
                    .collect();
                if held.is_empty() {
                    // It held nothing by then: woken at once, another is frozen next round.
                    w.signal(libc::SIGCONT);
                } else {
                    faults.frozen_id = w.id.clone();
                    frozen = Some((slot, Instant::now(), held));
                    froze = true;
                }
            }
        }
        if let Some((slot, since, _)) = &frozen {
            if now.duration_since(*since) >= FROZEN {
                fleet.live[*slot].as_ref().unwrap().signal(libc::SIGCONT);
                let (_, _, held) = frozen.take().unwrap();
                faults.frozen_runs.extend(held);
            }
        }
        if !restarted && now >= restart_at {
            cluster().restart_now().expect("Postgres restarts");
            restarted = true;
            continue;
        }
        if fleet.killed < kills && now >= next_kill {
            let frozen_slot = frozen.as_ref().map(|f| f.0);
            let victims: Vec<usize> = (0..WORKERS).filter(|s| Some(*s) != frozen_slot).collect();
            let victim = victims[dice.below(victims.len() as u64) as usize];
            fleet.kill(victim);
            next_kill = now + Duration::from_millis(600 + dice.below(900));
        }
        let all_ended = runs.len() >= submissions
            && runs.iter().all(|r| r.status.is_final())
            && (0..submissions)
                .filter(|i| {
                    plan.kinds[*i] == Kind::Pauses
                        && !faults.cancelled_running.contains(&plan.first_runs[*i])
                })
                .all(|i| faults.resumes.contains_key(&plan.threads[i]));
        if all_ended && frozen.is_none() && restarted && froze {
            faults.ran_for = faults_from.elapsed();
            return faults;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Queues the answer of each thread that paused (once), and cancels two running runs.
fn answer_and_cancel(graph: &Graph, runs: &[RunInfo], faults: &mut Faults, from: Instant) {
    for run in runs.iter().filter(|r| r.status == Status::Paused) {
        if !faults.resumes.contains_key(&run.thread) {
            let resume = graph.ok_retrying(
                &["submit", "--thread", &run.thread, "--resume", "yes"],
                Duration::from_secs(60),
            );
            (faults.resumes).insert(run.thread.clone(), resume.trim().to_string());
        }
    }
    if faults.cancelled_running.len() < 2 && from.elapsed() > Duration::from_secs(1) {
        let running = runs.iter().find(|r| {
            r.status == Status::Running && matches!(r.start, Start::Input(_)) && r.stop.is_none()
        });
        if let Some(run) = running {
            let out = graph.run(&["cancel", &run.id.to_string()]);
            if out.status.success() {
                faults.cancelled_running.push(run.id.to_string());
            }
        }
    }
}

/// Every run ended once, as asked; every thread as an uninterrupted run ends, one chain; no
/// saved step ran again; the frozen worker's runs were taken over. Returns how many runs,
/// takeovers, node executions and tasks run again there were.
fn check_end(
    runtime: &tokio::runtime::Runtime,
    queue: &RunQueue,
    url: &str,
    fleet: &Fleet,
    plan: &Plan,
    faults: &Faults,
) -> (usize, usize, usize, usize) {
    let runs = runtime
        .block_on(queue.list(&RunFilter::default().limit(100_000)))
        .unwrap();
    let by_id: HashMap<String, &RunInfo> = runs.iter().map(|r| (r.id.to_string(), r)).collect();
    let expected_runs = plan.kinds.len() + faults.resumes.len();
    assert_eq!(runs.len(), expected_runs, "runs lost or made up");
    let executions = fleet.executions();
    let ran: HashSet<&str> = executions.iter().map(|e| e.thread.as_str()).collect();
    let mut takeovers = 0;
    for run in &runs {
        takeovers += run.claims.saturating_sub(1) as usize;
        assert_ne!(run.status, Status::Failed, "{run:?}");
    }
    let references = references(runtime);
    let store = runtime
        .block_on(PostgresCheckpointer::connect(url))
        .unwrap();
    let reader = runtime
        .block_on(PostgresCheckpointer::connect(url))
        .unwrap();
    let pipeline = (registry().resolve("pipeline", &[]).unwrap())
        .build(Some(Arc::new(reader)))
        .unwrap();
    for (i, thread) in plan.threads.iter().enumerate() {
        let first = by_id[&plan.first_runs[i]];
        let cancelled = faults.cancelled_running.contains(&plan.first_runs[i]);
        match (plan.kinds[i], cancelled) {
            (Kind::CancelledQueued, _) => {
                assert_eq!(first.status, Status::Cancelled);
                let never = !ran.contains(thread.as_str());
                assert!(never, "{thread}: cancelled before its claim, it ran");
                continue;
            }
            (_, true) => assert_eq!(first.status, Status::Cancelled, "{first:?}"),
            (Kind::Through, false) => assert_eq!(first.status, Status::Done, "{first:?}"),
            (Kind::Pauses, false) => {
                assert_eq!(first.status, Status::Paused, "{first:?}");
                let resume = by_id[&faults.resumes[thread]];
                assert_eq!(resume.status, Status::Done, "{resume:?}");
            }
        }
        check_chain(runtime, &store, thread);
        if !cancelled {
            let state = runtime.block_on(pipeline.get_state(thread, None)).unwrap();
            assert_eq!(
                &state.values, &references[&plan.kinds[i]],
                "thread {thread} ended otherwise than an uninterrupted run"
            );
        }
    }
    let again = check_executions(&executions);
    assert!(
        !faults.frozen_runs.is_empty(),
        "the frozen worker held no run"
    );
    // Woken, the frozen worker found its runs taken over: nothing of them was its to record.
    let frozen =
        (fleet.done.iter()).find(|w| w.id == faults.frozen_id && w.count("worker stopped:") > 0);
    if let Some(w) = frozen {
        let none_lost = w.count(", 0 taken over by another worker");
        assert_eq!(none_lost, 0, "{}", w.log());
    }
    for held in &faults.frozen_runs {
        let run = by_id[held];
        assert!(
            run.claims >= 2,
            "the frozen worker's run {held} was not taken over: {run:?}"
        );
    }
    (runs.len(), takeovers, executions.len(), again)
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.extend(stategraph_agents::builtin_factories());
    registry
}

/// The pipeline's final state as an uninterrupted run ends it: through (`--yes`), and paused
/// at its review then answered `yes`.
fn references(runtime: &tokio::runtime::Runtime) -> HashMap<Kind, Value> {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
    // A graph and its run settings, as a worker resolves them.
    let build = |sets: &[&str], thread: &str| {
        let overrides: Vec<Override> = sets.iter().map(|s| s.parse().unwrap()).collect();
        let resolved = registry().resolve("pipeline", &overrides).unwrap();
        let config = resolved.file.run_config().thread(thread);
        (resolved.build(Some(store.clone())).unwrap(), config)
    };
    let input = json!({ "topic": TOPIC });
    runtime.block_on(async {
        let (through, config) = build(&["step_ms=0", "yes=true"], "through");
        let done = through.run(input.clone(), config, None).await.unwrap();
        let (pauses, config) = build(&["step_ms=0"], "pauses");
        pauses.run(input, config.clone(), None).await.unwrap();
        let waiting = pauses.get_state("pauses", None).await.unwrap().interrupts;
        let answer = Resume::answering(&waiting, Some(json!("yes")));
        let resumed = pauses.resume("pauses", answer, config, None).await.unwrap();
        HashMap::from([(Kind::Through, done.state), (Kind::Pauses, resumed.state)])
    })
}

/// The thread's checkpoints form one chain, one per step.
fn check_chain(runtime: &tokio::runtime::Runtime, store: &PostgresCheckpointer, thread: &str) {
    let chain = runtime
        .block_on(store.list_checkpoints(thread, None, 10_000))
        .unwrap();
    let steps: HashSet<_> = chain.iter().map(|c| c.step).collect();
    assert_eq!(
        steps.len(),
        chain.len(),
        "thread {thread}: two checkpoints of one step"
    );
    for pair in chain.windows(2) {
        assert_eq!(
            pair[0].parent_id,
            Some(pair[1].id),
            "thread {thread}: a forked chain"
        );
    }
}
