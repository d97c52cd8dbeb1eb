//! One-todo edits (add, remove, move, status, dependencies), as `graph plan` applies them.
//!
//! Every edit returns a new plan or a [`PlanEditError`] naming the line, in the plan's Markdown
//! form ([`render`](super::plan_markdown::render)), of the todo at fault; the stored plan never
//! changes on error. The edited plan is checked by [`validate_plan`] as a whole.

use super::plan::{one_line, validate_plan};
use super::plan_markdown::{line_of_todo, PlanEditError};
use super::state::{Kind, Status, Todo};

/// Where [`PlanEdit::Move`] puts a todo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveTo {
    /// At this 1-based position (past the end means last).
    Position(usize),
    /// Just before the todo with this id.
    Before(String),
    /// Just after the todo with this id.
    After(String),
}

/// One change to a plan, as `graph plan THREAD add|rm|move|status|deps` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanEdit {
    /// Appends a pending todo; without an id, the next free `tN` is used.
    Add {
        /// Its id, or `None` for a generated one.
        id: Option<String>,
        /// What to do.
        task: String,
        /// Research or tool.
        kind: Kind,
        /// Ids it waits for.
        dependencies: Vec<String>,
    },
    /// Removes a todo. Refused while another todo depends on it.
    Remove {
        /// The todo.
        id: String,
    },
    /// Moves a todo (plan order decides which ready todo runs first).
    Move {
        /// The todo.
        id: String,
        /// Where to.
        to: MoveTo,
    },
    /// Sets a todo's status. Back to `pending` also clears its attempts and failure, so it is
    /// tried afresh; `blocked` and `failed` keep `reason`.
    Status {
        /// The todo.
        id: String,
        /// The new status.
        status: Status,
        /// Why (kept as the failure reason).
        reason: Option<String>,
    },
    /// Replaces a todo's dependencies.
    Dependencies {
        /// The todo.
        id: String,
        /// The ids it waits for now.
        dependencies: Vec<String>,
    },
}

/// The next free id of the form `t<N>` (one more than the largest `N` in use).
///
/// ```
/// use stategraph_agents::research::{next_id, Kind, Todo};
/// let plan = vec![Todo::new("t1", "a", Kind::Research), Todo::new("t7", "b", Kind::Tool)];
/// assert_eq!(next_id(&plan), "t8");
/// ```
pub fn next_id(plan: &[Todo]) -> String {
    let top = plan
        .iter()
        .filter_map(|t| t.id.strip_prefix('t').and_then(|n| n.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    let mut n = top + 1;
    // Ids like `t3` are unique by construction; the loop only guards hand-made oddities.
    while plan.iter().any(|t| t.id == format!("t{n}")) {
        n += 1;
    }
    format!("t{n}")
}

fn position(plan: &[Todo], id: &str) -> Result<usize, PlanEditError> {
    plan.iter().position(|t| t.id == id).ok_or_else(|| {
        PlanEditError::general(format!(
            "no todo `{id}` in the plan (ids: {})",
            plan.iter()
                .map(|t| t.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// Applies one edit, returning the new plan, or the problem with the line (in the new plan's
/// Markdown) of the todo at fault. The new plan is validated as a whole.
///
/// ```
/// use stategraph_agents::research::{apply_edit, Kind, PlanEdit, Todo};
/// let plan = vec![Todo::new("t1", "a", Kind::Research), Todo::new("t2", "b", Kind::Research).depends_on(["t1"])];
/// let refused = apply_edit(&plan, PlanEdit::Remove { id: "t1".into() }).unwrap_err();
/// assert!(refused.message.contains("`t2` depends on it"), "{refused}");
/// let plan = apply_edit(&plan, PlanEdit::Remove { id: "t2".into() }).unwrap();
/// assert_eq!(plan.len(), 1);
/// ```
pub fn apply_edit(plan: &[Todo], edit: PlanEdit) -> Result<Vec<Todo>, PlanEditError> {
    apply_edit_showing(plan, edit).map_err(|(e, _)| e)
}

/// Like [`apply_edit`], and on error also the plan whose Markdown the error's line is in (the
/// plan the edit would have produced, or the plan as it was).
pub(crate) fn apply_edit_showing(
    plan: &[Todo],
    edit: PlanEdit,
) -> Result<Vec<Todo>, (PlanEditError, Vec<Todo>)> {
    let mut next: Vec<Todo> = plan.to_vec();
    let edited = match edit {
        PlanEdit::Add {
            id,
            task,
            kind,
            dependencies,
        } => {
            let id = id.unwrap_or_else(|| next_id(plan));
            let task = one_line(&task);
            next.push(Todo::new(id, task, kind).depends_on(dependencies));
            Ok(())
        }
        PlanEdit::Remove { id } => remove(&mut next, &id),
        PlanEdit::Move { id, to } => move_todo(&mut next, &id, to),
        PlanEdit::Status { id, status, reason } => {
            position(&next, &id).map(|at| set_status(&mut next[at], status, reason))
        }
        PlanEdit::Dependencies { id, dependencies } => {
            position(&next, &id).map(|at| next[at].dependencies = dependencies)
        }
    };
    // Errors before the plan changed name no line, or a line of `plan` as it was.
    edited.map_err(|e| (e, plan.to_vec()))?;
    if let Err(p) = validate_plan(&next) {
        return Err((
            PlanEditError::new(line_of_todo(&next, p.index), p.message),
            next,
        ));
    }
    Ok(next)
}

/// Removes todo `id` from `plan`, unless another todo depends on it.
fn remove(plan: &mut Vec<Todo>, id: &str) -> Result<(), PlanEditError> {
    let at = position(plan, id)?;
    if let Some(user) = plan.iter().find(|t| t.dependencies.iter().any(|d| d == id)) {
        return Err(PlanEditError::new(
            line_of_todo(plan, at),
            format!(
                "cannot remove `{id}`: `{}` depends on it (remove that dependency first)",
                user.id
            ),
        ));
    }
    plan.remove(at);
    Ok(())
}

/// Moves todo `id` to `to` in `plan`.
fn move_todo(plan: &mut Vec<Todo>, id: &str, to: MoveTo) -> Result<(), PlanEditError> {
    let at = position(plan, id)?;
    let todo = plan.remove(at);
    let dest = match to {
        MoveTo::Position(p) => p.saturating_sub(1).min(plan.len()),
        MoveTo::Before(other) => position(plan, &other)?,
        MoveTo::After(other) => position(plan, &other)? + 1,
    };
    plan.insert(dest, todo);
    Ok(())
}

/// Sets `todo`'s status: back to pending it is tried afresh; blocked or failed keeps a reason.
fn set_status(todo: &mut Todo, status: Status, reason: Option<String>) {
    todo.status = status;
    match status {
        Status::Pending => {
            todo.attempts = 0;
            todo.failure_reason = None;
            todo.error = None;
        }
        Status::Blocked | Status::Failed => {
            todo.failure_reason =
                Some(reason.unwrap_or_else(|| format!("marked {} by hand", status.as_str())));
        }
        Status::Done | Status::InProgress => {
            if reason.is_some() {
                todo.failure_reason = reason;
            }
        }
    }
}
