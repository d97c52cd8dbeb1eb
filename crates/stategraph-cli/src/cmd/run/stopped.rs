//! A run that stopped at a step boundary without ending (`RunError::Stopped`): drained by
//! SIGTERM (`stop.rs`), or past its `--timeout`. Its last step is saved and none after it
//! started, so this is not reported as an error: the report says why it stopped, where the
//! thread stands and the `graph resume` line that continues it; the exit code says which
//! (143 for SIGTERM, as any stop by it; 124 for a timeout, as `timeout(1)` ends).

use super::stop::Stop;
use crate::error::{EXIT_TERMINATED, EXIT_TIMED_OUT};
use serde_json::{json, Value};
use stategraph::runtime::StopReason;

/// What was stopped, and by which signal when one asked for it.
pub(super) struct StoppedRun<'a> {
    pub thread: &'a str,
    pub stopped_by: Option<Stop>,
}

/// Says how the run stopped and how to continue it; returns the exit code.
pub(super) fn report_stopped(
    meta: StoppedRun<'_>,
    reason: &StopReason,
    step: u64,
    next: &[String],
    resume_hint: &str,
    doc: &mut Value,
) -> u8 {
    let thread = meta.thread;
    let next_text = match next {
        [] => String::new(),
        nodes => format!(" (next: {})", nodes.join(", ")),
    };
    doc["continue_with"] = json!(resume_hint);
    doc["next"] = json!(next);
    match reason {
        StopReason::Drained => {
            let by = meta.stopped_by.map_or("a drain", |stop| stop.name());
            doc["stopped_by"] = json!(by);
            say!(
                "drained on {by}: step {step} of thread {thread} finished and is saved, no new \
                 step started{next_text}. Continue with:\n  {resume_hint}"
            );
            meta.stopped_by
                .map_or(EXIT_TERMINATED, |stop| stop.exit_code())
        }
        StopReason::RunTimeout { limit, elapsed } => {
            doc["stopped_by"] = json!("timeout");
            say!(
                "stopped: the run passed its --timeout of {} (it had run {}); step {step} of \
                 thread {thread} is saved, no new step started{next_text}. Continue with:\n  \
                 {resume_hint}\n(give it --timeout again to bound that run too)",
                seconds(*limit),
                seconds(*elapsed)
            );
            EXIT_TIMED_OUT
        }
    }
}

/// A duration in seconds, as a person reads it back against the `--timeout` they wrote.
fn seconds(d: std::time::Duration) -> String {
    match d.as_secs() {
        0 => format!("{}ms", d.as_millis()),
        s if s < 60 => format!("{:.1}s", d.as_secs_f64()),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{}m {}s", s / 60, s % 60),
    }
}
