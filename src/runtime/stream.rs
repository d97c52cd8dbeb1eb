use super::executor::Start;
use super::{execute, RunConfig, RunControl, RunError, RunOutcome};
use crate::graph::CompiledGraph;
use crate::run::events::{Event, EventSink, Modes};
use crate::state::State;
use futures::Stream;
use std::pin::Pin;
use std::task::{Context as TaskCx, Poll};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A running graph seen as a stream of [`Event`]s. Dropping it cancels the run (its last
/// checkpoint is kept).
///
/// ```no_run
/// # use futures::StreamExt;
/// # async fn demo<S: stategraph::State>(graph: stategraph::graph::CompiledGraph<S>, input: S::Update) {
/// let mut run = graph.stream(input, Default::default());
/// while let Some(event) = run.next().await {
///     println!("{}", serde_json::to_string(&event).unwrap());
/// }
/// let outcome = run.outcome().await;
/// # let _ = outcome; }
/// ```
pub struct RunStream<S: State> {
    events: mpsc::UnboundedReceiver<Event>,
    handle: Option<JoinHandle<Result<RunOutcome<S>, RunError>>>,
    control: RunControl,
}

impl<S: State> RunStream<S> {
    pub(crate) fn spawn(graph: CompiledGraph<S>, start: Start<S>, mut config: RunConfig) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let modes = Modes::of(&config.stream);
        let control = config.control.get_or_insert_with(RunControl::new).clone();
        let handle = tokio::spawn(execute(graph, start, config, EventSink::new(tx, modes)));
        RunStream {
            events: rx,
            handle: Some(handle),
            control,
        }
    }

    /// The run's [`RunControl`] (the config's, or one made for the stream): drain the run
    /// with it, and its step in flight finishes and is saved before it stops.
    ///
    /// ```no_run
    /// # use futures::StreamExt;
    /// # async fn demo<S: stategraph::State>(graph: stategraph::graph::CompiledGraph<S>, input: S::Update) {
    /// let mut run = graph.stream(input, Default::default());
    /// let control = run.control();
    /// while let Some(_event) = run.next().await {
    ///     control.request_drain(); // stop after the step in flight
    /// }
    /// let outcome = run.outcome().await; // Err(RunError::Stopped { .. }), resumable
    /// # let _ = outcome; }
    /// ```
    pub fn control(&self) -> RunControl {
        self.control.clone()
    }

    /// Waits for the run to end and returns its result (remaining events are dropped).
    pub async fn outcome(mut self) -> Result<RunOutcome<S>, RunError> {
        let Some(handle) = self.handle.take() else {
            return Err(RunError::InvalidInput(
                "the run's outcome was already taken".into(),
            ));
        };
        match handle.await {
            Ok(result) => result,
            Err(e) => Err(RunError::InvalidInput(format!(
                "the run stopped abnormally: {e}"
            ))),
        }
    }
}

impl<S: State> Stream for RunStream<S> {
    type Item = Event;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Option<Event>> {
        self.events.poll_recv(cx)
    }
}

impl<S: State> Drop for RunStream<S> {
    fn drop(&mut self) {
        if let Some(h) = &self.handle {
            h.abort();
        }
    }
}
