//! `execution_router`: blocks what can no longer run and picks the next todo.
//!
//! The next todo is the first, in plan order, that is pending (or left in progress) and whose
//! dependencies are all done. A todo with a failed or blocked (or missing) dependency is blocked
//! with the reason; a split todo whose sub-todo failed is given up (`failed`), keeping its
//! earlier reason too. The router after this node only reads `current_task_id`.

use super::settle::Settled;
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{ResearchAgent, ResearchSettings};
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

fn runnable(status: Status) -> bool {
    matches!(status, Status::Pending | Status::InProgress)
}

/// Why `todo` can never run, judging by its dependencies in `plan`.
fn blocker(plan: &[Todo], todo: &Todo) -> Option<(Status, String)> {
    for dep in &todo.dependencies {
        let Some(d) = plan.iter().find(|t| &t.id == dep) else {
            return Some((
                Status::Blocked,
                format!("blocked: dependency `{dep}` is not in the plan"),
            ));
        };
        if matches!(d.status, Status::Blocked | Status::Failed)
            && !super::settle::waits_for_children(plan, d)
        {
            let why = d
                .failure_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into());
            if d.parent.as_deref() == Some(todo.id.as_str()) {
                let before = todo.failure_reason.clone().unwrap_or_default();
                return Some((
                    Status::Failed,
                    format!(
                        "gave up: escalation failed, sub-todo `{}` is {} ({why}); before that: {before}",
                        d.id,
                        d.status.as_str()
                    ),
                ));
            }
            return Some((
                Status::Blocked,
                format!(
                    "blocked: dependency `{}` is {} ({why})",
                    d.id,
                    d.status.as_str()
                ),
            ));
        }
    }
    None
}

/// The todos that change status, and the next todo to run.
pub(crate) fn decide(plan: &[Todo]) -> (Vec<Todo>, Option<String>) {
    let mut plan = plan.to_vec();
    let mut changed: Vec<usize> = Vec::new();
    // Blocks propagate along chains; each pass settles at least one todo or stops, so this
    // runs at most plan.len() + 1 times.
    loop {
        let mut any = false;
        for i in 0..plan.len() {
            if !runnable(plan[i].status) {
                continue;
            }
            if let Some((status, reason)) = blocker(&plan, &plan[i]) {
                plan[i].status = status;
                plan[i].failure_reason = Some(reason);
                changed.push(i);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let done = |id: &String| plan.iter().any(|t| &t.id == id && t.status == Status::Done);
    let next = plan
        .iter()
        .find(|t| runnable(t.status) && t.dependencies.iter().all(done))
        .map(|t| t.id.clone());
    if next.is_none() {
        // Whatever is still pending waits on something that will never finish (only possible
        // after a hand edit); settle it so the run ends with a reason on every todo.
        for (i, todo) in plan.iter_mut().enumerate() {
            if runnable(todo.status) {
                todo.status = Status::Blocked;
                todo.failure_reason =
                    Some("blocked: its dependencies can never all be done".into());
                changed.push(i);
            }
        }
    }
    changed.sort_unstable();
    changed.dedup();
    (changed.into_iter().map(|i| plan[i].clone()).collect(), next)
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = super::settings(&ctx)?;
    let settled = if settings.uses_tool_loop() {
        super::settle::settle(agent, &s, &settings, &ctx).await?
    } else {
        Settled {
            plan: s.plan.clone(),
            ..Settled::default()
        }
    };
    let (changed, next) = decide(&settled.plan);
    let mut plan = settled.plan.clone();
    for todo in &changed {
        if let Some(slot) = plan.iter_mut().find(|t| t.id == todo.id) {
            *slot = todo.clone();
        }
    }
    let mut log = settled.log.clone();
    log.extend(changed.iter().map(|t| {
        format!(
            "{} {}: {}",
            t.id,
            t.status.as_str(),
            t.failure_reason.as_deref().unwrap_or("")
        )
    }));
    let tool_loop = settings.uses_tool_loop();
    let mut update = PlanStateUpdate::default();
    let mut verifications = settled.verifications.clone();
    if let (None, true, Some(command)) = (&next, tool_loop, &settings.limits.verify_command) {
        let verified = s.verifications.iter().any(|v| v.starts_with("goal:"));
        if !verified && plan.iter().any(|t| t.status == Status::Done) {
            verifications.push(verify_goal(agent, &settings, &ctx, command).await?);
        }
    }
    let nothing_done = !plan.iter().any(|t| t.status == Status::Done);
    if next.is_none() && tool_loop && nothing_done && plan.iter().any(|t| t.kind == Kind::Tool) {
        update = update.gave_up(Some(gave_up(&s, &plan)));
        log.push("nothing left to run and nothing done: giving up".to_string());
    } else {
        match &next {
            Some(id) => log.push(format!("next: {id}")),
            None => log.push("nothing left to run: finalize".to_string()),
        }
    }
    for todo in &changed {
        ctx.emit("todo", serde_json::json!({"id": todo.id, "status": todo.status, "reason": todo.failure_reason}));
    }
    update = update.current_task_id(next).log(log);
    if s.tool_loop != tool_loop {
        update = update.tool_loop(tool_loop);
    }
    if !verifications.is_empty() {
        update = update.verifications(verifications);
    }
    if settled.removed {
        update = update.overwrite_plan(plan);
    } else {
        let ids: Vec<&String> = settled
            .changed
            .iter()
            .chain(changed.iter().map(|t| &t.id))
            .collect();
        let written: Vec<Todo> = plan.into_iter().filter(|t| ids.contains(&&t.id)).collect();
        if !written.is_empty() {
            update = update.plan(written);
        }
    }
    Ok(update)
}

/// The goal's own check before the report, journaled like every command: its verification
/// line, with the last lines of its output.
async fn verify_goal(
    agent: &ResearchAgent,
    settings: &ResearchSettings,
    ctx: &Context,
    command: &str,
) -> Result<String, NodeError> {
    let (passed, output) = super::settle::verify(agent, settings, ctx, "goal", command).await?;
    let tail: String = output
        .lines()
        .rev()
        .take(5)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    Ok(format!(
        "goal: `{command}` {}: {tail}",
        if passed { "passed" } else { "failed" }
    ))
}

/// Why a tool-using run gives up when nothing of its plan could be done: each todo and what
/// stopped it.
fn gave_up(s: &PlanState, plan: &[Todo]) -> String {
    let tried: Vec<String> = plan
        .iter()
        .map(|t| {
            format!(
                "{} ({}): {}",
                t.id,
                t.status.as_str(),
                t.failure_reason.as_deref().unwrap_or("not run")
            )
        })
        .collect();
    format!(
        "gave up on the goal \"{}\": nothing of the plan could be completed. Tried: {}",
        s.question.trim(),
        tried.join("; ")
    )
}
