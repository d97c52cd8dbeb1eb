//! `TaskPlan` replies for the task-tree tests: a decomposition as the model would write it.
//!
//! ```ignore
//! let reply = task_plan("app.md", &[("fetch", "simple", &[]), ("parse", "simple", &["fetch.md"])]);
//! ```
#![allow(dead_code)]

use serde_json::{json, Value};

/// A child as `(name, type, dependents)`.
pub type Child<'a> = (&'a str, &'a str, &'a [&'a str]);

/// A `TaskPlan` for `task` with these children; each child is titled `Title {name}` and
/// summarised `Summary of {name}.`.
pub fn task_plan(task: &str, children: &[Child<'_>]) -> Value {
    json!({
        "analysis": format!("How {task} splits."),
        "children": children.iter().map(|(name, kind, deps)| json!({
            "name": name, "title": format!("Title {name}"), "type": kind,
            "summary": format!("Summary of {name}."), "dependents": deps,
        })).collect::<Vec<_>>(),
    })
}
