//! How a run ended, in the user's words: the answer, the pause and the commands that continue,
//! or the error and how to go on; and the exit code. With `--json`, one document on stdout; with
//! `--stream`, one last `outcome` line.

use super::stop::Stop;
use crate::args::RunSettings;
use crate::error::{run_error_code, EXIT_DONE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_PAUSED};
use crate::hints::run_mend;
use crate::{out, Ctx};
use crate::{pause, progress};
use serde_json::{json, Value};
use stategraph::checkpoint::{CheckpointError, InterruptRecord, ThreadStatus};
use stategraph::runtime::{RunError, RunOutcome, RunStatus};
use stategraph_llm::UsageLedger;
use stategraph_registry::Resolved;

/// How a run ended, for the report.
pub(in crate::cmd) struct Ended {
    pub(super) thread: String,
    pub(super) graph: String,
    pub(super) status: ThreadStatus,
    pub(super) step: u64,
    pub(super) checkpoint_id: Option<String>,
    /// The newest step known to be saved: the last one the run reported saved, else the one
    /// it started from. `None` when nothing of the thread was saved (it is not kept).
    pub(super) saved_step: Option<u64>,
    /// Why a run that reached its end failed at its job anyway, as its graph judges its final
    /// state ([`GraphFactory::failure`](stategraph_registry::GraphFactory::failure)).
    pub(super) failure: Option<String>,
    /// What the thread's model calls cost as its newest checkpoint keeps it (its `usage`
    /// ledger), read when the run failed or was stopped: a run that ends badly has paid too.
    pub(super) usage: Option<UsageLedger>,
    /// What the thread's branch paid for that no step's ledger holds: failed attempts, and
    /// results an edit or a rerun set aside ([`off_ledger`](stategraph_spend::off_ledger)).
    pub(super) off_ledger: Option<UsageLedger>,
    /// What stopped the run (Ctrl+C, SIGTERM, SIGHUP, a `--stream`'s stdout closed), if
    /// anything did.
    pub(super) stopped_by: Option<Stop>,
    /// Whether the run started: one stopped before it started never does (`stop.rs`).
    pub(super) started: bool,
    /// Why the thread's store could not be flushed when the run let it go (a full disk): the
    /// steps it reported saved may not be on disk, so a run that ended well failed.
    pub(super) unflushed: Option<CheckpointError>,
}

/// How a command's outcome is printed on stdout.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Output {
    Text,
    /// One JSON document (`--json`).
    Json,
    /// One line, `{"event":"outcome",...}`, after the streamed events (`--stream`).
    Ndjson,
}

impl Output {
    /// As the command's `--stream` and `--json` ask.
    pub(super) fn of(settings: &RunSettings) -> Output {
        match (settings.stream.is_empty(), settings.json) {
            (false, _) => Output::Ndjson,
            (true, true) => Output::Json,
            (true, false) => Output::Text,
        }
    }
}

/// Prints how the run ended and returns the exit code.
pub(in crate::cmd) fn report(
    ctx: &Ctx,
    resolved: &Resolved,
    meta: &Ended,
    result: Result<RunOutcome<Value>, RunError>,
    json: bool,
    resume_hint: &str,
) -> anyhow::Result<u8> {
    let output = if json { Output::Json } else { Output::Text };
    report_as(ctx, resolved, meta, result, output, resume_hint)
}

pub(super) fn report_as(
    ctx: &Ctx,
    resolved: &Resolved,
    meta: &Ended,
    result: Result<RunOutcome<Value>, RunError>,
    output: Output,
    resume_hint: &str,
) -> anyhow::Result<u8> {
    let json = output != Output::Text;
    let thread = &meta.thread;
    let mut doc = json!({
        "thread_id": thread,
        "graph": meta.graph,
        "status": meta.status,
        "step": meta.step,
        "checkpoint_id": meta.checkpoint_id,
    });
    if let Some(off) = &meta.off_ledger {
        // As `graph state --json` says it: what the branch paid for that no step's ledger holds.
        doc["failed_usage"] = json!(stategraph_spend::as_usage(off));
    }
    if let (Some(e), Ok(outcome)) = (&meta.unflushed, &result) {
        let code = report_unflushed(meta, e, outcome.step, resume_hint, &mut doc);
        return finish(doc, output, code);
    }
    let code = match result {
        Ok(mut outcome) => {
            let code = match &outcome.status {
                RunStatus::Done => report_done(ctx, resolved, meta, &outcome, json, &mut doc),
                RunStatus::Interrupted { interrupts, next } => {
                    let command = pause::continue_command(ctx, thread, interrupts);
                    doc["interrupts"] = serde_json::to_value(interrupts).unwrap_or(Value::Null);
                    doc["next"] = json!(next);
                    doc["continue_with"] = json!(command);
                    if !json {
                        say_paused(ctx, resolved, thread, &outcome, interrupts, next, &command);
                    }
                    EXIT_PAUSED
                }
            };
            if json {
                // Moved, not copied: the state can be large.
                doc["state"] = std::mem::take(&mut outcome.state);
            }
            code
        }
        Err(e) => report_error(meta, &e, resume_hint, !json && !ctx.quiet, &mut doc),
    };
    finish(doc, output, code)
}

/// A pause, on stderr: where it stands, what waits and for what, and the commands that go on.
fn say_paused(
    ctx: &Ctx,
    resolved: &Resolved,
    thread: &str,
    outcome: &RunOutcome<Value>,
    interrupts: &[InterruptRecord],
    next: &[String],
    command: &str,
) {
    // Steps are checkpoint steps everywhere (`state`, `history`, progress lines): the thread
    // stands at its last saved step, and the waiting nodes are the next step's, which the
    // progress lines called started.
    say!(
        "paused at step {} of thread {thread}; step {} waits: {}",
        outcome.step,
        outcome.step + 1,
        progress::tasks_text(next)
    );
    for line in pause::describe(resolved, interrupts, &outcome.state) {
        say!("{line}");
    }
    if resolved.factory.plan_editor().is_some() {
        say!(
            "see or change the plan first with:\n  {}",
            ctx.command_line_with(
                &["plan", thread],
                "[--edit | add | rm | move | status | deps]"
            )
        );
    }
    say!("continue with:\n  {command}");
}

/// A run that failed or was stopped: what happened, what the thread's saved steps used (when
/// `show_usage`), and how to go on, on stderr.
fn report_error(
    meta: &Ended,
    e: &RunError,
    resume_hint: &str,
    show_usage: bool,
    doc: &mut Value,
) -> u8 {
    let thread = &meta.thread;
    if let (false, Some(stop)) = (meta.started, meta.stopped_by) {
        let next = (meta.saved_step.is_some()).then_some(resume_hint);
        return not_started(stop, Some(thread), next, doc);
    }
    if let RunError::Stopped {
        reason, step, next, ..
    } = e
    {
        let stopped = super::stopped::StoppedRun {
            thread,
            stopped_by: meta.stopped_by,
        };
        return super::stopped::report_stopped(stopped, reason, *step, next, resume_hint, doc);
    }
    let mut code = run_error_code(e);
    doc["error"] = json!(e.to_string());
    if code == EXIT_INTERRUPTED {
        // Asked for, so not reported as an error; the exit code says by which signal.
        let by = match meta.stopped_by {
            Some(stop) => {
                code = stop.exit_code();
                doc["stopped_by"] = json!(stop.name());
                format!(" ({})", stop.name())
            }
            None => String::new(),
        };
        say!(
            "stopped at step {} of thread {thread}{by}; the last checkpoint is kept. Continue with:\n  {resume_hint}",
            meta.step
        );
        doc["continue_with"] = json!(resume_hint);
    } else if let Some(path) = disk_full(e) {
        say!("error: the disk holding {path} is full (no space left on device)");
        match meta.saved_step {
            Some(step) => {
                say!("thread {thread} could not save its next step; the last saved step is {step}. Free some space, then continue with:\n  {resume_hint}");
                doc["continue_with"] = json!(resume_hint);
            }
            None => {
                say!("nothing of thread {thread} was saved; free some space and run it again")
            }
        }
        return code;
    } else {
        say!("error: {e}");
    }
    if let Some(ledger) = meta.usage.as_ref().filter(|l| !l.is_empty()) {
        doc["usage"] = serde_json::to_value(ledger).unwrap_or(Value::Null);
    }
    if show_usage {
        // What the failed step's tasks paid for is in no saved step: its rows say (failed).
        let saved = meta.usage.clone().unwrap_or_default();
        let (shown, what) = match &meta.off_ledger {
            Some(off) => (saved.merged(off), "saved steps and failed attempts"),
            None => (saved, "saved steps"),
        };
        if !shown.is_empty() {
            say_text!("model usage of this thread's {what}:\n{shown}");
        }
    }
    if code == EXIT_FAILURE && meta.status != ThreadStatus::Done {
        say!("the thread keeps its last checkpoint; after fixing the cause, continue with:\n  {resume_hint}");
        if let Some(mend) = run_mend(e, resume_hint) {
            say!("{mend}");
        }
        doc["continue_with"] = json!(resume_hint);
    }
    code
}

/// A run that ended (done or paused) but whose store could not be flushed as it was let go:
/// a failed run, since its last steps may not be on disk. Says what failed and that a resume
/// goes on from what is there.
fn report_unflushed(
    meta: &Ended,
    e: &CheckpointError,
    step: u64,
    resume_hint: &str,
    doc: &mut Value,
) -> u8 {
    let thread = &meta.thread;
    say!("error: could not flush the thread's store as the run ended: {e}");
    say!(
        "thread {thread} ran to step {step}, but its last steps may not be on disk. Free some \
         space, then continue with:\n  {resume_hint}\n(the resume goes on from the last step on \
         disk, and writes the thread's artifact files again)"
    );
    doc["error"] = json!(format!("could not flush the thread's store: {e}"));
    doc["flushed"] = json!(false);
    doc["continue_with"] = json!(resume_hint);
    EXIT_FAILURE
}

/// A command stopped before it took its thread (`stop.rs`): nothing was made or changed. Says
/// so and how to go on (`next`, the command that continues the thread, when there is one), also
/// as the document `--json` or `--stream` ask for; returns the stop's exit code.
pub(super) fn stopped_before_taking(
    stop: Stop,
    thread: Option<&str>,
    next: Option<&str>,
    output: Output,
) -> anyhow::Result<u8> {
    let mut doc = json!({ "thread_id": thread });
    let code = not_started(stop, thread, next, &mut doc);
    finish(doc, output, code)
}

/// A run stopped before it started: what became of its thread, and how to go on: `next`
/// continues the thread, which is as it was; without one (a new run's) no thread was kept.
fn not_started(stop: Stop, thread: Option<&str>, next: Option<&str>, doc: &mut Value) -> u8 {
    let name = stop.name();
    doc["stopped_by"] = json!(name);
    doc["started"] = json!(false);
    match (thread, next) {
        (Some(thread), Some(next)) => {
            say!("stopped ({name}) before the run started: thread {thread} is as it was. Continue with:\n  {next}");
            doc["continue_with"] = json!(next);
        }
        _ => {
            say!("stopped ({name}) before the run started: no thread was kept; run the same command again to start it");
            doc["status"] = json!("not started");
        }
    }
    stop.exit_code()
}

/// A run that reached its end: exit 0, or 1 when the graph says it failed at its job anyway
/// (e.g. a research run where no todo succeeded), saying why after its output.
fn report_done(
    ctx: &Ctx,
    resolved: &Resolved,
    meta: &Ended,
    outcome: &RunOutcome<Value>,
    json: bool,
    doc: &mut Value,
) -> u8 {
    let thread = &meta.thread;
    if let Some(why) = &meta.failure {
        doc["error"] = json!(format!("the run finished but failed: {why}"));
    }
    if !json {
        if !ctx.quiet {
            let steps = match outcome.step {
                1 => "1 step".to_string(),
                n => format!("{n} steps"),
            };
            say!("done: thread {thread} finished after {steps}");
            print_usage(&outcome.state, meta.off_ledger.as_ref());
        }
        let shown = resolved
            .factory
            .output_field()
            .and_then(|f| outcome.state.get(f))
            .and_then(Value::as_str);
        match shown {
            Some(text) => out(text),
            None => out(&format!("{:#}", outcome.state)),
        }
    }
    match &meta.failure {
        Some(why) => {
            // Said even with --json, where stdout holds the document: a script sees the code.
            say!("error: thread {thread} finished but failed: {why}");
            EXIT_FAILURE
        }
        None => EXIT_DONE,
    }
}

fn finish(mut doc: Value, output: Output, code: u8) -> anyhow::Result<u8> {
    match output {
        Output::Text => {}
        Output::Json => out(&format!("{doc:#}")),
        Output::Ndjson => {
            doc["event"] = json!("outcome");
            out(&doc.to_string());
        }
    }
    Ok(code)
}

/// The path of the store whose disk is full, when that is why the run failed.
fn disk_full(e: &RunError) -> Option<&str> {
    match e {
        RunError::Checkpoint(CheckpointError::DiskFull { path }) => Some(path),
        _ => None,
    }
}

/// Shows what the thread's model calls cost, when its state keeps a usage ledger in `usage`
/// (the convention of the built-in agents), including what resumes did not pay again.
fn print_usage(state: &Value, off_ledger: Option<&UsageLedger>) {
    let Some(mut ledger) = state
        .get("usage")
        .and_then(|u| serde_json::from_value::<stategraph_llm::UsageLedger>(u.clone()).ok())
    else {
        return;
    };
    // Attempts no step's ledger holds (rows marked failed or set aside) were paid for too.
    if let Some(off) = off_ledger {
        ledger.merge(off);
    }
    if !ledger.is_empty() {
        say_text!("model usage of this thread:\n{ledger}");
    }
}
