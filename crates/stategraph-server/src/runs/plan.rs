//! A run request (LangGraph's `RunCreate`) read into what to run: checked before anything
//! starts, so a request that cannot run is refused with the field at fault (422), not failed
//! later in the run's stream.

use super::Strategy;
use crate::assistants::{Assistant, Assistants};
use crate::error::ApiError;
use crate::sse::parse_modes;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use stategraph::checkpoint::CheckpointId;
use stategraph::graph::Goto;
use stategraph::runtime::{Durability, RunConfig};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The body of a run request. Fields LangGraph defines and this server ignores (tracing,
/// feedback keys) are let through; those it would have to honour and does not are refused.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RunRequest {
    #[serde(default)]
    pub assistant_id: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub command: Option<CommandRequest>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub config: Option<ConfigRequest>,
    #[serde(default)]
    pub context: Option<Map<String, Value>>,
    #[serde(default)]
    pub stream_mode: Option<OneOrMany>,
    #[serde(default)]
    pub stream_subgraphs: Option<bool>,
    #[serde(default)]
    pub interrupt_before: Option<Nodes>,
    #[serde(default)]
    pub interrupt_after: Option<Nodes>,
    #[serde(default)]
    pub checkpoint_id: Option<String>,
    #[serde(default)]
    pub checkpoint: Option<CheckpointRef>,
    #[serde(default)]
    pub multitask_strategy: Option<Strategy>,
    #[serde(default)]
    pub if_not_exists: Option<IfNotExists>,
    #[serde(default)]
    pub on_disconnect: Option<OnDisconnect>,
    #[serde(default)]
    pub on_completion: Option<OnCompletion>,
    #[serde(default)]
    pub durability: Option<Durability>,
    #[serde(default)]
    pub after_seconds: Option<f64>,
    #[serde(default)]
    pub webhook: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// `"*"` (every node) or a list of node names.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Nodes {
    All(String),
    List(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CommandRequest {
    #[serde(default)]
    pub resume: Option<Value>,
    #[serde(default)]
    pub update: Option<Value>,
    #[serde(default)]
    pub goto: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ConfigRequest {
    #[serde(default)]
    pub recursion_limit: Option<u64>,
    #[serde(default)]
    pub configurable: Option<Map<String, Value>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CheckpointRef {
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IfNotExists {
    Create,
    Reject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnDisconnect {
    Cancel,
    Continue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnCompletion {
    Delete,
    Keep,
}

/// How a run starts on its thread.
#[derive(Debug)]
pub(crate) enum Start {
    /// A new input (applied on top of the thread's state when it has one).
    Input(Value),
    /// Continues the thread, answering its pause with `answer` when one is given; a command's
    /// `update` is merged and its `goto` tasks added before the step.
    Continue {
        answer: Option<Value>,
        update: Option<Value>,
        goto: Vec<Goto>,
    },
}

/// A checked run request.
pub(crate) struct Plan {
    pub assistant: Arc<Assistant>,
    pub thread: String,
    pub start: Start,
    /// The engine's settings (its cancellation is set when the run starts).
    pub config: RunConfig,
    pub modes: BTreeSet<crate::sse::Mode>,
    pub subgraphs: bool,
    pub strategy: Strategy,
    pub temporary: bool,
}

/// Reads `req` for a run on `thread` (`temporary`: a stateless run's own thread).
pub(crate) fn plan(
    assistants: &Assistants,
    thread: &str,
    temporary: bool,
    req: &RunRequest,
) -> Result<Plan, ApiError> {
    refuse_unsupported(req)?;
    let id = req.assistant_id.as_deref().ok_or_else(|| {
        ApiError::invalid(
            "assistant_id",
            "missing: give the name of a registered graph (POST /assistants/search lists them)",
        )
    })?;
    let assistant = assistants.get(id)?;
    assistant.resolved.preflight()?;
    let names: Vec<&str> = match &req.stream_mode {
        None => vec!["values"],
        Some(OneOrMany::One(m)) => vec![m.as_str()],
        Some(OneOrMany::Many(ms)) => ms.iter().map(String::as_str).collect(),
    };
    let modes = parse_modes(&names, "stream_mode")?;
    let config = run_config(&assistant, thread, req)?;
    let start = start_of(&assistant, req, config.checkpoint_id.is_some())?;
    Ok(Plan {
        assistant,
        thread: thread.to_string(),
        start,
        config,
        modes,
        subgraphs: req.stream_subgraphs.unwrap_or(false),
        strategy: req.multitask_strategy.unwrap_or_default(),
        temporary,
    })
}

fn refuse_unsupported(req: &RunRequest) -> Result<(), ApiError> {
    if req.webhook.is_some() {
        return Err(ApiError::unsupported(
            "webhook",
            "calling a webhook when a run ends",
        ));
    }
    if req.after_seconds.is_some_and(|s| s > 0.0) {
        return Err(ApiError::unsupported("after_seconds", "delaying a run"));
    }
    Ok(())
}

/// What the run does first: an input, or continuing the thread (answering its pause).
fn start_of(
    assistant: &Assistant,
    req: &RunRequest,
    at_checkpoint: bool,
) -> Result<Start, ApiError> {
    let input = req.input.clone().filter(|v| !v.is_null());
    let command = req.command.as_ref();
    let answer = command.and_then(|c| c.resume.clone());
    let update = command
        .and_then(|c| c.update.clone())
        .filter(|v| !v.is_null());
    let goto = match command.and_then(|c| c.goto.as_ref()) {
        Some(goto) => gotos(goto, &assistant.graph.node_names())?,
        None => Vec::new(),
    };
    let commanded = answer.is_some() || update.is_some() || !goto.is_empty();
    match (input, commanded) {
        (Some(_), true) => Err(ApiError::invalid(
            "command",
            "give either an input or a command, not both",
        )),
        (Some(_), false) if at_checkpoint => Err(ApiError::unsupported(
            "checkpoint_id",
            "an input with a checkpoint to start from (update the state at it, then run)",
        )),
        (Some(input), false) => {
            assistant
                .graph
                .check_update(&input, "the input")
                .map_err(|e| ApiError::from(e).in_field("input"))?;
            // The graph's own checks (a company with no data room, say), before any thread is
            // made, as `graph run` makes them.
            assistant.resolved.check_input(&input).map_err(|e| {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_input", format!("input: {e}"))
            })?;
            Ok(Start::Input(input))
        }
        (None, _) => {
            if let Some(update) = &update {
                assistant
                    .graph
                    .check_update(update, "the command's update")
                    .map_err(|e| ApiError::from(e).in_field("command.update"))?;
            }
            Ok(Start::Continue {
                answer,
                update,
                goto,
            })
        }
    }
}

/// A command's `goto` as LangGraph's clients send it: a node's name, a `Send`
/// (`{"node", "arg"}`; `input` as well, as langgraph-sdk names it), or a list of them.
fn gotos(given: &Value, nodes: &[String]) -> Result<Vec<Goto>, ApiError> {
    let one = |v: &Value| -> Result<Goto, ApiError> {
        let (node, arg) = match v {
            Value::String(name) => (name.as_str(), None),
            Value::Object(send) => match send.get("node").and_then(Value::as_str) {
                Some(node) => (node, send.get("arg").or_else(|| send.get("input"))),
                None => {
                    return Err(ApiError::invalid(
                        "command.goto",
                        "a Send names its node: {\"node\": \"NAME\", \"arg\": ...}",
                    ))
                }
            },
            other => {
                return Err(ApiError::invalid(
                    "command.goto",
                    format!("expected a node's name, a Send or a list of them, not {other}"),
                ))
            }
        };
        if node != stategraph::END && !nodes.iter().any(|n| n == node) {
            return Err(ApiError::invalid(
                "command.goto",
                format!(
                    "no node named `{node}`; the graph's nodes are: {}",
                    nodes.join(", ")
                ),
            ));
        }
        Ok(match arg {
            Some(arg) => Goto::Send(stategraph::Send {
                node: node.to_string(),
                arg: arg.clone(),
            }),
            None => Goto::from(node),
        })
    };
    match given {
        Value::Array(list) => list.iter().map(one).collect(),
        Value::Null => Ok(Vec::new()),
        single => Ok(vec![one(single)?]),
    }
}

/// The engine's settings for the run: the graph file's (recursion limit, durability,
/// `[settings]`), then the request's: breakpoints, recursion limit, durability, the checkpoint
/// to start from, and what nodes read as settings (`configurable` and `context`, merged into
/// the file's tables key by key).
fn run_config(
    assistant: &Assistant,
    thread: &str,
    req: &RunRequest,
) -> Result<RunConfig, ApiError> {
    let mut config = assistant.resolved.file.run_config().thread(thread);
    let nodes = assistant.graph.node_names();
    config.interrupt_before =
        breakpoints(&nodes, req.interrupt_before.as_ref(), "interrupt_before")?;
    config.interrupt_after = breakpoints(&nodes, req.interrupt_after.as_ref(), "interrupt_after")?;
    if let Some(d) = req.durability {
        config.durability = d;
    }
    let given = req.config.as_ref();
    if let Some(limit) = given.and_then(|c| c.recursion_limit) {
        config.recursion_limit = limit;
    }
    let configurable = given.and_then(|c| c.configurable.as_ref());
    // A setting the graph declares is checked as `graph run --set` checks it, before a thread is
    // made: a wrong type or a misspelt key inside one of its tables is a 422 naming it.
    let schema = assistant.resolved.settings_schema();
    for (field, table) in [
        ("config.configurable", configurable),
        ("context", req.context.as_ref()),
    ] {
        if let Some(table) = table {
            schema
                .check_declared(table)
                .map_err(|message| ApiError::invalid(field, message))?;
        }
    }
    for (key, value) in configurable
        .into_iter()
        .chain(req.context.as_ref())
        .flatten()
    {
        // What LangGraph keeps in `configurable` about the thread is not a setting.
        if !matches!(
            key.as_str(),
            "thread_id" | "checkpoint_id" | "checkpoint_ns"
        ) && !key.starts_with("__")
        {
            match config.settings.get_mut(key) {
                Some(setting) => merge(setting, value),
                None => {
                    config.settings.insert(key.clone(), value.clone());
                }
            }
        }
    }
    let at = req.checkpoint_id.as_deref().or(req
        .checkpoint
        .as_ref()
        .and_then(|c| c.checkpoint_id.as_deref()));
    if let Some(at) = at {
        let id = at.parse::<CheckpointId>().map_err(|_| {
            ApiError::invalid(
                "checkpoint_id",
                format!("`{at}` is not a checkpoint id (a UUID from the thread's history)"),
            )
        })?;
        config.checkpoint_id = Some(id);
    }
    Ok(config)
}

/// Writes `given` over `setting`: tables key by key (a request naming `search.corpus` keeps
/// the file's other `search` keys), anything else replaced.
fn merge(setting: &mut Value, given: &Value) {
    match (setting, given) {
        (Value::Object(table), Value::Object(over)) => {
            for (key, value) in over {
                match table.get_mut(key) {
                    Some(old) => merge(old, value),
                    None => {
                        table.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (setting, given) => *setting = given.clone(),
    }
}

fn breakpoints(
    known: &[String],
    nodes: Option<&Nodes>,
    field: &str,
) -> Result<BTreeSet<String>, ApiError> {
    match nodes {
        None => Ok(BTreeSet::new()),
        Some(Nodes::All(star)) if star == "*" => Ok(known.iter().cloned().collect()),
        Some(Nodes::All(other)) => Err(ApiError::invalid(
            field,
            format!("expected \"*\" or a list of node names, not \"{other}\""),
        )),
        Some(Nodes::List(list)) => {
            for name in list {
                if !known.contains(name) {
                    return Err(ApiError::invalid(
                        field,
                        format!(
                            "no node named `{name}`; the graph's nodes are: {}",
                            known.join(", ")
                        ),
                    ));
                }
            }
            Ok(list.iter().cloned().collect())
        }
    }
}

/// The request's run arguments, as a run's record shows them.
pub(crate) fn kwargs(req: &RunRequest, plan: &Plan) -> Value {
    let modes: Vec<&str> = plan.modes.iter().map(|m| m.name()).collect();
    json!({
        "input": req.input,
        "command": req.command.as_ref().map(|c| json!({"resume": c.resume, "update": c.update, "goto": c.goto})),
        "stream_mode": modes,
        "stream_subgraphs": plan.subgraphs,
        "interrupt_before": plan.config.interrupt_before,
        "interrupt_after": plan.config.interrupt_after,
        "config": {"recursion_limit": plan.config.recursion_limit, "configurable": plan.config.settings},
        "checkpoint_id": plan.config.checkpoint_id.map(|c| c.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_setting_is_merged_into_the_files_table_key_by_key() {
        let mut search = json!({"provider": "auto", "max_results": 5, "deep": {"a": 1}});
        merge(
            &mut search,
            &json!({"corpus": "docs/", "max_results": 2, "deep": {"b": 2}}),
        );
        assert_eq!(
            search,
            json!({"provider": "auto", "max_results": 2, "corpus": "docs/", "deep": {"a": 1, "b": 2}})
        );
        let mut plain = json!(0.2);
        merge(&mut plain, &json!({"x": 1}));
        assert_eq!(plain, json!({"x": 1}));
    }
}
