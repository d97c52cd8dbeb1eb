//! `graph worker`: this binary's graphs served to the run queue until a signal drains it.
//!
//! Ctrl+C or SIGTERM drains: no new claims, each run finishes its current step, saves it and
//! goes back to the queue with its leases let go, so another worker continues it at once; then
//! the command ends with 130 or 143. A second signal while draining ends at once: the runs'
//! leases then lapse and other workers take them over from their last checkpoints.
//!
//! With `--retention-every SECS` (an hour by default; 0: off) and a graph with a `[retention]`
//! policy, it also sweeps the database in the background (`cmd/background_sweep.rs`); every
//! worker may, as a sweep skips a thread another process writes.

use super::postgres;
use crate::args::WorkerArgs;
use crate::error::{EXIT_DONE, EXIT_INTERRUPTED, EXIT_TERMINATED};
use crate::Ctx;
use stategraph_worker::{Worker, WorkerOptions, WorkerReport};
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// `graph worker`.
pub(crate) async fn worker(ctx: &Ctx, args: WorkerArgs) -> anyhow::Result<u8> {
    // Heard from the start: a signal during the connection drains a worker with nothing to do.
    let mut signals = Signals::new()?;
    // Refuses an embedded store; on Postgres, the URL the command was given.
    postgres(ctx)?;
    let url = ctx.postgres_url().unwrap_or_default();
    let mut options = WorkerOptions::new(url)
        .concurrency(usize::from(args.concurrency))
        .lease(Duration::from_secs_f64(args.lease))
        .retries(args.retries);
    if let Some(id) = args.id {
        options = options.id(id);
    }
    // Runs' nodes reach the database's long-term store, as `graph run`'s do; the background
    // sweep removes its expired items.
    let long_term = crate::long_term::for_runs(&ctx.store);
    options = options.long_term_store(long_term.clone());
    let worker = tokio::select! {
        connected = Worker::connect(ctx.registry.clone(), options) => connected?,
        code = signals.next() => return Ok(code),
    };
    let graphs: Vec<&str> = ctx.registry.iter().map(|f| f.name()).collect();
    say!(
        "worker {} serving {} graphs ({}), {} run(s) at once; Ctrl+C or SIGTERM drains it",
        worker.id(),
        graphs.len(),
        graphs.join(", "),
        args.concurrency
    );
    // Stopped when this command ends (dropped), after its round in progress.
    let _sweeper = crate::cmd::background_sweep::start(ctx, args.retention_every, &long_term);
    let mut running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run().await }
    });
    let code = tokio::select! {
        ended = &mut running => {
            // `run` returns only once drained, or on an error that stops the worker.
            let report = ended??;
            say_report(&report);
            return Ok(EXIT_DONE);
        }
        code = signals.next() => code,
    };
    say!("draining: each run finishes its current step, saves it and goes back to the queue (a second signal stops at once)");
    tokio::select! {
        () = worker.drain() => {}
        again = signals.next() => {
            say!("stopped without draining: the runs' leases lapse and other workers take them over");
            return Ok(again);
        }
    }
    let report = running.await??;
    say_report(&report);
    Ok(code)
}

fn say_report(report: &WorkerReport) {
    say!(
        "worker stopped: {} done, {} paused, {} failed, {} cancelled, {} given back to the queue, {} taken over by another worker",
        report.done,
        report.paused,
        report.failed,
        report.cancelled,
        report.released,
        report.lost
    );
}

/// Ctrl+C and SIGTERM, each with the exit code it calls for.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next signal's exit code.
    async fn next(&mut self) -> u8 {
        tokio::select! {
            _ = self.interrupt.recv() => EXIT_INTERRUPTED,
            _ = self.terminate.recv() => EXIT_TERMINATED,
        }
    }
}
