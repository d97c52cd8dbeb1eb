//! Running graphs: the superstep loop, thread operations and subgraphs.
//!
//! A run is a sequence of supersteps. In each, every task of the frontier runs concurrently on
//! tokio; their updates are merged after all of them finish, in task order (declaration order,
//! then Send order; never finish order); then routers and edges choose the next frontier and a
//! checkpoint is saved. See `executor/` for the loop and `threads.rs` for inspection, editing
//! and time travel.
//!
//! The types a node and a caller see (settings, [`Context`], events, thread paths, snapshots,
//! [`SubgraphView`]) live in the crate's `run/` and its errors in `error.rs`, below `graph`,
//! whose nodes take them; they are public from here.
//!
//! Invariant: the runtime talks to storage only through [`Checkpointer`](crate::checkpoint::Checkpointer);
//! it knows no backend.

mod cache;
mod edit;
mod executor;
mod persist;
mod saved;
mod stream;
mod subgraph;
mod subgraph_fork;
mod subgraph_view;
mod threads;
mod triggers;

pub use crate::error::{
    NodeError, NodeErrorKind, NonDeterminism, ResumeError, RunError, StopReason,
};
pub use crate::run::config::{Durability, RunConfig, SnapshotPolicy};
pub use crate::run::context::{task_journal_key, Context, TextSink};
pub use crate::run::control::RunControl;
pub use crate::run::events::{Event, StreamMode, INTERRUPT, PROGRESS_EVENT, TOKEN_EVENT};
pub use crate::run::namespace::{self, ThreadPath};
pub use crate::run::snapshot::{StateSnapshot, SubgraphState, SubgraphView};
pub use crate::run::store::NodeStore;
pub use crate::run::store_link::SharedStore;
pub use edit::StateEdit;
pub use stream::RunStream;
pub use subgraph::Subgraph;
pub use threads::{HistoryEntry, HistoryQuery, TaskError, ThreadStatus, ThreadSummary};

use crate::checkpoint::{CheckpointId, InterruptRecord};
use crate::graph::CompiledGraph;
use crate::run::events::EventSink;
use crate::state::{State, WriteMarks};
use executor::{Identity, Run, Start};
use std::collections::BTreeMap;
use tracing::Instrument;

/// How a resumed run answers the interrupts it finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Resume {
    /// Continue without answering (after a breakpoint, a failure or a crash).
    #[default]
    Continue,
    /// Answer the single pending interrupt with this value.
    Value(serde_json::Value),
    /// Answer pending interrupts by id.
    ById(BTreeMap<String, serde_json::Value>),
}

impl Resume {
    /// Answers the single pending interrupt.
    pub fn value(value: impl serde::Serialize) -> Result<Self, serde_json::Error> {
        Ok(Resume::Value(serde_json::to_value(value)?))
    }

    /// The resume that gives a person's `answer` to the interrupts `waiting` (a snapshot's
    /// `interrupts`), as LangGraph reads `Command(resume=...)`: no answer continues; an object
    /// whose keys are all ids of the waiting dynamic interrupts, when more than one waits,
    /// answers each by id; any other value answers the single one.
    ///
    /// ```
    /// use stategraph::runtime::Resume;
    /// assert_eq!(Resume::answering(&[], None), Resume::Continue);
    /// let yes = serde_json::json!("yes");
    /// assert_eq!(Resume::answering(&[], Some(yes.clone())), Resume::Value(yes));
    /// ```
    pub fn answering(waiting: &[InterruptRecord], answer: Option<serde_json::Value>) -> Resume {
        let dynamic: Vec<&str> = waiting
            .iter()
            .filter(|i| i.when == crate::checkpoint::InterruptWhen::Dynamic)
            .map(|i| i.id.as_str())
            .collect();
        match answer {
            None => Resume::Continue,
            Some(serde_json::Value::Object(map))
                if dynamic.len() > 1 && map.keys().all(|k| dynamic.contains(&k.as_str())) =>
            {
                Resume::ById(map.into_iter().collect())
            }
            Some(v) => Resume::Value(v),
        }
    }
}

/// LangGraph's `Command(resume=..., update=..., goto=...)` given to a resume
/// ([`CompiledGraph::resume_command`]): answers to the pending interrupts, an update merged into
/// the state before the step (as input, through the reducers), and extra tasks for the step
/// (nodes, or `Send`s), which run alongside the paused tasks. Saved with the checkpoint before
/// anything runs, so a crash or a failed step keeps it.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use stategraph::{runtime::{Resume, ResumeCommand}, State};
/// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { note: String }
/// let command = ResumeCommand::<S>::new(Resume::value("yes").unwrap())
///     .update(SUpdate::default().note("checked by hand".to_string()))
///     .goto("review");
/// # let _ = command;
/// ```
pub struct ResumeCommand<S: State> {
    resume: Resume,
    update: Option<S::Update>,
    goto: Vec<crate::graph::Goto>,
}

impl<S: State> ResumeCommand<S> {
    /// A command that answers as `resume` does, with no update and no extra task yet.
    pub fn new(resume: Resume) -> Self {
        ResumeCommand {
            resume,
            update: None,
            goto: Vec::new(),
        }
    }

    /// Merges `update` into the state before the step.
    pub fn update(mut self, update: S::Update) -> Self {
        self.update = Some(update);
        self
    }

    /// Adds tasks for the step: node names or [`Send`](crate::Send)s.
    pub fn goto(mut self, route: impl Into<crate::graph::Route>) -> Self {
        self.goto.extend(route.into().0);
        self
    }
}

/// How a run ended, when it did not fail.
#[derive(Clone, Debug, PartialEq)]
pub enum RunStatus {
    /// The graph reached its end.
    Done,
    /// The run paused for a person; resume the thread to continue.
    Interrupted {
        /// What waits (answer dynamic ones by id when there are several).
        interrupts: Vec<InterruptRecord>,
        /// The nodes that run when the thread resumes.
        next: Vec<String>,
    },
}

/// The result of a run that did not fail.
#[derive(Clone, Debug)]
pub struct RunOutcome<S> {
    /// The thread.
    pub thread_id: String,
    /// This run's id.
    pub run_id: String,
    /// The state when the run stopped.
    pub state: S,
    /// Done or paused.
    pub status: RunStatus,
    /// The last checkpoint, when the graph has a checkpointer.
    pub checkpoint_id: Option<CheckpointId>,
    /// Supersteps done on the thread.
    pub step: u64,
}

impl<S> RunOutcome<S> {
    /// True when the run paused for a person.
    pub fn is_interrupted(&self) -> bool {
        matches!(self.status, RunStatus::Interrupted { .. })
    }
}

pub(crate) async fn execute<S: State>(
    graph: CompiledGraph<S>,
    start: Start<S>,
    config: RunConfig,
    events: EventSink,
) -> Result<RunOutcome<S>, RunError> {
    let (run, status) = execute_run(graph, start, config, events, None, false).await?;
    Ok(run.into_outcome(status))
}

/// Runs a root graph to its end or pause and hands back the finished run, for [`execute`] to
/// shape into a [`RunOutcome`]; a subgraph's run is [`nested_run`]. `nested` and `mark` (what
/// `nested_run` passes on) are always `None` and `false` here, but taking them keeps the root
/// run's future as it is: without them every root run cost ~700 instructions more (callgrind,
/// subgraph bench, `flat` 77.3k to 78.0k), its future laid out and moved differently.
pub(crate) async fn execute_run<S: State>(
    graph: CompiledGraph<S>,
    start: Start<S>,
    config: RunConfig,
    events: EventSink,
    nested: Option<Identity>,
    mark: bool,
) -> Result<(Run<S>, RunStatus), RunError> {
    let span = run_span(&graph);
    run_in_span(graph, start, config, events, nested, mark)
        .instrument(span)
        .await
}

/// A subgraph's run (`nested`: its namespace and what it shares with its parent's run), as a
/// future made in one go, which its caller boxes; with `mark`, the run records which fields
/// its steps wrote (its input aside). Awaited inside an `async fn` as the root's is, the run's
/// future was held twice in that function's own (once made, once instrumented): 13 KB where
/// the run needs 7, all of it copied into the box.
pub(crate) fn nested_run<S: State>(
    graph: CompiledGraph<S>,
    start: Start<S>,
    config: RunConfig,
    events: EventSink,
    nested: Identity,
    mark: bool,
) -> impl std::future::Future<Output = Result<(Run<S>, RunStatus), RunError>> + Send {
    let span = run_span(&graph);
    run_in_span(graph, start, config, events, Some(nested), mark).instrument(span)
}

fn run_span<S: State>(graph: &CompiledGraph<S>) -> tracing::Span {
    tracing::info_span!(
        "run",
        graph = graph.name().unwrap_or("graph"),
        thread_id = tracing::field::Empty,
        run_id = tracing::field::Empty
    )
}

/// The run itself, inside its span (see [`run_span`]).
async fn run_in_span<S: State>(
    graph: CompiledGraph<S>,
    start: Start<S>,
    config: RunConfig,
    events: EventSink,
    nested: Option<Identity>,
    mark: bool,
) -> Result<(Run<S>, RunStatus), RunError> {
    let (mut run, lease) = Run::start(graph, start, config, events.clone(), nested).await?;
    if mark {
        run.marks = Some(WriteMarks::new());
    }
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("thread_id", run.thread_id());
        span.record("run_id", run.run_id());
    }
    events.emit(|| Event::RunStarted {
        namespace: String::new(),
        thread_id: run.thread_id().to_string(),
        run_id: run.run_id().to_string(),
        step: run.step(),
    });
    // One drive future, watched beside the lease when there is one: it is the bulk of
    // the run's future, which is moved (and for a subgraph boxed) whole.
    let result = {
        let drive = run.drive();
        tokio::pin!(drive);
        match &lease {
            Some(lease) => tokio::select! {
                result = &mut drive => result,
                // The lease was taken over; the run goes on, as it would with a lapsed one.
                () = lease.keep_alive() => drive.await,
            },
            None => drive.await,
        }
    };
    let finished = run.finish().await;
    if let Some(lease) = lease {
        lease.release().await;
    }
    let status = match &result {
        Ok(RunStatus::Done) => "done",
        Ok(RunStatus::Interrupted { .. }) => "interrupted",
        Err(RunError::Cancelled { .. }) => "cancelled",
        Err(RunError::Stopped { .. }) => "stopped",
        Err(_) => "failed",
    };
    events.emit(|| Event::RunFinished {
        namespace: String::new(),
        step: run.step(),
        status: status.to_string(),
    });
    // A run stopped at a step boundary says its step is saved: only once it is.
    let finished = match (&result, finished) {
        (Err(RunError::Stopped { .. }), Err(unsaved)) => return Err(unsaved),
        (_, finished) => finished,
    };
    let status = result?;
    finished?;
    Ok((run, status))
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph on `input` (applied like any update, on top of the thread's state when the
    /// thread already exists) until it ends or pauses.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{graph::StateGraph, runtime::{Context, RunConfig}, State, START, END};
    /// #[derive(State, Clone, Default, Serialize, Deserialize)]
    /// struct S { #[state(append)] log: Vec<String> }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("hello", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default().log(vec!["hi".to_string()])) });
    /// g.add_edge(START, "hello").add_edge("hello", END);
    /// let out = g.compile().unwrap().invoke(SUpdate::default(), RunConfig::new()).await.unwrap();
    /// assert_eq!(out.state.log, vec!["hi"]);
    /// # }
    /// ```
    ///
    /// Called inside a node without a thread of its own (`config.thread_id` unset), the graph
    /// runs as a child of the node's task, as in LangGraph: checkpointed in the parent's thread
    /// under the task's namespace, and when it pauses the whole run pauses (whatever the node
    /// then returns); on resume the node runs again and this call continues the child where it
    /// paused. (A tokio task the node spawns is not the node: a graph invoked there runs on
    /// its own.)
    pub async fn invoke(
        &self,
        input: S::Update,
        config: RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        if config.thread_id.is_none() && config.checkpoint_id.is_none() {
            if let Some(ctx) = crate::run::context::current_task() {
                return subgraph::invoke_as_child(&ctx, self, input, &config).await;
            }
        }
        execute(
            self.clone(),
            Start::Input(input),
            config,
            EventSink::default(),
        )
        .await
    }

    /// Continues a thread from its newest checkpoint (or `config.checkpoint_id`, which replays
    /// from that checkpoint on a new branch). Tasks whose results were saved are not run again.
    pub async fn resume(
        &self,
        thread_id: &str,
        resume: Resume,
        config: RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        let start = Start::Resume {
            thread_id: thread_id.to_string(),
            resume,
        };
        execute(self.clone(), start, config, EventSink::default()).await
    }

    /// Continues a thread with a [`ResumeCommand`]: its answers, then its update merged and its
    /// gotos added to the step's tasks (LangGraph's `invoke(Command(resume=..., update=...,
    /// goto=...))`).
    pub async fn resume_command(
        &self,
        thread_id: &str,
        command: ResumeCommand<S>,
        config: RunConfig,
    ) -> Result<RunOutcome<S>, RunError> {
        let start = Start::Command {
            thread_id: thread_id.to_string(),
            resume: command.resume,
            update: command.update,
            goto: command.goto,
        };
        execute(self.clone(), start, config, EventSink::default()).await
    }

    /// Like [`invoke`](Self::invoke), but yields the run's [`Event`]s as they happen; await
    /// [`RunStream::outcome`] for the result.
    pub fn stream(&self, input: S::Update, config: RunConfig) -> RunStream<S> {
        RunStream::spawn(self.clone(), Start::Input(input), config)
    }

    /// Like [`resume_command`](Self::resume_command), as a stream of events (what a server
    /// streams when a client resumes with `Command(update=..., goto=...)`).
    pub fn stream_resume_command(
        &self,
        thread_id: &str,
        command: ResumeCommand<S>,
        config: RunConfig,
    ) -> RunStream<S> {
        let start = Start::Command {
            thread_id: thread_id.to_string(),
            resume: command.resume,
            update: command.update,
            goto: command.goto,
        };
        RunStream::spawn(self.clone(), start, config)
    }

    /// Like [`resume`](Self::resume), as a stream of events.
    pub fn stream_resume(
        &self,
        thread_id: &str,
        resume: Resume,
        config: RunConfig,
    ) -> RunStream<S> {
        let start = Start::Resume {
            thread_id: thread_id.to_string(),
            resume,
        };
        RunStream::spawn(self.clone(), start, config)
    }
}
