//! A compiled graph behind JSON: the state type erased, so a registry (and the CLI) can hold
//! graphs of different state types side by side.

use async_trait::async_trait;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use stategraph::checkpoint::{CheckpointId, Checkpointer};
use stategraph::graph::{CompiledGraph, Goto, GraphError, Route};
use stategraph::runtime::ThreadPath;
use stategraph::runtime::{
    Event, HistoryEntry, HistoryQuery, Resume, ResumeCommand, RunConfig, RunError, RunOutcome,
    RunStream, StateSnapshot,
};
use stategraph::state::State;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// Which drawing [`ErasedGraph::draw`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrawFormat {
    /// A Mermaid flowchart.
    Mermaid,
    /// Graphviz DOT.
    Dot,
}

/// Where a run's events go, if anyone listens.
pub type EventSender = Option<UnboundedSender<Event>>;

/// A [`CompiledGraph`] of any state type, with JSON in and out.
///
/// Implemented for every `CompiledGraph<S>`; a [`GraphFactory`](super::GraphFactory) hands one
/// out already configured by its graph file. Input and edits are decoded into the state's update
/// type, and a value that does not fit is an [`RunError::InvalidInput`] naming the field.
///
/// ```no_run
/// # async fn demo(graph: Box<dyn stategraph_registry::ErasedGraph>) -> Result<(), stategraph::RunError> {
/// use stategraph::runtime::RunConfig;
/// let outcome = graph.run(serde_json::json!({"topic": "sled"}), RunConfig::new(), None).await?;
/// println!("{}", outcome.state);
/// # Ok(()) }
/// ```
// RunError's size is the runtime's choice; these methods pass it through unchanged.
#[allow(clippy::result_large_err)]
#[async_trait]
pub trait ErasedGraph: Send + Sync {
    /// The graph's name (`graph` when it has none).
    fn name(&self) -> &str;

    /// The nodes, in declaration order.
    fn node_names(&self) -> Vec<String>;

    /// Draws the graph; with `xray` > 0 (Mermaid only), subgraphs are drawn inside the nodes
    /// that run them, that many levels deep.
    fn draw(&self, format: DrawFormat, xray: usize) -> String;

    /// Checks that `update` (a run's input, or an edit) fits the state's update type, without
    /// running anything. `source` names it in the error (`the input`, or where it came from), which
    /// says what does not fit in the words of JSON: the field, what it takes, what was given.
    fn check_update(&self, update: &Value, source: &str) -> Result<(), RunError>;

    /// Starts a run on `input` (a thread is created unless `config.thread_id` names one).
    async fn run(
        &self,
        input: Value,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError>;

    /// Continues a thread from its newest checkpoint.
    async fn resume(
        &self,
        thread: &str,
        resume: Resume,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError>;

    /// Continues a thread as LangGraph's `Command(resume=..., update=..., goto=...)` does (see
    /// [`CompiledGraph::resume_command`]): `resume` answers what waits, `update` (JSON, an
    /// update of the state, checked as an input is) is merged before the step, and `goto` adds
    /// tasks to it (nodes, or `Send`s), which run beside the paused ones.
    ///
    /// ```no_run
    /// # async fn demo(graph: Box<dyn stategraph_registry::ErasedGraph>) -> Result<(), stategraph::RunError> {
    /// use stategraph::runtime::{Resume, RunConfig};
    /// let note = serde_json::json!({"note": "checked by hand"});
    /// let goto = vec![stategraph::Goto::from("review")];
    /// graph.resume_command("t1", Resume::Continue, Some(note), goto, RunConfig::new(), None).await?;
    /// # Ok(()) }
    /// ```
    async fn resume_command(
        &self,
        thread: &str,
        resume: Resume,
        update: Option<Value>,
        goto: Vec<Goto>,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError>;

    /// Replays a thread from the newest checkpoint where `node` was about to run, on a new
    /// branch (see [`CompiledGraph::rerun_from`]).
    async fn rerun_from(
        &self,
        thread: &str,
        node: &str,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError>;

    /// The thread's state at its newest checkpoint, or at `checkpoint`. `thread` may be a
    /// child namespace (`{thread}/{node}:{task}`).
    async fn get_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError>;

    /// Like [`get_state`](Self::get_state), with the children of the next step's tasks nested
    /// (see [`CompiledGraph::get_state_with_subgraphs`]).
    async fn get_state_with_subgraphs(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError>;

    /// The thread's checkpoints, newest first.
    async fn history(
        &self,
        thread: &str,
        query: HistoryQuery,
    ) -> Result<Vec<HistoryEntry>, RunError>;

    /// Edits the thread's state (see [`CompiledGraph::update_state`]); `thread` may be a child
    /// namespace, whose update is then the child's (see
    /// [`CompiledGraph::update_subgraph_state`]).
    async fn update_state(
        &self,
        thread: &str,
        update: Value,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError>;

    /// Copies a checkpoint into a new thread; returns its id.
    async fn fork(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        new_thread: Option<String>,
    ) -> Result<String, RunError>;

    /// Deletes a thread.
    async fn delete(&self, thread: &str) -> Result<(), RunError>;

    /// Deletes all but the newest `keep` checkpoints of a thread; returns how many went.
    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, RunError>;
}

/// Decodes JSON into `T` (a state's update); what does not fit is said in the words of JSON
/// (see [`state::update_from_json`](stategraph::state::update_from_json)). `what` names where the
/// JSON came from (`the input`, `the update`).
#[allow(clippy::result_large_err)]
pub(crate) fn decode<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, RunError> {
    stategraph::state::update_from_json(value)
        .map_err(|why| RunError::InvalidInput(format!("{what} does not fit the state: {why}")))
}

#[allow(clippy::result_large_err)]
fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, RunError> {
    serde_json::to_value(value)
        .map_err(|e| RunError::InvalidInput(format!("the state cannot be shown as JSON: {e}")))
}

#[allow(clippy::result_large_err)]
fn erase_outcome<S: State>(outcome: RunOutcome<S>) -> Result<RunOutcome<Value>, RunError> {
    Ok(RunOutcome {
        state: to_json(&outcome.state)?,
        thread_id: outcome.thread_id,
        run_id: outcome.run_id,
        status: outcome.status,
        checkpoint_id: outcome.checkpoint_id,
        step: outcome.step,
    })
}

/// Forwards a run's events, then returns its outcome.
async fn drive<S: State>(
    mut stream: RunStream<S>,
    events: EventSender,
) -> Result<RunOutcome<Value>, RunError> {
    while let Some(event) = stream.next().await {
        if let Some(tx) = &events {
            // A listener that went away does not stop the run.
            let _ = tx.send(event);
        }
    }
    erase_outcome(stream.outcome().await?)
}

#[allow(clippy::result_large_err)]
fn unknown_node<S: State>(graph: &CompiledGraph<S>, name: &str, context: &'static str) -> RunError {
    GraphError::UnknownNode {
        name: name.to_string(),
        context,
        known: graph.node_names().join(", "),
    }
    .into()
}

#[async_trait]
impl<S: State> ErasedGraph for CompiledGraph<S> {
    fn name(&self) -> &str {
        CompiledGraph::name(self).unwrap_or("graph")
    }

    fn node_names(&self) -> Vec<String> {
        CompiledGraph::node_names(self)
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    fn draw(&self, format: DrawFormat, xray: usize) -> String {
        match format {
            DrawFormat::Mermaid => self.to_mermaid_with(stategraph::graph::DrawOptions::xray(xray)),
            DrawFormat::Dot => self.to_dot(),
        }
    }

    fn check_update(&self, update: &Value, source: &str) -> Result<(), RunError> {
        decode::<S::Update>(update.clone(), source).map(drop)
    }

    async fn run(
        &self,
        input: Value,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError> {
        let input = decode::<S::Update>(input, "the input")?;
        drive(self.stream(input, config), events).await
    }

    async fn resume(
        &self,
        thread: &str,
        resume: Resume,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError> {
        drive(self.stream_resume(thread, resume, config), events).await
    }

    async fn resume_command(
        &self,
        thread: &str,
        resume: Resume,
        update: Option<Value>,
        goto: Vec<Goto>,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError> {
        let known = CompiledGraph::node_names(self);
        for target in &goto {
            let node = match target {
                Goto::Node(node) => node,
                Goto::Send(send) => &send.node,
                Goto::End => continue,
            };
            if !known.contains(&node.as_str()) {
                return Err(unknown_node(self, node, "the command's goto"));
            }
        }
        let mut command = ResumeCommand::<S>::new(resume);
        if let Some(update) = update {
            command = command.update(decode::<S::Update>(update, "the command's update")?);
        }
        if !goto.is_empty() {
            command = command.goto(Route(goto));
        }
        drive(self.stream_resume_command(thread, command, config), events).await
    }

    async fn rerun_from(
        &self,
        thread: &str,
        node: &str,
        config: RunConfig,
        events: EventSender,
    ) -> Result<RunOutcome<Value>, RunError> {
        if !CompiledGraph::node_names(self).contains(&node) {
            return Err(unknown_node(self, node, "the node to rerun from"));
        }
        let store: Arc<dyn Checkpointer> = self
            .checkpointer()
            .cloned()
            .ok_or(RunError::NoCheckpointer { operation: "rerun" })?;
        stategraph::checkpoint::validate_thread_id(thread)?;
        // The same search as CompiledGraph::rerun_from, which runs without an event stream.
        let mut before = None;
        loop {
            let page = store.list_checkpoints(thread, before, 200).await?;
            let Some(last) = page.last() else { break };
            before = Some(last.id);
            if let Some(found) = page
                .iter()
                .find(|r| r.frontier.tasks.iter().any(|t| t.node == node))
            {
                let config = config.from_checkpoint(found.id);
                return drive(self.stream_resume(thread, Resume::Continue, config), events).await;
            }
        }
        if store.get_checkpoint(thread, None).await?.is_none() {
            return Err(RunError::ThreadNotFound {
                thread_id: thread.to_string(),
            });
        }
        Err(RunError::InvalidInput(format!(
            "node `{node}` never ran on thread `{thread}`: nothing to rerun from"
        )))
    }

    async fn get_state(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError> {
        if !ThreadPath::is_root_id(thread) {
            let mut s = self.subgraph_state(thread, checkpoint).await?;
            s.subgraphs.clear();
            return Ok(s);
        }
        let s = CompiledGraph::get_state(self, thread, checkpoint).await?;
        Ok(s.map_values(to_json(&s.values)?))
    }

    async fn get_state_with_subgraphs(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<StateSnapshot<Value>, RunError> {
        if !ThreadPath::is_root_id(thread) {
            return self.subgraph_state(thread, checkpoint).await;
        }
        let s = CompiledGraph::get_state_with_subgraphs(self, thread, checkpoint).await?;
        Ok(s.map_values(to_json(&s.values)?))
    }

    async fn history(
        &self,
        thread: &str,
        query: HistoryQuery,
    ) -> Result<Vec<HistoryEntry>, RunError> {
        CompiledGraph::history(self, thread, query).await
    }

    async fn update_state(
        &self,
        thread: &str,
        update: Value,
        as_node: Option<&str>,
    ) -> Result<CheckpointId, RunError> {
        if !ThreadPath::is_root_id(thread) {
            return self.update_subgraph_state(thread, update, as_node).await;
        }
        if let Some(node) = as_node {
            if !CompiledGraph::node_names(self).contains(&node) {
                return Err(unknown_node(self, node, "the node an update stands for"));
            }
        }
        let update = decode::<S::Update>(update, "the update")?;
        CompiledGraph::update_state(self, thread, update, as_node).await
    }

    async fn fork(
        &self,
        thread: &str,
        checkpoint: CheckpointId,
        new_thread: Option<String>,
    ) -> Result<String, RunError> {
        CompiledGraph::fork(self, thread, checkpoint, new_thread).await
    }

    async fn delete(&self, thread: &str) -> Result<(), RunError> {
        self.delete_thread(thread).await
    }

    async fn prune(&self, thread: &str, keep: usize) -> Result<usize, RunError> {
        CompiledGraph::prune(self, thread, keep).await
    }
}
