//! A run's events as it streamed them, kept in memory with their ids, so any number of readers
//! follow it: one that joins late gets what it missed, one that reconnects with the last id it
//! saw (`Last-Event-ID`) gets what came after, each event exactly once, in order.
//!
//! Ids are the events' positions in the run (0, 1, 2...). A std mutex guards the list: it is
//! never held across an await, and pushes are short.
//!
//! A finished run's stream is kept whole for a while, then [expired](EventLog::expire): what
//! stays is what says how the run went (`metadata`, `error`, `end`, and its last `values`, the
//! state it ended with), at their ids, as the stream of a run another server ran is told from
//! the ledger (`ledger.rs`). A reader rejoining it after any id gets those that follow.

use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// One event of a run's stream. Finished runs keep theirs for a while (`KEEP_STREAMS` runs), so
/// a frame is one allocation for its name and data together, sized to fit.
#[derive(Debug)]
pub(crate) struct Frame {
    /// Its position in the run's stream: the SSE `id`.
    pub id: u64,
    /// The stream mode it belongs to; `None` for the run's own events (`metadata`, `error`,
    /// `end`), which every reader gets.
    pub mode: Option<&'static str>,
    /// The SSE event name (`values`, `updates|sub:1`, `end`...) followed by the JSON data.
    text: Box<str>,
    /// Where the name ends in `text`.
    split: u32,
}

impl Frame {
    fn new(id: u64, event: &str, mode: Option<&'static str>, data: &Value) -> Frame {
        let mut text = String::with_capacity(event.len() + 32);
        text.push_str(event);
        let split = u32::try_from(event.len()).unwrap_or(u32::MAX);
        // Writing a Value into a String cannot fail (it is valid UTF-8 and its map keys are
        // strings); `Display` is how `Value::to_string` writes it too.
        use std::fmt::Write;
        let _ = write!(text, "{data}");
        Frame {
            id,
            mode,
            text: text.into_boxed_str(),
            split,
        }
    }

    /// The SSE event name (`values`, `updates|sub:1`, `end`...).
    pub fn event(&self) -> &str {
        self.text.get(..self.split as usize).unwrap_or_default()
    }

    /// The JSON data.
    pub fn data(&self) -> &str {
        self.text.get(self.split as usize..).unwrap_or_default()
    }
}

#[derive(Default)]
struct Frames {
    /// The id of the next frame (starting at 0 but for a stream rebuilt from the store, whose
    /// ids follow those its reader saw: see `ledger.rs`).
    next: u64,
    /// In id order; the ids are consecutive until the log is expired.
    list: Vec<Arc<Frame>>,
    closed: bool,
}

/// A run's stream: appended while it runs, closed when it ends.
#[derive(Default)]
pub(crate) struct EventLog {
    frames: Mutex<Frames>,
    /// Woken on every push and on close; readers wait on it. A `Notify` lives inside the log:
    /// nothing allocated apart for each of the runs kept.
    changed: Notify,
}

impl EventLog {
    /// An empty log whose first event gets the id `base`.
    pub fn starting_at(base: u64) -> Self {
        let log = EventLog::default();
        log.lock().next = base;
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends an event (ignored once the log is closed: nothing follows `end`).
    pub fn push(&self, event: &str, mode: Option<&'static str>, data: &Value) {
        {
            let mut frames = self.lock();
            if frames.closed {
                return;
            }
            let id = frames.next;
            frames.next += 1;
            frames
                .list
                .push(Arc::new(Frame::new(id, event, mode, data)));
        }
        self.changed.notify_waiters();
    }

    /// Marks the stream complete: readers end after its last event.
    pub fn close(&self) {
        {
            let mut frames = self.lock();
            frames.closed = true;
            // Nothing is added any more: what it keeps is what it holds.
            frames.list.shrink_to_fit();
        }
        self.changed.notify_waiters();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The events from position `from` on, and whether the log is closed.
    pub fn from(&self, from: u64) -> (Vec<Arc<Frame>>, bool) {
        let frames = self.lock();
        let start = frames.list.partition_point(|f| f.id < from);
        (frames.list[start..].to_vec(), frames.closed)
    }

    /// Drops a finished stream's steps, keeping the run's own events and its last `values` at
    /// their ids (see the module's documentation); nothing for a stream still open.
    pub fn expire(&self) {
        let mut frames = self.lock();
        if !frames.closed {
            return;
        }
        let last_values = frames.list.iter().rposition(|f| f.event() == "values");
        let mut at = 0;
        frames.list.retain(|f| {
            let keep = f.mode.is_none() || Some(at) == last_values;
            at += 1;
            keep
        });
        frames.list.shrink_to_fit();
    }

    /// The events from position `from` on, waiting for one when there is none yet, and
    /// whether the log is closed (then with no events when `from` is past its end).
    pub async fn next(&self, from: u64) -> (Vec<Arc<Frame>>, bool) {
        loop {
            // Registered before looking, so a push between the look and the wait wakes it.
            let mut changed = std::pin::pin!(self.changed.notified());
            changed.as_mut().enable();
            let (frames, closed) = self.from(from);
            if !frames.is_empty() || closed {
                return (frames, closed);
            }
            changed.await;
        }
    }

    /// Waits until the log is closed (the run ended).
    pub async fn closed(&self) {
        loop {
            let mut changed = std::pin::pin!(self.changed.notified());
            changed.as_mut().enable();
            if self.is_closed() {
                return;
            }
            changed.await;
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
    async fn a_waiting_reader_is_woken_by_a_push_and_by_the_close() {
        let log = Arc::new(EventLog::default());
        let reader = tokio::spawn({
            let log = log.clone();
            async move {
                let (first, closed) = log.next(0).await;
                assert!(!closed);
                let (rest, closed) = log.next(first.len() as u64).await;
                (first.len(), rest.len(), closed)
            }
        });
        tokio::task::yield_now().await;
        log.push("values", Some("values"), &serde_json::json!(1));
        tokio::task::yield_now().await;
        log.close();
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .expect("the reader was not woken")
            .unwrap();
        assert_eq!(got, (1, 0, true));
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

    #[test]
    fn an_expired_log_keeps_how_the_run_went_at_its_ids() {
        let log = EventLog::default();
        log.push("metadata", None, &serde_json::json!({"run_id": "r"}));
        for i in 0..4 {
            log.push("updates", Some("updates"), &serde_json::json!({"n": i}));
            log.push("values", Some("values"), &serde_json::json!({"count": i}));
        }
        log.push("end", None, &serde_json::json!({"status": "success"}));
        log.expire();
        // Still open when asked: nothing goes.
        assert_eq!(log.from(0).0.len(), 10);
        log.close();
        log.expire();
        let (all, closed) = log.from(0);
        let seen: Vec<(u64, &str, &str)> =
            all.iter().map(|f| (f.id, f.event(), f.data())).collect();
        assert_eq!(
            seen,
            vec![
                (0, "metadata", r#"{"run_id":"r"}"#),
                (8, "values", r#"{"count":3}"#),
                (9, "end", r#"{"status":"success"}"#),
            ]
        );
        assert!(closed);
        // A reader rejoining after an id gets what follows it, kept or not.
        assert_eq!(
            log.from(3).0.iter().map(|f| f.id).collect::<Vec<_>>(),
            vec![8, 9]
        );
        assert_eq!(log.from(9).0.len(), 1);
        assert!(log.from(10).0.is_empty());
    }
}
