//! `run`, `resume` and `rerun`: the commands that run a graph on a thread.

use super::artifacts;
use crate::checkpoint::{
    record_verdict, summarize, CheckpointError, Checkpointer, InterruptWhen, ThreadStatus,
    ThreadSummary, Verdict,
};
use crate::cli::args::{RerunArgs, ResumeArgs, RunArgs, RunSettings};
use crate::cli::error::{
    bad_input, run_error_code, EXIT_DONE, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_PAUSED,
};
use crate::cli::origin::Origin;
use crate::cli::pause;
use crate::cli::progress::{Notices, Progress};
use crate::cli::{check_thread_id, out, parse_json, parse_overrides, Ctx};
use crate::registry::{AnyFactory, ErasedGraph, GraphFileError, RegistryError, Resolved};
use crate::runtime::{Event, Resume, RunError, RunOutcome, RunStatus};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// How a run ended, for the report.
pub(super) struct Ended {
    thread: String,
    graph: String,
    status: ThreadStatus,
    step: u64,
    checkpoint_id: Option<String>,
    /// The newest step known to be saved: the last one the run reported saved, else the one
    /// it started from. `None` when nothing of the thread was saved (it is not kept).
    saved_step: Option<u64>,
    /// Why a run that reached its end failed at its job anyway, as its graph judges its final
    /// state ([`GraphFactory::failure`](crate::registry::GraphFactory::failure)).
    failure: Option<String>,
}

/// What a run does on its thread.
pub(super) enum Action {
    Run(Value),
    Resume(Resume),
    Rerun(String),
}

/// The `--set`, `--yes` and `--durability` of a command, as overrides kept with the thread.
fn thread_overrides(s: &RunSettings) -> Vec<String> {
    let mut sets = s.sets.clone();
    if s.yes {
        sets.push("yes=true".to_string());
    }
    if let Some(d) = s.durability {
        sets.push(format!("durability={:?}", d.as_str()));
    }
    sets
}

/// `--yes` on a graph without a `yes` setting: it has no review to approve, which is what the
/// user needs to hear (the override `--yes` stands for is an implementation detail).
fn explain_yes(e: anyhow::Error, graph: &str) -> anyhow::Error {
    let no_yes = e.chain().any(|cause| {
        let file_error = cause.downcast_ref::<GraphFileError>().or_else(|| {
            match cause.downcast_ref::<RegistryError>() {
                Some(RegistryError::File(f)) => Some(f),
                _ => None,
            }
        });
        matches!(
            file_error,
            Some(GraphFileError::BadOverride { text, message })
                if text == "yes=true" && message.contains("there is no setting `yes`")
        )
    });
    if no_yes {
        bad_input(format!(
            "--yes: the graph {graph} has no review to approve (it has no `yes` setting and never \
             pauses for one); run it without --yes"
        ))
    } else {
        e
    }
}

/// The run's relative path settings made absolute against the folder it starts in, as
/// overrides to keep with the thread (see [`Resolved::absolute_path_overrides`]).
fn path_pins(resolved: &Resolved) -> Vec<String> {
    match std::env::current_dir() {
        Ok(here) => resolved.absolute_path_overrides(&here),
        // No current folder: a relative path then reads nothing anyway, and says so.
        Err(_) => Vec::new(),
    }
}

/// The graph a new run names, with its overrides `sets`, its relative path settings pinned
/// (added to `sets`, which the run keeps with the thread).
fn new_graph(ctx: &Ctx, graph: &str, sets: &mut Vec<String>) -> anyhow::Result<Resolved> {
    let resolved = ctx
        .registry
        .resolve(graph, &parse_overrides(sets)?)
        .map_err(|e| explain_yes(e.into(), &format!("`{graph}`")))?;
    let pins = path_pins(&resolved);
    if pins.is_empty() {
        return Ok(resolved);
    }
    sets.extend(pins);
    Ok(ctx.registry.resolve(graph, &parse_overrides(sets)?)?)
}

/// A thread's graph with this command's `extra` overrides, its relative path settings pinned
/// (added to `extra`, which the command keeps with the thread).
async fn thread_graph(
    ctx: &Ctx,
    thread: &str,
    extra: &mut Vec<String>,
) -> anyhow::Result<(Resolved, Option<Origin>)> {
    let (resolved, origin) = ctx
        .graph_for_thread(thread, extra)
        .await
        .map_err(|e| explain_yes(e, &format!("of thread {thread}")))?;
    let pins = path_pins(&resolved);
    if pins.is_empty() {
        return Ok((resolved, origin));
    }
    extra.extend(pins);
    ctx.graph_for_thread(thread, extra).await
}

/// Checks the run's `--interrupt-before/after` names against the graph's nodes.
fn check_breakpoints(graph: &dyn ErasedGraph, settings: &RunSettings) -> anyhow::Result<()> {
    check_nodes(graph, &settings.interrupt_before, "--interrupt-before")?;
    check_nodes(graph, &settings.interrupt_after, "--interrupt-after")
}

fn check_nodes(graph: &dyn ErasedGraph, names: &[String], flag: &str) -> anyhow::Result<()> {
    let known = graph.node_names();
    for name in names {
        if !known.contains(name) {
            return Err(bad_input(format!(
                "{flag}: no node named `{name}` in graph `{}`; its nodes are: {}",
                graph.name(),
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// Refuses a run whose graph has an input field the input leaves empty: it could only fail at
/// its first step, leaving a thread behind.
fn require_input(input: &Value, factory: &dyn AnyFactory) -> anyhow::Result<()> {
    if let Some(field) = factory.input_field() {
        let filled = match input.get(field) {
            None | Some(Value::Null) => false,
            Some(Value::String(text)) => !text.trim().is_empty(),
            Some(_) => true,
        };
        if !filled {
            return Err(bad_input(format!(
                "graph `{}` needs an input: give it with --input TEXT (or --input-json '{{\"{field}\": ...}}')",
                factory.name()
            )));
        }
    }
    Ok(())
}

fn read_input(args: &RunArgs, factory: &dyn AnyFactory) -> anyhow::Result<Value> {
    if let Some(text) = &args.input {
        let field = factory.input_field().ok_or_else(|| {
            bad_input(format!(
                "graph `{}` takes no text input: give --input-json '{{\"field\": ...}}' instead",
                factory.name()
            ))
        })?;
        return Ok(json!({ field: text }));
    }
    if let Some(text) = &args.input_json {
        return parse_json(text, "--input-json");
    }
    if let Some(path) = &args.input_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad_input(format!("cannot read --input-file {}: {e}", path.display())))?;
        return parse_json(&text, &format!("--input-file {}", path.display()));
    }
    Ok(json!({}))
}

/// `graph run`.
pub(crate) async fn run(ctx: &Ctx, args: RunArgs) -> anyhow::Result<u8> {
    let mut sets = thread_overrides(&args.settings);
    let resolved = new_graph(ctx, &args.graph, &mut sets)?;
    let input = read_input(&args, resolved.factory.as_ref())?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    graph.check_update(&input, &args.input_source())?;
    require_input(&input, resolved.factory.as_ref())?;
    // Before a thread exists: a run that cannot start (no model configured...) leaves nothing.
    resolved.preflight()?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    let thread = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            t.clone()
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    // The file the run used is the one its resumes use, from whichever folder.
    let graph_file = match &resolved.path {
        Some(path) => std::fs::canonicalize(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.display().to_string()),
        None => args.graph.clone(),
    };
    match ctx.store.create(&thread).await {
        Ok(()) => {}
        Err(CheckpointError::ThreadExists { .. }) => {
            return Err(bad_input(format!(
                "thread `{thread}` already exists: continue it with `{}`, or copy one of its \
                 checkpoints into a new thread with `{}`",
                ctx.command_line(&["resume", &thread]),
                ctx.command_line_with(&["fork", &thread], "--checkpoint <ID> --to <NEW-ID>")
            )))
        }
        Err(e) => return Err(e.into()),
    }
    if !ctx.quiet {
        match &resolved.path {
            Some(path) => eprintln!("graph {} from {}", resolved.file.graph, path.display()),
            None => eprintln!("graph {} (built-in graph file)", resolved.file.graph),
        }
    }
    eprintln!("thread {thread}");
    let origin = Origin::new(&resolved.file.graph, &graph_file, sets);
    if let Err(e) = origin.write(&ctx.store, &thread).await {
        // Not even started (a full disk, say): no half-made thread stays behind.
        let _ = ctx.store.delete_thread(&thread).await;
        return Err(e.into());
    }
    if let Some(arts) = artifacts::of(ctx, &resolved)? {
        arts.start_version(&thread, args.out.as_deref(), "run")
            .await?;
    }
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        &thread,
        Action::Run(input),
        &args.settings,
        &[],
    )
    .await
}

/// `graph resume`.
pub(crate) async fn resume(ctx: &Ctx, args: ResumeArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let mut extra = thread_overrides(&args.settings);
    let (resolved, origin) = thread_graph(ctx, &args.thread, &mut extra).await?;
    resolved.preflight()?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    let answer = match (&args.resume, &args.resume_json) {
        (Some(text), _) => Some(Value::String(text.clone())),
        (None, Some(text)) => Some(parse_json(text, "--resume-json")?),
        (None, None) => None,
    };
    pause::refuse_empty_answer(ctx, graph.as_ref(), &args.thread, answer.as_ref()).await?;
    ctx.store.hold(&args.thread).await?;
    eprintln!("thread {}", args.thread);
    remember_overrides(ctx, &resolved, origin, &args.thread, extra).await?;
    if let Some(arts) = artifacts::of(ctx, &resolved)? {
        let version = args.version.as_deref();
        let (ignore, answering) = (args.ignore_edits, answer.is_some());
        artifacts::before_resume(ctx, arts.as_ref(), &args.thread, version, ignore, answering)
            .await?;
        if let Some(out) = &args.out {
            artifacts::resume_into(ctx, arts.as_ref(), &args.thread, out).await?;
        }
    } else if args.version.is_some() {
        return Err(bad_input(format!(
            "--version: graph `{}` declares no artifacts",
            resolved.file.graph
        )));
    }
    let snapshot = graph.get_state(&args.thread, None).await?;
    let dynamic: Vec<&str> = snapshot
        .interrupts
        .iter()
        .filter(|i| i.when == InterruptWhen::Dynamic)
        .map(|i| i.id.as_str())
        .collect();
    let resume = match answer {
        None => Resume::Continue,
        // With several questions open, an object whose keys are their ids answers each.
        Some(Value::Object(map))
            if dynamic.len() > 1 && map.keys().all(|k| dynamic.contains(&k.as_str())) =>
        {
            Resume::ById(map.into_iter().collect())
        }
        Some(v) => Resume::Value(v),
    };
    let next = snapshot.next.clone();
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        &args.thread,
        Action::Resume(resume),
        &args.settings,
        &next,
    )
    .await
}

/// `graph rerun`.
pub(crate) async fn rerun(ctx: &Ctx, args: RerunArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let mut extra = thread_overrides(&args.settings);
    let (resolved, origin) = thread_graph(ctx, &args.thread, &mut extra).await?;
    resolved.preflight()?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    check_nodes(graph.as_ref(), std::slice::from_ref(&args.from), "--from")?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    ctx.store.hold(&args.thread).await?;
    eprintln!("thread {}", args.thread);
    remember_overrides(ctx, &resolved, origin, &args.thread, extra).await?;
    if let Some(arts) = artifacts::of(ctx, &resolved)? {
        let (out, ignore) = (args.out.as_deref(), args.ignore_edits);
        artifacts::before_rerun(
            ctx,
            arts.as_ref(),
            graph.as_ref(),
            &args.thread,
            &args.from,
            out,
            ignore,
        )
        .await?;
    }
    let from = std::slice::from_ref(&args.from);
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        &args.thread,
        Action::Rerun(args.from.clone()),
        &args.settings,
        from,
    )
    .await
}

/// Keeps the `--set` overrides of a resume with the thread, so later resumes apply them too.
async fn remember_overrides(
    ctx: &Ctx,
    resolved: &Resolved,
    origin: Option<Origin>,
    thread: &str,
    extra: Vec<String>,
) -> anyhow::Result<()> {
    if extra.is_empty() && origin.is_some() {
        return Ok(());
    }
    let mut origin =
        origin.unwrap_or_else(|| Origin::new(&resolved.file.graph, &resolved.origin, Vec::new()));
    origin.overrides.extend(extra);
    origin.write(&ctx.store, thread).await?;
    Ok(())
}

/// Stops the run on the first Ctrl+C (its last checkpoint is kept); quits on the second. It
/// prints through `notices`, not to stderr directly, so the live progress lines stay right.
fn watch_ctrl_c(
    token: CancellationToken,
    hint: String,
    notices: Notices,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        notices.after_ctrl_c("stopping: the step in flight is abandoned, the last checkpoint is kept (Ctrl+C again quits at once)");
        token.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            notices.quit_after_ctrl_c(
                &format!("quit; continue with: {hint}"),
                i32::from(EXIT_INTERRUPTED),
            );
        }
    })
}

async fn execute(
    ctx: &Ctx,
    resolved: &Resolved,
    graph: &dyn ErasedGraph,
    thread: &str,
    action: Action,
    settings: &RunSettings,
    first_step: &[String],
) -> anyhow::Result<u8> {
    let resume_hint = ctx.command_line(&["resume", thread]);
    let (ended, result) = drive(ctx, resolved, graph, thread, action, settings, first_step).await;
    let output = match (settings.stream.is_empty(), settings.json) {
        (false, _) => Output::Ndjson,
        (true, true) => Output::Json,
        (true, false) => Output::Text,
    };
    report_as(ctx, resolved, &ended, result, output, &resume_hint)
}

/// Runs `action` on `thread`, made (remembering how it was started, with `sets`) when it does
/// not exist yet, and hands back how it ended for the caller to report in its own words.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_on_thread(
    ctx: &Ctx,
    resolved: &Resolved,
    graph: &dyn ErasedGraph,
    thread: &str,
    sets: Vec<String>,
    action: Action,
    settings: &RunSettings,
    first_step: &[String],
) -> anyhow::Result<(Ended, Result<RunOutcome<Value>, RunError>)> {
    match ctx.store.create(thread).await {
        Ok(()) => {
            Origin::new(&resolved.file.graph, &resolved.origin, sets)
                .write(&ctx.store, thread)
                .await?
        }
        Err(CheckpointError::ThreadExists { .. }) => ctx.store.hold(thread).await?,
        Err(e) => return Err(e.into()),
    }
    Ok(drive(ctx, resolved, graph, thread, action, settings, first_step).await)
}

/// The run itself: everything [`execute`] does but the report.
async fn drive(
    ctx: &Ctx,
    resolved: &Resolved,
    graph: &dyn ErasedGraph,
    thread: &str,
    action: Action,
    settings: &RunSettings,
    first_step: &[String],
) -> (Ended, Result<RunOutcome<Value>, RunError>) {
    let resume_hint = ctx.command_line(&["resume", thread]);
    let fresh = matches!(action, Action::Run(_));
    let started_at = match fresh {
        true => None,
        false => summarize(ctx.store.as_ref(), thread)
            .await
            .ok()
            .flatten()
            .map(|s| s.step),
    };
    let mut progress = Progress::new(ctx.quiet, ctx.verbose > 0);
    progress.expect(first_step);
    let token = CancellationToken::new();
    let watcher = watch_ctrl_c(token.clone(), resume_hint.clone(), progress.notices());
    let config = resolved
        .file
        .run_config()
        .thread(thread.to_string())
        .cancel_on(token.clone())
        .interrupt_before(settings.interrupt_before.iter().cloned())
        .interrupt_after(settings.interrupt_after.iter().cloned())
        .stream_modes(settings.stream.iter().copied());
    let streaming = !settings.stream.is_empty();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let run = async {
        match action {
            Action::Run(input) => graph.run(input, config, Some(tx)).await,
            Action::Resume(resume) => graph.resume(thread, resume, config, Some(tx)).await,
            Action::Rerun(node) => graph.rerun_from(thread, &node, config, Some(tx)).await,
        }
    };
    tokio::pin!(run);
    let mut saved_step = started_at;
    let mut seen = |event: &Event, progress: &mut Progress| {
        if let Event::CheckpointSaved { step, .. } = event {
            saved_step = Some(*step);
        }
        if streaming {
            // `--stream`: the asked-for events, one JSON object per line.
            if let Ok(line) = serde_json::to_string(event) {
                out(&line);
            }
            return;
        }
        progress.event(event);
    };
    let arts = artifacts::of(ctx, resolved).unwrap_or_else(|e| {
        eprintln!("warning: artifacts not written: {e:#}");
        None
    });
    let mut writer = arts
        .as_deref()
        .map(|a| artifacts::Writer::new(a, thread, ctx.quiet));
    let result = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => {
                seen(&event, &mut progress);
                if let (Some(w), Event::CheckpointSaved { checkpoint_id, .. }) = (&mut writer, &event) {
                    w.write(Some(checkpoint_id)).await;
                }
            }
            result = &mut run => break result,
        }
    };
    while let Ok(event) = rx.try_recv() {
        seen(&event, &mut progress);
        if let (Some(w), Event::CheckpointSaved { checkpoint_id, .. }) = (&mut writer, &event) {
            w.write(Some(checkpoint_id)).await;
        }
    }
    if let Some(w) = &mut writer {
        if saved_step.is_some() {
            w.write(None).await;
        }
    }
    progress.clear();
    drop(progress);
    watcher.abort();
    let failure = judge(ctx, resolved, thread, &result).await;
    // Where the thread stands: a finished run says so itself, else its records say. The state
    // is not read back (with a 100 MB state, reading it again as a snapshot and as JSON beside
    // the run's result was what a run peaked on).
    let newest = match &result {
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
        graph: resolved.file.graph.clone(),
        status: summary.map_or(ThreadStatus::Failed, |s| s.status),
        step: summary.map_or(0, |s| s.step),
        checkpoint_id: summary.map(|s| s.checkpoint_id.to_string()),
        saved_step,
        failure,
    };
    let nothing_saved = fresh && saved_step.is_none() && result.is_err();
    if nothing_saved || matches!(newest, Ok(None)) {
        // Nothing was saved: the thread is not kept half-made (an id without a checkpoint).
        let _ = ctx.store.delete_thread(thread).await;
    }
    if let Err(e) = ctx.store.release(thread) {
        // A failed run already says what failed its store.
        if result.is_ok() {
            eprintln!("warning: could not flush the thread's store: {e}");
        }
    }
    (ended, result)
}

/// A run that reached its end, judged by its graph while its final state is at hand. The verdict
/// is kept with the thread (before it is let go, so its index entry carries it too): `threads`
/// then says "done (failed)" from that record instead of building the graph and decoding the
/// whole state of every done thread.
async fn judge(
    ctx: &Ctx,
    resolved: &Resolved,
    thread: &str,
    result: &Result<RunOutcome<Value>, RunError>,
) -> Option<String> {
    let outcome = result.as_ref().ok()?;
    if !matches!(outcome.status, RunStatus::Done) {
        return None;
    }
    let failure = resolved.factory.failure(&outcome.state);
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

/// Prints how the run ended and returns the exit code.
pub(super) fn report(
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

/// How a command's outcome is printed on stdout.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    Text,
    /// One JSON document (`--json`).
    Json,
    /// One line, `{"event":"outcome",...}`, after the streamed events (`--stream`).
    Ndjson,
}

fn report_as(
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
    let code = match result {
        Ok(mut outcome) => {
            let code = match outcome.status {
                RunStatus::Done => report_done(ctx, resolved, meta, &outcome, json, &mut doc),
                RunStatus::Interrupted { interrupts, next } => {
                    let command = pause::continue_command(ctx, thread, &interrupts);
                    doc["interrupts"] = serde_json::to_value(&interrupts).unwrap_or(Value::Null);
                    doc["next"] = json!(&next);
                    doc["continue_with"] = json!(command);
                    if !json {
                        // Steps are checkpoint steps everywhere (`state`, `history`, progress
                        // lines): the thread stands at its last saved step, and the waiting
                        // nodes are the next step's, which the progress lines called started.
                        eprintln!(
                            "paused at step {} of thread {thread}; step {} ({}) waits:",
                            outcome.step,
                            outcome.step + 1,
                            next.join(", ")
                        );
                        for line in pause::describe(resolved, &interrupts, &outcome.state) {
                            eprintln!("{line}");
                        }
                        if resolved.factory.plan_editor().is_some() {
                            eprintln!(
                                "see or change the plan first with:\n  {}",
                                ctx.command_line_with(
                                    &["plan", thread.as_str()],
                                    "[--edit | add | rm | move | status | deps]"
                                )
                            );
                        }
                        eprintln!("continue with:\n  {command}");
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
        Err(e) => {
            let code = run_error_code(&e);
            doc["error"] = json!(e.to_string());
            if code == EXIT_INTERRUPTED {
                // Asked for, so not reported as an error.
                eprintln!(
                    "stopped at step {} of thread {thread}; the last checkpoint is kept. Continue with:\n  {resume_hint}",
                    meta.step
                );
                doc["continue_with"] = json!(resume_hint);
            } else if let Some(path) = disk_full(&e) {
                eprintln!("error: the disk holding {path} is full (no space left on device)");
                match meta.saved_step {
                    Some(step) => {
                        eprintln!("thread {thread} could not save its next step; the last saved step is {step}. Free some space, then continue with:\n  {resume_hint}");
                        doc["continue_with"] = json!(resume_hint);
                    }
                    None => eprintln!(
                        "nothing of thread {thread} was saved; free some space and run it again"
                    ),
                }
                return finish(doc, output, code);
            } else {
                eprintln!("error: {e}");
            }
            if code == EXIT_FAILURE && meta.status != ThreadStatus::Done {
                eprintln!("the thread keeps its last checkpoint; after fixing the cause, continue with:\n  {resume_hint}");
                doc["continue_with"] = json!(resume_hint);
            }
            code
        }
    };
    finish(doc, output, code)
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
    let failure = &meta.failure;
    if let Some(why) = failure {
        doc["error"] = json!(format!("the run finished but failed: {why}"));
    }
    if !json {
        if !ctx.quiet {
            eprintln!(
                "done: thread {thread} finished after {} steps",
                outcome.step
            );
            print_usage(&outcome.state);
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
    match failure {
        Some(why) => {
            // Said even with --json, where stdout holds the document: a script sees the code.
            eprintln!("error: thread {thread} finished but failed: {why}");
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
fn print_usage(state: &Value) {
    let Some(ledger) = state
        .get("usage")
        .and_then(|u| serde_json::from_value::<crate::llm::UsageLedger>(u.clone()).ok())
    else {
        return;
    };
    if !ledger.is_empty() {
        eprint!("model usage of this thread:\n{ledger}");
    }
}
