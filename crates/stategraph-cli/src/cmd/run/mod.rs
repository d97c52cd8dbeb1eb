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
mod stopped;

pub(super) use drive::{run_on_thread, ThreadRun};
pub(super) use report::{report, Ended};
pub(crate) use stop::Stops;
// What `submit` (cmd/queue) resolves and checks as `run` does.
pub(super) use setup::{
    graph_file, new_graph, read_answer, read_input, require_input, thread_overrides,
};

use super::artifacts;
use crate::args::{RerunArgs, ResumeArgs, RunArgs, RunSettings};
use crate::error::bad_input;
use crate::origin::Origin;
use crate::pause;
use crate::{check_thread_id, Ctx};
use drive::execute;
use report::{stopped_before_taking, Output};
use serde_json::Value;
use setup::{check_breakpoints, check_nodes, create_thread, remember_overrides, thread_graph};
use stategraph::runtime::Resume;
use stategraph_registry::{ErasedGraph, Resolved};
use stop::Stop;

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
    // Before a thread exists: a run that cannot start (no model configured, an input it
    // cannot work with...) leaves nothing.
    resolved.preflight()?;
    resolved.check_input(&input)?;
    check_breakpoints(graph.as_ref(), &args.settings)?;
    let thread = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            t.clone()
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    let origin = Origin::new(
        &resolved.file.graph,
        &graph_file(&resolved, &args.graph),
        sets,
    );
    // Making the thread (with its record of how it started) waits while a process that does
    // not serve it holds its id: a stop ends that wait (and one that came before, the command)
    // with no thread made.
    match ctx
        .stops
        .unless_stopped(create_thread(ctx, &thread, &origin))
        .await
    {
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
    if let Some(arts) = artifacts::of(ctx, &resolved)? {
        arts.start_version(&thread, args.out.as_deref(), "run")
            .await?;
    }
    let run = ThreadRun {
        ctx,
        resolved: &resolved,
        graph: graph.as_ref(),
        thread: &thread,
        settings: &args.settings,
        first_step: &[],
    };
    execute(&run, Action::Run(input)).await
}

/// The thread of a `resume` or a `rerun`: its graph resolved with the command's overrides,
/// built and checked, not held yet (the command checks what it was asked first).
struct TakenThread {
    resolved: Resolved,
    graph: Box<dyn ErasedGraph>,
    origin: Option<Origin>,
    extra: Vec<String>,
}

impl TakenThread {
    /// Resolves and builds the thread's graph; `Err(stop)` when a stop ended the wait for a
    /// thread another process holds.
    async fn resolve(
        ctx: &Ctx,
        thread: &str,
        settings: &RunSettings,
    ) -> anyhow::Result<Result<TakenThread, Stop>> {
        let mut extra = thread_overrides(settings);
        let (resolved, origin) = match ctx
            .stops
            .unless_stopped(thread_graph(ctx, thread, &mut extra))
            .await
        {
            Ok(found) => found?,
            Err(stop) => return Ok(Err(stop)),
        };
        resolved.preflight()?;
        let graph = resolved.build(Some(ctx.checkpointer()))?;
        check_breakpoints(graph.as_ref(), settings)?;
        Ok(Ok(TakenThread {
            resolved,
            graph,
            origin,
            extra,
        }))
    }

    /// Holds the thread (waiting, unless stopped, while another process does) and keeps the
    /// command's overrides with it.
    async fn hold(&mut self, ctx: &Ctx, thread: &str) -> anyhow::Result<Result<(), Stop>> {
        match ctx.stops.unless_stopped(ctx.store.hold(thread)).await {
            Ok(held) => held?,
            Err(stop) => return Ok(Err(stop)),
        }
        say!("thread {thread}");
        let (origin, extra) = (self.origin.take(), std::mem::take(&mut self.extra));
        remember_overrides(ctx, &self.resolved, origin, thread, extra).await?;
        Ok(Ok(()))
    }
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
    // Reading and taking the thread wait while a process that does not serve it holds it: a
    // stop ends either wait.
    let mut taken = match TakenThread::resolve(ctx, &args.thread, &args.settings).await? {
        Ok(taken) => taken,
        Err(stop) => return stopped(stop),
    };
    let answer = read_answer(args.resume.as_ref(), args.resume_json.as_ref())?;
    let graph = taken.graph.as_ref();
    pause::refuse_empty_answer(ctx, graph, &args.thread, answer.as_ref()).await?;
    if let Err(stop) = taken.hold(ctx, &args.thread).await? {
        return stopped(stop);
    }
    let (resolved, graph) = (&taken.resolved, taken.graph.as_ref());
    if let Some(arts) = artifacts::of(ctx, resolved)? {
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
    let action = Action::Resume(Resume::answering(&snapshot.interrupts, answer));
    let run = ThreadRun {
        ctx,
        resolved,
        graph,
        thread: &args.thread,
        settings: &args.settings,
        first_step: &snapshot.next,
    };
    execute(&run, action).await
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
    // As in `resume`: a stop ends a wait for a thread another process holds.
    let mut taken = match TakenThread::resolve(ctx, &args.thread, &args.settings).await? {
        Ok(taken) => taken,
        Err(stop) => return stopped(stop),
    };
    check_nodes(
        taken.graph.as_ref(),
        std::slice::from_ref(&args.from),
        "--from",
    )?;
    if let Err(stop) = taken.hold(ctx, &args.thread).await? {
        return stopped(stop);
    }
    let (resolved, graph) = (&taken.resolved, taken.graph.as_ref());
    if let Some(arts) = artifacts::of(ctx, resolved)? {
        let (out, ignore) = (args.out.as_deref(), args.ignore_edits);
        artifacts::before_rerun(
            ctx,
            arts.as_ref(),
            graph,
            &args.thread,
            &args.from,
            out,
            ignore,
        )
        .await?;
    }
    let run = ThreadRun {
        ctx,
        resolved,
        graph,
        thread: &args.thread,
        settings: &args.settings,
        first_step: std::slice::from_ref(&args.from),
    };
    execute(&run, Action::Rerun(args.from.clone())).await
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
