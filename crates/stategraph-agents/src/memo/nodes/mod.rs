//! The memo's 13 stages, grouped by job, plus what they share: timing and the progress line,
//! journaled model calls, the data room.

pub(crate) mod analyse;
pub(crate) mod cite;
pub(crate) mod draft;
pub(crate) mod enrich;
pub(crate) mod finish;
pub(crate) mod research;
pub(crate) mod visualize;

use super::dataroom::DataRoom;
use super::outline::{stage_number, STAGES};
use super::settings::MemoSettings;
use super::state::{MemoState, MemoStateUpdate, Mode};
use super::MemoAgent;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use stategraph::runtime::{Context, NodeError, PROGRESS_EVENT};
use stategraph_llm::{
    structured_validated, usd, ChatRequest, Message, StructuredOptions, Usage, UsageLedger,
};
use stategraph_prebuilt::model_node_error;
use stategraph_spend as spend;
use std::path::PathBuf;
use std::time::Instant;

/// The run's settings, or a clear error.
pub(crate) fn settings(ctx: &Context) -> Result<MemoSettings, NodeError> {
    MemoSettings::from_map(ctx.settings()).map_err(|e| NodeError::new(format!("settings: {e}")))
}

/// One stage's run: its settings, its clock and its model usage, ended by [`Stage::done`].
pub(crate) struct Stage {
    name: &'static str,
    started: Instant,
    pub(crate) settings: MemoSettings,
    pub(crate) usage: UsageLedger,
}

impl Stage {
    /// Starts `name`, after the `stage_ms` pause that lets a person watch or kill the run. The
    /// stage's clock starts before the pause: the time its line shows is the time it took, as
    /// the step's own log line says it.
    pub(crate) async fn begin(name: &'static str, ctx: &Context) -> Result<Stage, NodeError> {
        let started = Instant::now();
        let settings = settings(ctx)?;
        if settings.stage_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(settings.stage_ms)).await;
        }
        Ok(Stage {
            name,
            started,
            settings,
            usage: UsageLedger::default(),
        })
    }

    /// The data room the run works from (resolved by the first stage).
    pub(crate) fn room(&self, s: &MemoState) -> Result<DataRoom, NodeError> {
        let dir = match &s.dataroom {
            Some(dir) => PathBuf::from(dir),
            None => self.settings.room(&s.company).map_err(NodeError::new)?,
        };
        DataRoom::open(&dir).map_err(NodeError::new)
    }

    /// Asks the model for a `T` once per task: journaled under `key`, so a stage re-run after
    /// a crash gets the recorded reply instead of paying again.
    pub(crate) async fn ask<T, F>(
        &mut self,
        ctx: &Context,
        agent: &MemoAgent,
        key: &str,
        messages: Vec<Message>,
        check: F,
    ) -> Result<T, NodeError>
    where
        T: JsonSchema + DeserializeOwned + Serialize + Send + 'static,
        F: Fn(&T) -> Result<(), String> + Send + 'static,
    {
        let model = agent.model().clone();
        let opts = StructuredOptions {
            temperature: self.settings.llm.temperature,
            ..StructuredOptions::default()
        };
        let pricing = self.settings.llm.pricing;
        let pricing = pricing.as_ref();
        let (value, usage): (T, Usage) = ctx
            .record(key, || async move {
                match structured_validated(model.as_ref(), messages, opts, check).await {
                    Ok(reply) => Ok(reply),
                    Err(e) => Err(spend::failed_call(ctx, key, e, pricing, model_node_error).await),
                }
            })
            .await?;
        self.account(ctx, key, usage).await?;
        Ok(value)
    }

    /// Asks the model for text once per task (journaled like [`ask`](Self::ask)).
    pub(crate) async fn write(
        &mut self,
        ctx: &Context,
        agent: &MemoAgent,
        key: &str,
        messages: Vec<Message>,
    ) -> Result<String, NodeError> {
        let model = agent.model().clone();
        let mut request = ChatRequest::new(messages);
        request.temperature = self.settings.llm.temperature;
        let (text, usage): (String, Usage) = ctx
            .record(key, || async move {
                let reply = model.chat(request).await.map_err(model_node_error)?;
                Ok::<_, NodeError>((reply.message.content, reply.usage))
            })
            .await?;
        self.account(ctx, key, usage).await?;
        Ok(text.trim().to_string())
    }

    /// Adds the call under `key` to the stage's usage, with what its failed attempts in
    /// earlier runs of the task paid for ([`spend`]).
    async fn account(&mut self, ctx: &Context, key: &str, usage: Usage) -> Result<(), NodeError> {
        let pricing = self.settings.llm.pricing.as_ref();
        if ctx.was_replayed(key) {
            self.usage.record_reused(self.name, usage, pricing);
        } else {
            self.usage.record(self.name, usage, pricing);
        }
        spend::add_failed(ctx, key, self.name, &mut self.usage, pricing).await
    }

    /// Ends the stage: logs it, adds its time and usage, and prints
    /// `stage k of 13 · name · time · elapsed · cost (mode) · note` as a progress line: the
    /// stage's time (its `stage_ms` wait included), the sum of the run's stage times so far,
    /// what its model calls cost so far (`USD 0.0000`: four places, as a call costs a fraction
    /// of a cent). The README shows this line: change both together.
    pub(crate) fn done(
        self,
        ctx: &Context,
        s: &MemoState,
        update: MemoStateUpdate,
        note: &str,
    ) -> MemoStateUpdate {
        let ms = self.started.elapsed().as_millis() as u64;
        let total = s.usage.clone().merged(&self.usage).total();
        let cost = match (total.calls, total.cost) {
            (0, _) => usd(0.0),
            (_, Some(cost)) if total.unpriced_calls == 0 => usd(cost),
            (calls, cost) => format!(
                "{} + {} unpriced of {calls} {} (set pricing)",
                usd(cost.unwrap_or(0.0)),
                total.unpriced_calls,
                if calls == 1 { "call" } else { "calls" }
            ),
        };
        let mode = s.mode.unwrap_or_default();
        let line = format!(
            "stage {} of {} · {} · {:.2}s · elapsed {:.2}s · {cost} ({} mode){}{}",
            stage_number(self.name),
            STAGES.len(),
            self.name,
            ms as f64 / 1000.0,
            (s.elapsed_ms + ms) as f64 / 1000.0,
            mode.as_str(),
            if note.is_empty() { "" } else { " · " },
            note
        );
        ctx.emit(PROGRESS_EVENT, line);
        update
            .log(vec![self.name.to_string()])
            .elapsed_ms(ms)
            .usage(self.usage)
    }
}

/// The mode a stage works in: the one the first stage chose.
pub(crate) fn mode(s: &MemoState) -> Mode {
    s.mode.unwrap_or_default()
}

/// True for an answer that approves (`yes`, `approve`, `ok`, `true`...).
pub(crate) fn is_approval(answer: &serde_json::Value) -> bool {
    match answer {
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => matches!(
            s.trim().to_lowercase().as_str(),
            "y" | "yes" | "ok" | "approve" | "approved" | "lgtm"
        ),
        _ => false,
    }
}

/// A system and a user message.
pub(crate) fn messages(system: &str, user: String) -> Vec<Message> {
    vec![Message::system(system), Message::user(user)]
}
