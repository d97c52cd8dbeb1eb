//! Graphs inside graphs: a compiled graph as a node, a mapped subgraph of another state type,
//! and [`Context::run_subgraph`] for a node that runs one itself (once per Send item, say).
//!
//! A child runs as a nested run whose thread is a namespace of its parent's
//! ([`ThreadPath`](super::ThreadPath)): its steps are checkpointed in the parent's store under
//! the parent's lease, so a crash inside the child resumes inside it and its finished steps never
//! run again. When the child pauses, the parent's task pauses with every one of the child's
//! interrupts (each naming its namespace), so the whole run pauses; answers come back down to
//! the child by interrupt id when the task runs again. A child that fails fails the parent's
//! task with the path of nodes (`parent > child`); a child whose store fails fails the parent
//! run with that store error, as the parent's own store failure would.

use super::executor::{Identity, Run, Start};
use super::subgraph_view::view_of;
use super::{nested_run, Resume, RunConfig, RunOutcome, RunStatus};
use crate::checkpoint::waiting_interrupts;
use crate::checkpoint::{Checkpointer, InterruptRecord};
use crate::error::{NodeError, NodeErrorKind, RunError};
use crate::graph::{Command, CompiledGraph, Node};
use crate::run::context::{Context, TaskContext};
use crate::run::namespace::{task_id, ThreadPath};
use crate::run::snapshot::SubgraphView;
use crate::state::State;
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A compiled graph over the parent's own state type is a node: it starts from the parent's
/// state, and its result is what it changed, as an update that goes through the parent's
/// reducers (items it appended are appended once, numbers it added are added), so parallel
/// children writing one list combine as any parallel nodes do.
///
/// ```
/// # use std::sync::Arc;
/// # use serde::{Deserialize, Serialize};
/// # use stategraph::{graph::StateGraph, runtime::{Context, RunConfig}, State, START, END};
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct S { #[state(append)] log: Vec<String> }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut child = StateGraph::<S>::new();
/// child.add_node("inner", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default().log(vec!["inner".to_string()])) });
/// child.add_edge(START, "inner").add_edge("inner", END);
/// let mut parent = StateGraph::<S>::new();
/// parent.add_node("child", child.compile().unwrap());
/// parent.add_edge(START, "child").add_edge("child", END);
/// let out = parent.compile().unwrap().invoke(SUpdate::default(), RunConfig::new()).await.unwrap();
/// assert_eq!(out.state.log, vec!["inner"]);
/// # }
/// ```
#[async_trait]
impl<S: State> Node<S> for CompiledGraph<S> {
    async fn run(&self, state: Arc<S>, ctx: Context) -> Result<Command<S>, NodeError> {
        let input = state.whole_update().map_err(|e| {
            NodeError::new(format!("the state cannot be given to the subgraph: {e}"))
        })?;
        let t = ctx.task();
        check_child_name(t).map_err(NodeError::new)?;
        let call = t.subgraph_calls.fetch_add(1, Ordering::Relaxed);
        // A child run in one go from its input says which fields its steps wrote, so only those
        // are compared; one resumed from a checkpoint is compared whole (same rule, same result).
        let (after, marks) = match child_run(&ctx, self, input, call, None, true).await {
            Ok((mut run, status)) => {
                let marks = run.marks.take();
                (finished(t, run, status)?, marks)
            }
            Err(e) => return Err(failed(e, &child_path(t, call).to_string())),
        };
        let update = after
            .changes_since(&state, marks.as_ref())
            .map_err(|e| NodeError::new(format!("a subgraph's changes: {e}")))?;
        Ok(Command::from_update(update))
    }

    fn subgraphs(&self) -> Vec<Arc<dyn SubgraphView>> {
        vec![view_of(self)]
    }
}

type InputFn<P, C> =
    Arc<dyn Fn(&P, &Context) -> Result<<C as State>::Update, NodeError> + Send + Sync>;
type OutputFn<P, C> = Arc<dyn Fn(&P, C) -> <P as State>::Update + Send + Sync>;

/// A subgraph over another state type, as a node: `input` maps the parent's state (and the
/// task's context, e.g. its Send argument) to the child's input, `output` maps the child's
/// final state to the parent's update.
///
/// ```
/// # use std::sync::Arc;
/// # use serde::{Deserialize, Serialize};
/// # use stategraph::{graph::StateGraph, runtime::{Context, RunConfig, Subgraph}, State, START, END};
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Parent { topic: String, #[state(append)] notes: Vec<String> }
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Child { question: String, answer: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut child = StateGraph::<Child>::new();
/// child.add_node("answer", |s: Arc<Child>, _c: Context| async move {
///     Ok(ChildUpdate::default().answer(format!("about {}", s.question)))
/// });
/// child.add_edge(START, "answer").add_edge("answer", END);
/// let research = Subgraph::new(
///     child.compile().unwrap(),
///     |p: &Parent, _ctx: &Context| Ok(ChildUpdate::default().question(p.topic.clone())),
///     |_p: &Parent, c: Child| ParentUpdate::default().notes(vec![c.answer]),
/// );
/// let mut parent = StateGraph::<Parent>::new();
/// parent.add_node("research", research);
/// parent.add_edge(START, "research").add_edge("research", END);
/// let input = ParentUpdate::default().topic("rust".to_string());
/// let out = parent.compile().unwrap().invoke(input, RunConfig::new()).await.unwrap();
/// assert_eq!(out.state.notes, vec!["about rust"]);
/// # }
/// ```
pub struct Subgraph<P: State, C: State> {
    graph: CompiledGraph<C>,
    input: InputFn<P, C>,
    output: OutputFn<P, C>,
}

impl<P: State, C: State> Subgraph<P, C> {
    /// The node that runs `graph` with `input(parent, ctx)` and returns `output(parent, child)`.
    pub fn new(
        graph: CompiledGraph<C>,
        input: impl Fn(&P, &Context) -> Result<C::Update, NodeError> + Send + Sync + 'static,
        output: impl Fn(&P, C) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        Subgraph {
            graph,
            input: Arc::new(input),
            output: Arc::new(output),
        }
    }
}

#[async_trait]
impl<P: State, C: State> Node<P> for Subgraph<P, C> {
    async fn run(&self, state: Arc<P>, ctx: Context) -> Result<Command<P>, NodeError> {
        let input = (self.input)(&state, &ctx)?;
        let child = ctx.run_subgraph(&self.graph, input).await?;
        Ok(Command::from_update((self.output)(&state, child)))
    }

    fn subgraphs(&self) -> Vec<Arc<dyn SubgraphView>> {
        vec![view_of(&self.graph)]
    }
}

impl Context {
    /// Runs `graph` as a subgraph of this task and returns its final state. Its steps are
    /// checkpointed in this run's thread under the namespace `{node}:{task_id}` (calls after the
    /// first in one task get `-1`, `-2`, ... in the order they are made), so a crash resumes it
    /// where it was; when it pauses, this returns the pause as an error to propagate with `?`,
    /// and the whole run pauses; once resumed, this call continues the child.
    ///
    /// ```no_run
    /// # use stategraph::{graph::CompiledGraph, runtime::{Context, NodeError}, State};
    /// # async fn node<C: State>(ctx: Context, child: CompiledGraph<C>, input: C::Update) -> Result<(), NodeError> {
    /// let result: C = ctx.run_subgraph(&child, input).await?;
    /// # let _ = result; Ok(()) }
    /// ```
    pub fn run_subgraph<'a, C: State>(
        &'a self,
        graph: &'a CompiledGraph<C>,
        input: C::Update,
    ) -> impl std::future::Future<Output = Result<C, NodeError>> + Send + 'a {
        // Taken when the call is made, not when it is first polled, so children started
        // together (join_all) keep their namespaces from run to run.
        let call = self.task().subgraph_calls.fetch_add(1, Ordering::Relaxed);
        run_child(self, graph, input, call)
    }
}

async fn run_child<C: State>(
    ctx: &Context,
    graph: &CompiledGraph<C>,
    input: C::Update,
    call: u32,
) -> Result<C, NodeError> {
    let t = ctx.task();
    check_child_name(t).map_err(NodeError::new)?;
    match child_run(ctx, graph, input, call, None, false).await {
        Ok((run, status)) => finished(t, run, status),
        Err(e) => Err(failed(e, &child_path(t, call).to_string())),
    }
}

/// A child run's final state, or the parent task's pause when it paused.
fn finished<C: State>(t: &TaskContext, run: Run<C>, status: RunStatus) -> Result<C, NodeError> {
    match status {
        RunStatus::Done => Ok(run.into_state()),
        RunStatus::Interrupted { interrupts, .. } => Err(paused(&t.node, interrupts)),
    }
}

/// `graph.invoke(input, config)` called inside a node without a thread of its own: the graph
/// runs as the task's next child (as `run_subgraph` would), and a pause of it pauses the task
/// even if the node goes on and returns a result (LangGraph propagates the child's interrupt
/// through the node the same way).
pub(crate) async fn invoke_as_child<C: State>(
    ctx: &Context,
    graph: &CompiledGraph<C>,
    input: C::Update,
    config: &RunConfig,
) -> Result<RunOutcome<C>, RunError> {
    let t = ctx.task();
    check_child_name(t).map_err(RunError::InvalidInput)?;
    let call = t.subgraph_calls.fetch_add(1, Ordering::Relaxed);
    let (run, status) = child_run(ctx, graph, input, call, Some(config), false).await?;
    let out = run.into_outcome(status);
    if let RunStatus::Interrupted { interrupts, .. } = &out.status {
        ctx.child_paused(interrupts);
    }
    Ok(out)
}

/// Refuses a task whose node name would break the namespace of a child it runs.
pub(crate) fn check_child_name(t: &TaskContext) -> Result<(), String> {
    if t.node.contains(crate::checkpoint::NAMESPACE_SEPARATOR) {
        return Err(format!(
            "node `{}` runs a subgraph, but its name contains `/`, which separates the levels of \
             a subgraph namespace: rename the node",
            t.node
        ));
    }
    Ok(())
}

fn child_path(t: &TaskContext, call: u32) -> ThreadPath {
    t.path
        .child_of_task(&t.node, task_id(t.checkpoint_id, t.task, call))
}

/// Runs (or, when its namespace has a checkpoint, continues) the task's `call`-th child.
/// `caller` is the config a node gave `invoke`: its breakpoints apply to the child. With
/// `mark`, a child that runs from its input (not continued) also records which fields its
/// steps wrote (`Run::marks`).
pub(crate) async fn child_run<C: State>(
    ctx: &Context,
    graph: &CompiledGraph<C>,
    input: C::Update,
    call: u32,
    caller: Option<&RunConfig>,
    mark: bool,
) -> Result<(Run<C>, RunStatus), RunError> {
    let t = ctx.task();
    let path = child_path(t, call);
    let thread = path.thread_id();
    let mut graph = graph.clone();
    if let Some(store) = &t.checkpointer {
        graph.checkpointer = Some(store.clone());
    }
    let config = child_config(t, caller);
    let start = match &graph.checkpointer {
        Some(store) => child_start(t, store.as_ref(), &thread, input).await?,
        None => Start::Fresh(input),
    };
    let events = t.events.nested(|| path.namespace());
    let identity = Identity {
        path,
        thread_id: thread.into(),
        run_id: t.run_id.clone(),
        settings: t.settings.clone(),
        inherit: t.inherit.clone(),
    };
    // The child's run lives on the heap: inline, its whole state machine was part of the
    // node's future and copied each time that future moved or was boxed, and each level of
    // nesting grew the parent's future by a whole run.
    let mark = mark && matches!(start, Start::Fresh(_));
    Box::pin(nested_run(graph, start, config, events, identity, mark)).await
}

/// A child run's config. Its run id, settings and what it inherits are the parent run's (see
/// `Identity`); the config only carries them for the run's own loop, and no settings map is
/// copied. `caller`'s breakpoints (a node's own `invoke` config) apply to the child.
fn child_config(t: &TaskContext, caller: Option<&RunConfig>) -> RunConfig {
    RunConfig {
        durability: t.inherit.durability,
        recursion_limit: t.inherit.recursion_limit,
        cancel: t.inherit.cancel.clone(),
        interrupt_before: caller
            .map(|c| c.interrupt_before.clone())
            .unwrap_or_default(),
        interrupt_after: caller
            .map(|c| c.interrupt_after.clone())
            .unwrap_or_default(),
        ..RunConfig::default()
    }
}

/// How a child begins: continued from its namespace's checkpoint (with the answers the parent
/// task forwards to what it still waits for), or fresh from `input` when it has none.
async fn child_start<C: State>(
    t: &TaskContext,
    store: &dyn Checkpointer,
    thread: &str,
    input: C::Update,
) -> Result<Start<C>, RunError> {
    // Looked up once: a fresh child's run need not read the store again to learn it is new.
    let Some(record) = store.get_checkpoint(thread, None).await? else {
        return Ok(Start::Fresh(input));
    };
    let resume = if t.forwarded.is_empty() {
        Resume::Continue
    } else {
        let pending = store.get_writes(thread, record.id).await?;
        // Only answers to what the child still waits for: an answer it consumed on an earlier
        // resume stays in the parent's writes but is never delivered again.
        let mine: BTreeMap<String, Value> = waiting_interrupts(&pending)
            .into_iter()
            .filter_map(|w| {
                let value = t.forwarded.get(&w.record.id)?;
                Some((w.record.id, value.clone()))
            })
            .collect();
        if mine.is_empty() {
            Resume::Continue
        } else {
            Resume::ById(mine)
        }
    };
    Ok(Start::Resume {
        thread_id: thread.to_owned(),
        resume,
    })
}

/// The parent task's pause for a child that paused on `interrupts`.
fn paused(node: &str, interrupts: Vec<InterruptRecord>) -> NodeError {
    let Some(first) = interrupts.first().cloned() else {
        return NodeError::new(format!(
            "the subgraph of node `{node}` paused without saying what it waits for"
        ));
    };
    let mut error = NodeError::with_kind(
        NodeErrorKind::Interrupted(Box::new(first)),
        format!("the subgraph of node `{node}` is waiting for input"),
    );
    error.paused = interrupts;
    error
}

/// The parent task's error for a child run that failed: same kind (so the parent's retry
/// policy applies; a retry resumes the child and reruns only what failed), naming the path.
fn failed(error: RunError, thread: &str) -> NodeError {
    match error {
        RunError::NodeFailed {
            node,
            step,
            message,
            kind,
            ..
        } => {
            let kind = match kind {
                NodeErrorKind::Interrupted(_) => NodeErrorKind::Failed,
                other => other,
            };
            let mut e = NodeError::with_kind(
                kind,
                format!("{message} (at step {step} of subgraph `{thread}`)"),
            );
            e.inner_path = Some(node);
            e
        }
        RunError::RecursionLimit { limit, step, .. } => NodeError::new(format!(
            "subgraph `{thread}` reached the recursion limit of {limit} supersteps at step {step} \
             without finishing; it may loop forever (raise RunConfig::recursion_limit if it is \
             legitimately long)"
        )),
        // Not retried by the default policy: the parent's own store failure is not either.
        RunError::Checkpoint(error) => NodeError::wrap(
            ChildStoreFailed {
                thread: thread.to_string(),
                error,
            },
            false,
        ),
        // The child saw the run's cancellation (they share its token): the parent's end too.
        RunError::Cancelled { .. } => NodeError::wrap(
            ChildCancelled {
                thread: thread.to_string(),
            },
            false,
        ),
        other => NodeError::new(format!("subgraph `{thread}`: {other}")),
    }
}

/// A child run cancelled with its parent's run (the token they share): the parent run ends
/// [`RunError::Cancelled`] as well (`executor/step.rs`), never as a failed node, whichever of
/// the two noticed the cancellation first.
#[derive(Debug, thiserror::Error)]
#[error("subgraph `{thread}` was cancelled with its run")]
pub(crate) struct ChildCancelled {
    /// The child's thread (its namespace under the parent's).
    pub(crate) thread: String,
}

/// A child run's store failure, carried as the source of its parent task's error: the parent
/// run then fails with the same [`RunError::Checkpoint`] it returns when its own store fails
/// (`executor/step.rs`), not with a node failure, so a caller tells "the database failed" from
/// "the graph failed" at any depth of subgraphs (a queue worker gives the run back for the
/// first, and records the second).
#[derive(Debug, thiserror::Error)]
#[error("subgraph `{thread}`: {error}")]
pub(crate) struct ChildStoreFailed {
    /// The child's thread (its namespace under the parent's).
    pub(crate) thread: String,
    /// What the store said.
    #[source]
    pub(crate) error: crate::checkpoint::CheckpointError,
}
