//! Nodes: the units of work in a graph, and the options that govern how each one runs.

use super::cache_policy::CachePolicy;
use super::command::Command;
use super::on_error::OnError;
use crate::error::NodeError;
use crate::run::context::Context;
use crate::run::snapshot::SubgraphView;
use crate::state::State;
use async_trait::async_trait;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A step of work over the state: reads the state, returns an update (and maybe where to go).
///
/// Most nodes are async closures given to [`StateGraph::add_node`](super::StateGraph::add_node);
/// implement this trait for nodes that carry their own configuration or clients:
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use serde::{Deserialize, Serialize};
/// use stategraph::{graph::Node, runtime::{Context, NodeError}, Command, State};
///
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Doc { #[state(append)] lines: Vec<String> }
///
/// struct Stamp { text: String }
///
/// #[async_trait]
/// impl Node<Doc> for Stamp {
///     async fn run(&self, _state: Arc<Doc>, _ctx: Context) -> Result<Command<Doc>, NodeError> {
///         Ok(DocUpdate::default().lines(vec![self.text.clone()]).into())
///     }
/// }
/// ```
#[async_trait]
pub trait Node<S: State>: Send + Sync + 'static {
    /// Runs the node once. `state` is the state as of the start of the superstep; sibling
    /// tasks' writes of the same step are not visible.
    async fn run(&self, state: Arc<S>, ctx: Context) -> Result<Command<S>, NodeError>;

    /// The graphs this node runs as subgraphs, so reading a thread with its subgraphs can show
    /// their values, a child namespace can be edited and drawings can expand them. Compiled
    /// graphs and [`Subgraph`](crate::runtime::Subgraph) nodes say so themselves; a node that
    /// calls [`Context::run_subgraph`] returns its graphs here (or is declared with
    /// [`NodeSpec::subgraph`]).
    fn subgraphs(&self) -> Vec<Arc<dyn SubgraphView>> {
        Vec::new()
    }
}

/// Adapts an async closure (or `async fn`) to [`Node`].
pub(crate) struct FnNode<F, Fut, O> {
    f: F,
    _marker: PhantomData<fn() -> (Fut, O)>,
}

impl<F, Fut, O> FnNode<F, Fut, O> {
    pub(crate) fn new(f: F) -> Self {
        FnNode {
            f,
            _marker: PhantomData,
        }
    }
}

#[async_trait]
impl<S, F, Fut, O> Node<S> for FnNode<F, Fut, O>
where
    S: State,
    F: Fn(Arc<S>, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<Command<S>> + 'static,
{
    async fn run(&self, state: Arc<S>, ctx: Context) -> Result<Command<S>, NodeError> {
        (self.f)(state, ctx).await.map(Into::into)
    }
}

/// Anything [`StateGraph::add_node`](super::StateGraph::add_node) takes: an async closure or
/// `async fn` of the state and a [`Context`], a [`Node`] impl, a compiled graph over the same
/// state (a subgraph), or a [`Subgraph`](crate::runtime::Subgraph) of another state type.
///
/// `M` only tells the forms apart; it is inferred.
pub trait IntoNode<S: State, M> {
    /// The node, ready to be shared by the graph's tasks.
    fn into_node(self) -> Arc<dyn Node<S>>;
}

/// The [`IntoNode`] form of async closures.
#[doc(hidden)]
pub struct FnMarker<Fut, O>(PhantomData<fn() -> (Fut, O)>);

/// The [`IntoNode`] form of [`Node`] impls.
#[doc(hidden)]
pub struct NodeMarker;

impl<S, F, Fut, O> IntoNode<S, FnMarker<Fut, O>> for F
where
    S: State,
    F: Fn(Arc<S>, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, NodeError>> + Send + 'static,
    O: Into<Command<S>> + 'static,
{
    fn into_node(self) -> Arc<dyn Node<S>> {
        Arc::new(FnNode::new(self))
    }
}

impl<S: State, N: Node<S>> IntoNode<S, NodeMarker> for N {
    fn into_node(self) -> Arc<dyn Node<S>> {
        Arc::new(self)
    }
}

/// Which failed attempts a [`RetryPolicy`] retries.
pub type RetryPredicate = Arc<dyn Fn(&NodeError) -> bool + Send + Sync>;

/// How a node's failed attempts are retried: exponential backoff with jitter.
///
/// ```
/// use std::time::Duration;
/// use stategraph::graph::RetryPolicy;
/// let policy = RetryPolicy::new(5).initial_interval(Duration::from_millis(200));
/// assert_eq!(policy.max_attempts, 5);
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_interval: Duration,
    /// Each further wait is this many times the previous one.
    pub backoff_factor: f64,
    /// No wait is longer than this.
    pub max_interval: Duration,
    /// Waits are scaled by a random factor in [0.5, 1.5) so retries of many runs spread out.
    pub jitter: bool,
    /// Which errors are retried; by default transient ones and timeouts
    /// ([`NodeError::is_transient`]).
    pub retry_on: RetryPredicate,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(60),
            jitter: true,
            retry_on: Arc::new(NodeError::is_transient),
        }
    }
}

impl RetryPolicy {
    /// The default policy with `max_attempts` attempts.
    pub fn new(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            ..Self::default()
        }
    }

    /// Sets the first wait.
    pub fn initial_interval(mut self, d: Duration) -> Self {
        self.initial_interval = d;
        self
    }

    /// Sets the growth factor of waits.
    pub fn backoff_factor(mut self, factor: f64) -> Self {
        self.backoff_factor = factor;
        self
    }

    /// Caps each wait.
    pub fn max_interval(mut self, d: Duration) -> Self {
        self.max_interval = d;
        self
    }

    /// Turns jitter on or off.
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Chooses which errors are retried.
    pub fn retry_on(
        mut self,
        predicate: impl Fn(&NodeError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Arc::new(predicate);
        self
    }

    /// The wait before attempt `attempt + 1`, after `attempt` failed attempts (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .backoff_factor
            .max(1.0)
            .powi(attempt.saturating_sub(1) as i32);
        let base = self.initial_interval.as_secs_f64() * exp;
        let scaled = if self.jitter {
            base * (0.5 + rand::random::<f64>())
        } else {
            base
        };
        Duration::from_secs_f64(scaled.min(self.max_interval.as_secs_f64()).max(0.0))
    }
}

/// How one node runs: timeout, retries, deferral, declared command destinations.
#[derive(Clone, Debug, Default)]
pub struct NodeOptions {
    /// Each attempt is cancelled after this long and counts as a (transient) failure.
    pub timeout: Option<Duration>,
    /// Each attempt is cancelled once it has shown no sign of life
    /// ([`Context::heartbeat`], an event, a streamed piece of text) for this long, and counts
    /// as a (transient) failure.
    pub idle_timeout: Option<Duration>,
    /// Retries of failed attempts; none by default.
    pub retry: Option<RetryPolicy>,
    /// Run only once nothing else is pending (e.g. a final join over branches of unequal length).
    pub deferred: bool,
    /// Where this node's commands may send the run (checked at run time; drawn as edges).
    pub destinations: Vec<String>,
    /// Graphs the node runs with [`Context::run_subgraph`], declared with
    /// [`NodeSpec::subgraph`].
    pub subgraphs: Vec<Arc<dyn SubgraphView>>,
    /// Serves results for inputs seen before from the run's cache ([`NodeSpec::cache`]).
    pub cache: Option<CachePolicy>,
    /// Where the run goes when the node's retries are spent ([`NodeSpec::on_error`]).
    pub on_error: Option<OnError>,
}

/// The handle returned by [`StateGraph::add_node`](super::StateGraph::add_node), to set a
/// node's options in place.
///
/// ```
/// # use std::{sync::Arc, time::Duration};
/// # use serde::{Deserialize, Serialize};
/// # use stategraph::{graph::{StateGraph, RetryPolicy}, runtime::{Context, NodeError}, State};
/// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { n: u32 }
/// let mut g = StateGraph::<S>::new();
/// g.add_node("fetch", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default()) })
///     .timeout(Duration::from_secs(30))
///     .retry(RetryPolicy::new(3));
/// ```
pub struct NodeSpec<'g> {
    pub(crate) options: &'g mut NodeOptions,
}

impl NodeSpec<'_> {
    /// Cancels each attempt after `d`.
    pub fn timeout(&mut self, d: Duration) -> &mut Self {
        self.options.timeout = Some(d);
        self
    }

    /// Cancels an attempt that shows no sign of life for longer than `d`: no
    /// [`Context::heartbeat`], no event emitted, no text streamed. The attempt fails with a
    /// timeout error naming the node and how long it was silent, which the node's retry
    /// policy sees as any timeout (the default policy retries it). A model stream heartbeats
    /// with each piece; work that cannot, such as a tool call, runs inside
    /// [`Context::heartbeat_during`].
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{graph::{StateGraph, RetryPolicy}, runtime::{Context, NodeError}, State};
    /// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { n: u32 }
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("research", |_s: Arc<S>, ctx: Context| async move {
    ///     ctx.heartbeat(); // after each piece of progress
    ///     Ok::<_, NodeError>(SUpdate::default().n(1))
    /// })
    /// .idle_timeout(Duration::from_secs(60))
    /// .retry(RetryPolicy::new(3));
    /// ```
    pub fn idle_timeout(&mut self, d: Duration) -> &mut Self {
        self.options.idle_timeout = Some(d);
        self
    }

    /// Retries failed attempts by `policy`.
    pub fn retry(&mut self, policy: RetryPolicy) -> &mut Self {
        self.options.retry = Some(policy);
        self
    }

    /// Runs the node only once nothing else is pending.
    pub fn deferred(&mut self) -> &mut Self {
        self.options.deferred = true;
        self
    }

    /// Declares where the node's commands may go.
    pub fn destinations<I, T>(&mut self, targets: I) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.options
            .destinations
            .extend(targets.into_iter().map(Into::into));
        self
    }
}

impl NodeSpec<'_> {
    /// Caches the node's results by `policy` (see [`CachePolicy`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use serde::{Deserialize, Serialize};
    /// # use stategraph::{graph::{StateGraph, CachePolicy}, runtime::{Context, NodeError}, State};
    /// # #[derive(State, Clone, Default, Serialize, Deserialize)] struct S { n: u32 }
    /// let mut g = StateGraph::<S>::new();
    /// g.add_node("slow", |_s: Arc<S>, _c: Context| async { Ok(SUpdate::default().n(1)) })
    ///     .cache(CachePolicy::new());
    /// ```
    pub fn cache(&mut self, policy: CachePolicy) -> &mut Self {
        self.options.cache = Some(policy);
        self
    }
}

impl NodeSpec<'_> {
    /// When the node fails after its retries, writes the [`NodeFailure`](super::on_error::NodeFailure) into state field
    /// `field` and runs `handler` next instead of failing the run. The node's own edges and
    /// routers are not followed; the handler's decide what follows (try again, skip ahead, or
    /// end with a verdict). The failure and the route are saved in the step's checkpoint like
    /// any step's writes, so a run killed in the handler resumes in the handler.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use serde::{Deserialize, Serialize};
    /// use stategraph::graph::{NodeFailure, StateGraph};
    /// use stategraph::runtime::{Context, NodeError};
    /// use stategraph::{State, END, START};
    ///
    /// #[derive(State, Clone, Default, Serialize, Deserialize)]
    /// struct Job { failure: Option<NodeFailure>, note: String }
    ///
    /// let mut g = StateGraph::<Job>::new();
    /// g.add_node("fetch", |_s: Arc<Job>, _c: Context| async {
    ///     Err::<JobUpdate, _>(NodeError::new("connection refused"))
    /// })
    /// .on_error("recover", "failure");
    /// g.add_node("recover", |s: Arc<Job>, _c: Context| async move {
    ///     let failed = s.failure.as_ref().map(|f| f.node.clone()).unwrap_or_default();
    ///     Ok(JobUpdate::default().note(format!("skipped {failed}")))
    /// });
    /// g.add_edge(START, "fetch").add_edge("fetch", END).add_edge("recover", END);
    /// assert!(g.compile().is_ok());
    /// ```
    pub fn on_error(&mut self, handler: impl Into<String>, field: impl Into<String>) -> &mut Self {
        let handler = handler.into();
        // The handler is where the node may send the run: drawn, and reachable for validation.
        if !self.options.destinations.contains(&handler) {
            self.options.destinations.push(handler.clone());
        }
        self.options.on_error = Some(OnError {
            handler,
            field: field.into(),
        });
        self
    }
}
