//! What a step's model calls spent when the step failed, for agents that keep a usage ledger
//! (the built-in research, tree and memo agents use it; so can one's own). A failed task writes no state, so the
//! requests it paid for would be in no usage ledger: they are kept in the task's journal
//! instead ([`Context::journal`], which survives the failure), summed over the task's failed
//! attempts and runs, and the call's next success (a retry, or the resumed run) adds them to
//! the node's ledger update. That update is saved once, with the step (a finished task is
//! never run again at its checkpoint); an update lost to a crash is made again, from the same
//! journal, by the node's next run, so the requests are counted once.
//!
//! A thread can also move past a failed step without it succeeding: an edit (`graph update`, a
//! plan edit) or a rerun of that step starts from a new checkpoint, whose tasks have a journal
//! of their own. Those requests are in no ledger; [`off_ledger`] finds them on the thread's
//! branch, in its subgraphs' namespaces too, for `graph state` and the run's summary, which
//! show them beside the ledger. A fork into a new thread takes its source's along
//! ([`carry_into_fork`]). A run keeps, when it ends, what its thread's history before its last
//! checkpoint left ([`off_ledger_keeping`]), so a readout reads only what came after.
//!
//! # Layout
//! `lib.rs` the failed spend of a task; `branches.rs` [`off_ledger`], a walk of a thread's branch
//! and its subgraphs; `links.rs` a thread's checkpoints as links, newest first; `kept.rs` the
//! sum a run keeps at its end; `fork.rs` what a fork takes along ([`carry_into_fork`]).

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod branches;
mod fork;
mod kept;
mod links;

pub use branches::{off_ledger, off_ledger_keeping};
pub use fork::carry_into_fork;

use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{usd, LlmError, Pricing, Usage, UsageLedger};
use std::collections::BTreeMap;

/// The task's journal entry: what its model calls spent in attempts that failed, by call key.
const FAILED_SPEND: &str = "usage/failed";

/// What a task's failed attempts spent, by call key.
type FailedSpend = BTreeMap<String, Usage>;

/// The node error for a failed model call (journaled under `key`), as `to_error` makes it,
/// after keeping what its answered requests used ([`LlmError::usage`]) in the task's journal.
/// The error then says what the task's failed attempts have spent so far (priced when
/// `pricing` is given), so a failed run shows what it cost.
pub async fn failed_call(
    ctx: &Context,
    key: &str,
    e: LlmError,
    pricing: Option<&Pricing>,
    to_error: impl FnOnce(LlmError) -> NodeError,
) -> NodeError {
    let spent = e.usage().filter(|u| !u.is_empty());
    let error = to_error(e);
    let Some(spent) = spent else {
        return error;
    };
    let total = match keep(ctx, key, spent).await {
        Ok(total) => total,
        Err(why) => {
            // The model's error is the one to report; the lost record only costs accuracy.
            tracing::warn!(%why, key, "what a failed model call used could not be journaled");
            spent
        }
    };
    let message = format!("{} ({})", error.message(), note(total, pricing));
    if error.is_transient() {
        NodeError::transient(message)
    } else {
        NodeError::new(message)
    }
}

/// Adds to `ledger`, as calls of `node`, what the failed attempts of the call under `key` spent
/// in earlier attempts or runs of this task: for the node's update once that call succeeded.
pub async fn add_failed(
    ctx: &Context,
    key: &str,
    node: &str,
    ledger: &mut UsageLedger,
    pricing: Option<&Pricing>,
) -> Result<(), NodeError> {
    let failed: FailedSpend = ctx.journaled(FAILED_SPEND).await?.unwrap_or_default();
    if let Some(spent) = failed.get(key).filter(|u| !u.is_empty()) {
        ledger.record(node, *spent, pricing);
    }
    Ok(())
}

/// The prices a graph's settings give (`pricing`, the built-in agents' setting), if any.
pub fn pricing_of(settings: &serde_json::Map<String, serde_json::Value>) -> Option<Pricing> {
    serde_json::from_value(settings.get("pricing")?.clone()).ok()
}

/// A ledger's total as one usage, its calls as requests (for `failed_usage`).
pub fn as_usage(ledger: &UsageLedger) -> Usage {
    let total = ledger.total();
    Usage {
        requests: total.calls,
        ..total.usage
    }
}

/// Adds `spent` to the task's failed spend of `key`; returns the task's failed spend in all.
async fn keep(ctx: &Context, key: &str, spent: Usage) -> Result<Usage, NodeError> {
    let mut failed: FailedSpend = ctx.journaled(FAILED_SPEND).await?.unwrap_or_default();
    *failed.entry(key.to_string()).or_default() += spent;
    ctx.journal(FAILED_SPEND, &failed).await?;
    Ok(failed.into_values().fold(Usage::default(), |a, b| a + b))
}

/// What a task's failed attempts spent, in words, for its error.
fn note(spent: Usage, pricing: Option<&Pricing>) -> String {
    let requests = spent.requests.max(1);
    let cost = pricing
        .map(|p| format!(" ({})", usd(p.cost(spent))))
        .unwrap_or_default();
    format!(
        "this task's failed attempts have used {requests} model request{} so far, {} tokens in \
         and {} out{cost}; they are added to the thread's usage ledger when the task succeeds \
         (until then, they count as off-ledger spend)",
        if requests == 1 { "" } else { "s" },
        spent.input_tokens,
        spent.output_tokens
    )
}
