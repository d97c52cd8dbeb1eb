//! `planning_mode`: a person reviews (and may edit) the plan before anything runs.

use super::settings;
use crate::research::plan::validate_plan;
use crate::research::state::{PlanState, PlanStateUpdate, Todo};
use crate::research::{apply_markdown, render, ResearchAgent};
use serde_json::Value;
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

/// Most answers read in one review before giving up: each invalid edit asks again.
const MAX_ROUNDS: usize = 20;

enum Review {
    Approve,
    Edited(Vec<Todo>),
}

/// An empty answer is not approval (the CLI refuses it before it gets here, for every graph):
/// a plan nobody approved must not run.
fn is_approval(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    matches!(
        text.trim().to_lowercase().as_str(),
        "y" | "yes" | "ok" | "approve" | "approved" | "lgtm" | "go" | "run"
    )
}

/// Reads a resume value: an approval, an edited Markdown plan, or a JSON list of todos (bare
/// or as `{"plan": [...]}`).
fn read(stored: &[Todo], answer: &Value) -> Result<Review, String> {
    let todos = match answer {
        Value::Null | Value::Bool(true) => return Ok(Review::Approve),
        Value::Bool(false) => {
            return Err(
                "the plan was not approved: answer `approve`, or give an edited plan".into(),
            )
        }
        Value::String(text) if is_approval(text) => return Ok(Review::Approve),
        Value::String(markdown) => {
            return apply_markdown(stored, markdown)
                .map(Review::Edited)
                .map_err(|e| e.to_string())
        }
        Value::Object(map) if map.contains_key("plan") => {
            map.get("plan").cloned().unwrap_or_default()
        }
        other => other.clone(),
    };
    let todos: Vec<Todo> = stategraph::state::from_json(todos)
        .map_err(|why| format!("the edited plan is not a list of todos: a plan {why}"))?;
    validate_plan(&todos).map_err(|p| {
        format!(
            "todo #{} (`{}`): {}",
            p.index + 1,
            todos.get(p.index).map(|t| t.id.as_str()).unwrap_or("?"),
            p.message
        )
    })?;
    Ok(Review::Edited(todos))
}

pub(crate) async fn run(
    _agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    if settings.yes {
        return Ok(PlanStateUpdate::default()
            .plan_approved(true)
            .log(vec!["plan approved (yes = true)".to_string()]));
    }
    let mut problem: Option<String> = None;
    for _ in 0..MAX_ROUNDS {
        let answer: Value = ctx
            .interrupt(serde_json::json!({
                "question": "Review the research plan. Answer `approve` to run it, or give the edited plan \
                             (the Markdown checklist, or a JSON list of todos).",
                "research_question": s.question,
                "markdown": render(&s.plan),
                "plan": s.plan,
                "problem": problem,
            }))
            .await?;
        match read(&s.plan, &answer) {
            Ok(Review::Approve) => {
                return Ok(PlanStateUpdate::default()
                    .plan_approved(true)
                    .log(vec![format!("plan approved ({} todos)", s.plan.len())]))
            }
            Ok(Review::Edited(todos)) => {
                return Ok(PlanStateUpdate::default()
                    .plan_approved(true)
                    .log(vec![format!(
                        "plan edited at review and approved ({} todos)",
                        todos.len()
                    )])
                    .overwrite_plan(todos))
            }
            Err(e) => problem = Some(format!("your edit was refused, the plan is unchanged: {e}")),
        }
    }
    Err(NodeError::new(format!(
        "the plan review got {MAX_ROUNDS} unusable answers; stopping"
    )))
}
