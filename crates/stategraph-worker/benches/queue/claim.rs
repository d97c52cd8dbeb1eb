//! `claim`: how long one claim and one submit take as the queue grows to 10,000 queued runs,
//! and the plan the server chose for the claim at the deepest queue.

use crate::pg_cluster::{Cluster, TestDatabase};
use crate::throughput::submit_all;
use crate::{spread, Args, Error};
use stategraph_postgres::queue::{Outcome, RunQueue, Submission};
use std::time::{Duration, Instant};

pub struct Options {
    depths: Vec<usize>,
    samples: usize,
}

impl Options {
    pub fn parse(args: &Args) -> Result<Options, Error> {
        let mut depths = args.numbers("--depths", &[0, 100, 1000, 10_000])?;
        depths.sort_unstable();
        let samples = args.number("--samples", 50)?;
        if samples == 0 {
            return Err("--samples must be at least 1".into());
        }
        Ok(Options { depths, samples })
    }
}

const LEASE: Duration = Duration::from_secs(30);

pub async fn run(cluster: &'static Cluster, options: &Options) -> Result<(), Error> {
    let db = cluster.database();
    let queue = RunQueue::connect(db.url()).await?;
    let mut queued = 0;
    let mut next = 0;
    let mut names = |n: usize| -> Vec<String> {
        let out = (next..next + n).map(|i| format!("q-{i}")).collect();
        next += n;
        out
    };
    eprintln!("depth | submit median / p90 / max ms | claim median / p90 / max ms");
    for &depth in &options.depths {
        submit_all(&queue, "chain", &names(depth - queued)).await?;
        queued = depth;
        let mut submits = Vec::new();
        for thread in names(options.samples) {
            let submission = Submission::input("chain", serde_json::json!({})).thread(thread);
            let started = Instant::now();
            queue.submit(submission).await?;
            submits.push(started.elapsed());
        }
        let mut claims = Vec::new();
        for _ in 0..options.samples {
            let started = Instant::now();
            let claimed = queue
                .claim("bench", LEASE)
                .await?
                .ok_or("nothing to claim")?;
            claims.push(started.elapsed());
            queue
                .finish(claimed.id, claimed.epoch, Outcome::Done)
                .await?;
        }
        let (submit, claim) = (spread(&mut submits), spread(&mut claims));
        eprintln!("{depth} | {submit} | {claim}");
        println!(
            "{}",
            serde_json::json!({
                "bench": "queue_claim", "queued": depth, "samples": options.samples,
                "submit": submit, "claim": claim,
            })
        );
    }
    let plan = claim_plan(cluster, &db).await?;
    let scans = plan.contains("Seq Scan on stategraph_runs");
    eprintln!("the claim at {queued} queued runs, as the server ran it:\n{plan}");
    println!(
        "{}",
        serde_json::json!({
            "bench": "queue_claim_plan", "queued": queued, "seq_scan": scans, "plan": plan,
        })
    );
    Ok(())
}

/// The plan of one claim (`auto_explain`, analyzed) on a new connection, read from the server's
/// log (`server.log` beside its data folder, where the fixture keeps it).
async fn claim_plan(cluster: &Cluster, db: &TestDatabase) -> Result<String, Error> {
    for setting in [
        "session_preload_libraries = 'auto_explain'",
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_analyze = on",
        "auto_explain.log_buffers = on",
    ] {
        cluster.admin(&format!("ALTER DATABASE \"{}\" SET {setting}", db.name()))?;
    }
    let queue = RunQueue::connect(db.url()).await?;
    let claimed = queue
        .claim("bench", LEASE)
        .await?
        .ok_or("nothing to claim")?;
    queue
        .finish(claimed.id, claimed.epoch, Outcome::Done)
        .await?;
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let data: String = client
        .query_one("SHOW data_directory", &[])
        .await?
        .try_get(0)?;
    let log = std::path::Path::new(&data)
        .parent()
        .ok_or("the data folder has no parent")?
        .join("server.log");
    let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let at = text
        .rfind("Query Text: WITH next AS")
        .ok_or("no claim in the server's log")?;
    // The plan: the lines after the query's, up to the log's next entry (a timestamped line).
    let plan: Vec<&str> = text[at..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with("Update on") && !l.contains("->"))
        .take_while(|l| !l.starts_with("20"))
        .collect();
    Ok(plan.join("\n"))
}
