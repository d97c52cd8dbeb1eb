//! Deciding for a todo that was decomposed (escalation, zoom in) once its sub-todos settle:
//!
//! - all sub-todos done: the todo is done, after `limits.verify_command` passes when one is set;
//! - most done and no recent errors: the verification command decides (without one, the todo
//!   is re-planned);
//! - otherwise (all or most blocked, or the verification failed): zoom out to it: its
//!   sub-todos are cleared from the plan and it is tried again, its next attempt told what
//!   exists (files written, recent errors, the verification's output).

use super::tool_loop::recent_errors;
use crate::research::state::{PlanState, Status, Todo};
use crate::research::{ResearchAgent, ResearchSettings};
use serde_json::json;
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::ToolCall;

/// What settling changed.
#[derive(Default)]
pub(crate) struct Settled {
    /// The plan after settling (sub-todos cleared where a parent was re-planned).
    pub plan: Vec<Todo>,
    /// True when sub-todos were removed, so the plan must be overwritten, not merged.
    pub removed: bool,
    /// Todos whose status changed.
    pub changed: Vec<String>,
    /// Log lines.
    pub log: Vec<String>,
    /// Verification lines.
    pub verifications: Vec<String>,
}

/// True when `todo` is blocked only while its sub-todos run (dependents wait for it).
pub(crate) fn waits_for_children(plan: &[Todo], todo: &Todo) -> bool {
    todo.status == Status::Blocked
        && plan.iter().any(|c| {
            c.parent.as_deref() == Some(todo.id.as_str())
                && matches!(c.status, Status::Pending | Status::InProgress)
        })
}

fn decomposed_and_settled(plan: &[Todo], todo: &Todo) -> bool {
    if todo.status != Status::Blocked || !todo.escalated {
        return false;
    }
    let mut children = plan
        .iter()
        .filter(|c| c.parent.as_deref() == Some(todo.id.as_str()))
        .peekable();
    children.peek().is_some() && children.all(|c| c.status.is_settled())
}

pub(crate) async fn verify(
    agent: &ResearchAgent,
    settings: &ResearchSettings,
    ctx: &Context,
    parent: &str,
    command: &str,
) -> Result<(bool, String), NodeError> {
    let node = agent.tool_node(settings).await?;
    let call = ToolCall {
        id: format!("verify-{parent}"),
        name: "run_command".into(),
        arguments: json!({"command": command}),
    };
    let tools = node.tools().clone();
    let result = ctx
        .record(&format!("verify:{parent}"), || async move {
            Ok::<_, NodeError>(tools.run(&call).await)
        })
        .await?;
    let passed = !result.is_error && result.content.starts_with("exit code: 0\n");
    Ok((passed, result.content))
}

/// Settles every decomposed todo whose sub-todos have all settled.
pub(crate) async fn settle(
    agent: &ResearchAgent,
    s: &PlanState,
    settings: &ResearchSettings,
    ctx: &Context,
) -> Result<Settled, NodeError> {
    let mut out = Settled {
        plan: s.plan.clone(),
        ..Settled::default()
    };
    let parents: Vec<Todo> = s
        .plan
        .iter()
        .filter(|t| decomposed_and_settled(&s.plan, t))
        .cloned()
        .collect();
    for parent in parents {
        let children: Vec<Todo> = out
            .plan
            .iter()
            .filter(|c| c.parent.as_deref() == Some(parent.id.as_str()))
            .cloned()
            .collect();
        let errors = recent_errors(&s.messages, 3);
        let verdict = judge(agent, settings, ctx, &parent, &children, &errors, &mut out).await?;
        if out.plan.iter().any(|t| t.id == parent.id) {
            apply(&mut out, &parent, &children, verdict);
            out.changed.push(parent.id.clone());
        }
    }
    Ok(out)
}

/// Whether `parent` is done through its sub-todos (`Ok(how)`) or must be re-planned
/// (`Err(why)`); a verification run is also recorded in `out.verifications`.
async fn judge(
    agent: &ResearchAgent,
    settings: &ResearchSettings,
    ctx: &Context,
    parent: &Todo,
    children: &[Todo],
    errors: &[String],
    out: &mut Settled,
) -> Result<Result<String, String>, NodeError> {
    let done = children.iter().filter(|c| c.status == Status::Done).count();
    let all_done = done == children.len();
    let most_done = done * 2 > children.len() && errors.is_empty();
    Ok(
        match (&settings.limits.verify_command, all_done, most_done) {
            (Some(command), true, _) | (Some(command), _, true) => {
                let (passed, output) = verify(agent, settings, ctx, &parent.id, command).await?;
                let tail: String = output
                    .chars()
                    .rev()
                    .take(600)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                out.verifications.push(format!(
                    "{}: `{command}` {} ({done} of {} sub-todos done)",
                    parent.id,
                    if passed { "passed" } else { "failed" },
                    children.len()
                ));
                if passed {
                    Ok(format!("verified: `{command}` passed"))
                } else {
                    Err(format!("verification `{command}` failed: {tail}"))
                }
            }
            (None, true, _) => Ok("all sub-todos done".to_string()),
            _ => Err(format!(
                "{} of {} sub-todos blocked ({}){}",
                children.len() - done,
                children.len(),
                children
                    .iter()
                    .filter(|c| c.status != Status::Done)
                    .map(|c| format!(
                        "{}: {}",
                        c.id,
                        c.failure_reason.as_deref().unwrap_or("no reason")
                    ))
                    .collect::<Vec<_>>()
                    .join("; "),
                if errors.is_empty() {
                    String::new()
                } else {
                    format!("; recent errors: {}", errors.join(" | "))
                }
            )),
        },
    )
}

/// Marks `parent` done with its sub-todos' results, or zooms out to it: its sub-todos are
/// cleared from the plan and it is tried again, told why.
fn apply(out: &mut Settled, parent: &Todo, children: &[Todo], verdict: Result<String, String>) {
    let Some(slot) = out.plan.iter_mut().find(|t| t.id == parent.id) else {
        return;
    };
    match verdict {
        Ok(how) => {
            slot.status = Status::Done;
            slot.result = Some(format!(
                "done through its sub-todos ({how}):\n{}",
                children
                    .iter()
                    .filter_map(|c| c.result.as_ref().map(|r| format!("- {}: {r}", c.task)))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
            out.log.push(format!("{} done: {how}", parent.id));
        }
        Err(why) => {
            // Zoom out to the parent: clear its sub-todos and try it again with what exists.
            let ids: Vec<String> = children.iter().map(|c| c.id.clone()).collect();
            slot.status = Status::Pending;
            slot.rounds = 0;
            slot.failure_reason = Some(format!(
                "re-planning (zoom out) after its sub-todos {} were cleared: {why}; before: {}",
                ids.join(", "),
                parent.failure_reason.as_deref().unwrap_or("")
            ));
            out.plan.retain(|t| !ids.contains(&t.id));
            out.removed = true;
            out.log.push(format!(
                "{} zoomed out: cleared {} and re-planning: {why}",
                parent.id,
                ids.join(", ")
            ));
        }
    }
}
