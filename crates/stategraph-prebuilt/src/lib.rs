//! Building blocks for tool-using agents, as LangGraph users know them: a conversation field
//! with the add-messages reducer ([`add_messages`], [`MessagesState`]), a [`ToolNode`] that runs
//! the last message's tool calls concurrently (durably, each journaled by its tool-call id, with
//! optional approval pauses), the [`tools_condition`] router, and a prebuilt [`agent`] graph.
//!
//! They use only the public graph API, so an agent of one's own can mix them with its own
//! nodes: any state implementing [`MessagesState`] can host a [`ToolNode`].
//!
//! # Layout
//! `messages.rs` the conversation field and its reducer; `tool_node.rs` the tool node and the
//! tools condition; `agent.rs` the prebuilt agent loop; `model_error.rs` a failed model call as a
//! node error (whether to retry it, what it says), for every agent.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod messages;
mod model_error;
mod tool_node;

pub use agent::{
    agent, call_model, AgentOptions, AgentState, AgentStateUpdate, AGENT, DEFAULT_MAX_ROUNDS,
};
pub use messages::{add_messages, MessagesState};
pub use model_error::{asked_node_error, model_node_error};
pub use tool_node::{tools_condition, Approval, ApprovalAnswer, ToolNode, TOOLS};
