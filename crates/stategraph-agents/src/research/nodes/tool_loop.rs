//! `act` and `tools`: a `tool` todo's model↔tool loop in the workspace.
//!
//! `act` calls the model with the todo's conversation and the tools (journaled, so a resume
//! never pays for a reply it already got). Tool calls go to `tools`, which runs them
//! concurrently, each journaled under its tool-call id (a finished command is never run
//! again), and comes back to `act`. A reply without tool calls is the todo's result, reviewed
//! by `reflect`. Each model call is a round, counted on the todo (state, so a resumed loop
//! keeps its count); at `limits.max_rounds` (`max_rounds_per_subtask` for a sub-todo) the todo
//! goes to `escalate_tool` instead of another round.

use super::{ledger, settings, system};
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{prompts, ResearchAgent, ResearchSettings};
use stategraph::graph::Command;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{ChatRequest, Message, Role};
use stategraph_prebuilt::{call_model, MessagesState};
use stategraph_tools::Toolbox;
use std::sync::Arc;

/// True when `todo` runs the model↔tool loop under `settings` (a tool todo, with a workspace
/// or MCP servers).
pub(crate) fn uses_loop(todo: &Todo, settings: &ResearchSettings) -> bool {
    todo.kind == Kind::Tool && settings.uses_tool_loop()
}

/// The round limit of one attempt at `todo`.
pub(crate) fn round_limit(todo: &Todo, settings: &ResearchSettings) -> u32 {
    if todo.parent.is_some() {
        settings.limits.max_rounds_per_subtask
    } else {
        settings.limits.max_rounds
    }
}

/// Files of the workspace, relative, for prompts (capped; `.gitignore` honoured).
pub(crate) fn workspace_files(settings: &ResearchSettings, cap: usize) -> Vec<String> {
    let Some(root) = settings.workspace.as_ref() else {
        return Vec::new();
    };
    let mut files: Vec<String> = ignore::WalkBuilder::new(root)
        .require_git(false)
        .follow_links(false)
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter_map(|e| {
            e.path()
                .strip_prefix(root)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect();
    files.sort();
    let total = files.len();
    files.truncate(cap);
    if total > cap {
        files.push(format!("... and {} more", total - cap));
    }
    files
}

/// The error results among the conversation's last tool results, newest last.
pub(crate) fn recent_errors(messages: &[Message], n: usize) -> Vec<String> {
    let mut errors: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.content.starts_with("Error:"))
        .map(|m| m.content.chars().take(300).collect())
        .collect();
    let skip = errors.len().saturating_sub(n);
    errors.drain(..skip);
    errors
}

fn first_message(s: &PlanState, todo: &Todo, settings: &ResearchSettings) -> Message {
    let done: Vec<String> = s
        .plan
        .iter()
        .filter(|t| t.status == Status::Done)
        .map(|t| format!("- {}: {}", t.task, t.result.as_deref().unwrap_or("done")))
        .collect();
    let files = workspace_files(settings, 60);
    let mut text = format!("Goal: {}\nYour task: {}\n", s.question.trim(), todo.task);
    if let Some(parent) = todo.parent.as_deref().and_then(|p| s.todo(p)) {
        text.push_str(&format!(
            "It is a step of the larger task: {}\n",
            parent.task
        ));
    }
    if !done.is_empty() {
        text.push_str(&format!("Done so far:\n{}\n", done.join("\n")));
    }
    if settings.workspace.is_some() {
        text.push_str(&format!(
            "Files in the workspace: {}\n",
            if files.is_empty() {
                "(none)".to_string()
            } else {
                files.join(", ")
            }
        ));
    }
    if let Some(before) = &todo.failure_reason {
        text.push_str(&format!("Earlier attempts: {before}\n"));
    }
    text.push_str(&format!(
        "You have at most {} tool rounds for this task.",
        round_limit(todo, settings)
    ));
    Message::user(text)
}

pub(crate) async fn act(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<Command<PlanState>, NodeError> {
    let settings = settings(&ctx)?;
    let Some(current) = s.current() else {
        return Err(NodeError::new(
            "act found no current todo; was it removed from the plan?",
        ));
    };
    let tool_node = agent.tool_node(&settings).await?;
    let round = take_up(&s, current, &settings);
    let limit = round_limit(&round.todo, &settings);
    if round.todo.rounds >= limit {
        return Ok(escalate_at_limit(round, limit));
    }
    let Round {
        mut todo,
        conversation,
        mut fresh,
        new_attempt,
        update,
    } = round;
    let mut messages = vec![system(&settings.prompts.act, prompts::ACT)];
    messages.extend(conversation);
    let mut request = ChatRequest::new(messages).with_tools(tool_node.tools().specs());
    request.temperature = settings.llm.temperature;
    let reply = call_model(agent.model().as_ref(), request, &ctx, "model").await?;
    todo.rounds += 1;
    let update = update
        .rounds(1)
        .usage(ledger(&ctx, "model", "act", reply.usage, &settings).await?);
    let (goto, log) = follow_reply(&mut todo, &reply.message, tool_node.tools());
    fresh.push(reply.message);
    // A new attempt's messages replace the conversation of the attempt before it.
    let update = if new_attempt {
        update.overwrite_messages(fresh)
    } else {
        update.messages(fresh)
    };
    Ok(Command::from_update(update.plan(vec![todo]).log(vec![log])).goto(goto))
}

/// A todo as `act` takes it up for a round.
struct Round {
    todo: Todo,
    /// What the model is shown after the system prompt: the attempt's conversation.
    conversation: Vec<Message>,
    /// The messages the round adds to the state.
    fresh: Vec<Message>,
    /// True when the round starts an attempt; its messages then replace the conversation.
    new_attempt: bool,
    update: PlanStateUpdate,
}

/// Takes `current` up for a round: in the attempt it is in, or, when none is in progress, in
/// a new attempt with a new conversation that opens with [`first_message`].
fn take_up(s: &PlanState, current: &Todo, settings: &ResearchSettings) -> Round {
    let mut todo = current.clone();
    if current.status == Status::InProgress {
        return Round {
            todo,
            conversation: s.messages.clone(),
            fresh: Vec::new(),
            new_attempt: false,
            update: PlanStateUpdate::default(),
        };
    }
    todo.status = Status::InProgress;
    todo.attempts += 1;
    todo.rounds = 0;
    todo.error = None;
    todo.result = None;
    let first = first_message(s, &todo, settings);
    Round {
        todo,
        conversation: vec![first.clone()],
        fresh: vec![first],
        new_attempt: true,
        update: PlanStateUpdate::default().executions(1),
    }
}

/// An attempt that used its `limit` of rounds without finishing: the todo, stuck, goes to
/// `escalate_tool` instead of another round.
fn escalate_at_limit(round: Round, limit: u32) -> Command<PlanState> {
    let Round {
        mut todo,
        fresh,
        update,
        ..
    } = round;
    let reason = format!(
        "stuck: attempt {} reached the round limit ({limit} model/tool rounds) without finishing",
        todo.attempts
    );
    todo.error = Some(reason.clone());
    let log = format!("{} {reason}: escalating", todo.id);
    let mut update = update.plan(vec![todo]).log(vec![log]);
    if !fresh.is_empty() {
        update = update.overwrite_messages(fresh);
    }
    Command::from_update(update).goto("escalate_tool")
}

/// Where the model's `reply` leads, and the round's log line: tool calls go to `tools`; a reply
/// without them is the todo's result, for `reflect` to review.
fn follow_reply(todo: &mut Todo, reply: &Message, tools: &Toolbox) -> (&'static str, String) {
    let calls = reply.tool_calls.len();
    let goto = if calls > 0 {
        "tools"
    } else {
        todo.result = Some(if reply.content.trim().is_empty() {
            "(the model finished without saying what it did)".to_string()
        } else {
            reply.content.trim().to_string()
        });
        "reflect"
    };
    let log = format!(
        "{} round {}: {}",
        todo.id,
        todo.rounds,
        if calls > 0 {
            let names: Vec<&str> = reply
                .tool_calls
                .iter()
                .map(|c| tools.shown(&c.name))
                .collect();
            format!("calls {}", names.join(", "))
        } else {
            "finished".to_string()
        }
    );
    (goto, log)
}

pub(crate) async fn tools(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let Some(mut todo) = s.current().cloned() else {
        return Err(NodeError::new(
            "tools found no current todo; was it removed from the plan?",
        ));
    };
    let tool_node = agent.tool_node(&settings).await?;
    let calls = s.pending_tool_calls().to_vec();
    let results = tool_node.run_calls(&calls, &ctx).await?;
    let mut log = Vec::new();
    for r in &results {
        // People read an MCP tool as `fs.read_file`; the model calls it `fs__read_file`.
        let shown = tool_node.tools().shown(&r.name).to_string();
        if !todo.tools_used.contains(&shown) {
            todo.tools_used.push(shown.clone());
        }
        let head: String = r
            .content
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(120)
            .collect();
        log.push(format!(
            "{} {shown} {}: {head}",
            todo.id,
            if r.is_error { "failed" } else { "ok" }
        ));
        ctx.emit(
            "tool",
            serde_json::json!({"todo": todo.id, "id": r.call_id, "name": shown, "is_error": r.is_error}),
        );
    }
    let messages: Vec<Message> = results.into_iter().map(|r| r.into_message()).collect();
    Ok(PlanStateUpdate::default()
        .messages(messages)
        .plan(vec![todo])
        .log(log))
}
