//! The research agent's [`PlanEditor`]: what `graph plan THREAD` reads and changes, over the
//! JSON of a [`PlanState`](super::PlanState).
//!
//! Every edit is validated as a whole plan ([`validate_plan`](super::validate_plan)) and
//! returned as an explicit overwrite of `plan`, so a removed todo is really gone; results,
//! sources and attempts of the todos that stay are kept.

use super::plan_edit::{apply_edit_showing, next_id, MoveTo, PlanEdit};
use super::plan_markdown::{apply_markdown, render, PlanEditError};
use super::state::{Kind, PlanStateUpdate, Status, Todo};
use serde_json::Value;
use stategraph_registry::{DependencyChange, PlanEditor, PlanError, PlanOp, PlanPosition};

/// Edits the plan of a research thread.
///
/// ```
/// use serde_json::json;
/// use stategraph_agents::research::ResearchPlanEditor;
/// use stategraph_registry::{PlanEditor, PlanOp};
/// let state = json!({"plan": [
///     {"id": "t1", "task": "find X", "kind": "research", "status": "pending", "dependencies": []},
///     {"id": "t2", "task": "find Y", "kind": "research", "status": "pending", "dependencies": ["t1"]}
/// ]});
/// let editor = ResearchPlanEditor;
/// assert!(editor.render(&state).unwrap().contains("- [ ] t2 (research): find Y (after: t1)"));
/// let update = editor.apply(&state, PlanOp::Remove { id: "t2".into() }).unwrap();
/// assert_eq!(update["plan"]["$overwrite"].as_array().unwrap().len(), 1);
/// let refused = editor.apply(&state, PlanOp::Remove { id: "t1".into() }).unwrap_err();
/// assert!(refused.message.contains("`t2` depends on it"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ResearchPlanEditor;

fn stored(state: &Value) -> Result<Vec<Todo>, PlanError> {
    match state.get("plan") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(plan) => serde_json::from_value(plan.clone()).map_err(|e| {
            PlanError::general(format!("the stored plan cannot be read as todos: {e}"))
        }),
    }
}

fn update(plan: Vec<Todo>) -> Result<Value, PlanError> {
    serde_json::to_value(PlanStateUpdate::default().overwrite_plan(plan))
        .map_err(|e| PlanError::general(format!("the edited plan cannot be stored: {e}")))
}

/// The error, with the text of its line in `markdown`.
fn shown(e: PlanEditError, markdown: &str) -> PlanError {
    match e.line {
        Some(n) => {
            let text = markdown.lines().nth(n.saturating_sub(1)).unwrap_or("");
            PlanError::on_line(n, text, e.message)
        }
        None => PlanError::general(e.message),
    }
}

fn edit(plan: &[Todo], change: PlanEdit) -> Result<Vec<Todo>, PlanError> {
    apply_edit_showing(plan, change).map_err(|(e, shown_plan)| shown(e, &render(&shown_plan)))
}

fn move_to(at: PlanPosition) -> MoveTo {
    match at {
        PlanPosition::Before(id) => MoveTo::Before(id),
        PlanPosition::After(id) => MoveTo::After(id),
        PlanPosition::At(n) => MoveTo::Position(n),
    }
}

fn unknown_id(plan: &[Todo], id: &str) -> PlanError {
    let ids: Vec<&str> = plan.iter().map(|t| t.id.as_str()).collect();
    PlanError::general(format!(
        "no todo `{id}` in the plan (ids: {})",
        ids.join(", ")
    ))
}

impl PlanEditor for ResearchPlanEditor {
    fn plan(&self, state: &Value) -> Result<Value, PlanError> {
        Ok(state
            .get("plan")
            .cloned()
            .unwrap_or(Value::Array(Vec::new())))
    }

    fn render(&self, state: &Value) -> Result<String, PlanError> {
        Ok(render(&stored(state)?))
    }

    fn apply_markdown(&self, state: &Value, markdown: &str) -> Result<Value, PlanError> {
        let plan = apply_markdown(&stored(state)?, markdown).map_err(|e| shown(e, markdown))?;
        update(plan)
    }

    fn apply(&self, state: &Value, op: PlanOp) -> Result<Value, PlanError> {
        let plan = stored(state)?;
        let next = match op {
            PlanOp::Add {
                id,
                task,
                kind,
                dependencies,
                at,
            } => add(&plan, id, task, kind, dependencies, at)?,
            PlanOp::Remove { id } => edit(&plan, PlanEdit::Remove { id })?,
            PlanOp::Move { id, to } => edit(
                &plan,
                PlanEdit::Move {
                    id,
                    to: move_to(to),
                },
            )?,
            PlanOp::Status { id, status, reason } => {
                let status = Status::parse(&status).ok_or_else(|| {
                    PlanError::general(format!(
                        "unknown status `{status}`: use pending, in_progress, done, blocked or failed"
                    ))
                })?;
                edit(&plan, PlanEdit::Status { id, status, reason })?
            }
            PlanOp::Dependencies { id, change } => change_dependencies(&plan, id, change)?,
        };
        update(next)
    }
}

/// Adds a todo (a research todo unless `kind` says otherwise) at the end of the plan, then
/// moves it to `at` when given.
fn add(
    plan: &[Todo],
    id: Option<String>,
    task: String,
    kind: Option<String>,
    dependencies: Vec<String>,
    at: Option<PlanPosition>,
) -> Result<Vec<Todo>, PlanError> {
    let kind = match kind {
        None => Kind::Research,
        Some(k) => Kind::parse(&k).ok_or_else(|| {
            PlanError::general(format!("unknown kind `{k}`: use research or tool"))
        })?,
    };
    let id = id.unwrap_or_else(|| next_id(plan));
    let added = edit(
        plan,
        PlanEdit::Add {
            id: Some(id.clone()),
            task,
            kind,
            dependencies,
        },
    )?;
    match at {
        Some(at) => edit(
            &added,
            PlanEdit::Move {
                id,
                to: move_to(at),
            },
        ),
        None => Ok(added),
    }
}

/// Sets, adds to or takes from the dependencies of todo `id`.
fn change_dependencies(
    plan: &[Todo],
    id: String,
    change: DependencyChange,
) -> Result<Vec<Todo>, PlanError> {
    let todo = plan
        .iter()
        .find(|t| t.id == id)
        .ok_or_else(|| unknown_id(plan, &id))?;
    let mut dependencies = todo.dependencies.clone();
    match change {
        DependencyChange::Set(ids) => dependencies = ids,
        DependencyChange::Add(ids) => {
            for dep in ids {
                if !dependencies.contains(&dep) {
                    dependencies.push(dep);
                }
            }
        }
        DependencyChange::Remove(ids) => dependencies.retain(|d| !ids.contains(d)),
    }
    edit(plan, PlanEdit::Dependencies { id, dependencies })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> Value {
        json!({"plan": [
            {"id": "t1", "task": "a", "kind": "research", "status": "done", "result": "found [1]", "dependencies": []},
            {"id": "t2", "task": "b", "kind": "research", "status": "pending", "dependencies": []},
            {"id": "t3", "task": "c", "kind": "tool", "status": "pending", "dependencies": ["t1"]}
        ]})
    }

    fn ids(update: &Value) -> Vec<String> {
        update["plan"]["$overwrite"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn add_places_the_todo_and_keeps_results() {
        let e = ResearchPlanEditor;
        let op = PlanOp::Add {
            id: None,
            task: "d".into(),
            kind: Some("tool".into()),
            dependencies: vec!["t1".into()],
            at: Some(PlanPosition::After("t1".into())),
        };
        let u = e.apply(&state(), op).unwrap();
        assert_eq!(ids(&u), ["t1", "t4", "t2", "t3"]);
        assert_eq!(u["plan"]["$overwrite"][0]["result"], "found [1]");
    }

    #[test]
    fn a_cycle_names_the_line_and_its_text() {
        let e = ResearchPlanEditor;
        let op = PlanOp::Dependencies {
            id: "t1".into(),
            change: DependencyChange::Add(vec!["t3".into()]),
        };
        let err = e.apply(&state(), op).unwrap_err();
        assert!(err.message.contains("cycle"), "{err}");
        assert!(err.line.is_some());
        assert!(err.text.unwrap().contains("t1 (research): a (after: t3)"));
    }

    #[test]
    fn unknown_words_are_refused() {
        let e = ResearchPlanEditor;
        let op = PlanOp::Status {
            id: "t2".into(),
            status: "finished".into(),
            reason: None,
        };
        assert!(e
            .apply(&state(), op)
            .unwrap_err()
            .message
            .contains("unknown status"));
        let op = PlanOp::Dependencies {
            id: "t9".into(),
            change: DependencyChange::Set(vec![]),
        };
        assert!(e
            .apply(&state(), op)
            .unwrap_err()
            .message
            .contains("no todo `t9`"));
    }
}
