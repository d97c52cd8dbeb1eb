//! The research graph's nodes, one file each, plus what they share.

pub(crate) mod escalate;
pub(crate) mod escalate_tool;
pub(crate) mod execute;
pub(crate) mod execution_router;
pub(crate) mod finalize;
pub(crate) mod generate_plan;
pub(crate) mod planning_mode;
pub(crate) mod reflect;
pub(crate) mod settle;
pub(crate) mod tool_loop;

use super::settings::ResearchSettings;
use serde::de::DeserializeOwned;
use serde::Serialize;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{
    ChatModel, ChatRequest, LlmError, Message, StructuredOptions, Usage, UsageLedger,
};
use stategraph_prebuilt::asked_node_error;
use stategraph_spend as spend;
use std::future::Future;

/// The run's research settings, or a clear error.
pub(crate) fn settings(ctx: &Context) -> Result<ResearchSettings, NodeError> {
    ResearchSettings::from_map(ctx.settings()).map_err(|e| NodeError::new(e.to_string()))
}

/// The system message: the settings' override, else the built-in prompt.
pub(crate) fn system(custom: &Option<String>, builtin: &str) -> Message {
    Message::system(custom.clone().unwrap_or_else(|| builtin.to_string()))
}

/// A ledger holding one node's calls (the state's reducer adds it to the run's): the call under
/// `key` that succeeded, and what that call's failed attempts in earlier attempts or runs of
/// this task spent ([`spend::add_failed`]).
///
/// Counted once: the ledger is part of the node's update, which the engine saves with the
/// step's results (a finished task is never run again at that checkpoint), and an update lost
/// to a crash or to a later failure of the node is made again, from the same journal, by the
/// node's next run.
pub(crate) async fn ledger(
    ctx: &Context,
    key: &str,
    node: &str,
    usage: Usage,
    settings: &ResearchSettings,
) -> Result<UsageLedger, NodeError> {
    let pricing = settings.llm.pricing.as_ref();
    let mut ledger = UsageLedger::default();
    if ctx.was_replayed(key) {
        ledger.record_reused(node, usage, pricing);
    } else {
        ledger.record(node, usage, pricing);
    }
    spend::add_failed(ctx, key, node, &mut ledger, pricing).await?;
    Ok(ledger)
}

/// Asks the model once per task: `call` runs under [`Context::record`] with `key` (a node run
/// again after a crash gets the recorded reply instead of paying again); when it fails, what
/// its answered requests used is kept for the ledger first ([`failed_call`]).
pub(crate) async fn ask<T>(
    ctx: &Context,
    (key, failure): (&str, &str),
    settings: &ResearchSettings,
    call: impl Future<Output = Result<(T, Usage), LlmError>>,
) -> Result<(T, Usage), NodeError>
where
    T: Serialize + DeserializeOwned,
{
    ctx.record(key, || async move {
        match call.await {
            Ok(reply) => Ok(reply),
            Err(e) => Err(failed_call(ctx, (key, failure), settings, e).await),
        }
    })
    .await
}

/// A failed model call (journaled under `key`) as a node error ([`asked_node_error`] with
/// `failure`), after keeping what its answered requests used for the call's next success
/// ([`spend::failed_call`]).
pub(crate) async fn failed_call(
    ctx: &Context,
    (key, failure): (&str, &str),
    settings: &ResearchSettings,
    e: LlmError,
) -> NodeError {
    let pricing = settings.llm.pricing.as_ref();
    spend::failed_call(ctx, key, e, pricing, |e| asked_node_error(failure, e)).await
}

/// Structured-output options with the settings' temperature.
pub(crate) fn options(name: &str, settings: &ResearchSettings) -> StructuredOptions {
    let mut opts = StructuredOptions::default().with_name(name);
    opts.temperature = settings.llm.temperature;
    opts
}

/// Asks the model for text once per task: the call is journaled under `key` (a node re-run after
/// a crash gets the recorded reply instead of paying again) and streamed as token events.
/// Returns the reply and the ledger entry for `node`.
pub(crate) async fn journaled_text(
    ctx: &Context,
    agent: &super::ResearchAgent,
    (key, node): (&str, &str),
    messages: Vec<Message>,
    settings: &ResearchSettings,
    failure: &'static str,
) -> Result<(String, UsageLedger), NodeError> {
    let tokens = ctx.text_sink(stategraph::runtime::TOKEN_EVENT);
    let call = chat_text(agent.model().as_ref(), messages, settings, tokens);
    let (text, usage): (String, Usage) = ask(ctx, (key, failure), settings, call).await?;
    Ok((text, ledger(ctx, key, node, usage, settings).await?))
}

/// One plain-text model call, returning the reply's text and usage.
pub(crate) async fn chat_text(
    model: &dyn ChatModel,
    messages: Vec<Message>,
    settings: &ResearchSettings,
    stream: Option<stategraph_llm::TokenSink>,
) -> Result<(String, Usage), LlmError> {
    let mut request = ChatRequest::new(messages);
    request.temperature = settings.llm.temperature;
    // Streamed replies show up as the run's token events (the CLI prints them as they arrive).
    request.stream = stream;
    let reply = model.chat(request).await?;
    Ok((reply.message.content, reply.usage))
}

#[cfg(test)]
mod tests {
    use crate::research::{build, PlanStateUpdate};
    use stategraph::checkpoint::MemoryCheckpointer;
    use stategraph::runtime::RunConfig;
    use stategraph_llm::{FakeChatModel, LlmError};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_retried_step_counts_the_requests_its_failed_attempt_paid_for() {
        // Attempt 1 of `generate_plan`: an empty plan (answered, unusable), then the corrected
        // reply breaks off (transient), so the node's retry policy runs it again; attempt 2 gets
        // a usable plan at once. Two requests were answered (and billed), the third broke off.
        let plan = r#"{"todos": [{"id": "t1", "task": "find it", "kind": "research", "dependencies": []}]}"#;
        let model = Arc::new(
            FakeChatModel::with_replies([r#"{"todos": []}"#])
                .then_error(LlmError::Stream {
                    provider: "fake".into(),
                    detail: "connection reset".into(),
                })
                .then_text(plan),
        );
        let graph = build(model.clone())
            .unwrap()
            .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
        let config = RunConfig::new()
            .thread("retried")
            .interrupt_after(["generate_plan"]);
        let outcome = graph
            .invoke(PlanStateUpdate::default().question("why?"), config)
            .await
            .unwrap();
        assert_eq!(model.remaining(), 0, "the script was used up");
        let planned = outcome.state.usage.node("generate_plan").copied();
        assert_eq!(
            planned.map(|n| n.calls),
            Some(2),
            "the empty plan of the failed attempt and the good one: {planned:?}"
        );
    }
}
