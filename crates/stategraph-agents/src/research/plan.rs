//! What makes a plan sound: valid unique ids, known dependencies, no cycles
//! ([`validate_plan`]), and a task on one line ([`one_line`]). Every way a plan is made or
//! changed goes through these: the planner's nodes, a one-todo edit (`plan_edit.rs`) and a
//! plan a person edited as Markdown (`plan_markdown.rs`), so both of those depend on this file
//! and it on neither.

use super::state::Todo;
use petgraph::graph::DiGraph;
use std::collections::{HashMap, HashSet};

/// What is wrong with a plan, and which todo (by position) shows it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanProblem {
    /// The position (0-based) of the todo at fault.
    pub index: usize,
    /// What is wrong.
    pub message: String,
}

/// True for a usable todo id: non-empty, at most 40 of letters, digits, `.`, `_`, `-`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 40
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks a plan: ids valid and unique, tasks not empty, every dependency an existing other
/// todo, and no cycle among dependencies (found with petgraph, reported with its members).
///
/// ```
/// use stategraph_agents::research::{validate_plan, Kind, Todo};
/// let plan = vec![
///     Todo::new("a", "first", Kind::Research).depends_on(["b"]),
///     Todo::new("b", "second", Kind::Research).depends_on(["a"]),
/// ];
/// let problem = validate_plan(&plan).unwrap_err();
/// assert!(problem.message.contains("cycle"), "{problem}");
/// ```
pub fn validate_plan(plan: &[Todo]) -> Result<(), PlanProblem> {
    let ids = check_todos(plan)?;
    let graph = dependency_graph(plan, &ids)?;
    match first_cycle(plan, &graph) {
        Some(problem) => Err(problem),
        None => Ok(()),
    }
}

/// Checks each todo on its own (a valid id no other todo has, a task) and returns where each
/// id is in the plan.
fn check_todos(plan: &[Todo]) -> Result<HashMap<&str, usize>, PlanProblem> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, todo) in plan.iter().enumerate() {
        if !is_valid_id(&todo.id) {
            return Err(PlanProblem {
                index,
                message: format!(
                    "invalid id `{}`: use 1 to 40 letters, digits, `.`, `_` or `-`",
                    todo.id
                ),
            });
        }
        if let Some(first) = seen.insert(&todo.id, index) {
            return Err(PlanProblem {
                index,
                message: format!(
                    "duplicate id `{}` (also todo #{} of the plan)",
                    todo.id,
                    first + 1
                ),
            });
        }
        if todo.task.trim().is_empty() {
            return Err(PlanProblem {
                index,
                message: format!("todo `{}` has no task", todo.id),
            });
        }
    }
    Ok(seen)
}

/// The todos as a graph (each node weighs its todo's index) with an edge from each dependency
/// to the todo that needs it; a todo that depends on itself or on an id no todo has is refused.
fn dependency_graph(
    plan: &[Todo],
    ids: &HashMap<&str, usize>,
) -> Result<DiGraph<usize, ()>, PlanProblem> {
    let mut graph = DiGraph::<usize, ()>::new();
    let nodes: Vec<_> = (0..plan.len()).map(|i| graph.add_node(i)).collect();
    for (index, todo) in plan.iter().enumerate() {
        let mut deps = HashSet::new();
        for dep in &todo.dependencies {
            if dep == &todo.id {
                return Err(PlanProblem {
                    index,
                    message: format!("todo `{}` depends on itself", todo.id),
                });
            }
            let Some(&target) = ids.get(dep.as_str()) else {
                return Err(PlanProblem {
                    index,
                    message: format!(
                        "unknown dependency `{dep}` of todo `{}`: no todo has that id",
                        todo.id
                    ),
                });
            };
            if deps.insert(dep) {
                graph.add_edge(nodes[target], nodes[index], ());
            }
        }
    }
    Ok(graph)
}

/// The first dependency cycle (cycles compared by their members' places in the plan), as a
/// problem of its first todo.
fn first_cycle(plan: &[Todo], graph: &DiGraph<usize, ()>) -> Option<PlanProblem> {
    // A strongly connected component of more than one todo is a cycle (self-loops are
    // refused in dependency_graph).
    let mut cycles: Vec<Vec<usize>> = petgraph::algo::tarjan_scc(graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut members: Vec<usize> = scc.into_iter().map(|n| graph[n]).collect();
            members.sort_unstable();
            members
        })
        .collect();
    cycles.sort();
    let cycle = cycles.first()?;
    let names: Vec<&str> = cycle.iter().map(|&i| plan[i].id.as_str()).collect();
    Some(PlanProblem {
        index: cycle[0],
        message: format!(
            "dependency cycle among {}: none of them could ever start",
            names.join(", ")
        ),
    })
}

/// Collapses whitespace (newlines included) so a task fits on one Markdown line.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
