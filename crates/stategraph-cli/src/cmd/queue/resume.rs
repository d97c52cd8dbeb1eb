//! `graph resume` of a thread the run queue serves: on Postgres, a thread that has runs in the
//! queue is resumed by queueing its continuation (a paused run freed its worker; a worker runs
//! the answer), not by running it in this terminal beside the workers. A thread never submitted
//! resumes here as on any store.

use super::submit::{report, resume_submission};
use crate::args::ResumeArgs;
use crate::cmd::run::{read_answer, thread_overrides};
use crate::error::{bad_input, EXIT_DONE};
use crate::{check_thread_id, Ctx};
use stategraph_postgres::queue::RunFilter;

/// Queues the resume when the store is Postgres and the thread has runs in its queue; returns
/// the exit code then, `None` when the thread is to be resumed here.
pub(crate) async fn queued_resume(ctx: &Ctx, args: &ResumeArgs) -> anyhow::Result<Option<u8>> {
    let Some(store) = ctx.postgres() else {
        return Ok(None);
    };
    check_thread_id(&args.thread)?;
    let queue = store.run_queue();
    let filter = RunFilter::default().thread(args.thread.clone()).limit(1);
    let Some(last) = queue.list(&filter).await.map_err(super::queue_error)?.pop() else {
        return Ok(None);
    };
    let settings = &args.settings;
    let here_only = [
        (!settings.stream.is_empty(), "--stream"),
        (!settings.interrupt_before.is_empty(), "--interrupt-before"),
        (!settings.interrupt_after.is_empty(), "--interrupt-after"),
        (args.version.is_some(), "--version"),
    ];
    if let Some((_, flag)) = here_only.iter().find(|(given, _)| *given) {
        return Err(bad_input(format!(
            "thread `{}` is served by the run queue (its last run {} is {}): its resume is \
             queued for a worker, where {flag} does not apply; answer with `{}`",
            args.thread,
            last.id,
            last.status,
            ctx.command_line_with(&["resume", &args.thread], "--resume ANSWER")
        )));
    }
    let answer = read_answer(args.resume.as_ref(), args.resume_json.as_ref())?;
    let sets = thread_overrides(settings);
    let submission = resume_submission(ctx, &args.thread, answer, None, sets).await?;
    let graph = submission.graph.clone();
    let run = queue.submit(submission).await.map_err(super::queue_error)?;
    if !ctx.quiet && !settings.json {
        say!(
            "thread `{}` is served by the run queue: its resume is queued",
            args.thread
        );
    }
    report(ctx, settings.json, run, &args.thread, &graph);
    Ok(Some(EXIT_DONE))
}
