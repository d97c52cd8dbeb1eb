//! One file per group of commands; `dispatch` picks the command (`without_store` first, for
//! those that read no thread).

mod artifacts;
mod background_sweep;
pub(crate) mod cache;
mod edit;
mod graphs;
mod inspect;
mod mcp;
mod plan;
mod queue;
pub(crate) mod rekey;
pub(crate) mod retention;
mod run;
mod serve;
pub(crate) mod store;
mod tree;

pub(crate) use run::Stops;

use super::args::Command;
use super::invocation::Invocation;
use super::Ctx;
use stategraph_registry::Registry;

/// Runs a command that reads no thread (listing and drawing the graphs), with no store opened;
/// `None` for every other command.
pub(crate) fn without_store(
    registry: &Registry,
    invocation: &Invocation,
    command: &Command,
) -> Option<anyhow::Result<u8>> {
    match command {
        Command::Graphs(a) => Some(graphs::graphs(registry, invocation, a.json)),
        Command::Draw(a) => Some(graphs::draw(registry, a)),
        _ => None,
    }
}

/// Runs one command; returns its exit code.
pub(crate) async fn dispatch(ctx: &Ctx, command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Run(a) => run::run(ctx, a).await,
        // A thread the run queue serves is resumed by a worker (cmd/queue/resume.rs).
        Command::Resume(a) => match queue::queued_resume(ctx, &a).await? {
            Some(code) => Ok(code),
            None => run::resume(ctx, a).await,
        },
        Command::Rerun(a) => run::rerun(ctx, a).await,
        Command::Artifacts(a) => artifacts::artifacts(ctx, a).await,
        Command::Threads(a) => inspect::threads(ctx, a.json).await,
        Command::State(a) => inspect::state(ctx, a).await,
        Command::History(a) => inspect::history(ctx, a).await,
        Command::Update(a) => edit::update(ctx, a).await,
        Command::Plan(a) => plan::plan(ctx, a).await,
        Command::Fork(a) => edit::fork(ctx, a).await,
        Command::Delete(a) => edit::delete(ctx, a).await,
        Command::Prune(a) => edit::prune(ctx, a).await,
        Command::Repair(a) => edit::repair(ctx, a).await,
        Command::Graphs(a) => graphs::graphs(&ctx.registry, &ctx.invocation, a.json),
        Command::Draw(a) => graphs::draw(&ctx.registry, &a),
        Command::Decompose(a) => tree::decompose(ctx, a).await,
        Command::Tree(a) => tree::tree(ctx, a).await,
        Command::Solve(a) => tree::solve(ctx, a).await,
        Command::Serve(a) => serve::serve(ctx, a).await,
        Command::Store(a) => store::store(ctx, a).await,
        Command::Mcp(a) => mcp::mcp(ctx, a).await,
        Command::Submit(a) => queue::submit(ctx, a).await,
        Command::Worker(a) => queue::worker(ctx, a).await,
        Command::Runs(a) => queue::runs(ctx, a).await,
        Command::Cancel(a) => queue::cancel(ctx, a).await,
        Command::Cache(a) => cache::cache(ctx, a).await,
        Command::Rekey(a) => rekey::rekey(ctx, a).await,
    }
}
