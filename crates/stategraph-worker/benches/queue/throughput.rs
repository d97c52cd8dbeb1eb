//! `throughput`: runs per second and steps per second with 1, 2 and 4 worker processes
//! serving one queue.

use crate::pg_cluster::{Cluster, TestDatabase};
use crate::{graphs, Args, Error};
use stategraph_postgres::queue::{RunQueue, Submission};
use stategraph_postgres::PostgresCheckpointer;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Options {
    workload: String,
    runs: usize,
    workers: Vec<usize>,
    rounds: usize,
    concurrency: usize,
}

impl Options {
    pub fn parse(args: &Args) -> Result<Options, Error> {
        let workload = args.get("--workload").unwrap_or("chain").to_string();
        if graphs::shape(&workload).is_none() {
            return Err(format!("--workload takes chain or fanout, not `{workload}`").into());
        }
        let runs = args.number("--runs", if workload == "chain" { 48 } else { 400 })?;
        let options = Options {
            workload,
            runs,
            workers: args.numbers("--workers", &[1, 2, 4])?,
            rounds: args.number("--rounds", 3)?,
            concurrency: args.number("--concurrency", 1)?,
        };
        if options.runs == 0 || options.rounds == 0 || options.workers.contains(&0) {
            return Err("--runs, --rounds and each of --workers must be at least 1".into());
        }
        Ok(options)
    }
}

/// One timed batch, and what it cost: the database's commits and WAL flushes, and how busy the
/// machine's cores were.
struct Sample {
    workers: usize,
    seconds: f64,
    commits: i64,
    wal_syncs: i64,
    cpu_busy: f64,
}

pub async fn run(cluster: &'static Cluster, options: &Options) -> Result<(), Error> {
    let (steps_per_run, _) = graphs::shape(&options.workload).ok_or("unknown workload")?;
    let mut samples = Vec::new();
    for round in 0..options.rounds {
        let mut order = options.workers.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for &workers in &order {
            let db = cluster.database();
            let sample = batch(&db, options, workers).await?;
            let (runs, steps, seconds) =
                (options.runs, options.runs * steps_per_run, sample.seconds);
            println!(
                "{}",
                serde_json::json!({
                    "bench": "queue_throughput", "workload": options.workload, "round": round,
                    "workers": workers, "concurrency": options.concurrency, "runs": runs,
                    "steps": steps, "seconds": (seconds * 1e4).round() / 1e4,
                    "runs_per_s": (runs as f64 / seconds * 10.0).round() / 10.0,
                    "steps_per_s": (steps as f64 / seconds).round(),
                    "commits_per_step": sample.commits as f64 / steps as f64,
                    "wal_syncs_per_step": sample.wal_syncs as f64 / steps as f64,
                    "cpu_busy": (sample.cpu_busy * 1000.0).round() / 1000.0,
                })
            );
            samples.push(sample);
        }
    }
    summarize(options, steps_per_run, &samples);
    Ok(())
}

/// Medians per worker count, and each against one worker's.
fn summarize(options: &Options, steps_per_run: usize, samples: &[Sample]) {
    let median_of = |w: usize, f: fn(&Sample) -> f64| {
        let mut s: Vec<f64> = samples.iter().filter(|s| s.workers == w).map(f).collect();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let median = |w: usize| median_of(w, |s| s.seconds);
    let steps = (options.runs * steps_per_run) as f64;
    let base = median(options.workers[0]);
    eprintln!(
        "{} runs of {} ({} steps each), median of {} rounds:",
        options.runs, options.workload, steps_per_run, options.rounds
    );
    for &w in &options.workers {
        let seconds = median(w);
        eprintln!(
            "  {w} worker(s) x {}: {:.2} s, {:.1} runs/s, {:.0} steps/s, {:.2}x the first; \
             per step {:.2} commits, {:.2} WAL flushes; cores {:.0}% busy",
            options.concurrency,
            seconds,
            options.runs as f64 / seconds,
            steps / seconds,
            base / seconds,
            median_of(w, |s| s.commits as f64) / steps,
            median_of(w, |s| s.wal_syncs as f64) / steps,
            median_of(w, |s| s.cpu_busy) * 100.0,
        );
    }
}

/// Submits the runs, starts `workers` worker processes together, and times them to the last
/// run done (the database's clock at both ends). Checks every run's outcome and final state.
async fn batch(db: &TestDatabase, options: &Options, workers: usize) -> Result<Sample, Error> {
    let queue = RunQueue::connect(db.url()).await?;
    let threads: Vec<String> = (0..options.runs).map(|i| format!("run-{i}")).collect();
    submit_all(&queue, &options.workload, &threads).await?;
    let mut children = Vec::new();
    for _ in 0..workers {
        children.push(WorkerProcess::start(db.url(), options.concurrency)?);
    }
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let before = counters(&client).await?;
    let cpu_before = cpu_ticks();
    let start: f64 = client
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await?
        .try_get(0)?;
    let mut polls = 0;
    for child in &mut children {
        child.go()?;
    }
    let give_up = Instant::now() + Duration::from_secs(900);
    let (end, cpu_after) = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        polls += 1;
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE status NOT IN ('queued', 'running')), \
                 extract(epoch FROM max(since))::float8 FROM stategraph_runs",
                &[],
            )
            .await?;
        let (ended, last): (i64, Option<f64>) = (row.try_get(0)?, row.try_get(1)?);
        if ended as usize == options.runs {
            break (last.ok_or("no run ended")?, cpu_ticks());
        }
        if Instant::now() > give_up {
            return Err(format!("{ended} of {} runs ended in 15 minutes", options.runs).into());
        }
    };
    let mut done = 0;
    for child in children {
        done += child.finish()?;
    }
    // The workers are gone, so their counts reached the server's statistics.
    let after = counters(&client).await?;
    let not_done: i64 = client
        .query_one(
            "SELECT count(*) FROM stategraph_runs WHERE status <> 'done'",
            &[],
        )
        .await?
        .try_get(0)?;
    if not_done > 0 || done != options.runs {
        return Err(
            format!("{not_done} runs did not end done; the workers report {done} done").into(),
        );
    }
    check_states(db, &options.workload, &threads).await?;
    let cpu_busy = match (cpu_before, cpu_after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    Ok(Sample {
        workers,
        seconds: end - start,
        // The polls above are transactions of this database too (read-only: no WAL flush);
        // the few of the bench's own statistics not yet flushed are within a percent.
        commits: after.0 - before.0 - polls,
        wal_syncs: after.1 - before.1,
        cpu_busy,
    })
}

/// The database's commits so far and the server's WAL flushes so far.
async fn counters(client: &tokio_postgres::Client) -> Result<(i64, i64), Error> {
    let row = client
        .query_one(
            "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()), \
                    (SELECT wal_sync FROM pg_stat_wal)",
            &[],
        )
        .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// Busy and total ticks of all the machine's cores so far (`/proc/stat`).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|t| t.parse().ok())
        .collect();
    let idle = ticks.get(3)? + ticks.get(4)?;
    let total: u64 = ticks.iter().sum();
    Some((total - idle, total))
}

/// Submits a run of `graph` per thread, 16 submits in flight.
pub async fn submit_all(queue: &RunQueue, graph: &str, threads: &[String]) -> Result<(), Error> {
    let mut pending = tokio::task::JoinSet::new();
    for thread in threads {
        if pending.len() >= 16 {
            if let Some(done) = pending.join_next().await {
                done??;
            }
        }
        let (queue, submission) = (
            queue.clone(),
            Submission::input(graph, serde_json::json!({})).thread(thread.clone()),
        );
        pending.spawn(async move { queue.submit(submission).await.map(drop) });
    }
    while let Some(done) = pending.join_next().await {
        done??;
    }
    Ok(())
}

/// Every thread ended where an uninterrupted run ends, read as a front end reads it.
async fn check_states(db: &TestDatabase, workload: &str, threads: &[String]) -> Result<(), Error> {
    let (_, ended_well) = graphs::shape(workload).ok_or("unknown workload")?;
    let store = Arc::new(PostgresCheckpointer::connect(db.url()).await?);
    let graph = graphs::registry()
        .resolve(workload, &[])?
        .build(Some(store))?;
    for thread in threads {
        let values = graph.get_state(thread, None).await?.values;
        if !ended_well(&values) {
            return Err(format!("thread {thread} ended in {values}").into());
        }
    }
    Ok(())
}

/// A worker process: this executable in its `worker` mode.
struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl WorkerProcess {
    /// Starts one and waits until it is connected.
    fn start(url: &str, concurrency: usize) -> Result<WorkerProcess, Error> {
        let mut child = Command::new(std::env::current_exe()?)
            .args([
                "worker",
                "--db",
                url,
                "--concurrency",
                &concurrency.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(format!("a worker process said {line:?} instead of `ready`").into());
        }
        Ok(WorkerProcess {
            child,
            stdin,
            stdout,
        })
    }

    fn go(&mut self) -> Result<(), Error> {
        let stdin = self.stdin.as_mut().ok_or("already finished")?;
        stdin.write_all(b"go\n")?;
        Ok(stdin.flush()?)
    }

    /// Drains it (stdin closed); returns how many runs it reports done.
    fn finish(mut self) -> Result<usize, Error> {
        drop(self.stdin.take());
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let status = self.child.wait()?;
        let done = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("done="))
            .and_then(|n| n.parse().ok());
        match (status.success(), done) {
            (true, Some(done)) => Ok(done),
            _ => Err(format!("a worker process ended {status} saying {line:?}").into()),
        }
    }
}
