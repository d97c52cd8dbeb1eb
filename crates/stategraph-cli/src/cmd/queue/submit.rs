//! `graph submit`: a run queued for the workers, with the thread's origin record written first
//! (as `graph run` writes it), so `state`, `history` and a later resume build the same graph.
//!
//! A new thread's graph, input and overrides are resolved and checked here, as `run` checks
//! them, so a run that could not start is refused before anything is queued. An existing
//! thread (a continuation, or a resume) runs its own graph with its own overrides, plus this
//! submit's `--set`, which are the run's and not kept with the thread (the thread may be
//! running on a worker, which alone may write it).

use super::{postgres, queue_error};
use crate::args::{MultitaskArg, RunArgs, RunSettings, SubmitArgs};
use crate::cmd::run::{graph_file, new_graph, read_answer, read_input, require_input};
use crate::error::{bad_input, EXIT_DONE};
use crate::origin::Origin;
use crate::{check_thread_id, parse_overrides, Ctx};
use serde_json::json;
use stategraph_postgres::queue::{RunId, Strategy, Submission};

/// `graph submit`.
pub(crate) async fn submit(ctx: &Ctx, args: SubmitArgs) -> anyhow::Result<u8> {
    let queue = postgres(ctx)?.run_queue();
    let resuming = args.resume.is_some() || args.resume_json.is_some();
    let (submission, thread) = match resuming {
        true => resume_of(ctx, &args).await?,
        false => run_of(ctx, &args).await?,
    };
    let graph = submission.graph.clone();
    let run = queue
        .submit(submission.strategy(strategy(args.multitask)))
        .await
        .map_err(queue_error)?;
    report(ctx, args.json, run, &thread, &graph);
    Ok(EXIT_DONE)
}

/// A run on an input: on a new thread, its graph resolved and checked and the thread made with
/// its origin (as `run` makes it); on an existing one, continuing from its newest checkpoint
/// with the thread's own graph and overrides.
async fn run_of(ctx: &Ctx, args: &SubmitArgs) -> anyhow::Result<(Submission, String)> {
    // clap requires the graph without --resume.
    let given = args.graph.clone().unwrap_or_default();
    let thread = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            t.clone()
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    let origin = ctx.store.read_origin(&thread).await?;
    let existing = origin.is_some() || ctx.store.get_checkpoint(&thread, None).await?.is_some();
    let mut sets = own_sets(args);
    let resolved = match &origin {
        Some(_) => ctx.registry.resolve(&given, &parse_overrides(&sets)?)?,
        None => new_graph(ctx, &given, &mut sets)?,
    };
    let run_args = as_run_args(args, &given);
    let input = read_input(&run_args, resolved.factory.as_ref())?;
    let graph = resolved.build(None)?;
    graph.check_update(&input, &run_args.input_source())?;
    if existing {
        // A continuation: the thread's graph, which the given one must be.
        let (graph, overrides) = match origin {
            Some(origin) if origin.graph != resolved.file.graph => {
                return Err(bad_input(format!(
                    "thread `{thread}` runs graph `{}`, not `{}`: submit without --thread for \
                     a new thread",
                    origin.graph, resolved.file.graph
                )))
            }
            Some(origin) => (origin.graph_file, [origin.overrides, sets].concat()),
            // A thread another program wrote: the graph given, as given.
            None => (graph_file(&resolved, &given), sets),
        };
        let submission = Submission::input(graph, input)
            .thread(thread.clone())
            .overrides(overrides);
        return Ok((submission, thread));
    }
    require_input(&input, resolved.factory.as_ref())?;
    resolved.preflight()?;
    resolved.check_input(&input)?;
    let file = graph_file(&resolved, &given);
    let origin = Origin::new(&resolved.file.graph, &file, sets.clone());
    ctx.store.create(&thread, &origin).await?;
    let submission = Submission::input(file, input)
        .thread(thread.clone())
        .overrides(sets);
    Ok((submission, thread))
}

/// The resume of a paused thread, answering its question with this submit's answer.
async fn resume_of(ctx: &Ctx, args: &SubmitArgs) -> anyhow::Result<(Submission, String)> {
    // clap requires --thread with --resume.
    let thread = args.thread.clone().unwrap_or_default();
    check_thread_id(&thread)?;
    let answer = read_answer(args.resume.as_ref(), args.resume_json.as_ref())?;
    let graph = args.graph.as_deref();
    let submission = resume_submission(ctx, &thread, answer, graph, own_sets(args)).await?;
    Ok((submission, thread))
}

/// The resume of `thread` answering with `answer`: the thread's own graph (else `graph`, else
/// the one its checkpoints name) and overrides, plus `sets` for this run.
pub(super) async fn resume_submission(
    ctx: &Ctx,
    thread: &str,
    answer: Option<serde_json::Value>,
    graph: Option<&str>,
    sets: Vec<String>,
) -> anyhow::Result<Submission> {
    let (graph, overrides) = match ctx.store.read_origin(thread).await? {
        Some(origin) => (origin.graph_file, origin.overrides),
        None => match ctx.store.get_checkpoint(thread, None).await? {
            Some(record) => match graph.map(String::from).or(record.metadata.graph) {
                Some(graph) => (graph, Vec::new()),
                None => {
                    return Err(bad_input(format!(
                        "thread `{thread}` names no graph in its checkpoints: give it as `{}`",
                        ctx.command_line_with(&["submit"], "GRAPH --thread ID --resume ANSWER")
                    )))
                }
            },
            None => {
                return Err(bad_input(format!(
                    "thread `{thread}` has no checkpoint and was never submitted: there is \
                     nothing to resume"
                )))
            }
        },
    };
    let overrides = [overrides, sets].concat();
    Ok(Submission::resume(graph, thread, answer).overrides(overrides))
}

/// This submit's `--set` and `--yes`, as overrides.
fn own_sets(args: &SubmitArgs) -> Vec<String> {
    let mut sets = args.sets.clone();
    if args.yes {
        sets.push("yes=true".to_string());
    }
    sets
}

/// The submit's input flags as `run` reads them.
fn as_run_args(args: &SubmitArgs, graph: &str) -> RunArgs {
    RunArgs {
        graph: graph.to_string(),
        input: args.input.clone(),
        input_json: args.input_json.clone(),
        input_file: args.input_file.clone(),
        thread: args.thread.clone(),
        out: None,
        settings: RunSettings::default(),
    }
}

fn strategy(arg: MultitaskArg) -> Strategy {
    match arg {
        MultitaskArg::Reject => Strategy::Reject,
        MultitaskArg::Enqueue => Strategy::Enqueue,
        MultitaskArg::Interrupt => Strategy::Interrupt,
        MultitaskArg::Rollback => Strategy::Rollback,
    }
}

/// The run id on stdout (for `RUN=$(graph submit …)`), the thread and what to do next on
/// stderr; or one JSON document.
pub(super) fn report(ctx: &Ctx, json: bool, run: RunId, thread: &str, graph: &str) {
    if json {
        let doc = json!({"run_id": run.to_string(), "thread_id": thread, "graph": graph,
            "status": "queued"});
        crate::out(&format!("{doc:#}"));
        return;
    }
    crate::out(&run.to_string());
    say!("thread {thread}");
    if !ctx.quiet {
        say!(
            "queued; a `{}` process runs it. Follow it with:\n  {}",
            ctx.command_line(&["worker"]),
            ctx.command_line(&["runs", "--watch", "--thread", thread])
        );
    }
}
