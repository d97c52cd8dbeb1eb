//! A run's events as Server-Sent Events, in LangGraph's names and shapes:
//!
//! - `metadata` first (`{"run_id", "attempt"}`), `end` last (`{"run_id", "status"}`), `error`
//!   before it when the run failed (`{"error", "message"}`);
//! - `values`: the whole state after each step that wrote it (first, on a resume, the state it
//!   resumes from); `updates`: `{node: update}` per task, in task order; a pause is
//!   `{"__interrupt__": [{"value", "id"}]}` in `updates` and the state with that key in
//!   `values` (a static breakpoint: in `updates` only), as LangGraph streams them;
//! - `custom`: what a node emitted (`Context::emit`'s payload); `messages`: model text as
//!   `[chunk, metadata]`;
//! - `debug`: `{"type": "task" | "task_result" | "checkpoint", "timestamp", "step", "payload"}`;
//!   `tasks` and `checkpoints`: the payloads of its task events and of its checkpoint events
//!   alone, as LangGraph's modes of those names stream them.
//!
//! With `stream_subgraphs`, a subgraph's events are named `mode|node:task` (levels joined by
//! `|`); without, they are left out. Every event carries its id in the run (`id:`).

use super::error::ApiError;
use super::runs::log::{EventLog, Frame};
use super::shapes::{interrupts, iso};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{stream, Stream, StreamExt};
use serde_json::{json, Value};
use stategraph::checkpoint::now_ms;
use stategraph::checkpoint::InterruptRecord;
use stategraph::runtime::{Event, StreamMode, INTERRUPT};
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;

/// A stream mode a request may name: the engine's, and two views of its debug events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    Values,
    Updates,
    Custom,
    Messages,
    Debug,
    /// Debug's task and task result events, their payloads alone.
    Tasks,
    /// Debug's checkpoint events, their payloads alone.
    Checkpoints,
}

impl Mode {
    /// The SSE name of the mode's events.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Values => "values",
            Mode::Updates => "updates",
            Mode::Custom => "custom",
            Mode::Messages => "messages",
            Mode::Debug => "debug",
            Mode::Tasks => "tasks",
            Mode::Checkpoints => "checkpoints",
        }
    }
}

/// Reads the stream modes a request names; `messages-tuple` is `messages`.
pub(crate) fn parse_modes(names: &[&str], field: &str) -> Result<BTreeSet<Mode>, ApiError> {
    names
        .iter()
        .map(|name| match *name {
            "values" => Ok(Mode::Values),
            "updates" => Ok(Mode::Updates),
            "custom" => Ok(Mode::Custom),
            "debug" => Ok(Mode::Debug),
            "messages" | "messages-tuple" => Ok(Mode::Messages),
            "tasks" => Ok(Mode::Tasks),
            "checkpoints" => Ok(Mode::Checkpoints),
            other => Err(ApiError::invalid(
                field,
                format!(
                    "stream mode `{other}` is not served here; use values, updates, custom, \
                     messages, debug, tasks or checkpoints"
                ),
            )),
        })
        .collect()
}

/// Turns a run's engine events into its stream's events.
pub(crate) struct Mapper {
    modes: BTreeSet<Mode>,
    subgraphs: bool,
    /// The root's state after its latest step, for debug checkpoint events.
    last_values: Value,
    /// The root's latest checkpoint, which the next step's task ids are made from.
    last_checkpoint: Option<String>,
}

impl Mapper {
    pub fn new(modes: BTreeSet<Mode>, subgraphs: bool) -> Self {
        Mapper {
            modes,
            subgraphs,
            last_values: Value::Null,
            last_checkpoint: None,
        }
    }

    /// What the engine must stream for these modes: debug always (checkpoints come through
    /// it, and the tasks and checkpoints modes are views of it), values too when checkpoints
    /// are shown (they hold the state). A pause comes in the updates and values modes
    /// themselves.
    pub fn engine_modes(&self) -> BTreeSet<StreamMode> {
        let fed_by = |mode: &Mode| match mode {
            Mode::Values | Mode::Debug | Mode::Checkpoints => Some(StreamMode::Values),
            Mode::Updates => Some(StreamMode::Updates),
            Mode::Custom => Some(StreamMode::Custom),
            Mode::Messages => Some(StreamMode::Messages),
            Mode::Tasks => None,
        };
        let mut modes = BTreeSet::from([StreamMode::Debug]);
        modes.extend(self.modes.iter().filter_map(fed_by));
        modes
    }

    /// Appends what `event` becomes (nothing, or one or two events) to `log`.
    pub fn push(&mut self, event: Event, log: &EventLog) {
        let ns = event.namespace().to_string();
        if !ns.is_empty() && !self.subgraphs {
            return;
        }
        let name = |mode: Mode| match ns.is_empty() {
            true => std::borrow::Cow::Borrowed(mode.name()),
            false => format!("{}|{}", mode.name(), ns.replace('/', "|")).into(),
        };
        let out: Vec<(Mode, Value)> = match event {
            Event::Values {
                mut values,
                interrupts: waits,
                ..
            } => {
                if ns.is_empty() && self.shows_checkpoints() {
                    self.last_values = values.clone();
                }
                // A pause: the state with what waits beside it, as LangGraph streams it.
                if !waits.is_empty() {
                    match values.as_object_mut() {
                        Some(state) => {
                            state.insert(INTERRUPT.into(), interrupts(&waits));
                        }
                        None => values = json!({ INTERRUPT: interrupts(&waits) }),
                    }
                }
                vec![(Mode::Values, values)]
            }
            Event::Updates { node, update, .. } if node == INTERRUPT => {
                // The engine lists what waits as its records; clients read LangGraph's shape.
                let waits: Vec<InterruptRecord> =
                    serde_json::from_value(update).unwrap_or_default();
                vec![(Mode::Updates, json!({ INTERRUPT: interrupts(&waits) }))]
            }
            Event::Updates { node, update, .. } => {
                vec![(Mode::Updates, json!({ node: update }))]
            }
            Event::Custom { payload, .. } => vec![(Mode::Custom, payload)],
            Event::Message {
                node, text, step, ..
            } => vec![(
                Mode::Messages,
                json!([
                    {"type": "AIMessageChunk", "content": text},
                    {"langgraph_node": node, "langgraph_step": step},
                ]),
            )],
            other => match self.debug(other, ns.is_empty(), self.shows_debug()) {
                Some(debug) => {
                    let view = match debug["type"] == "checkpoint" {
                        true => Mode::Checkpoints,
                        false => Mode::Tasks,
                    };
                    vec![(view, debug["payload"].clone()), (Mode::Debug, debug)]
                }
                None => Vec::new(),
            },
        };
        for (mode, data) in out {
            if self.modes.contains(&mode) {
                log.push(&name(mode), Some(mode.name()), &data);
            }
        }
    }

    /// Whether a mode made of debug events is asked for.
    fn shows_debug(&self) -> bool {
        self.shows_checkpoints() || self.modes.contains(&Mode::Tasks)
    }

    /// Whether checkpoints (which show the state) are asked for.
    fn shows_checkpoints(&self) -> bool {
        self.modes.contains(&Mode::Debug) || self.modes.contains(&Mode::Checkpoints)
    }

    /// A debug event (`task`, `task_result`, `checkpoint`), if `event` is one and `shown` (a
    /// run's modes do not change: a run that shows none never needs the checkpoints kept).
    fn debug(&mut self, event: Event, root: bool, shown: bool) -> Option<Value> {
        if !shown {
            return None;
        }
        let task_id = |step: u64, task: usize, last: &Option<String>| match last {
            Some(c) => format!("{c}:{task}"),
            None => format!("step-{step}:{task}"),
        };
        let (kind, step, payload) = match event {
            Event::NodeStarted {
                step, node, task, ..
            } => {
                let id = task_id(step, task, &self.last_checkpoint);
                let payload = json!({"id": id, "name": node, "input": null, "triggers": []});
                ("task", step, payload)
            }
            Event::NodeFinished {
                step,
                node,
                task,
                update,
                ..
            } => {
                let id = task_id(step, task, &self.last_checkpoint);
                let payload = json!({"id": id, "name": node, "error": null, "result": update, "interrupts": []});
                ("task_result", step, payload)
            }
            Event::NodeFailed {
                step,
                node,
                task,
                error,
                will_retry: false,
                ..
            } => {
                let id = task_id(step, task, &self.last_checkpoint);
                let payload =
                    json!({"id": id, "name": node, "error": error, "result": {}, "interrupts": []});
                ("task_result", step, payload)
            }
            Event::CheckpointSaved {
                step,
                checkpoint_id,
                next,
                ..
            } => {
                let payload = self.checkpoint_payload(&checkpoint_id, step, &next);
                if root {
                    self.last_checkpoint = Some(checkpoint_id);
                }
                ("checkpoint", step, payload)
            }
            _ => return None,
        };
        Some(json!({"type": kind, "timestamp": iso(now_ms()), "step": step, "payload": payload}))
    }

    fn checkpoint_payload(&self, checkpoint_id: &str, step: u64, next: &[String]) -> Value {
        let config = |id: &Option<String>| {
            id.as_ref()
                .map(|id| json!({"configurable": {"checkpoint_ns": "", "checkpoint_id": id}}))
        };
        let tasks: Vec<Value> = next
            .iter()
            .enumerate()
            .map(|(i, node)| {
                json!({"id": format!("{checkpoint_id}:{i}"), "name": node, "interrupts": [], "state": null})
            })
            .collect();
        json!({
            "config": config(&Some(checkpoint_id.to_string())),
            "parent_config": config(&self.last_checkpoint),
            "values": self.last_values,
            "metadata": {"step": step},
            "next": next,
            "tasks": tasks,
        })
    }
}

/// Something kept alive as long as a reader streams (the run's cancellation when the client
/// asked for `on_disconnect: cancel`).
pub(crate) type Guard = Option<Box<dyn Send + Sync>>;

struct Reader {
    log: Arc<EventLog>,
    next: u64,
    modes: Option<BTreeSet<&'static str>>,
    _guard: Guard,
}

impl Reader {
    /// The next events this reader gets, waiting for them; `None` once the log is closed and
    /// read to its end.
    async fn batch(mut self) -> Option<(Vec<Arc<Frame>>, Reader)> {
        loop {
            // Empty only once the log is closed and read to its end.
            let (frames, _closed) = self.log.next(self.next).await;
            let last = frames.last()?;
            self.next = last.id + 1;
            let wanted: Vec<Arc<Frame>> = frames
                .into_iter()
                .filter(|f| match (&self.modes, f.mode) {
                    (Some(modes), Some(mode)) => modes.contains(mode),
                    _ => true,
                })
                .collect();
            if !wanted.is_empty() {
                return Some((wanted, self));
            }
        }
    }
}

/// The SSE response over `log`: its events after `last_seen` (all without), those of `modes`
/// only when given, until the log closes. `guard` lives as long as the response does.
pub(crate) fn respond(
    log: Arc<EventLog>,
    last_seen: Option<u64>,
    modes: Option<BTreeSet<&'static str>>,
    guard: Guard,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let reader = Reader {
        next: last_seen.map_or(0, |id| id + 1),
        log,
        modes,
        _guard: guard,
    };
    let frames = stream::unfold(reader, Reader::batch).flat_map(stream::iter);
    let events = frames.map(|frame| {
        Ok(SseEvent::default()
            .id(frame.id.to_string())
            .event(frame.event())
            .data(frame.data()))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
