//! The functional API: a plain async function whose durable `task` calls are the workflow
//! (LangGraph's `@entrypoint`/`@task`, the shape of DBOS and Temporal).
//!
//! [`entrypoint`] turns a function into a [`CompiledGraph`] over [`FunctionState`] with one node,
//! named as the function, so the registry, the CLI, streams, the server and workers run, pause,
//! resume and inspect it like any other graph. Inside, [`FunctionContext::task`] runs a durable
//! task: its result is saved in the thread's journal under its position in the function (its
//! ordinal, taken in call order) with its name, so when the function runs again (after a crash,
//! a failed attempt, or an [`interrupt`](FunctionContext::interrupt) answered) every finished
//! task hands back its saved result without running, and the function reaches the point where
//! it stopped. A re-execution that calls a different task at a position is refused with
//! [`NonDeterminism`](crate::runtime::NonDeterminism) rather than given another task's result.
//!
//! ```
//! use stategraph::checkpoint::MemoryCheckpointer;
//! use stategraph::functional::{entrypoint, FunctionContext, FunctionState};
//! use stategraph::runtime::{NodeError, RunConfig};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let graph = entrypoint("shout", |name: String, ctx: FunctionContext| async move {
//!     let upper = ctx
//!         .task("upper", name, |n: String| async move { Ok::<_, NodeError>(n.to_uppercase()) })
//!         .await?;
//!     Ok(format!("{upper}!"))
//! })?
//! .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
//! let out = graph.invoke(FunctionState::input("ada")?, RunConfig::new().thread("t1")).await?;
//! assert_eq!(out.state.output, serde_json::json!("ADA!"));
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! # Layout
//! - `mod.rs`: [`entrypoint`] (and [`entrypoint_with`], with node options) and
//!   [`FunctionState`]: the graph a function becomes.
//! - `context.rs`: [`FunctionContext`] (tasks, interrupts) and the journal entry of a task,
//!   [`TaskEvent`]s in the run's stream.
//!
//! Invariant: built on the public graph API and the node journal of `run/context.rs`; the
//! runtime knows nothing of functions. Guarantee: a task runs at least once and, once its result
//! is saved, never again for that step; a kill between a task's end and its save runs it again.

mod context;

pub use context::{FunctionContext, TaskEvent, TaskStatus, TASK_EVENT};

use crate::error::{GraphError, NodeError};
use crate::graph::{CompiledGraph, NodeSpec, StateGraph};
use crate::run::context::Context;
use crate::{State, END, START};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::Arc;

/// The state of a function graph: its input and, once it returned, its output, both as JSON
/// (the function reads and returns its own types; the graph's registry, CLI and server see
/// JSON). `graph run NAME --input TEXT` fills `input` with the text.
///
/// ```
/// use stategraph::functional::FunctionState;
/// let start = FunctionState::input(vec![1, 2, 3]).unwrap();
/// assert_eq!(start.input, Some(stategraph::state::Write::Reduce(serde_json::json!([1, 2, 3]))));
/// ```
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionState {
    /// What the function was called with.
    pub input: serde_json::Value,
    /// What it returned; `null` until it has.
    pub output: serde_json::Value,
}

impl FunctionState {
    /// The update that starts a run of a function with `input`.
    pub fn input(input: impl Serialize) -> Result<FunctionStateUpdate, serde_json::Error> {
        Ok(FunctionStateUpdate::default().input(serde_json::to_value(input)?))
    }

    /// The output, decoded into the function's own type; `None` before the function returned.
    ///
    /// ```
    /// use stategraph::functional::FunctionState;
    /// let done = FunctionState { input: "x".into(), output: serde_json::json!(3) };
    /// assert_eq!(done.output_as::<u32>().unwrap(), Some(3));
    /// ```
    pub fn output_as<O: DeserializeOwned>(&self) -> Result<Option<O>, serde_json::Error> {
        if self.output.is_null() {
            return Ok(None);
        }
        serde_json::from_value(self.output.clone()).map(Some)
    }
}

/// Makes a graph of the async function `function`, named `name`: one node (also `name`) that
/// decodes the state's `input` as `I`, runs the function with a [`FunctionContext`], and
/// writes what it returns to `output`. Attach a checkpointer to make its tasks durable.
///
/// The function runs again from its start whenever its step does (a resume after a crash or
/// an interrupt, a retry): finished tasks return their saved results, so it must call its tasks
/// in the same order each time, deciding only from its input, task results and answers.
///
/// ```
/// use stategraph::functional::{entrypoint, FunctionContext};
/// let graph = entrypoint("double", |n: i64, _ctx: FunctionContext| async move { Ok(n * 2) }).unwrap();
/// assert_eq!(graph.name(), Some("double"));
/// assert_eq!(graph.node_names(), ["double"]);
/// ```
///
/// Fails only for a name no node may have (empty, or the reserved start and end names).
pub fn entrypoint<I, O, F, Fut>(
    name: &str,
    function: F,
) -> Result<CompiledGraph<FunctionState>, GraphError>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(I, FunctionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
{
    entrypoint_with(name, |_| {}, function)
}

/// [`entrypoint`], with the function's node options set by `options`: retries (a retry runs
/// the function again, its finished tasks replayed), a timeout, an idle timeout.
///
/// ```
/// use stategraph::functional::{entrypoint_with, FunctionContext};
/// use stategraph::graph::RetryPolicy;
/// let graph = entrypoint_with(
///     "double",
///     |node| { node.retry(RetryPolicy::new(3)); },
///     |n: i64, _ctx: FunctionContext| async move { Ok(n * 2) },
/// ).unwrap();
/// assert_eq!(graph.name(), Some("double"));
/// ```
pub fn entrypoint_with<I, O, F, Fut>(
    name: &str,
    options: impl FnOnce(&mut NodeSpec<'_>),
    function: F,
) -> Result<CompiledGraph<FunctionState>, GraphError>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(I, FunctionContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
{
    let function = Arc::new(function);
    let name_of: Arc<str> = name.into();
    let mut g = StateGraph::<FunctionState>::named(name);
    let mut node = g.add_node(name, move |state: Arc<FunctionState>, ctx: Context| {
        let function = function.clone();
        let name = name_of.clone();
        async move {
            let input: I = crate::state::from_json(state.input.clone()).map_err(|why| {
                NodeError::new(format!(
                    "function `{name}` cannot read its input `{}`: it {why}",
                    crate::quote::cut(&state.input.to_string())
                ))
            })?;
            let output = function(input, FunctionContext::new(ctx, name.clone())).await?;
            let output = serde_json::to_value(output).map_err(|e| {
                NodeError::new(format!(
                    "function `{name}` returned a value that is not JSON: {e}"
                ))
            })?;
            Ok(FunctionStateUpdate::default().output(output))
        }
    });
    options(&mut node);
    g.add_edge(START, name).add_edge(name, END);
    g.compile()
}
