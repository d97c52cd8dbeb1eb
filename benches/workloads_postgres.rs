//! The shared workloads of `../shared/bench/WORKLOADS.md` on the Postgres checkpointer, for the
//! comparison with LangGraph's `PostgresSaver` (`langgraph_peer.py WORKLOAD --saver postgres`).
//! Declared by `stategraph-postgres` (the crate whose API it shows), so the engine's own tests
//! build no Postgres client; the graphs and the JSON line are `workloads.rs`'s.
//!
//! ```text
//! cargo bench -p stategraph-postgres --bench workloads_postgres -- \
//!     chain|loop|fanout --saver postgres --db postgres://USER@HOST:PORT/DB [--durability sync] ...
//! ```
//!
//! `--db` names a database of its own (the checkpointer creates its tables there); `db_bytes` is
//! `pg_database_size` of that database after the run, as the peer reports it, so both include
//! the few MB of an empty database. Every other option is `workloads.rs`'s.

#[path = "workloads.rs"]
#[allow(dead_code)]
mod workloads;

use stategraph_checkpoint::Checkpointer;
use stategraph_postgres::PostgresCheckpointer;
use std::sync::Arc;

type Error = Box<dyn std::error::Error>;

/// Splits `--saver postgres --db URL` from the options `workloads.rs` parses.
fn split_args(args: &[String]) -> Result<(String, Vec<String>), String> {
    let (mut url, mut rest) = (None, Vec::new());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--saver" => match args.next().map(String::as_str) {
                Some("postgres") => {}
                other => return Err(format!("this bench runs --saver postgres, not {other:?}")),
            },
            "--db" => url = Some(args.next().ok_or("--db needs a postgres:// URL")?.clone()),
            _ => rest.push(arg.clone()),
        }
    }
    let url = url.ok_or("pass --db postgres://USER@HOST:PORT/DB, a database of its own")?;
    Ok((url, rest))
}

async fn database_bytes(url: &str) -> Result<u64, Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let task = tokio::spawn(connection);
    let row = client
        .query_one("SELECT pg_database_size(current_database())", &[])
        .await?;
    drop(client);
    let _ = task.await;
    Ok(row.get::<_, i64>(0).try_into()?)
}

fn run(args: &[String]) -> Result<workloads::Report, Error> {
    let (url, rest) = split_args(args)?;
    let options = workloads::Options::parse(&rest)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let saver: Arc<dyn Checkpointer> = Arc::new(PostgresCheckpointer::connect(&url).await?);
        let mut report = workloads::run_on(&options, saver, "postgres").await?;
        report.db_bytes = Some(database_bytes(&url).await?);
        Ok(report)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(report) => println!("{}", report.to_json_line()),
        Err(e) => {
            eprintln!("workloads_postgres: {e}");
            std::process::exit(2);
        }
    }
}
