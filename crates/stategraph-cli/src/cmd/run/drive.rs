//! The run itself: a graph run on a thread, which Ctrl+C, SIGTERM, SIGHUP or a closed
//! `--stream` stop (`stop.rs`), progress lines or `--stream`, the artifacts of each saved
//! checkpoint of the thread, the graph's verdict on a finished run, and the thread let go (or
//! not kept, when nothing of it was saved).

use super::report::{report_as, Ended, Output};
use super::stop::{Stop, Stops};
use super::{resume_again, Action};
use crate::args::RunSettings;
use crate::cmd::artifacts;
use crate::origin::Origin;
use crate::output::{self, stdout_closed};
use crate::progress::Progress;
use crate::{out, Ctx};
use serde_json::Value;
use stategraph::checkpoint::{
    record_verdict, summarize, CheckpointError, ThreadStatus, ThreadSummary, Verdict,
};
use stategraph::runtime::{Event, Resume, RunConfig, RunError, RunOutcome, RunStatus};
use stategraph_llm::UsageLedger;
use stategraph_registry::{ErasedGraph, Resolved};
use stategraph_spend::{off_ledger_keeping, pricing_of};
use std::future::Future;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// What a run came to: its result as the graph returned it.
type Outcome = Result<RunOutcome<Value>, RunError>;

/// A run about to start on a thread: what every part of driving and reporting it reads.
pub(crate) struct ThreadRun<'a> {
    pub ctx: &'a Ctx,
    pub resolved: &'a Resolved,
    pub graph: &'a dyn ErasedGraph,
    pub thread: &'a str,
    pub settings: &'a RunSettings,
    /// The nodes that run first, for progress.
    pub first_step: &'a [String],
}

/// Runs `action` on the run's thread (already held) and reports how it ended.
pub(super) async fn execute(run: &ThreadRun<'_>, action: Action) -> anyhow::Result<u8> {
    let (ctx, thread) = (run.ctx, run.thread);
    let resume_hint = ctx.command_line(&["resume", thread]);
    // A rerun, or a resume with an answer, that never started is done again as it was asked;
    // once started, its thread goes on from where it stopped.
    let again = match &action {
        Action::Rerun(node) => Some(ctx.command_line(&["rerun", thread, "--from", node])),
        Action::Resume(Resume::Value(answer)) => Some(resume_again(ctx, thread, Some(answer))),
        Action::Resume(Resume::ById(answers)) => {
            let answers = Value::Object(answers.clone().into_iter().collect());
            Some(resume_again(ctx, thread, Some(&answers)))
        }
        Action::Resume(Resume::Continue) | Action::Run(_) => None,
    };
    let (ended, result) = drive(run, action).await;
    let resume_hint = match again {
        Some(again) if !ended.started => again,
        _ => resume_hint,
    };
    let output = Output::of(run.settings);
    report_as(ctx, run.resolved, &ended, result, output, &resume_hint)
}

/// Runs `action` on the run's thread, made (remembering how it was started, with `sets`) when
/// it does not exist yet, and hands back how it ended for the caller to report in its own words.
pub(crate) async fn run_on_thread(
    run: &ThreadRun<'_>,
    sets: Vec<String>,
    action: Action,
) -> anyhow::Result<(Ended, Outcome)> {
    let (ctx, resolved, thread) = (run.ctx, run.resolved, run.thread);
    let origin = Origin::new(&resolved.file.graph, &resolved.origin, sets);
    if let Err(e) = ctx.store.create(thread, &origin).await {
        match e.downcast_ref::<CheckpointError>() {
            Some(CheckpointError::ThreadExists { .. }) => ctx.store.hold(thread).await?,
            _ => return Err(e),
        }
    }
    Ok(drive(run, action).await)
}

/// The run itself: everything [`execute`] does but the report.
async fn drive(run: &ThreadRun<'_>, action: Action) -> (Ended, Outcome) {
    let ThreadRun {
        ctx,
        resolved,
        graph,
        thread,
        settings,
        first_step,
    } = *run;
    // Only a thread this run starts (no checkpoint yet) is not kept when it saves nothing: a new
    // run on a thread that has checkpoints (a tree command's, `run_on_thread`) keeps them, as a
    // resume or a rerun does, also when a stop comes before it starts.
    let before = summarize(ctx.store.as_ref(), thread).await;
    let started_at = before
        .as_ref()
        .ok()
        .and_then(|s| s.as_ref().map(|s| s.step));
    let fresh = matches!(action, Action::Run(_)) && matches!(before, Ok(None));
    let mut progress = Progress::new(ctx.quiet, ctx.verbose > 0);
    progress.expect(first_step);
    let hint = ctx.command_line(&["resume", thread]);
    let token = ctx.stops.watch(hint, progress.notices());
    let mut config = run_config(resolved, thread, token, settings).control(&ctx.stops.control());
    config.run_timeout = settings.timeout;
    let config = crate::cmd::cache::with_cache(config, ctx, settings.no_cache);
    // Nodes reach the long-term store beside the threads (opened when one first uses it).
    let items_ttl = resolved.file.retention.as_ref().map(|p| p.items_ttl());
    let items = crate::long_term::for_runs_with(&ctx.store, items_ttl.unwrap_or_default());
    let config = config.with_store(items);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let running = async {
        match action {
            Action::Run(input) => graph.run(input, config, Some(tx)).await,
            Action::Resume(resume) => graph.resume(thread, resume, config, Some(tx)).await,
            Action::Rerun(node) => graph.rerun_from(thread, &node, config, Some(tx)).await,
        }
    };
    let notices = progress.notices();
    let arts = artifacts::of(ctx, resolved).unwrap_or_else(|e| {
        notices.line(&format!("warning: artifacts not written: {e:#}"));
        None
    });
    let mut writer = (arts.as_deref()).map(|a| artifacts::Writer::new(a, thread, ctx, notices));
    let follower = Follower {
        stops: &ctx.stops,
        streaming: !settings.stream.is_empty(),
        saved_step: started_at,
    };
    // Stopped before it started: it never does (`Stops::stopped` says why).
    let started = ctx.stops.stopped().is_none();
    let (result, saved_step, stopped_by) = if started {
        follower.follow(running, rx, progress, &mut writer).await
    } else {
        progress.clear();
        let cancelled = Err(RunError::Cancelled {
            thread_id: thread.to_string(),
        });
        (cancelled, started_at, ctx.stops.run_ended())
    };
    let failure = judge(run, &result).await;
    let (mut ended, no_checkpoint) = settle(run, &result, saved_step, failure).await;
    ended.stopped_by = stopped_by;
    ended.started = started;
    if let (Some(w), Some(id)) = (&mut writer, ended.checkpoint_id.as_deref()) {
        // The files of where the thread stands now: its newest checkpoint, also when the run
        // reported none of its checkpoints (`--stream` without `debug`) or failed after some.
        if let Ok(id) = id.parse() {
            w.write(id).await;
        }
    }
    let nothing_saved = (fresh && ended.saved_step.is_none() && result.is_err()) || no_checkpoint;
    keep_or_drop(run, nothing_saved, &result, &mut ended).await;
    (ended, result)
}

/// The thread after its run: not kept half-made (an id without a checkpoint) when
/// `nothing_saved`, else kept with what its model calls cost counted (for a run that started);
/// let go either way. A store that could not be flushed as it was let go (a full disk) makes
/// a run that ended well a failed one (`Ended::unflushed`): what it saved may not be on disk.
async fn keep_or_drop(
    run: &ThreadRun<'_>,
    nothing_saved: bool,
    result: &Outcome,
    ended: &mut Ended,
) {
    let (ctx, thread) = (run.ctx, run.thread);
    if nothing_saved {
        let _ = ctx.store.delete(thread).await;
    } else if ended.started {
        count_spend(run, result, ended).await;
    }
    if let Err(e) = ctx.store.release(thread) {
        // A failed run already says what failed its store.
        if result.is_ok() {
            ended.unflushed = Some(e);
        }
    }
}

/// What the kept thread's model calls cost, for the report: a failed run's saved steps' ledger,
/// and what its branch paid for that no step's ledger holds.
async fn count_spend(run: &ThreadRun<'_>, result: &Outcome, ended: &mut Ended) {
    let (ctx, thread) = (run.ctx, run.thread);
    if result.is_err() {
        ended.usage = saved_usage(run.graph, thread).await;
    }
    let keeps_usage = match result {
        Ok(outcome) => outcome.state.get("usage").is_some(),
        Err(_) => ended.usage.is_some(),
    };
    if keeps_usage {
        // What the branch paid for that no step's ledger holds (failed attempts, results an
        // edit or a rerun set aside): the summary counts it too. Only for a graph that
        // keeps a ledger, as it walks the thread's checkpoints.
        let pricing = pricing_of(&run.resolved.file.settings);
        ended.off_ledger = off_ledger_keeping(ctx.store.as_ref(), thread, pricing.as_ref())
            .await
            .ok()
            .filter(|l| !l.is_empty());
    }
}

/// The run's configuration: the graph file's, on `thread`, stopped by `token`, with the
/// command's breakpoints and stream modes.
fn run_config(
    resolved: &Resolved,
    thread: &str,
    token: CancellationToken,
    settings: &RunSettings,
) -> RunConfig {
    resolved
        .file
        .run_config()
        .thread(thread.to_string())
        .cancel_on(token)
        .interrupt_before(settings.interrupt_before.iter().cloned())
        .interrupt_after(settings.interrupt_after.iter().cloned())
        .stream_modes(settings.stream.iter().copied())
}

/// Follows a run's events while it runs.
struct Follower<'a> {
    /// What stops the run; told when a `--stream` run's stdout closed.
    stops: &'a Stops,
    /// `--stream`: the asked-for events, one JSON object per line, instead of progress lines.
    streaming: bool,
    /// The newest step of the thread known to be saved.
    saved_step: Option<u64>,
}

impl Follower<'_> {
    /// Drives `run` to its end, showing each of its events and writing the artifacts of each
    /// checkpoint of the thread it saves; returns its result, the newest step known to be
    /// saved and what stopped it, if anything did.
    async fn follow(
        mut self,
        run: impl Future<Output = Outcome>,
        mut rx: UnboundedReceiver<Event>,
        mut progress: Progress,
        writer: &mut Option<artifacts::Writer<'_>>,
    ) -> (Outcome, Option<u64>, Option<Stop>) {
        tokio::pin!(run);
        let reader_gone = output::reader_gone();
        tokio::pin!(reader_gone);
        let mut watch_reader = self.streaming;
        let result = loop {
            tokio::select! {
                biased;
                Some(event) = rx.recv() => self.seen(&event, &mut progress, writer).await,
                result = &mut run => break result,
                () = &mut reader_gone, if watch_reader => {
                    watch_reader = false;
                    self.stops.stdout_closed();
                }
            }
        };
        // From here on a signal or a closed stdout no longer stops anything (stop.rs).
        let stopped_by = self.stops.run_ended();
        while let Ok(event) = rx.try_recv() {
            self.seen(&event, &mut progress, writer).await;
        }
        progress.clear();
        (result, self.saved_step, stopped_by)
    }

    async fn seen(
        &mut self,
        event: &Event,
        progress: &mut Progress,
        writer: &mut Option<artifacts::Writer<'_>>,
    ) {
        if self.streaming {
            if let Ok(line) = serde_json::to_string(event) {
                out(&line);
                if stdout_closed() {
                    self.stops.stdout_closed();
                }
            }
        } else {
            progress.event(event);
        }
        // A subgraph's checkpoints (`--stream debug` passes them on, under their namespace)
        // are the child's state and steps, not the thread's.
        if let Event::CheckpointSaved {
            namespace,
            step,
            checkpoint_id,
            ..
        } = event
        {
            if !namespace.is_empty() {
                return;
            }
            self.saved_step = Some(*step);
            if let (Some(w), Ok(id)) = (writer, checkpoint_id.parse()) {
                w.write(id).await;
            }
        }
    }
}

/// A run that reached its end, judged by its graph while its final state is at hand. The verdict
/// is kept with the thread (before it is let go, so its index entry carries it too): `threads`
/// then says "done (failed)" from that record instead of building the graph and decoding the
/// whole state of every done thread.
async fn judge(run: &ThreadRun<'_>, result: &Outcome) -> Option<String> {
    let (ctx, thread) = (run.ctx, run.thread);
    let outcome = result.as_ref().ok()?;
    if !matches!(outcome.status, RunStatus::Done) {
        return None;
    }
    let failure = run.resolved.factory.failure(&outcome.state);
    if let Some(checkpoint_id) = outcome.checkpoint_id {
        let verdict = Verdict {
            checkpoint_id,
            failure: failure.clone(),
        };
        if let Err(e) = record_verdict(ctx.store.as_ref(), thread, &verdict).await {
            // Nothing is lost: without a verdict, a listing judges the state itself.
            tracing::warn!(thread, error = %e, "could not keep the run's verdict with the thread");
        }
    }
    failure
}

/// Where the thread stands after the run, and whether its store is known to hold no checkpoint
/// of it: a finished run says so itself, else its records say. The state is not read back (with a 100 MB state, reading it again as a snapshot and as JSON
/// beside the run's result was what a run peaked on).
async fn settle(
    run: &ThreadRun<'_>,
    result: &Outcome,
    mut saved_step: Option<u64>,
    failure: Option<String>,
) -> (Ended, bool) {
    let (ctx, thread) = (run.ctx, run.thread);
    let streaming = !run.settings.stream.is_empty();
    let newest = match result {
        Ok(outcome) => Ok(outcome.checkpoint_id.map(|id| ThreadSummary {
            thread_id: thread.to_string(),
            status: match outcome.status {
                RunStatus::Done => ThreadStatus::Done,
                RunStatus::Interrupted { .. } => ThreadStatus::Paused,
            },
            step: outcome.step,
            updated_at_ms: 0,
            graph: None,
            checkpoint_id: id,
            verdict: None,
        })),
        Err(_) => summarize(ctx.store.as_ref(), thread).await,
    };
    let summary = newest.as_ref().ok().and_then(Option::as_ref);
    if streaming && saved_step.is_none() {
        // The stream carries checkpoint events only in debug mode: the store says instead.
        saved_step = summary.map(|s| s.step);
    }
    let ended = Ended {
        thread: thread.to_string(),
        graph: run.resolved.file.graph.clone(),
        status: summary.map_or(ThreadStatus::Failed, |s| s.status),
        step: summary.map_or(0, |s| s.step),
        checkpoint_id: summary.map(|s| s.checkpoint_id.to_string()),
        saved_step,
        failure,
        usage: None,
        off_ledger: None,
        stopped_by: None,
        started: true,
        unflushed: None,
    };
    (ended, matches!(newest, Ok(None)))
}

/// The usage ledger (`usage`, the built-in agents' convention) of the thread's newest
/// checkpoint, when it has one. Read only after a failed run, whose state is gone by then, so
/// this is the one state in memory.
async fn saved_usage(graph: &dyn ErasedGraph, thread: &str) -> Option<UsageLedger> {
    let snapshot = graph.get_state(thread, None).await.ok()?;
    let usage = snapshot.values.get("usage")?;
    serde_json::from_value(usage.clone()).ok()
}
