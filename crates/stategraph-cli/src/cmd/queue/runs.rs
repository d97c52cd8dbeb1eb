//! `graph runs` (the queue's runs, once or followed) and `graph cancel` (a run, or a thread's).

use super::{postgres, queue_error};
use crate::args::{CancelArgs, RunStatusArg, RunsArgs};
use crate::error::{bad_input, Fail, EXIT_DONE, EXIT_FAILURE};
use crate::{format_ago, format_time, Ctx};
use serde_json::{json, Value};
use stategraph_postgres::queue::{RunFilter, RunId, RunInfo, RunQueue, Start, Status, Stop};
use std::time::Duration;

/// How often `--watch` reads the queue again.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// `graph runs`.
pub(crate) async fn runs(ctx: &Ctx, args: RunsArgs) -> anyhow::Result<u8> {
    let queue = postgres(ctx)?.run_queue();
    let mut filter = RunFilter::default().limit(args.limit.max(1));
    if let Some(status) = args.status {
        filter = filter.status(status_of(status));
    }
    if let Some(thread) = &args.thread {
        filter = filter.thread(thread.clone());
    }
    let listed = queue.list(&filter).await.map_err(queue_error)?;
    if args.json {
        let runs: Vec<Value> = listed.iter().map(run_json).collect();
        crate::out(&format!("{:#}", json!({ "runs": runs })));
        return Ok(EXIT_DONE);
    }
    if !args.watch {
        crate::out(&table(&listed));
        return Ok(EXIT_DONE);
    }
    watch(&queue, &filter, listed).await
}

/// Draws the runs again every second until Ctrl+C, or until every listed run has ended.
async fn watch(
    queue: &RunQueue,
    filter: &RunFilter,
    mut listed: Vec<RunInfo>,
) -> anyhow::Result<u8> {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut last = String::new();
    loop {
        let drawn = table(&listed);
        if drawn != last {
            // On a terminal the list is drawn in place; into a pipe each change is a new block.
            match tty {
                true => crate::out(&format!("\x1b[H\x1b[2J{drawn}")),
                false => crate::out(&format!("{drawn}\n")),
            }
            last = drawn;
        }
        if !listed.is_empty() && listed.iter().all(|r| r.status.is_final()) {
            say!("every listed run has ended");
            return Ok(EXIT_DONE);
        }
        tokio::select! {
            _ = tokio::time::sleep(WATCH_EVERY) => {}
            _ = tokio::signal::ctrl_c() => return Ok(EXIT_DONE),
        }
        listed = queue.list(filter).await.map_err(queue_error)?;
    }
}

/// `graph cancel RUN` or `graph cancel --thread ID`.
pub(crate) async fn cancel(ctx: &Ctx, args: CancelArgs) -> anyhow::Result<u8> {
    let queue = postgres(ctx)?.run_queue();
    let cancelled = match (&args.run, &args.thread) {
        (Some(run), _) => {
            let id: RunId = run.parse().map_err(|e| {
                bad_input(format!(
                    "`{run}` is not a run id ({e}); `graph runs` lists them"
                ))
            })?;
            vec![(id, queue.cancel(id).await.map_err(queue_error)?)]
        }
        (None, Some(thread)) => queue.cancel_thread(thread).await.map_err(queue_error)?,
        // clap requires one of them.
        (None, None) => Vec::new(),
    };
    if args.json {
        let runs: Vec<Value> = (cancelled.iter())
            .map(|(id, status)| {
                json!({"run_id": id.to_string(), "status": status.as_str(),
                "cancelled": cancel_held(*status)})
            })
            .collect();
        crate::out(&format!("{:#}", json!({ "runs": runs })));
    }
    if let (Some(thread), true) = (&args.thread, cancelled.is_empty()) {
        return Err(Fail {
            code: EXIT_FAILURE,
            message: format!("thread `{thread}` has no queued or running run: nothing to cancel"),
        }
        .into());
    }
    let mut ended = None;
    for (id, status) in &cancelled {
        match status {
            Status::Cancelled => say!("run {id} cancelled: it will not run"),
            Status::Running => say!(
                "run {id} is asked to stop: it stops at its next step boundary, with the step \
                 in flight saved (`graph runs` shows it cancelled then)"
            ),
            // Given back to the queue with a rollback asked: that outranks the cancel.
            Status::Queued => say!(
                "run {id} is being rolled back: the next worker drops the checkpoints it saved \
                 and records it cancelled"
            ),
            other => {
                ended = Some(format!(
                    "run {id} had already ended ({other}): nothing to cancel"
                ))
            }
        }
    }
    match ended {
        // Only one run is named by id; a thread's are all active.
        Some(message) => Err(Fail {
            code: EXIT_FAILURE,
            message,
        }
        .into()),
        None => Ok(EXIT_DONE),
    }
}

/// Whether the cancellation took or will take effect.
fn cancel_held(status: Status) -> bool {
    matches!(status, Status::Cancelled | Status::Running | Status::Queued)
}

fn status_of(arg: RunStatusArg) -> Status {
    match arg {
        RunStatusArg::Queued => Status::Queued,
        RunStatusArg::Running => Status::Running,
        RunStatusArg::Paused => Status::Paused,
        RunStatusArg::Done => Status::Done,
        RunStatusArg::Failed => Status::Failed,
        RunStatusArg::Cancelled => Status::Cancelled,
    }
}

/// A run's state as a person reads it: a stop asked, a lease lapsed (its worker gone).
fn status_text(run: &RunInfo) -> String {
    let mut text = run.status.as_str().to_string();
    if run.status == Status::Running {
        if let Some(stop) = run.stop {
            text.push_str(match stop {
                Stop::Cancel => " (cancelling)",
                Stop::Interrupt => " (interrupted: stopping)",
                Stop::Rollback => " (rolled back: stopping)",
            });
        } else if run.lapsed {
            text.push_str(" (lease lapsed)");
        }
    }
    text
}

/// The runs as a table: run, thread, graph, status, worker, since when; why for an ended one.
fn table(runs: &[RunInfo]) -> String {
    if runs.is_empty() {
        return "no runs".to_string();
    }
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                r.thread.clone(),
                r.graph.clone(),
                status_text(r),
                r.worker.clone().unwrap_or_else(|| "-".into()),
                format_ago(u64::try_from(r.since_ms).unwrap_or(0)),
            ]
        })
        .collect();
    let head = ["RUN", "THREAD", "GRAPH", "STATUS", "WORKER", "SINCE"].map(String::from);
    let mut widths = head.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String; 6]| {
        let parts: Vec<String> = (cells.iter().zip(widths))
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let mut text = line(&head);
    for (row, run) in rows.iter().zip(runs) {
        text.push('\n');
        text.push_str(&line(row));
        if let Some(message) = run.message.as_deref().filter(|_| run.status.is_final()) {
            if run.status != Status::Done {
                text.push_str(&format!("\n    {}", stategraph::quote::cut(message)));
            }
        }
    }
    text
}

fn run_json(r: &RunInfo) -> Value {
    let start = match &r.start {
        Start::Input(input) => json!({ "input": input }),
        Start::Resume(answer) => json!({ "resume": answer }),
    };
    let time = |ms: i64| format_time(u64::try_from(ms).unwrap_or(0));
    json!({
        "run_id": r.id.to_string(),
        "thread_id": r.thread,
        "graph": r.graph,
        "status": r.status.as_str(),
        "stop": r.stop.map(|s| s.as_str()),
        "message": r.message,
        "worker": r.worker,
        "multitask": r.strategy.as_str(),
        "start": start,
        "metadata": r.metadata,
        "claims": r.claims,
        "since": time(r.since_ms),
        "since_ms": r.since_ms,
        "created_ms": r.created_ms,
        "lease_expires_ms": r.lease_expires_ms,
        "lease_lapsed": r.lapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph_postgres::queue::Strategy;

    fn info(status: Status, stop: Option<Stop>, message: Option<&str>) -> RunInfo {
        RunInfo {
            id: "0193e2a0-0000-7000-8000-000000000001".parse().unwrap(),
            thread: "acme-1".into(),
            graph: "pipeline".into(),
            status,
            stop,
            message: message.map(String::from),
            worker: (status == Status::Running).then(|| "db1:4242:ab12cd34".into()),
            strategy: Strategy::Enqueue,
            start: Start::Input(json!({"topic": "x"})),
            metadata: json!({}),
            claims: 1,
            since_ms: 0,
            created_ms: 0,
            lease_expires_ms: None,
            lapsed: false,
        }
    }

    #[test]
    fn the_table_says_who_runs_what_and_why_a_run_ended() {
        let runs = [
            info(Status::Running, Some(Stop::Cancel), None),
            info(Status::Failed, None, Some("node `draft` failed: boom")),
            info(Status::Done, None, Some("done")),
        ];
        let text = table(&runs);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("RUN") && lines[0].contains("  WORKER  "),
            "{text}"
        );
        assert!(lines[1].contains("running (cancelling)") && lines[1].contains("db1:4242"));
        assert!(lines[2].contains("failed"));
        assert_eq!(lines[3], "    node `draft` failed: boom");
        assert!(lines[4].contains("done") && lines.len() == 5, "{text}");
        // Columns line up: STATUS starts at the same place on every run's line.
        let at = lines[0].find("STATUS").unwrap();
        assert_eq!(&lines[2][at..at + 6], "failed");
        assert_eq!(table(&[]), "no runs");
    }
}
