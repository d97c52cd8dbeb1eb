//! `escalate`: a todo reached its attempt cap. Zoom in (split it into sub-todos it then waits
//! for) when it can; otherwise zoom out (block it and let the rest of the plan go on).

use super::{failed_call, ledger, options, settings, system};
use crate::research::plan::one_line;
use crate::research::state::{Kind, PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{prompts, ResearchAgent, ResearchSettings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::{structured_validated, Message, Usage};
use std::sync::Arc;

/// The structured reply when splitting a todo (schema name `Split`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Split {
    /// Smaller todos that together cover the failed one.
    pub sub_tasks: Vec<SubTask>,
}

/// One sub-todo.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubTask {
    /// One sentence.
    pub task: String,
    /// Research or tool.
    pub kind: Kind,
}

/// A split that did not work out (recorded in the journal like a reply): why, and what its
/// requests used. Journals written before the usage was kept hold only the reason.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "RecordedFailure")]
struct SplitFailed {
    why: String,
    usage: Usage,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RecordedFailure {
    WithUsage { why: String, usage: Usage },
    ReasonOnly(String),
}

impl From<RecordedFailure> for SplitFailed {
    fn from(recorded: RecordedFailure) -> Self {
        match recorded {
            RecordedFailure::WithUsage { why, usage } => SplitFailed { why, usage },
            RecordedFailure::ReasonOnly(why) => SplitFailed {
                why,
                usage: Usage::default(),
            },
        }
    }
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let Some(current) = s.current().cloned() else {
        return Err(NodeError::new(
            "escalate found no current todo; was it removed from the plan?",
        ));
    };
    let last = current.failure_reason.clone().unwrap_or_default();
    let mut update = PlanStateUpdate::default().escalations(1);
    let split = match room_to_split(&s, &current, &settings) {
        Err(why) => Err(why),
        Ok(room) => {
            let user = format!(
                "Research question: {}\nFailed todo: {}\nWhy it failed: {last}\nSplit it into 2 to {room} sub-tasks.",
                s.question.trim(),
                current.task
            );
            let (split, usage) = ask_split(agent, &ctx, &settings, user, room).await?;
            if let Some(usage) = usage {
                update = update.usage(ledger(&ctx, "split", "escalate", usage, &settings).await?);
            }
            split
        }
    };
    let mut todo = current;
    todo.escalated = true;
    todo.error = None;
    let (mut changed, log) = match split {
        Ok(split) => zoom_in(&s, &mut todo, &split, &last),
        Err(why) => (Vec::new(), zoom_out(&mut todo, &why, &last)),
    };
    ctx.emit(
        "todo",
        serde_json::json!({"id": todo.id, "status": todo.status, "reason": todo.failure_reason}),
    );
    changed.insert(0, todo);
    Ok(update.plan(changed).log(vec![log]))
}

/// How many sub-todos `current` may be split into (the plan's room, at most a split's), or
/// why it cannot be split: only a top-level todo is split, and only once.
fn room_to_split(
    s: &PlanState,
    current: &Todo,
    settings: &ResearchSettings,
) -> Result<usize, String> {
    let limits = &settings.limits;
    let room = limits
        .max_todos
        .saturating_sub(s.plan.len())
        .min(limits.max_subtasks);
    if current.parent.is_some() {
        Err("it is a sub-todo already".to_string())
    } else if current.escalated {
        Err("it was split once already".to_string())
    } else if room < 2 {
        Err(format!(
            "no room for sub-todos (limits: {} todos, {} per split)",
            limits.max_todos, limits.max_subtasks
        ))
    } else {
        Ok(room)
    }
}

/// Zoom in: `todo` goes back to pending with no attempts, depending on the sub-todos of
/// `split`. Returns them and the log line.
fn zoom_in(s: &PlanState, todo: &mut Todo, split: &Split, last: &str) -> (Vec<Todo>, String) {
    let children = sub_todos(
        s,
        todo,
        split.sub_tasks.iter().map(|t| (t.task.as_str(), t.kind)),
    );
    let ids: Vec<String> = children.iter().map(|t| t.id.clone()).collect();
    todo.status = Status::Pending;
    todo.attempts = 0;
    todo.result = None;
    todo.dependencies.extend(ids.iter().cloned());
    todo.failure_reason = Some(format!(
        "escalated (zoom in): split into {} after: {last}",
        ids.join(", ")
    ));
    let log = format!("{} zoomed in: split into {}", todo.id, ids.join(", "));
    (children, log)
}

/// Zoom out: `todo` is blocked and the rest of the plan goes on without it. Returns the log
/// line.
fn zoom_out(todo: &mut Todo, why: &str, last: &str) -> String {
    todo.status = Status::Blocked;
    todo.failure_reason = Some(format!(
        "escalated (zoom out): blocked, the rest of the plan goes on without it ({why}); {last}"
    ));
    format!("{} zoomed out: {why}", todo.id)
}

/// Asks the model to split the todo into 2 to `room` sub-tasks (journaled, so a resume does
/// not ask again). A reply that never fits is a failed split (`Err(why)`), not a failed node;
/// with it comes the usage of the requests answered, if any.
async fn ask_split(
    agent: &ResearchAgent,
    ctx: &Context,
    settings: &ResearchSettings,
    user: String,
    room: usize,
) -> Result<(Result<Split, String>, Option<Usage>), NodeError> {
    let messages = vec![
        system(&settings.prompts.split, prompts::SPLIT),
        Message::user(user),
    ];
    let model = agent.model().clone();
    let opts = options("Split", settings);
    let result: Result<(Split, Usage), SplitFailed> = ctx
        .record("split", || async move {
            let reply = structured_validated(model.as_ref(), messages, opts, move |sp: &Split| {
                let n = sp
                    .sub_tasks
                    .iter()
                    .filter(|t| !t.task.trim().is_empty())
                    .count();
                if (2..=room).contains(&n) {
                    Ok(())
                } else {
                    Err(format!(
                        "give between 2 and {room} non-empty sub_tasks, not {n}"
                    ))
                }
            })
            .await;
            match reply {
                Ok(ok) => Ok(Ok(ok)),
                Err(e) if e.is_transient() => {
                    Err(failed_call(ctx, ("split", "splitting the todo failed"), settings, e).await)
                }
                // Splitting is the escalation; its failure leads to zooming out, not to
                // a failed run. Its attempts were answered and billed all the same.
                Err(e) => Ok(Err(SplitFailed {
                    why: format!("splitting failed: {e}"),
                    usage: e.usage().unwrap_or_default(),
                })),
            }
        })
        .await?;
    Ok(match result {
        Ok((sp, usage)) => (Ok(sp), Some(usage)),
        // No answered request (a refused one, or an older journal that kept no usage):
        // nothing to add.
        Err(failed) => (
            Err(failed.why),
            Some(failed.usage).filter(|u| u.requests > 0),
        ),
    })
}

/// The sub-todos of a split `todo`, one per non-empty task, with ids `{id}.{n}` not taken in
/// the plan yet; each is under `todo` and depends on what it depends on.
pub(super) fn sub_todos<'a>(
    s: &PlanState,
    todo: &Todo,
    tasks: impl IntoIterator<Item = (&'a str, Kind)>,
) -> Vec<Todo> {
    let mut children: Vec<Todo> = Vec::new();
    let tasks = tasks
        .into_iter()
        .filter(|(task, _)| !task.trim().is_empty());
    for (k, (task, kind)) in tasks.enumerate() {
        let mut n = k + 1;
        let mut id = format!("{}.{n}", todo.id);
        while s.plan.iter().any(|t| t.id == id) || children.iter().any(|c| c.id == id) {
            n += 1;
            id = format!("{}.{n}", todo.id);
        }
        let mut child = Todo::new(id, one_line(task), kind).depends_on(todo.dependencies.clone());
        child.parent = Some(todo.id.clone());
        children.push(child);
    }
    children
}
