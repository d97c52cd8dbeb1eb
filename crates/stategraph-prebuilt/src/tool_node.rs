//! The tool node: runs the tool calls of the conversation's last message and appends their
//! results, and the router that sends the graph to it.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::messages::MessagesState;
use stategraph::graph::{Command, Node};
use stategraph::runtime::{Context, NodeError};
use stategraph::END;
use stategraph_llm::{Message, ToolCall};
use stategraph_tools::{ToolResult, Toolbox};
use tracing::Instrument as _;

/// The node name [`tools_condition`] routes to.
pub const TOOLS: &str = "tools";

/// Routes to [`TOOLS`] when the last message is the model's and calls tools, else to [`END`].
/// Use it with `add_conditional_edges(model_node, tools_condition, [TOOLS, END])`.
pub fn tools_condition<S: MessagesState>(state: &S) -> &'static str {
    if state.pending_tool_calls().is_empty() {
        END
    } else {
        TOOLS
    }
}

/// A tool whose calls wait for a person's approval before they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    /// The tool (e.g. `run_command`).
    pub tool: String,
    /// The argument an edited answer replaces (e.g. `command`). Empty: the question shows the
    /// whole arguments object and an edited answer is a JSON object replacing it (see
    /// [`Approval::whole`]).
    pub argument: String,
    /// When set, approval is asked only while this run setting is `true`
    /// (e.g. `approve_commands`).
    pub setting: Option<String>,
}

impl Approval {
    /// Approval of every call of `tool` (a tool of any shape, e.g. an MCP server's
    /// `fs__write_file`): the question shows its arguments; the answer is `yes`, `no`, or the
    /// edited arguments as a JSON object. Any other answer refuses the call and is passed to
    /// the model as the person's words.
    ///
    /// ```
    /// use stategraph_prebuilt::Approval;
    /// let rule = Approval::whole("fs__write_file");
    /// assert!(rule.argument.is_empty() && rule.setting.is_none());
    /// ```
    pub fn whole(tool: impl Into<String>) -> Self {
        Approval {
            tool: tool.into(),
            argument: String::new(),
            setting: None,
        }
    }
}

/// What a person answers to an approval pause: `yes`, `no`, or an edited value of the
/// approval's argument. `true`/`false` are read as yes/no.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ApprovalAnswer {
    /// A yes or no.
    Flag(bool),
    /// `yes`, `no`, or the edited argument.
    Text(String),
}

enum Decision {
    Run(ToolCall),
    Refused(ToolResult),
}

/// Runs the last message's tool calls concurrently and writes one result message per call, in
/// call order (never finish order). Each call's result is journaled under its tool-call id as
/// soon as it finishes, so after a crash a resume runs only the calls that had not finished: a
/// command that finished is never run again, its recorded output is used. A failing tool,
/// unknown tool or bad arguments give an error result; the node itself fails only when the
/// journal cannot be written.
pub struct ToolNode {
    tools: Arc<Toolbox>,
    approvals: Vec<Approval>,
}

impl ToolNode {
    /// A node running `tools`.
    pub fn new(tools: Arc<Toolbox>) -> Self {
        ToolNode {
            tools,
            approvals: Vec::new(),
        }
    }

    /// Pauses before each call of `approval.tool` (see [`ApprovalAnswer`]).
    pub fn approve(mut self, approval: Approval) -> Self {
        self.approvals.push(approval);
        self
    }

    /// The tools.
    pub fn tools(&self) -> &Arc<Toolbox> {
        &self.tools
    }

    /// Runs `calls` (approvals first, in call order), returning one result per call in order.
    pub async fn run_calls(
        &self,
        calls: &[ToolCall],
        ctx: &Context,
    ) -> Result<Vec<ToolResult>, NodeError> {
        let mut decisions = Vec::with_capacity(calls.len());
        for call in calls {
            decisions.push(self.decide(call, ctx).await?);
        }
        let runs = decisions.into_iter().map(|decision| async move {
            match decision {
                Decision::Refused(result) => Ok(result),
                Decision::Run(call) => {
                    let tools = self.tools.clone();
                    let key = format!("tool:{}", call.id);
                    let (id, name) = (call.id.clone(), call.name.clone());
                    // The call's span in a trace; `replayed` says it was answered from the
                    // journal without running.
                    let span = tracing::info_span!(
                        "tool_call",
                        tool = %name,
                        call = %id,
                        replayed = tracing::field::Empty
                    );
                    // A long tool call is work under way, not a silent node: it beats for
                    // the node's idle timeout while it runs (a tool bounds its own time).
                    let result = ctx
                        .record(&key, || async move {
                            Ok::<_, NodeError>(ctx.heartbeat_during(tools.run(&call)).await)
                        })
                        .instrument(span.clone())
                        .await?;
                    let replayed = ctx.was_replayed(&key);
                    span.record("replayed", replayed);
                    // Said once the result is on record (flushed), never before: from then
                    // on a kill cannot make this call run again (`graph -v` shows it).
                    if !replayed {
                        tracing::info!(call = %id, tool = %name, "tool call finished and recorded");
                    }
                    Ok(result)
                }
            }
        });
        futures::future::try_join_all(runs).await
    }

    async fn decide(&self, call: &ToolCall, ctx: &Context) -> Result<Decision, NodeError> {
        let Some(rule) = self.approvals.iter().find(|a| {
            a.tool == call.name
                && a.setting
                    .as_ref()
                    .is_none_or(|key| ctx.setting::<bool>(key).unwrap_or(false))
        }) else {
            return Ok(Decision::Run(call.clone()));
        };
        if rule.argument.is_empty() {
            return decide_whole(call, self.tools.shown(&call.name), ctx).await;
        }
        let shown = call
            .arguments
            .get(&rule.argument)
            .cloned()
            .unwrap_or(Value::Null);
        let answer: ApprovalAnswer = ctx
            .interrupt(json!({
                "approve": call.name,
                "tool_call_id": call.id,
                rule.argument.clone(): shown,
                "arguments": call.arguments,
                "question": format!(
                    "run {} {}? answer yes, no, or an edited {}",
                    call.name,
                    shown.as_str().map(str::to_string).unwrap_or_else(|| shown.to_string()),
                    rule.argument
                ),
            }))
            .await?;
        let text = match answer {
            ApprovalAnswer::Flag(true) => return Ok(Decision::Run(call.clone())),
            ApprovalAnswer::Flag(false) => String::from("no"),
            ApprovalAnswer::Text(text) => text,
        };
        match text.trim().to_ascii_lowercase().as_str() {
            "yes" | "y" | "approve" | "ok" => Ok(Decision::Run(call.clone())),
            "no" | "n" | "refuse" | "deny" => {
                let refused = ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: format!(
                        "the user refused to run this {}; do not run it again, try another way \
                         or explain what you need",
                        call.name
                    ),
                    is_error: true,
                };
                Ok(Decision::Refused(refused))
            }
            _ => {
                let mut edited = call.clone();
                if let Value::Object(map) = &mut edited.arguments {
                    map.insert(
                        rule.argument.clone(),
                        Value::String(text.trim().to_string()),
                    );
                } else {
                    edited.arguments = json!({ rule.argument.clone(): text.trim() });
                }
                Ok(Decision::Run(edited))
            }
        }
    }
}

/// The approval of an [`Approval::whole`] rule: the whole arguments shown, an edit replacing
/// them.
async fn decide_whole(call: &ToolCall, shown: &str, ctx: &Context) -> Result<Decision, NodeError> {
    let answer: ApprovalAnswer = ctx
        .interrupt(json!({
            "approve": shown,
            "tool_call_id": call.id,
            "arguments": call.arguments,
            "question": format!(
                "call {shown} with {}? answer yes, no, or the edited arguments as a JSON object",
                call.arguments
            ),
        }))
        .await?;
    let text = match answer {
        ApprovalAnswer::Flag(true) => return Ok(Decision::Run(call.clone())),
        ApprovalAnswer::Flag(false) => String::from("no"),
        ApprovalAnswer::Text(text) => text,
    };
    let refused = |why: String| {
        Decision::Refused(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: why,
            is_error: true,
        })
    };
    match text.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "approve" | "ok" => Ok(Decision::Run(call.clone())),
        "no" | "n" | "refuse" | "deny" => Ok(refused(format!(
            "the user refused to run this {shown}; do not run it again, try another way or \
             explain what you need"
        ))),
        _ => match serde_json::from_str::<Value>(text.trim()) {
            Ok(edited @ Value::Object(_)) => {
                let mut call = call.clone();
                call.arguments = edited;
                Ok(Decision::Run(call))
            }
            _ => Ok(refused(format!(
                "the user did not approve this {shown} and said: {}",
                text.trim()
            ))),
        },
    }
}

#[async_trait]
impl<S: MessagesState> Node<S> for ToolNode {
    async fn run(&self, state: Arc<S>, ctx: Context) -> Result<Command<S>, NodeError> {
        let calls = state.pending_tool_calls().to_vec();
        let results = self.run_calls(&calls, &ctx).await?;
        for r in &results {
            ctx.emit(
                "tool",
                json!({"id": r.call_id, "name": r.name, "is_error": r.is_error}),
            );
        }
        let messages: Vec<Message> = results.into_iter().map(ToolResult::into_message).collect();
        Ok(Command::from_update(S::messages_update(messages)))
    }
}
