//! How a paused thread is shown to a person (after `run` and in `graph state`): each question in
//! words rather than its JSON, the plan once and as it is now, and the command that continues.
//! `--json` output keeps the payloads whole.

use crate::error::bad_input;
use crate::Ctx;
use serde_json::Value;
use stategraph::checkpoint::{InterruptRecord, InterruptWhen};
use stategraph_registry::{ErasedGraph, Resolved};

/// Refuses an empty answer (`--resume ""`, blank, or JSON `null`) to a paused thread, before
/// anything is changed: for every graph, an empty answer is no answer. (A review that took it
/// as approval ran a plan nobody approved; one that took it as notes revised for nothing.) The
/// message quotes what the thread asks, which says which answers work.
pub(crate) async fn refuse_empty_answer(
    ctx: &Ctx,
    graph: &dyn ErasedGraph,
    thread: &str,
    answer: Option<&Value>,
) -> anyhow::Result<()> {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::String(text) => text.trim_start_matches('\u{feff}').trim().is_empty(),
        _ => false,
    };
    let Some(answer) = answer else {
        return Ok(());
    };
    if !matches!(answer, Value::Object(_)) && !empty(answer) {
        return Ok(());
    }
    let interrupts = graph.get_state(thread, None).await?.interrupts;
    let blank = match answer {
        // Answers by id, to several questions (as `resume` reads them): each one counts.
        Value::Object(by_id) => {
            let ids: Vec<&str> = interrupts
                .iter()
                .filter(|i| i.when == InterruptWhen::Dynamic)
                .map(|i| i.id.as_str())
                .collect();
            ids.len() > 1
                && by_id.keys().all(|k| ids.contains(&k.as_str()))
                && by_id.values().any(empty)
        }
        other => empty(other),
    };
    if !blank {
        return Ok(());
    }
    let mut message = String::from(
        "--resume: an empty answer is not an answer; nothing was changed. Answer what the thread asks",
    );
    let questions: Vec<String> = interrupts
        .iter()
        .filter(|i| i.when == InterruptWhen::Dynamic)
        .map(
            |i| match i.payload.get("question").and_then(Value::as_str) {
                Some(q) => format!("\n  `{}` asks: {q}", i.node),
                None => format!(
                    "\n  `{}` asks: {}",
                    i.node,
                    stategraph::quote::cut(&i.payload.to_string())
                ),
            },
        )
        .collect();
    match questions.is_empty() {
        true => {
            message = format!(
            "--resume: an empty answer is not an answer; nothing was changed. Thread `{thread}` \
             asks no question; continue it with: {}",
            continue_command(ctx, thread, &interrupts)
        )
        }
        false => {
            message.push(':');
            message.push_str(&questions.concat());
            message.push_str(&format!(
                "\ncontinue with: {}",
                continue_command(ctx, thread, &interrupts)
            ));
        }
    }
    Err(bad_input(message))
}

/// The command that answers the pending interrupts: `resume THREAD --resume <ANSWER>` for one
/// question, `--resume-json` by id for several, a bare `resume` for breakpoints.
pub(crate) fn continue_command(ctx: &Ctx, thread: &str, interrupts: &[InterruptRecord]) -> String {
    let dynamic: Vec<&InterruptRecord> = interrupts
        .iter()
        .filter(|i| i.when == InterruptWhen::Dynamic)
        .collect();
    let words = ["resume", thread];
    match dynamic.len() {
        0 => ctx.command_line(&words),
        1 => ctx.command_line_with(&words, "--resume <ANSWER>"),
        _ => {
            let ids: Vec<String> = dynamic
                .iter()
                .map(|i| format!("\"{}\": <ANSWER>", i.id))
                .collect();
            ctx.command_line_with(&words, &format!("--resume-json '{{{}}}'", ids.join(", ")))
        }
    }
}

/// The lines describing the pending interrupts of a thread whose state is `state`.
pub(crate) fn describe(
    resolved: &Resolved,
    interrupts: &[InterruptRecord],
    state: &Value,
) -> Vec<String> {
    // The plan as it is now (edits made while paused included), when the graph has one.
    let mut plan = resolved
        .factory
        .plan_editor()
        .and_then(|editor| editor.render(state).ok());
    let several = interrupts
        .iter()
        .filter(|i| i.when == InterruptWhen::Dynamic)
        .count()
        > 1;
    let mut lines = Vec::new();
    for i in interrupts {
        match i.when {
            InterruptWhen::Before => lines.push(format!("  breakpoint before `{}`", i.node)),
            InterruptWhen::After => lines.push(format!("  breakpoint after `{}`", i.node)),
            InterruptWhen::Dynamic => {
                lines.push(match several {
                    true => format!("  `{}` asks (interrupt {}):", i.node, i.id),
                    false => format!("  `{}` asks:", i.node),
                });
                payload_lines(&i.payload, &mut plan, &mut lines);
            }
        }
    }
    lines
}

/// Longest field of a question shown whole, in characters: a line of its own has room for a
/// long message, not for an input of megabytes.
const FIELD_UP_TO: usize = 2_000;

/// A payload in words: its `question` first, its scalar fields as `name: value`, its
/// `markdown` (or the plan as it is now) once; lists and tables are left to `--json`.
fn payload_lines(payload: &Value, plan: &mut Option<String>, lines: &mut Vec<String>) {
    let indent = |text: &str, lines: &mut Vec<String>| {
        for line in text.trim_end().lines() {
            lines.push(format!("    {line}").trim_end().to_string());
        }
    };
    let Value::Object(map) = payload else {
        match payload {
            Value::String(text) => indent(text, lines),
            Value::Null => {}
            other => indent(&other.to_string(), lines),
        }
        return;
    };
    if let Some(Value::String(question)) = map.get("question") {
        indent(question, lines);
    }
    for (key, value) in map {
        let shown = match value {
            // A field may carry what the run was given (a title made of its input): cut.
            Value::String(s) => stategraph::quote::cut_to(s, FIELD_UP_TO).into_owned(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        if key != "question" && key != "markdown" {
            indent(&format!("{}: {shown}", key.replace('_', " ")), lines);
        }
    }
    let markdown = map
        .get("markdown")
        .and_then(Value::as_str)
        .map(|asked| plan.take().unwrap_or_else(|| asked.to_string()));
    if let Some(markdown) = markdown {
        lines.push(String::new());
        indent(&markdown, lines);
        lines.push(String::new());
    }
}
