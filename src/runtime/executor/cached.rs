//! Where the loop meets the node cache (`runtime/cache.rs`): a task's cache entry when it is
//! prepared, a hit served in place of running the node, a finished result stored.

use super::{Outcome, PreparedTask, Run};
use crate::checkpoint::TaskSpec;
use crate::run::events::{Event, EventSink};
use crate::runtime::cache::{self, MarkAt, TaskCache};
use crate::state::State;
use std::time::Instant;

impl<S: State> Run<S> {
    /// The cache entry of task `index` of node `options`'s, when the run has a cache and the
    /// node a cache policy.
    pub(super) fn task_cache(
        &self,
        index: usize,
        spec: &TaskSpec,
        options: &crate::graph::NodeOptions,
    ) -> Option<TaskCache> {
        options.cache.as_ref()?;
        let mark = self.store().map(|store| MarkAt {
            store: store.clone(),
            thread: self.thread_id.clone(),
            checkpoint: self.checkpoint_id,
            task: index,
            run_id: self.run_id.clone(),
        });
        cache::for_task(
            self.inherit.cache.as_ref(),
            options,
            self.graph.name(),
            &spec.node,
            (&*self.state, spec.arg.as_ref()),
            mark,
        )
    }
}

/// The task's cached result, when its input's entry holds one that still fits: the task is
/// done without running its node.
pub(super) async fn served<S: State>(
    task: &PreparedTask<S>,
    events: &EventSink,
    step: u64,
    started: Option<Instant>,
) -> Option<Outcome<S>> {
    let cache = task.cache.as_ref()?;
    let command = cache.lookup::<S>().await?;
    cache.mark_hit().await;
    let elapsed_ms = started.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
    events.live(|| Event::NodeFinished {
        namespace: String::new(),
        step,
        node: task.name.to_string(),
        task: task.index,
        duration_ms: elapsed_ms,
        update: serde_json::to_value(&command.update).unwrap_or_default(),
        cached: true,
    });
    Some(Outcome::Done {
        command,
        raw: None,
        elapsed_ms,
        cached: true,
    })
}

/// Stores a task's finished result for the next task with the same input.
pub(super) async fn keep<S: State>(task: &PreparedTask<S>, outcome: &Outcome<S>) {
    if let (Some(cache), Outcome::Done { command, .. }) = (&task.cache, outcome) {
        cache.store(command).await;
    }
}
