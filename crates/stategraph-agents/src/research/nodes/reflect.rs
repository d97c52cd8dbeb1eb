//! `reflect` (update_plan): the model reviews the current todo's result; the plan is updated.

use super::{ask, ledger, options, settings, system};
use crate::research::plan::one_line;
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{next_id, prompts, Limits, ResearchAgent, ResearchSettings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stategraph::graph::Command;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{schema_for, structured_validated, Message, Usage};
use std::sync::Arc;

/// The verdict on one todo.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskOutcome {
    /// The result accomplishes the task.
    Done,
    /// It does not; the todo is tried again, or escalated at its attempt cap.
    Failed,
}

/// The structured reply of `reflect` (schema name `PlanUpdate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanUpdate {
    /// The id of the todo reviewed (the schema allows exactly the current todo's id).
    pub completed_task_id: String,
    /// One or two sentences on what the result shows.
    pub task_outcome: String,
    /// Done or failed.
    pub status: TaskOutcome,
    /// Follow-up todos for gaps the result revealed (usually none).
    pub new_tasks: Vec<NewTask>,
}

/// A follow-up todo; its id is assigned by the agent, not the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NewTask {
    /// One sentence.
    pub task: String,
    /// Research or tool.
    pub kind: Kind,
    /// Ids of existing todos it needs first (the schema allows only existing ids).
    pub dependencies: Vec<String>,
}

/// The `PlanUpdate` JSON schema narrowed at run time: `completed_task_id` may only be
/// `current_id`, and each dependency of a new task only one of `existing_ids`.
///
/// ```
/// use stategraph_agents::research::plan_update_schema;
/// let schema = plan_update_schema("t2", &["t1".to_string(), "t2".to_string()]);
/// assert_eq!(schema["properties"]["completed_task_id"]["enum"], serde_json::json!(["t2"]));
/// ```
pub fn plan_update_schema(current_id: &str, existing_ids: &[String]) -> Value {
    let mut schema = schema_for::<PlanUpdate>();
    schema["properties"]["completed_task_id"]["enum"] = json!([current_id]);
    let ids = json!(existing_ids);
    // schemars files NewTask under $defs; fall back to an inline item schema.
    let deps = if schema
        .pointer("/$defs/NewTask/properties/dependencies")
        .is_some()
    {
        schema.pointer_mut("/$defs/NewTask/properties/dependencies/items")
    } else {
        schema.pointer_mut("/properties/new_tasks/items/properties/dependencies/items")
    };
    if let Some(items) = deps {
        items["enum"] = ids;
    }
    schema
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<Command<PlanState>, NodeError> {
    let settings = settings(&ctx)?;
    let limits = &settings.limits;
    let Some(current) = s.current().cloned() else {
        return Err(NodeError::new(
            "reflect found no current todo; was it removed from the plan?",
        ));
    };
    let mut update = PlanStateUpdate::default();
    let (outcome, reason, new_tasks) = match (&current.error, &current.result) {
        // A tool failure needs no model to judge it.
        (Some(error), _) => (TaskOutcome::Failed, error.clone(), Vec::new()),
        (None, None) => (
            TaskOutcome::Failed,
            "the execution produced no result".to_string(),
            Vec::new(),
        ),
        (None, Some(result)) => {
            let (reply, usage) = review(agent, &ctx, &settings, &s, &current, result).await?;
            update = update.usage(ledger(&ctx, "review", "reflect", usage, &settings).await?);
            (reply.status, one_line(&reply.task_outcome), reply.new_tasks)
        }
    };

    let mut todo = current.clone();
    let mut log = Vec::new();
    let mut changed = follow_ups(&s, &mut todo, &new_tasks, limits, &mut log);

    let mut goto = "execution_router";
    match outcome {
        TaskOutcome::Done => {
            todo.status = Status::Done;
            todo.failure_reason = None;
            log.push(format!("{} done: {reason}", todo.id));
        }
        TaskOutcome::Failed if todo.attempts < limits.max_attempts_per_todo => {
            todo.status = Status::Pending;
            todo.failure_reason = Some(format!(
                "attempt {} of {} failed: {reason}",
                todo.attempts, limits.max_attempts_per_todo
            ));
            log.push(format!("{} retry: {reason}", todo.id));
        }
        TaskOutcome::Failed => {
            todo.status = Status::Failed;
            todo.failure_reason =
                Some(format!("failed {} attempts; last: {reason}", todo.attempts));
            log.push(format!("{} reached its attempt cap: escalating", todo.id));
            goto = if super::tool_loop::uses_loop(&todo, &settings) {
                "escalate_tool"
            } else {
                "escalate"
            };
        }
    }
    ctx.emit(
        "todo",
        json!({"id": todo.id, "status": todo.status, "reason": todo.failure_reason}),
    );
    changed.insert(0, todo);
    Ok(Command::from_update(update.plan(changed).log(log)).goto(goto))
}

/// Asks the model to review `result`, the current todo's: done or failed, and follow-ups,
/// whose dependencies may only name todos of the plan.
async fn review(
    agent: &ResearchAgent,
    ctx: &Context,
    settings: &ResearchSettings,
    s: &PlanState,
    current: &Todo,
    result: &str,
) -> Result<(PlanUpdate, Usage), NodeError> {
    let ids: Vec<String> = s.plan.iter().map(|t| t.id.clone()).collect();
    let schema = plan_update_schema(&current.id, &ids);
    let messages = vec![
        system(&settings.prompts.reflect, prompts::REFLECT),
        Message::user(format!(
            "Research question: {}\nPlan:\n{}\n\nReviewed todo `{}`: {}\nResult:\n{result}",
            s.question.trim(),
            s.plan
                .iter()
                .map(|t| format!("- {} [{}]: {}", t.id, t.status.as_str(), t.task))
                .collect::<Vec<_>>()
                .join("\n"),
            current.id,
            current.task
        )),
    ];
    let opts = options("PlanUpdate", settings).with_schema(schema);
    let id = current.id.clone();
    let call = structured_validated(
        agent.model().as_ref(),
        messages,
        opts,
        move |u: &PlanUpdate| {
            if u.completed_task_id != id {
                return Err(format!("completed_task_id must be `{id}`"));
            }
            for t in &u.new_tasks {
                if let Some(d) = t.dependencies.iter().find(|d| !ids.contains(d)) {
                    return Err(format!(
                        "new task `{}` depends on `{d}`, which is not in the plan",
                        t.task
                    ));
                }
            }
            Ok(())
        },
    );
    let unusable = "the model's review of the result was unusable";
    ask(ctx, ("review", unusable), settings, call).await
}

/// The follow-up todos of `todo`, within the per-todo and total caps (counted on `todo`);
/// what they are, and how many were dropped, goes to `log`.
fn follow_ups(
    s: &PlanState,
    todo: &mut Todo,
    new_tasks: &[NewTask],
    limits: &Limits,
    log: &mut Vec<String>,
) -> Vec<Todo> {
    let room = limits
        .max_followups_per_todo
        .saturating_sub(todo.followups as usize)
        .min(limits.max_todos.saturating_sub(s.plan.len()));
    let mut all = s.plan.clone();
    let mut changed = Vec::new();
    for task in new_tasks
        .iter()
        .filter(|t| !t.task.trim().is_empty())
        .take(room)
    {
        let id = next_id(&all);
        let follow =
            Todo::new(id, one_line(&task.task), task.kind).depends_on(task.dependencies.clone());
        log.push(format!(
            "{} follow-up {}: {}",
            todo.id, follow.id, follow.task
        ));
        all.push(follow.clone());
        changed.push(follow);
        todo.followups += 1;
    }
    if new_tasks.len() > room {
        log.push(format!(
            "{} dropped {} follow-ups (limits)",
            todo.id,
            new_tasks.len() - room
        ));
    }
    changed
}
