//! Graphs inside graphs: a compiled graph as a node, a mapped subgraph of another state type,
//! and [`Context::run_subgraph`] for a node that runs one itself (once per Send item, say).
//!
//! A child runs as a nested run whose thread is a namespace of its parent's
//! ([`ThreadPath`](super::ThreadPath)): its steps are checkpointed in the parent's store under
//! the parent's lease, so a crash inside the child resumes inside it and its finished steps never
//! run again. When the child pauses, the parent's task pauses with every one of the child's
//! interrupts (each naming its namespace), so the whole run pauses; answers come back down to
//! the child by interrupt id when the task runs again. A child that fails fails the parent's
//! task with the path of nodes (`parent > child`).

use super::context::{Context, TaskContext};
use super::error::{NodeError, NodeErrorKind, RunError};
use super::executor::Start;
use super::namespace::{task_id, ThreadPath};
use super::subgraph_view::{view_of, SubgraphView};
use super::{execute_at, Resume, RunConfig, RunOutcome, RunStatus};
use crate::checkpoint::status::waiting_interrupts;
use crate::checkpoint::InterruptRecord;
use crate::graph::{Command, CompiledGraph, Node};
use crate::state::OVERWRITE_KEY;
use crate::state::{State, TaggedUpdate};
use async_trait::async_trait;
use serde_json::{Map, Value};
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
        // Encoded once: the child's input is made of it, and its changes are measured from it.
        let before = fields_of(&*state)?;
        let input = whole_state::<S>(&before)?;
        let after = ctx.run_subgraph(self, input).await?;
        Ok(Command::from_update(changes(&*state, before, &after)?))
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
    match child_run(ctx, graph, input, call, None).await {
        Ok(out) => match out.status {
            RunStatus::Done => Ok(out.state),
            RunStatus::Interrupted { interrupts, .. } => Err(paused(&t.node, interrupts)),
        },
        Err(e) => Err(failed(e, &child_path(t, call).to_string())),
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
    let out = child_run(ctx, graph, input, call, Some(config)).await?;
    if let RunStatus::Interrupted { interrupts, .. } = &out.status {
        ctx.child_paused(interrupts);
    }
    Ok(out)
}

/// Refuses a task whose node name would break the namespace of a child it runs.
pub(crate) fn check_child_name(t: &TaskContext) -> Result<(), String> {
    if t.node.contains('/') {
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
        .child(&t.node, &task_id(t.checkpoint_id, t.task, call))
}

/// Runs (or, when its namespace has a checkpoint, continues) the task's `call`-th child.
/// `caller` is the config a node gave `invoke`: its breakpoints apply to the child.
pub(crate) async fn child_run<C: State>(
    ctx: &Context,
    graph: &CompiledGraph<C>,
    input: C::Update,
    call: u32,
    caller: Option<&RunConfig>,
) -> Result<RunOutcome<C>, RunError> {
    let t = ctx.task();
    let path = child_path(t, call);
    let thread = path.to_string();
    let mut graph = graph.clone();
    if let Some(store) = &t.checkpointer {
        graph.checkpointer = Some(store.clone());
    }
    let config = RunConfig {
        thread_id: Some(thread.clone()),
        durability: t.inherit.durability,
        recursion_limit: t.inherit.recursion_limit,
        cancel: t.inherit.cancel.clone(),
        settings: (*t.settings).clone(),
        interrupt_before: caller
            .map(|c| c.interrupt_before.clone())
            .unwrap_or_default(),
        interrupt_after: caller
            .map(|c| c.interrupt_after.clone())
            .unwrap_or_default(),
        ..RunConfig::default()
    };
    let existing = match &graph.checkpointer {
        Some(store) => store.get_checkpoint(&thread, None).await?,
        None => None,
    };
    let start = match (existing, &graph.checkpointer) {
        (Some(record), Some(store)) => {
            let resume = if t.forwarded.is_empty() {
                Resume::Continue
            } else {
                let pending = store.get_writes(&thread, record.id).await?;
                // Only answers to what the child still waits for: an answer it consumed on an
                // earlier resume stays in the parent's writes but is never delivered again.
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
            Start::Resume {
                thread_id: thread.clone(),
                resume,
            }
        }
        _ => Start::Input(input),
    };
    let events = t.events.nested(&path.namespace());
    // The child's run lives on the heap: inline, its whole state machine was part of the
    // node's future and copied each time that future moved or was boxed, and each level of
    // nesting grew the parent's future by a whole run.
    Box::pin(execute_at(graph, start, config, events, Some(path))).await
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
        RunError::Checkpoint(e) => NodeError::transient(format!("subgraph `{thread}`: {e}")),
        other => NodeError::new(format!("subgraph `{thread}`: {other}")),
    }
}

/// The fields of a state given to a same-type child, as JSON.
fn fields_of<S: State>(state: &S) -> Result<Map<String, Value>, NodeError> {
    let Value::Object(fields) = to_json(state)? else {
        return Err(NodeError::new(
            "a graph used as a node of the same state type needs a state that is a JSON object \
             (a struct with named fields)",
        ));
    };
    Ok(fields)
}

/// An update that sets every field of a state (`fields`): a same-type child's input.
fn whole_state<S: State>(fields: &Map<String, Value>) -> Result<S::Update, NodeError> {
    let wrapped: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.clone(), overwrite(v.clone())))
        .collect();
    serde_json::from_value(Value::Object(wrapped))
        .map_err(|e| NodeError::new(format!("the state cannot be given to the subgraph: {e}")))
}

/// What a same-type child changed, as an update through the parent's reducers: for each
/// changed field the write that the field's reducer turns `before` (whose fields are `old`)
/// into `after` with (what a list gained, what a number grew by), checked by applying it; an
/// explicit overwrite where no such write is found.
fn changes<S: State>(
    before: &S,
    old: Map<String, Value>,
    after: &S,
) -> Result<S::Update, NodeError> {
    let Value::Object(new) = to_json(after)? else {
        return Err(NodeError::new("a subgraph's state is not a JSON object"));
    };
    let mut reduce = Map::new();
    let mut forced = Map::new();
    for (field, value) in &new {
        let was = old.get(field);
        if was == Some(value) {
            continue;
        }
        match was.and_then(|w| growth(w, value)) {
            Some(delta) => reduce.insert(field.clone(), delta),
            None => forced.insert(field.clone(), overwrite(value.clone())),
        };
    }
    // Check the reducer writes all at once; fall back field by field only when one is off
    // (a custom reducer that does not simply append or add).
    let mut all = reduce.clone();
    all.extend(forced.clone());
    let update = decode_update::<S>(all)?;
    if matches!(applied(before, update.clone())?, Value::Object(m) if m == new) {
        return Ok(update);
    }
    let mut checked = forced;
    for (field, delta) in reduce {
        let single: Map<String, Value> = [(field.clone(), delta.clone())].into_iter().collect();
        let reached = applied(before, decode_update::<S>(single)?)?;
        let write = if reached.get(&field) == new.get(&field) {
            delta
        } else {
            overwrite(new[&field].clone())
        };
        checked.insert(field, write);
    }
    decode_update::<S>(checked)
}

/// The write that appends or adds `old` up to `new`, when `new` extends `old`.
fn growth(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Array(a), Value::Array(b)) if b.len() > a.len() && b.starts_with(a) => {
            Some(Value::Array(b[a.len()..].to_vec()))
        }
        (Value::String(a), Value::String(b)) if b.len() > a.len() && b.starts_with(a.as_str()) => {
            Some(Value::String(b[a.len()..].to_string()))
        }
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                return y.checked_sub(x).map(Value::from);
            }
            let d = b.as_f64()? - a.as_f64()?;
            serde_json::Number::from_f64(d).map(Value::Number)
        }
        _ => None,
    }
}

/// `before` with `update` merged, as JSON.
fn applied<S: State>(before: &S, update: S::Update) -> Result<Value, NodeError> {
    let mut state = before.clone();
    let mut batch = [TaggedUpdate::new("subgraph", update)];
    state
        .apply(&mut batch)
        .map_err(|e| NodeError::new(format!("a subgraph's changes do not merge: {e}")))?;
    to_json(&state)
}

fn decode_update<S: State>(fields: Map<String, Value>) -> Result<S::Update, NodeError> {
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| NodeError::new(format!("a subgraph's changes are not an update: {e}")))
}

fn overwrite(value: Value) -> Value {
    Value::Object([(OVERWRITE_KEY.to_string(), value)].into_iter().collect())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, NodeError> {
    serde_json::to_value(value)
        .map_err(|e| NodeError::new(format!("a subgraph's state is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::State;
    use serde::{Deserialize, Serialize};

    fn join_lines(current: &mut String, incoming: String) {
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&incoming);
    }

    #[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct S {
        topic: String,
        #[state(append)]
        log: Vec<u32>,
        #[state(add)]
        total: i64,
        #[state(with = join_lines)]
        notes: String,
    }

    fn merged(before: &S, update: SUpdate) -> S {
        let mut state = before.clone();
        state
            .apply(&mut [TaggedUpdate::new("child", update)])
            .unwrap();
        state
    }

    #[test]
    fn a_childs_changes_are_reducer_writes_where_the_reducer_makes_them_else_overwrites() {
        let before = S {
            topic: "x".into(),
            log: vec![1, 2],
            total: 5,
            notes: "a".into(),
        };
        let after = S {
            topic: "xy".into(),
            log: vec![1, 2, 3],
            total: 7,
            notes: "a\nb".into(),
        };
        let update = changes(&before, fields_of(&before).unwrap(), &after).unwrap();
        assert_eq!(merged(&before, update.clone()), after);
        let json = serde_json::to_value(&update).unwrap();
        // What a list gained and what a number grew by go through the parent's reducers
        // (so parallel children combine); a field whose reducer does not simply extend
        // (plain overwrite, a custom join) is overwritten.
        assert_eq!(json["log"], serde_json::json!([3]));
        assert_eq!(json["total"], serde_json::json!(2));
        assert_eq!(json["topic"], serde_json::json!({ OVERWRITE_KEY: "xy" }));
        assert_eq!(json["notes"], serde_json::json!({ OVERWRITE_KEY: "a\nb" }));
    }

    #[test]
    fn a_child_that_changed_nothing_writes_nothing_and_its_input_is_the_whole_state() {
        let state = S {
            topic: "x".into(),
            log: vec![1],
            total: 1,
            notes: String::new(),
        };
        let fields = fields_of(&state).unwrap();
        let input = whole_state::<S>(&fields).unwrap();
        assert_eq!(merged(&S::default(), input), state);
        let update = changes(&state, fields, &state).unwrap();
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            serde_json::json!({})
        );
    }
}
