//! `escalate_tool`: a `tool` todo is stuck (its round limit, or its attempt cap). The model
//! chooses by structured output (schema `Escalation`) between:
//!
//! - `decompose` (zoom in): the todo is blocked with the reason and 2-4 smaller sub-todos are
//!   added under it (`parent`); allowed while the todo has had fewer than 3 attempts and the
//!   plan has room. When they settle, `execution_router` decides for the parent (done,
//!   verified, or re-planned);
//! - `zoom_out`: the todo is blocked and the plan goes on with its next pending sibling; when
//!   all siblings are blocked, the router clears them and re-plans the parent;
//! - `give_up`: only for a top-level todo while nothing in the plan is done; the run then ends
//!   as a failure with a summary of what was tried (`give_up` node).
//!
//! An action that is not allowed is not offered (the schema's enum is narrowed). The prompt
//! says what was tried, which files exist and the recent errors.

use super::escalate::sub_todos;
use super::tool_loop::{recent_errors, workspace_files};
use super::{ask, ledger, options, settings, system};
use crate::research::plan::one_line;
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{prompts, ResearchAgent, ResearchSettings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stategraph::graph::Command;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{schema_for, structured_validated, Message, Role, Usage};
use std::sync::Arc;

/// Attempts after which a todo may no longer be decomposed.
pub const MAX_DECOMPOSE_ATTEMPTS: u32 = 3;

/// What to do with a stuck todo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EscalationAction {
    /// Zoom in: split it into smaller sub-todos.
    Decompose,
    /// Step back: set it aside and go on with its siblings; reconsider the parent.
    ZoomOut,
    /// End the run as a failure (only at the goal level with nothing completed).
    GiveUp,
}

impl EscalationAction {
    /// The name in the schema and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationAction::Decompose => "decompose",
            EscalationAction::ZoomOut => "zoom_out",
            EscalationAction::GiveUp => "give_up",
        }
    }
}

/// The structured reply of an escalation (schema name `Escalation`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Escalation {
    /// decompose, zoom_out or give_up.
    pub action: EscalationAction,
    /// One sentence: why.
    pub reason: String,
    /// For decompose: 2 to 4 smaller tasks, each doable in 1 to 3 actions.
    pub subtasks: Vec<String>,
}

/// The actions allowed for `todo` in `plan`, and for each one left out, why.
pub(crate) fn allowed(
    todo: &Todo,
    plan: &[Todo],
    max_todos: usize,
) -> (Vec<EscalationAction>, Vec<String>) {
    let mut actions = Vec::new();
    let mut why_not = Vec::new();
    if todo.attempts >= MAX_DECOMPOSE_ATTEMPTS {
        why_not.push(format!("decompose: it has had {} attempts", todo.attempts));
    } else if max_todos.saturating_sub(plan.len()) < 2 {
        why_not.push(format!("decompose: the plan is full ({max_todos} todos)"));
    } else {
        actions.push(EscalationAction::Decompose);
    }
    actions.push(EscalationAction::ZoomOut);
    if todo.parent.is_some() {
        why_not.push("give_up: it is a sub-todo; zoom out to its parent first".into());
    } else if plan.iter().any(|t| t.status == Status::Done) {
        why_not.push("give_up: part of the goal is done already".into());
    } else {
        actions.push(EscalationAction::GiveUp);
    }
    (actions, why_not)
}

fn what_was_tried(s: &PlanState) -> Vec<String> {
    s.messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| {
            let args: String = c.arguments.to_string().chars().take(160).collect();
            format!("{} {args}", c.name)
        })
        .collect()
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<Command<PlanState>, NodeError> {
    let settings = settings(&ctx)?;
    let Some(current) = s.current().cloned() else {
        return Err(NodeError::new("escalate_tool found no current todo"));
    };
    let limits = &settings.limits;
    let (actions, why_not) = allowed(&current, &s.plan, limits.max_todos);
    let last = current
        .error
        .clone()
        .or_else(|| current.failure_reason.clone())
        .unwrap_or_else(|| "no reason recorded".into());
    let files = workspace_files(&settings, 60);
    let room = limits.max_todos.saturating_sub(s.plan.len()).min(4);
    let messages = vec![
        system(&settings.prompts.escalate, prompts::ESCALATE),
        Message::user(prompt(&s, &current, &last, &files, &actions, &why_not)),
    ];
    let (choice, usage) = choose(agent, &ctx, &settings, messages, actions, room).await?;
    let reason = one_line(&choice.reason);
    let usage = ledger(&ctx, "escalation", "escalate_tool", usage, &settings).await?;
    let mut update = PlanStateUpdate::default().escalations(1).usage(usage);
    let mut todo = current.clone();
    todo.escalated = true;
    todo.error = None;
    todo.status = Status::Blocked;
    let (mut changed, log, goto) = match choice.action {
        EscalationAction::Decompose => {
            let (children, log) = decompose(&s, &mut todo, &choice.subtasks, &reason, &last);
            (children, log, "execution_router")
        }
        EscalationAction::ZoomOut => {
            todo.failure_reason = Some(format!("escalated (zoom out): {reason}; after: {last}"));
            let log = format!("{} escalated: zoom out ({reason})", todo.id);
            (Vec::new(), log, "execution_router")
        }
        EscalationAction::GiveUp => {
            let (log, summary) = give_up_on_goal(&s, &mut todo, &reason, &last, &files);
            update = update.gave_up(Some(summary));
            (Vec::new(), log, "give_up")
        }
    };
    ctx.emit(
        "todo",
        json!({"id": todo.id, "status": todo.status, "reason": todo.failure_reason, "escalation": choice.action.as_str()}),
    );
    changed.insert(0, todo);
    Ok(Command::from_update(update.plan(changed).log(vec![log])).goto(goto))
}

/// Zoom in: `todo` stays blocked, with 2-4 sub-todos under it (from `subtasks`). Returns them
/// and the log line.
fn decompose(
    s: &PlanState,
    todo: &mut Todo,
    subtasks: &[String],
    reason: &str,
    last: &str,
) -> (Vec<Todo>, String) {
    let tasks = subtasks.iter().map(|t| (t.as_str(), Kind::Tool));
    let children = sub_todos(s, todo, tasks);
    let ids: Vec<&str> = children.iter().map(|t| t.id.as_str()).collect();
    todo.failure_reason = Some(format!(
        "escalated (decompose): {reason}; split into {} after: {last}",
        ids.join(", ")
    ));
    let log = format!(
        "{} escalated: decompose into {} ({reason})",
        todo.id,
        ids.join(", ")
    );
    (children, log)
}

/// Give up on the goal: `todo` fails, and the run with it (in `give_up`). Returns the log line
/// and the run's summary of what was tried.
fn give_up_on_goal(
    s: &PlanState,
    todo: &mut Todo,
    reason: &str,
    last: &str,
    files: &[String],
) -> (String, String) {
    todo.status = Status::Failed;
    todo.failure_reason = Some(format!("escalated (give up): {reason}; after: {last}"));
    let log = format!("{} escalated: give up ({reason})", todo.id);
    let summary = format!(
        "gave up on the goal \"{}\": {reason}. Tried: todo `{}` ({}) in {} attempts; \
         last problem: {last}; files in the workspace: {}; nothing of the plan was completed.",
        s.question.trim(),
        todo.id,
        todo.task,
        todo.attempts,
        if files.is_empty() {
            "none".to_string()
        } else {
            files.join(", ")
        }
    );
    (log, summary)
}

/// The user message: the goal, the stuck todo and why, what was tried (the latest 20 tool
/// calls), the workspace's files, the recent errors and the allowed actions.
fn prompt(
    s: &PlanState,
    current: &Todo,
    last: &str,
    files: &[String],
    actions: &[EscalationAction],
    why_not: &[String],
) -> String {
    let mut tried = what_was_tried(s);
    let skip = tried.len().saturating_sub(20);
    tried.drain(..skip);
    let errors = recent_errors(&s.messages, 5);
    let listed = |items: &[String], sep: &str, none: &str| {
        if items.is_empty() {
            none.to_string()
        } else {
            items.join(sep)
        }
    };
    format!(
        "Goal: {}\nStuck task `{}`: {}\nWhy it is stuck: {last}\nAttempts so far: {}\n\
         What was tried (latest tool calls):\n{}\nFiles that exist: {}\nRecent errors:\n{}\n\
         Allowed actions: {}{}",
        s.question.trim(),
        current.id,
        current.task,
        current.attempts,
        listed(&tried, "\n", "(nothing)"),
        listed(files, ", ", "(none)"),
        listed(&errors, "\n", "(none)"),
        actions
            .iter()
            .map(|a| a.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if why_not.is_empty() {
            String::new()
        } else {
            format!(" (not allowed: {})", why_not.join("; "))
        }
    )
}

/// Asks the model for an [`Escalation`] among `actions` only (the schema's enum is narrowed,
/// and a reply outside it is sent back); a decomposition must have 2 to `room` subtasks.
async fn choose(
    agent: &ResearchAgent,
    ctx: &Context,
    settings: &ResearchSettings,
    messages: Vec<Message>,
    actions: Vec<EscalationAction>,
    room: usize,
) -> Result<(Escalation, Usage), NodeError> {
    let mut schema = schema_for::<Escalation>();
    schema["properties"]["action"] = json!({
        "type": "string",
        "enum": actions.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
        "description": "decompose, zoom_out or give_up"
    });
    let opts = options("Escalation", settings).with_schema(schema);
    let call = structured_validated(
        agent.model().as_ref(),
        messages,
        opts,
        move |e: &Escalation| {
            if !actions.contains(&e.action) {
                return Err(format!(
                    "action `{}` is not allowed here",
                    e.action.as_str()
                ));
            }
            let n = e.subtasks.iter().filter(|t| !t.trim().is_empty()).count();
            if e.action == EscalationAction::Decompose && !(2..=room).contains(&n) {
                return Err(format!(
                    "decompose needs 2 to {room} non-empty subtasks, not {n}"
                ));
            }
            Ok(())
        },
    );
    let unusable = "the model's escalation choice was unusable";
    ask(ctx, ("escalation", unusable), settings, call).await
}

/// `give_up`: ends the run as a failure, with the summary of what was tried (kept in the state
/// as `gave_up` by the step before).
pub(crate) async fn give_up(
    _agent: &ResearchAgent,
    s: Arc<PlanState>,
    _ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    Err(NodeError::new(
        s.gave_up
            .clone()
            .unwrap_or_else(|| "gave up on the goal".to_string()),
    ))
}
