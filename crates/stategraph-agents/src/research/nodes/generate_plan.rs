//! `generate_plan`: the model writes the plan as a structured `Plan`.

use super::{ask, ledger, options, settings, system};
use crate::research::plan::{one_line, validate_plan};
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Todo};
use crate::research::{prompts, render, ResearchAgent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{structured_validated, Message, Usage};
use std::sync::Arc;

/// The structured reply of `generate_plan` (schema name `Plan`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    /// The todos, in the order they should run when several are ready.
    pub todos: Vec<PlannedTodo>,
}

/// One todo as the model plans it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedTodo {
    /// A short unique id, e.g. `t1`.
    pub id: String,
    /// One sentence saying what to find out or do.
    pub task: String,
    /// `research` (search and read) or `tool` (fetch a URL named in the task).
    pub kind: Kind,
    /// Ids of the todos this one needs first.
    pub dependencies: Vec<String>,
}

impl Plan {
    /// The plan as pending todos.
    pub fn into_todos(self) -> Vec<Todo> {
        self.todos
            .into_iter()
            .map(|t| {
                Todo::new(t.id.trim(), one_line(&t.task), t.kind)
                    .depends_on(t.dependencies.iter().map(|d| d.trim().to_string()))
            })
            .collect()
    }
}

/// Why a plan cannot be used, in words the model can act on.
fn check(plan: &Plan, max_todos: usize) -> Result<(), String> {
    if plan.todos.is_empty() {
        return Err("the plan has no todos; give at least one".into());
    }
    if plan.todos.len() > max_todos {
        return Err(format!(
            "the plan has {} todos but at most {max_todos} are allowed; merge or drop some",
            plan.todos.len()
        ));
    }
    validate_plan(&plan.clone().into_todos())
        .map_err(|p| format!("todo #{}: {}", p.index + 1, p.message))
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let question = s.question.trim().to_string();
    if question.is_empty() {
        return Err(NodeError::new(
            "the research has no question: give one as the run's input (the `question` field)",
        ));
    }
    if !s.plan.is_empty() {
        // A plan given with the input is used as is; a broken one is refused, not repaired.
        validate_plan(&s.plan).map_err(|p| {
            NodeError::new(format!(
                "the plan given as input is invalid: todo #{}: {}",
                p.index + 1,
                p.message
            ))
        })?;
        return Ok(PlanStateUpdate::default()
            .log(vec![format!("plan given as input: {} todos", s.plan.len())]));
    }
    let max = settings.limits.max_todos;
    let recalled = crate::research::memory::recall(&ctx, &settings.memory, &question).await?;
    let messages = vec![
        system(&settings.prompts.plan, prompts::PLAN),
        Message::user(format!(
            "{recalled}Question: {question}\n\nWrite a plan of at most {max} todos."
        )),
    ];
    let opts = options("Plan", &settings);
    let call = structured_validated(agent.model().as_ref(), messages, opts, move |p: &Plan| {
        check(p, max)
    });
    let unusable = "the model did not write a usable plan";
    let (plan, usage): (Plan, Usage) = ask(&ctx, ("plan", unusable), &settings, call).await?;
    let usage = ledger(&ctx, "plan", "generate_plan", usage, &settings).await?;
    crate::research::memory::remember(&ctx, &settings.memory, &question).await?;
    let todos = plan.into_todos();
    ctx.emit("plan", serde_json::json!({ "markdown": render(&todos) }));
    Ok(PlanStateUpdate::default()
        .log(vec![format!("plan: {} todos", todos.len())])
        .plan(todos)
        .usage(usage))
}
