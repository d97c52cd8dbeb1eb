//! A run's events as it streamed them, kept in memory with their ids, so any number of readers
//! follow it: one that joins late gets what it missed, one that reconnects with the last id it
//! saw (`Last-Event-ID`) gets what came after, each event exactly once, in order.
//!
//! Ids are the events' positions in the run (0, 1, 2...). A std mutex guards the list: it is
//! never held across an await, and pushes are short.

use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// One event of a run's stream.
#[derive(Debug)]
pub(crate) struct Frame {
    /// Its position in the run's stream: the SSE `id`.
    pub id: u64,
    /// The SSE event name (`values`, `updates|sub:1`, `end`...).
    pub event: String,
    /// The stream mode it belongs to; `None` for the run's own events (`metadata`, `error`,
    /// `end`), which every reader gets.
    pub mode: Option<&'static str>,
    /// The JSON data.
    pub data: String,
}

#[derive(Default)]
struct Frames {
    /// The id of the first frame (0 but for a stream rebuilt from the store, whose ids follow
    /// those its reader saw: see `ledger.rs`).
    base: u64,
    list: Vec<Arc<Frame>>,
    closed: bool,
}

/// A run's stream: appended while it runs, closed when it ends.
pub(crate) struct EventLog {
    frames: Mutex<Frames>,
    /// Bumped on every push and on close; readers wait on it.
    changed: watch::Sender<u64>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            frames: Mutex::new(Frames::default()),
            changed: watch::channel(0).0,
        }
    }
}

impl EventLog {
    /// An empty log whose first event gets the id `base`.
    pub fn starting_at(base: u64) -> Self {
        let log = EventLog::default();
        log.lock().base = base;
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends an event (ignored once the log is closed: nothing follows `end`).
    pub fn push(&self, event: impl Into<String>, mode: Option<&'static str>, data: &Value) {
        {
            let mut frames = self.lock();
            if frames.closed {
                return;
            }
            let id = frames.base + frames.list.len() as u64;
            frames.list.push(Arc::new(Frame {
                id,
                event: event.into(),
                mode,
                data: data.to_string(),
            }));
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// Marks the stream complete: readers end after its last event.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The events from position `from` on, and whether the log is closed.
    pub fn from(&self, from: u64) -> (Vec<Arc<Frame>>, bool) {
        let frames = self.lock();
        let start = (from.saturating_sub(frames.base) as usize).min(frames.list.len());
        (frames.list[start..].to_vec(), frames.closed)
    }

    /// Somebody to wake a reader when the log changes.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until the log is closed (the run ended).
    pub async fn closed(&self) {
        let mut rx = self.watch();
        loop {
            rx.borrow_and_update();
            if self.is_closed() {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_from_any_position_gets_the_rest_once() {
        let log = EventLog::default();
        for i in 0..5 {
            log.push("values", Some("values"), &serde_json::json!(i));
        }
        let (rest, closed) = log.from(3);
        assert_eq!(rest.iter().map(|f| f.id).collect::<Vec<_>>(), vec![3, 4]);
        assert!(!closed);
        log.close();
        log.push("values", Some("values"), &serde_json::json!(9));
        let (rest, closed) = log.from(5);
        assert!(rest.is_empty() && closed);
        log.closed().await;
    }

    #[tokio::test]
    async fn a_log_rebuilt_for_a_reader_continues_its_ids() {
        let log = EventLog::starting_at(7);
        log.push("metadata", None, &serde_json::json!({}));
        log.push("end", None, &serde_json::json!({}));
        log.close();
        let (all, closed) = log.from(7);
        assert_eq!(all.iter().map(|f| f.id).collect::<Vec<_>>(), vec![7, 8]);
        assert!(closed);
        assert_eq!(log.from(8).0.len(), 1);
        assert!(log.from(9).0.is_empty());
    }
}
