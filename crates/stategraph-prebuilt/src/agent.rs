//! The prebuilt tool-calling agent: a model node and a [`ToolNode`] in a loop, bounded by a
//! round limit.
//!
//! ```text
//! START -> agent --(tool calls)--> tools -> agent ...
//!            +----(no tool calls, or the round limit)----> END
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::messages::{add_messages, MessagesState};
use super::model_error::model_node_error;
use super::tool_node::{tools_condition, Approval, ToolNode, TOOLS};
use stategraph::graph::{Command, Node, RetryPolicy, StateGraph};
use stategraph::runtime::{Context, NodeError};
use stategraph::{State, END, START};
use stategraph_llm::{ChatModel, ChatRequest, ChatResponse, Message, Role, Usage};
use stategraph_tools::Toolbox;

/// The model node's name.
pub const AGENT: &str = "agent";

/// Model↔tool rounds allowed by default (one round is one model call).
pub const DEFAULT_MAX_ROUNDS: u32 = 16;

/// The state of [`agent`]: the conversation, the rounds used, and why it stopped early.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct AgentState {
    /// The conversation; write a user message to start (add-messages reducer).
    #[state(with = add_messages)]
    pub messages: Vec<Message>,
    /// Model calls so far: state, so a resumed run keeps counting where it was.
    #[state(add)]
    pub rounds: u32,
    /// Set when the loop stopped at its round limit rather than with a final answer.
    pub stopped: Option<String>,
    /// Tokens used by the model calls.
    #[state(add)]
    pub input_tokens: u64,
    /// Tokens produced by the model calls.
    #[state(add)]
    pub output_tokens: u64,
}

impl MessagesState for AgentState {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> AgentStateUpdate {
        AgentStateUpdate::default().messages(messages)
    }
}

impl AgentState {
    /// The final answer: the last assistant message's text, when the loop ended without tool
    /// calls.
    pub fn answer(&self) -> Option<&str> {
        match self.messages.last() {
            Some(m) if m.role == Role::Assistant && m.tool_calls.is_empty() => {
                Some(m.content.as_str())
            }
            _ => None,
        }
    }
}

/// How [`agent`] behaves.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// A system message put before the conversation on every model call (not stored).
    pub system_prompt: Option<String>,
    /// Model calls allowed; at the limit the loop ends with [`AgentState::stopped`] set.
    pub max_rounds: u32,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Tools whose calls wait for approval.
    pub approvals: Vec<Approval>,
    /// Retries of a model call that failed transiently.
    pub retry: RetryPolicy,
    /// The idle timeout of the model and tool nodes
    /// ([`NodeSpec::idle_timeout`](stategraph::graph::NodeSpec::idle_timeout)): a model reply
    /// streams (each piece a sign of life) and a tool call beats while it runs, so only a
    /// stalled stream is cut off, and retried as the model node's `retry` says.
    pub idle_timeout: Option<std::time::Duration>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            system_prompt: None,
            max_rounds: DEFAULT_MAX_ROUNDS,
            temperature: None,
            approvals: Vec::new(),
            retry: RetryPolicy::new(3),
            idle_timeout: None,
        }
    }
}

impl AgentOptions {
    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Sets the round limit.
    pub fn with_max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Cancels a model or tool node silent for longer than `d` (see
    /// [`AgentOptions::idle_timeout`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use stategraph_prebuilt::AgentOptions;
    /// let options = AgentOptions::default().with_idle_timeout(Duration::from_secs(60));
    /// assert_eq!(options.idle_timeout, Some(Duration::from_secs(60)));
    /// ```
    pub fn with_idle_timeout(mut self, d: std::time::Duration) -> Self {
        self.idle_timeout = Some(d);
        self
    }

    /// Pauses before calls of a tool.
    pub fn with_approval(mut self, approval: Approval) -> Self {
        self.approvals.push(approval);
        self
    }
}

/// Calls the model with the conversation and the tools once, journaled, so a resume after a
/// crash that followed the reply does not call (and pay) again.
pub async fn call_model(
    model: &dyn ChatModel,
    request: ChatRequest,
    ctx: &Context,
    key: &str,
) -> Result<ChatResponse, NodeError> {
    ctx.record(key, || async move {
        model.chat(request).await.map_err(model_node_error)
    })
    .await
}

struct ModelNode {
    model: Arc<dyn ChatModel>,
    tools: Arc<Toolbox>,
    options: AgentOptions,
}

#[async_trait]
impl Node<AgentState> for ModelNode {
    async fn run(
        &self,
        state: Arc<AgentState>,
        ctx: Context,
    ) -> Result<Command<AgentState>, NodeError> {
        if state.rounds >= self.options.max_rounds {
            let why = format!(
                "stopped at the round limit ({} model calls) before a final answer",
                self.options.max_rounds
            );
            return Ok(AgentStateUpdate::default().stopped(Some(why)).into());
        }
        let mut messages = Vec::with_capacity(state.messages.len() + 1);
        if let Some(system) = &self.options.system_prompt {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(state.messages.iter().cloned());
        let mut request = ChatRequest::new(messages).with_tools(self.tools.specs());
        request.temperature = self.options.temperature;
        request.stream = ctx.text_sink(stategraph::runtime::TOKEN_EVENT);
        let reply = call_model(self.model.as_ref(), request, &ctx, "model").await?;
        let Usage {
            input_tokens,
            output_tokens,
            ..
        } = reply.usage;
        Ok(AgentStateUpdate::default()
            .messages(vec![reply.message])
            .rounds(1)
            .input_tokens(input_tokens)
            .output_tokens(output_tokens)
            .into())
    }
}

/// The prebuilt agent: `model` answers, calling `tools` as it likes, until it answers without a
/// tool call or reaches `options.max_rounds`. Compile it to run alone, or add it to a larger
/// graph as a subgraph. Start it with a user message:
///
/// ```
/// use std::sync::Arc;
/// use stategraph_llm::{FakeChatModel, Message};
/// use stategraph_prebuilt::{agent, AgentOptions, AgentStateUpdate};
/// use stategraph_tools::Toolbox;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = Arc::new(FakeChatModel::with_replies(["Hello!"]));
/// let graph = agent(model, Toolbox::default(), AgentOptions::default()).compile().unwrap();
/// let out = graph
///     .invoke(AgentStateUpdate::default().messages(vec![Message::user("Hi")]), Default::default())
///     .await
///     .unwrap();
/// assert_eq!(out.state.answer(), Some("Hello!"));
/// # });
/// ```
pub fn agent(
    model: Arc<dyn ChatModel>,
    tools: Toolbox,
    options: AgentOptions,
) -> StateGraph<AgentState> {
    let tools = Arc::new(tools);
    let mut tool_node = ToolNode::new(tools.clone());
    for approval in &options.approvals {
        tool_node = tool_node.approve(approval.clone());
    }
    let retry = options.retry.clone();
    let idle = options.idle_timeout;
    let mut g = StateGraph::<AgentState>::named("agent");
    let mut model_node = g.add_node_impl(
        AGENT,
        ModelNode {
            model,
            tools,
            options,
        },
    );
    model_node.retry(retry);
    if let Some(idle) = idle {
        model_node.idle_timeout(idle);
    }
    let mut tools_node = g.add_node_impl(TOOLS, tool_node);
    if let Some(idle) = idle {
        tools_node.idle_timeout(idle);
    }
    g.add_edge(START, AGENT).add_edge(TOOLS, AGENT);
    g.add_conditional_edges(AGENT, tools_condition::<AgentState>, [TOOLS, END])
        .label("tool calls?");
    g
}
