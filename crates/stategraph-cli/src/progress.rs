//! Showing a run as it goes, from its event stream: a live line per running node on a
//! terminal, plain log lines otherwise.
//!
//! The live lines are redrawn in place (indicatif counts the lines it drew and moves the cursor
//! back over them), so while they are shown nothing else may write to stderr: text goes through
//! [`Progress::line`], [`Notices`] from another task, and log lines through [`LogWriter`]. A
//! bar draws only through the `MultiProgress` (it is made hidden and joins it before its first
//! draw).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use stategraph::runtime::{Event, PROGRESS_EVENT, TOKEN_EVENT};
use std::collections::HashMap;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

enum Mode {
    Quiet,
    Plain,
    Live(MultiProgress),
}

/// Renders a run's events on stderr.
pub(crate) struct Progress {
    mode: Mode,
    verbose: bool,
    started: Instant,
    steps_done: u64,
    /// How many tasks of each node the next step holds, to number parallel tasks.
    next: HashMap<String, usize>,
    bars: HashMap<(u64, usize), (String, ProgressBar)>,
    /// Whether live lines are on the screen (`bars` is not empty), for [`Notices`].
    live: Arc<AtomicBool>,
    /// Streamed text (model tokens) per node, shown a whole line at a time as it arrives.
    streamed: HashMap<String, String>,
}

impl Progress {
    /// `quiet` shows nothing; otherwise live lines when stderr is a terminal.
    pub(crate) fn new(quiet: bool, verbose: bool) -> Self {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            *live_lines() = Some(multi.clone());
            Mode::Live(multi)
        } else {
            Mode::Plain
        };
        Progress {
            mode,
            verbose,
            started: Instant::now(),
            steps_done: 0,
            next: HashMap::new(),
            bars: HashMap::new(),
            live: Arc::new(AtomicBool::new(false)),
            streamed: HashMap::new(),
        }
    }

    /// A handle to print with while this shows a run, for what does not own the `Progress`
    /// (the signal watcher, another task; the artifacts writer).
    pub(crate) fn notices(&self) -> Notices {
        match &self.mode {
            Mode::Live(multi) => Notices(Some((multi.clone(), self.live.clone()))),
            _ => Notices(None),
        }
    }

    /// Buffers streamed text and shows each completed line; `flush` shows the rest.
    fn stream_text(&mut self, node: &str, text: &str, flush: bool) {
        if matches!(self.mode, Mode::Quiet) {
            return;
        }
        let buffer = self.streamed.entry(node.to_string()).or_default();
        buffer.push_str(text);
        let mut lines = Vec::new();
        while let Some(end) = buffer.find('\n') {
            lines.push(buffer[..end].to_string());
            buffer.drain(..=end);
        }
        if flush && !buffer.is_empty() {
            lines.push(std::mem::take(buffer));
        }
        for line in lines {
            self.line(&format!("  {node} │ {line}"));
        }
    }

    /// Tells how many tasks of each node the first step runs (known from the checkpoint a
    /// resume starts from).
    pub(crate) fn expect(&mut self, next: &[String]) {
        self.next.clear();
        for n in next {
            *self.next.entry(n.clone()).or_default() += 1;
        }
    }

    /// Prints a line above the live lines (or plainly).
    pub(crate) fn line(&self, text: &str) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Plain => say!("{text}"),
            Mode::Live(multi) => {
                // Fails only when the terminal went away; nothing useful to do then.
                let _ = multi.println(text);
            }
        }
    }

    fn label(&self, node: &str, task: usize) -> String {
        if self.next.get(node).copied().unwrap_or(0) > 1 {
            format!("{node} #{task}")
        } else {
            node.to_string()
        }
    }

    fn stamp(&self) -> String {
        format!("[{:>6.2}s]", self.started.elapsed().as_secs_f64())
    }

    fn steps_text(&self) -> String {
        match self.steps_done {
            1 => "1 step done".to_string(),
            n => format!("{n} steps done"),
        }
    }

    /// Shows one event. Each kind of event has its own helper below: this only dispatches.
    pub(crate) fn event(&mut self, event: &Event) {
        match event {
            Event::RunStarted { step, .. } => {
                self.steps_done = *step;
            }
            Event::NodeStarted {
                step,
                node,
                task,
                attempt,
                ..
            } => self.node_started(*step, node, *task, *attempt),
            Event::NodeFinished {
                step,
                node,
                task,
                duration_ms,
                update,
                ..
            } => self.node_finished(*step, node, *task, *duration_ms, update),
            Event::NodeFailed {
                step,
                node,
                task,
                attempt,
                error,
                will_retry,
                ..
            } => self.node_failed(*step, node, *task, *attempt, error, *will_retry),
            Event::Custom {
                step,
                node,
                kind,
                payload,
                ..
            } => self.custom(*step, node, kind, payload),
            Event::CheckpointSaved { step, next, .. } => self.checkpoint_saved(*step, next),
            Event::Interrupted { .. } | Event::RunFinished { .. } => self.clear(),
            // Stream-mode events (`--stream`) are printed as NDJSON, not shown here.
            Event::Values { .. } | Event::Updates { .. } | Event::Message { .. } => {}
        }
    }

    /// A task began an attempt: a log line, or a live line that stays until it ends.
    fn node_started(&mut self, step: u64, node: &str, task: usize, attempt: u32) {
        let label = self.label(node, task);
        let retry = if attempt > 1 {
            format!(" (attempt {attempt})")
        } else {
            String::new()
        };
        match &self.mode {
            Mode::Quiet => {}
            Mode::Plain => {
                say!("{} step {step}: {label} started{retry}", self.stamp())
            }
            Mode::Live(multi) => {
                let text = format!("{label}{retry} · {} ·", self.steps_text());
                let bar = live_line(multi, step, text);
                self.bars.insert((step, task), (node.to_string(), bar));
                self.note_live();
            }
        }
    }

    /// A task finished: its live line goes, its streamed text's last line is shown, then a
    /// line that says how long it took (and, verbose, the update it made).
    fn node_finished(
        &mut self,
        step: u64,
        node: &str,
        task: usize,
        duration_ms: f64,
        update: &serde_json::Value,
    ) {
        if let Some((_, bar)) = self.bars.remove(&(step, task)) {
            bar.finish_and_clear();
            self.note_live();
        }
        self.stream_text(node, "", true);
        let label = self.label(node, task);
        let secs = duration_ms / 1000.0;
        let text = match &self.mode {
            Mode::Live(_) => format!("✓ step {step} {label} ({secs:.2}s)"),
            _ => format!("{} step {step}: {label} done in {secs:.2}s", self.stamp()),
        };
        self.line(&text);
        if self.verbose {
            self.line(&format!("    update: {update}"));
        }
    }

    /// A task's attempt failed: said at once. Its live line goes only when it failed for good:
    /// while another attempt follows, the task is still running.
    fn node_failed(
        &mut self,
        step: u64,
        node: &str,
        task: usize,
        attempt: u32,
        error: &str,
        will_retry: bool,
    ) {
        let then = if will_retry { "; retrying" } else { "" };
        let label = self.label(node, task);
        let text = match &self.mode {
            Mode::Live(_) => {
                format!("✗ step {step} {label} attempt {attempt} failed: {error}{then}")
            }
            _ => format!(
                "{} step {step}: {label} attempt {attempt} failed: {error}{then}",
                self.stamp()
            ),
        };
        if !will_retry {
            self.clear_task(step, task);
        }
        self.line(&text);
    }

    /// A node's own event: model tokens are streamed a line at a time, progress text is shown
    /// as is, and any other kind only when verbose (it is meant for programs, not people).
    fn custom(&mut self, step: u64, node: &str, kind: &str, payload: &serde_json::Value) {
        match kind {
            TOKEN_EVENT => {
                if let Some(text) = payload.as_str() {
                    self.stream_text(node, text, false);
                }
            }
            PROGRESS_EVENT => {
                if let Some(text) = payload.as_str() {
                    self.line(text);
                }
            }
            _ => {
                if self.verbose {
                    self.line(&format!(
                        "{} step {step}: {node} {kind}: {payload}",
                        self.stamp()
                    ));
                }
            }
        }
    }

    /// A step was saved: the live lines' step count moves on (they stay, as their tasks may
    /// still run); without live lines, a log line says what runs next.
    fn checkpoint_saved(&mut self, step: u64, next: &[String]) {
        self.steps_done = step;
        self.expect(next);
        if let Mode::Live(_) = self.mode {
            let steps = self.steps_text();
            for (_, bar) in self.bars.values() {
                let msg = bar.message();
                let head = msg.split(" · ").next().unwrap_or_default().to_string();
                bar.set_message(format!("{head} · {steps} ·"));
            }
        } else if self.verbose || matches!(self.mode, Mode::Plain) {
            let next = if next.is_empty() {
                "nothing (done)".to_string()
            } else {
                tasks_text(next)
            };
            self.line(&format!(
                "{} step {step}: checkpoint saved; next: {next}",
                self.stamp()
            ));
        }
    }

    /// Removes the line of a task that failed for good.
    fn clear_task(&mut self, step: u64, task: usize) {
        if let Some((_, bar)) = self.bars.remove(&(step, task)) {
            bar.finish_and_clear();
            self.note_live();
        }
    }

    /// Removes every live line.
    pub(crate) fn clear(&mut self) {
        for (_, (_, bar)) in self.bars.drain() {
            bar.finish_and_clear();
        }
        self.note_live();
    }

    fn note_live(&self) {
        self.live.store(!self.bars.is_empty(), Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
        if let Mode::Live(_) = self.mode {
            *live_lines() = None;
        }
    }
}

/// A spinner line for a running task, owned by `multi`, showing `step` and `text`.
fn live_line(multi: &MultiProgress, step: u64, text: String) -> ProgressBar {
    let style = ProgressStyle::with_template("{spinner:.cyan} step {prefix} {msg} {elapsed:.dim}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    // Hidden until the multi owns it: a bar made with its own stderr target (`new_spinner`)
    // draws itself there as its text is set, behind the multi's back, and that line is never
    // cleared. Its text is set before it joins, so no blank line flashes first.
    let bar = multi.add(
        ProgressBar::hidden()
            .with_style(style)
            .with_prefix(step.to_string())
            .with_message(text),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// The live lines on the screen now, if any: where [`LogWriter`] puts log lines.
fn live_lines() -> std::sync::MutexGuard<'static, Option<MultiProgress>> {
    static LIVE: std::sync::Mutex<Option<MultiProgress>> = std::sync::Mutex::new(None);
    // Poisoned only by a panic while it was held, which leaves the value itself whole.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the CLI's log lines (`-v`, `RUST_LOG`) go: stderr, above the live lines while a run is
/// shown (written directly, a log line would be erased by their next redraw, leaving stale
/// lines).
#[derive(Clone, Copy)]
pub(crate) struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine(Vec::new())
    }
}

/// One log event, gathered and written whole when the logger is done with it.
pub(crate) struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let live = live_lines().clone();
        // A log line that cannot be written has nowhere else to go.
        match live {
            Some(multi) => {
                let text = String::from_utf8_lossy(&self.0);
                let _ = multi.println(text.trim_end_matches('\n'));
            }
            None => {
                say_text!("{}", String::from_utf8_lossy(&self.0));
            }
        }
    }
}

/// A step's tasks as a person reads them: each node once, in order, with how many tasks it
/// runs when more than one (`draft (3 tasks), review`), not `draft, draft, draft`. Every text
/// that names the tasks a step runs next or ran says them this way (progress lines, the pause
/// message, `graph state`'s next and writers, `graph history`); `--json` keeps one name per task.
pub(crate) fn tasks_text(next: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for node in next {
        match counts.iter_mut().find(|(n, _)| n == node) {
            Some((_, count)) => *count += 1,
            None => counts.push((node, 1)),
        }
    }
    counts
        .iter()
        .map(|(node, count)| match count {
            1 => node.to_string(),
            n => format!("{node} ({n} tasks)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the signal watcher (Ctrl+C, SIGTERM, SIGHUP) and the artifacts writer print with while a
/// run is shown. Written
/// to stderr directly, its text would be where the live lines are, and their next redraw would
/// erase it and leave stale lines.
#[derive(Clone)]
pub(crate) struct Notices(Option<(MultiProgress, Arc<AtomicBool>)>);

impl Notices {
    /// Plain lines on stderr: before a run shows live lines.
    pub(crate) fn plain() -> Notices {
        Notices(None)
    }

    /// Shows `text` after a signal, above the live lines (plainly without them, also when
    /// quiet); `typed` when it was a Ctrl+C, whose `^C` the terminal echoed. Its caller first
    /// moves stderr off a terminal that hung up: indicatif's `suspend` panics when it cannot
    /// clear the lines.
    pub(crate) fn after_signal(&self, text: &str, typed: bool) {
        match &self.0 {
            Some((multi, live)) => multi.suspend(|| {
                if typed {
                    undo_ctrl_c_echo(live.load(Ordering::Relaxed));
                }
                say(text)
            }),
            None => plain(text, typed),
        }
    }

    /// Shows `text` above the live lines (plainly without them, also when quiet: the caller
    /// decides what a quiet run still says, such as a warning).
    pub(crate) fn line(&self, text: &str) {
        match &self.0 {
            // Fails only when the terminal went away; nothing useful to do then.
            Some((multi, _)) => {
                let _ = multi.println(text);
            }
            None => say(text),
        }
    }

    /// Like [`Notices::after_signal`], then ends the process with `code`; the live lines are
    /// cleared for good.
    pub(crate) fn quit_after_signal(&self, text: &str, typed: bool, code: i32) -> ! {
        // `exit` runs no destructors: the spans so far are sent first.
        crate::traces::finish();
        if let Some((multi, live)) = &self.0 {
            // Inside `suspend`, which holds the live lines' lock: no tick draws them again
            // before the process is gone.
            multi.suspend(|| {
                if typed {
                    undo_ctrl_c_echo(live.load(Ordering::Relaxed));
                }
                say(text);
                std::process::exit(code)
            });
        }
        plain(text, typed);
        std::process::exit(code)
    }
}

/// Writes a line to stderr (nothing when it cannot: a terminal that closed).
fn say(text: &str) {
    say!("{text}");
}

/// Without live lines: on a terminal (`--quiet`) the text of a typed Ctrl+C starts on a line of
/// its own, below the `^C` the terminal echoed.
fn plain(text: &str, typed: bool) {
    match typed && std::io::stderr().is_terminal() {
        true => say(&format!("\n{text}")),
        false => say(text),
    }
}

/// Takes back the line the terminal's `^C` echo added. indicatif pads the last line it draws
/// to the terminal's width, leaving the cursor at the edge, so the echo wraps to a new line it
/// does not know of. With live lines on the screen, its clear (in `suspend`, before this runs)
/// started one line too low and left the top live line: that line is cleared and the text
/// starts there. Without, the text starts on the echo's line, over the `^C`.
/// A terminal that does not echo control characters (`stty -echoctl`) added no line. A SIGINT
/// sent with `kill` to a run shown on a terminal that does echo takes one line too many: the
/// line above the live lines.
fn undo_ctrl_c_echo(live: bool) {
    if !echoes_ctrl_c() {
        return;
    }
    // Cursor up one line (with live lines), then to the line's start, and clear it. Nothing to
    // do when it cannot be written: the terminal is gone.
    let up = if live { "\x1b[1A" } else { "" };
    let _ = write!(std::io::stderr(), "{up}\r\x1b[2K");
}

/// Whether the terminal on stderr echoes a typed Ctrl+C as `^C`.
fn echoes_ctrl_c() -> bool {
    // SAFETY: tcgetattr only writes the termios struct it is given, which is zeroed (a valid
    // bit pattern for this plain C struct) and lives for the call.
    let mut termios: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: as above; STDERR_FILENO stays open for the process's life.
    if unsafe { libc::tcgetattr(libc::STDERR_FILENO, &mut termios) } != 0 {
        return false;
    }
    let echo = libc::ECHO | libc::ECHOCTL;
    termios.c_lflag & echo == echo
}

#[cfg(test)]
mod tests {
    use super::tasks_text;

    #[test]
    fn the_next_step_names_each_node_once_with_its_task_count() {
        let next = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(tasks_text(&next(&["outline"])), "outline");
        assert_eq!(
            tasks_text(&next(&["draft", "draft", "draft"])),
            "draft (3 tasks)"
        );
        assert_eq!(
            tasks_text(&next(&["draft", "review", "draft"])),
            "draft (2 tasks), review"
        );
    }
}
