//! The run queue's figures for BENCHMARKS.md (issue 31, item 6): throughput with 1, 2 and 4
//! workers against one Postgres, and how a claim's (and a submit's) latency grows with the
//! queue's depth. Each mode starts a throwaway Postgres cluster of its own (the postgres
//! crate's test fixture), durable as a production server is unless told otherwise.
//!
//! ```text
//! cargo bench -p stategraph-worker --bench queue -- throughput [--workload chain|fanout]
//!     [--runs N] [--workers 1,2,4] [--rounds R] [--concurrency C] [--fsync on|off]
//! cargo bench -p stategraph-worker --bench queue -- claim [--depths 0,100,1000,10000]
//!     [--samples S] [--fsync on|off]
//! cargo bench -p stategraph-worker --bench queue -- serve [--fsync on|off]
//! ```
//!
//! - `throughput`: `--runs` runs of the workload are submitted, then W worker *processes* (this
//!   executable again, in its hidden `worker` mode: a [`Worker`] with `--concurrency C`, 1 by
//!   default, and `graph worker`'s default clocks) are told to start together; timed from then
//!   (the database's clock) to the last run recorded done. Every run must end `done` in the
//!   state an uninterrupted run ends in. Worker counts alternate order per round.
//! - `claim`: the queue filled to each depth (submits 32 at a time), then `--samples` submits
//!   and `--samples` claims timed one by one (each claimed run recorded done, untimed); then
//!   the claim's plan at the deepest queue, from `auto_explain` (`EXPLAIN ANALYZE` of the real
//!   statement, as the server ran it).
//! - `serve`: a cluster for the side-by-side runs with LangGraph's `PostgresSaver`: prints its
//!   URL and settings, and stops when stdin closes.
//!
//! `--fsync on` (the default) sets what `initdb` sets and the fixture turns off for speed:
//! `fsync`, `full_page_writes`, `shared_buffers = 128MB`. JSON lines go to stdout, a summary
//! to stderr.

#[allow(dead_code)]
#[path = "../../../stategraph-postgres/tests/support/pg_cluster.rs"]
mod pg_cluster;

mod claim;
mod graphs;
mod throughput;

use pg_cluster::Cluster;
use stategraph_worker::{Worker, WorkerOptions};
use std::io::{BufRead, Write};
use std::time::Duration;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The command line, as `--flag value` pairs after the mode.
pub struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args, Error> {
        let mut pairs = Vec::new();
        let mut it = args.iter().filter(|a| *a != "--bench");
        while let Some(flag) = it.next() {
            let value = it.next().ok_or(format!("{flag} needs a value"))?;
            pairs.push((flag.clone(), value.clone()));
        }
        Ok(Args { pairs })
    }

    pub fn get(&self, flag: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(f, _)| f == flag)
            .map(|(_, v)| v.as_str())
    }

    pub fn number(&self, flag: &str, default: usize) -> Result<usize, Error> {
        self.get(flag).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("{flag} takes a number, not `{v}`").into())
        })
    }

    pub fn numbers(&self, flag: &str, default: &[usize]) -> Result<Vec<usize>, Error> {
        self.get(flag).map_or(Ok(default.to_vec()), |v| {
            v.split(',')
                .map(|n| n.trim().parse())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("{flag} takes numbers separated by commas, not `{v}`").into())
        })
    }

    fn check_known(&self, known: &[&str]) -> Result<(), Error> {
        match self
            .pairs
            .iter()
            .find(|(f, _)| !known.contains(&f.as_str()))
        {
            Some((flag, _)) => Err(format!("unknown option {flag} (known: {known:?})").into()),
            None => Ok(()),
        }
    }
}

/// The cluster, made as durable as `initdb` makes one when `fsync` (the fixture turns fsync
/// and full-page writes off, and shrinks shared buffers, to keep tests quick).
fn start_cluster(args: &Args) -> Result<&'static Cluster, Error> {
    let fsync = match args.get("--fsync").unwrap_or("on") {
        "on" => true,
        "off" => false,
        other => return Err(format!("--fsync takes on or off, not `{other}`").into()),
    };
    let cluster = pg_cluster::cluster();
    if fsync {
        // One statement each: ALTER SYSTEM refuses to run inside a transaction block.
        for sql in [
            "ALTER SYSTEM SET fsync = on",
            "ALTER SYSTEM SET full_page_writes = on",
            "ALTER SYSTEM SET shared_buffers = '128MB'",
        ] {
            cluster.admin(sql)?;
        }
        cluster.restart_now()?;
    }
    Ok(cluster)
}

/// The server's version and the settings that decide what a commit costs.
async fn settings(url: &str) -> Result<serde_json::Value, Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN \
             ('server_version', 'fsync', 'synchronous_commit', 'full_page_writes', \
              'wal_sync_method', 'shared_buffers', 'commit_delay', 'max_connections') \
             ORDER BY name",
            &[],
        )
        .await?;
    let mut out = serde_json::Map::new();
    for row in rows {
        out.insert(row.try_get(0)?, serde_json::Value::String(row.try_get(1)?));
    }
    Ok(out.into())
}

/// The hidden `worker` mode: one worker process. Says `ready` once connected, starts on a line
/// of stdin, drains when stdin closes, and prints its report.
async fn worker(args: &Args) -> Result<(), Error> {
    let url = args.get("--db").ok_or("worker needs --db URL")?;
    let concurrency = args.number("--concurrency", 1)?;
    let options = WorkerOptions::new(url).concurrency(concurrency);
    let worker = Worker::connect(graphs::registry(), options).await?;
    let mut stdin = std::io::stdin().lock();
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    drop(stdin);
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run().await }
    });
    // Until the parent closes our stdin (or dies).
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await??;
    worker.drain().await;
    let report = running.await??;
    println!(
        "report done={} failed={} released={} lost={}",
        report.done, report.failed, report.released, report.lost
    );
    Ok(())
}

/// The `serve` mode: a cluster for other programs, until stdin closes.
async fn serve(args: &Args) -> Result<(), Error> {
    let cluster = start_cluster(args)?;
    let url = cluster.url("postgres");
    eprintln!("settings: {}", settings(&url).await?);
    println!("{}", url.replace("?sslmode=disable", ""));
    std::io::stdout().flush()?;
    tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
        .await??;
    Ok(())
}

async fn run(mode: &str, args: &Args) -> Result<(), Error> {
    match mode {
        "worker" => {
            args.check_known(&["--db", "--concurrency"])?;
            worker(args).await
        }
        "serve" => {
            args.check_known(&["--fsync"])?;
            serve(args).await
        }
        "throughput" => {
            args.check_known(&[
                "--workload",
                "--runs",
                "--workers",
                "--rounds",
                "--concurrency",
                "--fsync",
            ])?;
            let options = throughput::Options::parse(args)?;
            let cluster = start_cluster(args)?;
            eprintln!("settings: {}", settings(&cluster.url("postgres")).await?);
            throughput::run(cluster, &options).await
        }
        "claim" => {
            args.check_known(&["--depths", "--samples", "--fsync"])?;
            let options = claim::Options::parse(args)?;
            let cluster = start_cluster(args)?;
            eprintln!("settings: {}", settings(&cluster.url("postgres")).await?);
            claim::run(cluster, &options).await
        }
        other => Err(format!("unknown mode `{other}`: throughput, claim or serve").into()),
    }
}

fn main() {
    let all: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some((mode, rest)) = all.split_first() else {
        eprintln!("queue: name a mode: throughput, claim or serve");
        std::process::exit(2);
    };
    let result = Args::parse(rest).and_then(|args| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(run(mode, &args))
    });
    if let Err(e) = result {
        eprintln!("queue {mode}: {e}");
        std::process::exit(2);
    }
}

/// Median, 90th percentile and maximum of `samples` (sorted here), in milliseconds.
pub fn spread(samples: &mut [Duration]) -> serde_json::Value {
    samples.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    serde_json::json!({ "median_ms": ms(at(0.5)), "p90_ms": ms(at(0.9)), "max_ms": ms(at(1.0)) })
}
