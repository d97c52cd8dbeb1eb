//! Stopping on time and on request: a run's step boundary (a drain asked through its
//! [`RunControl`](crate::runtime::RunControl), or its run timeout passed) and a node's idle
//! timeout (no heartbeat for too long).
//!
//! Both kinds of stop keep durability's promise: a run stops only between steps, after the
//! step's checkpoint, so nothing it did is lost and a resume runs nothing twice; an idle node's
//! attempt is cancelled like one past its timeout, as a failed attempt its retry policy sees.

use super::Run;
use crate::error::{duration_text, NodeError, NodeErrorKind, RunError, StopReason};
use crate::run::config::RunConfig;
use crate::run::context::{current_task, Context};
use crate::run::control::{Heartbeat, RunControl};
use crate::run::namespace::ThreadPath;
use crate::state::State;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// What a run checks between steps: whether a drain was asked for, or its time is up. Only a
/// root run has one: a subgraph's steps are inside a step of its parent, which stops at its
/// own boundary.
pub(super) struct Boundary {
    started: Instant,
    limit: Option<Duration>,
    control: Option<RunControl>,
}

impl Boundary {
    /// The checks `config` asks for, counted from now; `None` when it asks for none.
    pub(super) fn of(config: &RunConfig) -> Option<Boundary> {
        if config.run_timeout.is_none() && config.control.is_none() {
            return None;
        }
        Some(Boundary {
            started: Instant::now(),
            limit: config.run_timeout,
            control: config.control.clone(),
        })
    }

    /// Why the run must not start another step, if it must not.
    fn reached(&self) -> Option<StopReason> {
        if self
            .control
            .as_ref()
            .is_some_and(RunControl::drain_requested)
        {
            return Some(StopReason::Drained);
        }
        let limit = self.limit?;
        let elapsed = self.started.elapsed();
        (elapsed >= limit).then_some(StopReason::RunTimeout { limit, elapsed })
    }
}

impl<S: State> Run<S> {
    /// At a step boundary (the previous step saved, the next not started): the run's stop when
    /// `boundary` says it must not go on.
    pub(super) fn stop_here(&self, boundary: Option<&Boundary>) -> Option<RunError> {
        let reason = boundary?.reached()?;
        Some(RunError::Stopped {
            thread_id: self.thread_id.to_string(),
            step: self.step,
            reason,
            next: self.frontier.next_nodes(),
            saved: self.writer.is_some(),
        })
    }
}

/// The heartbeat a task of the run at `path` passes its beats to: that of the task running the
/// run's graph as a subgraph (the current tokio task's node), when that task has one.
pub(super) fn parent_heartbeat(path: &ThreadPath) -> Option<Heartbeat> {
    if path.is_root() {
        return None;
    }
    current_task().and_then(|ctx| ctx.task().heartbeat.clone())
}

/// `attempt` (a node's attempt, its panic caught) under the node's idle timeout: cancelled,
/// as a failed attempt, once the task has been silent for longer than `idle`. The attempt's
/// start counts as a sign of life.
pub(super) async fn idle_guard<T, P>(
    ctx: &Context,
    node: &str,
    idle: Option<Duration>,
    attempt: impl Future<Output = Result<Result<T, NodeError>, P>>,
) -> Result<Result<T, NodeError>, P> {
    let Some(heartbeat) = ctx.task().heartbeat.as_ref() else {
        return attempt.await;
    };
    heartbeat.beat();
    // A task that only passes its beats on (a subgraph's, under a watched node) is not
    // watched itself.
    let Some(idle) = idle else {
        return attempt.await;
    };
    tokio::pin!(attempt);
    loop {
        let silence = heartbeat.silence();
        if silence >= idle {
            return Ok(Err(NodeError::with_kind(
                NodeErrorKind::Timeout(idle),
                format!(
                    "node `{node}` showed no sign of life for {}, longer than its idle timeout \
                     of {}, and its attempt was cancelled (a node that works long without \
                     emitting or streaming says it is alive with Context::heartbeat)",
                    duration_text(silence),
                    duration_text(idle)
                ),
            )));
        }
        tokio::select! {
            biased;
            done = &mut attempt => return done,
            () = tokio::time::sleep(idle - silence) => {}
        }
    }
}
