//! `run`, `resume` and `rerun`: the commands that run a graph on a thread.
//!
//! By job: this file is the three commands, each resolving what it runs and taking its thread;
//! `setup.rs` is what they resolve and check before anything changes (overrides kept with the
//! thread, the graph, the input or the answer); `drive.rs` runs the graph on the thread (progress
//! or `--stream`, artifacts, the graph's verdict, letting the thread go); `stop.rs` stops it on
//! Ctrl+C, SIGTERM, SIGHUP or a `--stream` whose reader went away, and hears a signal until the
//! command's end; `report.rs` says how the run ended and picks the exit code. `tree.rs` runs its graph through
//! [`run_on_thread`] and [`report`] too.

mod drive;
mod report;
mod setup;
mod stop;

pub(super) use drive::run_on_thread;
pub(super) use report::{report, Ended};
pub(crate) use stop::Stops;

use super::artifacts;
use crate::args::{RerunArgs, ResumeArgs, RunArgs};
use crate::error::bad_input;
use crate::origin::Origin;
use crate::pause;
use crate::{check_thread_id, Ctx};
use drive::execute;
use report::{stopped_before_taking, Output};
use serde_json::Value;
use setup::{
    check_breakpoints, check_nodes, create_thread, graph_file, new_graph, read_answer, read_input,
    remember_overrides, require_input, resume_with, thread_graph, thread_overrides,
};
use stategraph::checkpoint::Checkpointer;
use stategraph::runtime::Resume;

/// What a run does on its thread.
pub(super) enum Action {
    Run(Value),
    Resume(Resume),
    Rerun(String),
}

/// `graph run`.
pub(crate) async fn run(ctx: &Ctx, args: RunArgs) -> anyhow::Result<u8> {
    ctx.stops.listen();
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
    // Making the thread waits while a process that does not serve it holds its id: a stop
    // ends that wait (and one that came before, the command) with no thread made.
    match ctx.stops.unless_stopped(create_thread(ctx, &thread)).await {
        Ok(made) => made?,
        Err(stop) => return stopped_before_taking(stop, None, None, Output::of(&args.settings)),
    }
    if !ctx.quiet {
        match &resolved.path {
            Some(path) => say!("graph {} from {}", resolved.file.graph, path.display()),
            None => say!("graph {} (built-in graph file)", resolved.file.graph),
        }
    }
    say!("thread {thread}");
    let origin = Origin::new(
        &resolved.file.graph,
        &graph_file(&resolved, &args.graph),
        sets,
    );
    if let Err(e) = origin.write(&ctx.store, &thread).await {
        // Not even started (a full disk, say): no half-made thread stays behind.
        let _ = ctx.store.delete_thread(&thread).await;
        return Err(e.into());
    }
    if let Some(arts) = artifacts::of(ctx, &resolved)? {
        arts.start_version(&thread, args.out.as_deref(), "run")
            .await?;
    }
    let action = Action::Run(input);
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        &thread,
        action,
        &args.settings,
        &[],
    )
    .await
}

/// `graph resume`.
pub(crate) async fn resume(ctx: &Ctx, args: ResumeArgs) -> anyhow::Result<u8> {
    ctx.stops.listen();
    check_thread_id(&args.thread)?;
    // Stopped before it took its thread: the thread is as it was, the answer not given yet.
    let stopped = |stop| {
        let answer = read_answer(args.resume.as_ref(), args.resume_json.as_ref());
        let next = resume_again(ctx, &args.thread, answer.ok().flatten().as_ref());
        let output = Output::of(&args.settings);
        stopped_before_taking(stop, Some(&args.thread), Some(&next), output)
    };
    let mut extra = thread_overrides(&args.settings);
    // Reading and taking the thread wait while a process that does not serve it holds it: a
    // stop ends either wait.
    let (resolved, origin) = match ctx
        .stops
        .unless_stopped(thread_graph(ctx, &args.thread, &mut extra))
        .await
    {
        Ok(found) => found?,
        Err(stop) => return stopped(stop),
    };
    resolved.preflight()?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    let answer = read_answer(args.resume.as_ref(), args.resume_json.as_ref())?;
    pause::refuse_empty_answer(ctx, graph.as_ref(), &args.thread, answer.as_ref()).await?;
    match ctx.stops.unless_stopped(ctx.store.hold(&args.thread)).await {
        Ok(held) => held?,
        Err(stop) => return stopped(stop),
    }
    say!("thread {}", args.thread);
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
    let action = Action::Resume(resume_with(&snapshot, answer));
    let (thread, settings) = (&args.thread, &args.settings);
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        thread,
        action,
        settings,
        &snapshot.next,
    )
    .await
}

/// `graph rerun`.
pub(crate) async fn rerun(ctx: &Ctx, args: RerunArgs) -> anyhow::Result<u8> {
    ctx.stops.listen();
    check_thread_id(&args.thread)?;
    // Stopped before it took its thread: the thread is as it was.
    let stopped = |stop| {
        let next = ctx.command_line(&["rerun", &args.thread, "--from", &args.from]);
        let output = Output::of(&args.settings);
        stopped_before_taking(stop, Some(&args.thread), Some(&next), output)
    };
    let mut extra = thread_overrides(&args.settings);
    // As in `resume`: a stop ends a wait for a thread another process holds.
    let (resolved, origin) = match ctx
        .stops
        .unless_stopped(thread_graph(ctx, &args.thread, &mut extra))
        .await
    {
        Ok(found) => found?,
        Err(stop) => return stopped(stop),
    };
    resolved.preflight()?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    check_nodes(graph.as_ref(), std::slice::from_ref(&args.from), "--from")?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    match ctx.stops.unless_stopped(ctx.store.hold(&args.thread)).await {
        Ok(held) => held?,
        Err(stop) => return stopped(stop),
    }
    say!("thread {}", args.thread);
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
    let action = Action::Rerun(args.from.clone());
    let (thread, settings) = (&args.thread, &args.settings);
    execute(
        ctx,
        &resolved,
        graph.as_ref(),
        thread,
        action,
        settings,
        from,
    )
    .await
}

/// The command that resumes `thread` with `answer` (as `--resume TEXT` or `--resume-json JSON`):
/// what to do again after a resume stopped before it started, whose answer was not given yet.
pub(super) fn resume_again(ctx: &Ctx, thread: &str, answer: Option<&Value>) -> String {
    let json;
    let mut words = vec!["resume", thread];
    match answer {
        None => {}
        Some(Value::String(text)) => words.extend(["--resume", text.as_str()]),
        Some(other) => {
            json = other.to_string();
            words.extend(["--resume-json", json.as_str()]);
        }
    }
    ctx.command_line(&words)
}
