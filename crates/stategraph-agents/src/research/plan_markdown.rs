//! The plan as a Markdown checklist, for people: [`render`] it, edit it, [`parse`] it back.
//!
//! ```text
//! # Plan
//! > One todo per line: - [status] id (kind): task (after: id, id) (parent: id)
//! > status: [ ] pending, [~] in progress, [x] done, [-] blocked, [!] failed; kind: research or tool
//!
//! - [x] t1 (research): Find when sled 0.34 was released
//!     result: Released in 2020 [1].
//! - [ ] t2 (tool): Read https://sled.rs/ (after: t1)
//! ```
//!
//! Only lines starting with `- [` (or `* [`) are todos. Blank lines, headings (`#`), quotes
//! (`>`) and indented lines (the details under a todo) are ignored, so they may be edited
//! freely; any other line is refused. What a line carries (id, kind, status, task,
//! dependencies, parent) round-trips exactly; results, attempts and reasons are kept from the
//! stored plan by [`apply_markdown`].

use super::plan::{one_line, validate_plan};
use super::state::{Kind, Status, Todo};

/// A plan edit that was refused. `line` is 1-based, in the Markdown the person edited (or, for
/// a one-todo edit, in the Markdown of the plan it would have produced); `None` when the
/// problem is not on any line (e.g. an unknown id in an edit command).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", match line { Some(n) => format!("line {n}: "), None => String::new() })]
pub struct PlanEditError {
    /// The line at fault.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl PlanEditError {
    /// An error on a line.
    pub fn new(line: usize, message: impl Into<String>) -> Self {
        PlanEditError {
            line: Some(line),
            message: message.into(),
        }
    }

    /// An error not tied to a line.
    pub fn general(message: impl Into<String>) -> Self {
        PlanEditError {
            line: None,
            message: message.into(),
        }
    }
}

const HEADER: [&str; 3] = [
    "# Plan",
    "> One todo per line: - [status] id (kind): task (after: id, id) (parent: id)",
    "> status: [ ] pending, [~] in progress, [x] done, [-] blocked, [!] failed; kind: research or tool",
];

fn mark(status: Status) -> char {
    match status {
        Status::Pending => ' ',
        Status::InProgress => '~',
        Status::Done => 'x',
        Status::Blocked => '-',
        Status::Failed => '!',
    }
}

fn status_of(mark: char) -> Option<Status> {
    match mark {
        ' ' => Some(Status::Pending),
        '~' => Some(Status::InProgress),
        'x' | 'X' => Some(Status::Done),
        '-' => Some(Status::Blocked),
        '!' => Some(Status::Failed),
        _ => None,
    }
}

fn short(text: &str, max: usize) -> String {
    let text = one_line(text);
    if text.chars().count() <= max {
        text
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// The rendered lines and, for each todo, its 1-based line number.
fn render_lines(plan: &[Todo]) -> (Vec<String>, Vec<usize>) {
    let mut lines: Vec<String> = HEADER.iter().map(|s| s.to_string()).collect();
    lines.push(String::new());
    let mut at = Vec::with_capacity(plan.len());
    for todo in plan {
        let mut line = format!(
            "- [{}] {} ({}): {}",
            mark(todo.status),
            todo.id,
            todo.kind.as_str(),
            one_line(&todo.task)
        );
        if !todo.dependencies.is_empty() {
            line.push_str(&format!(" (after: {})", todo.dependencies.join(", ")));
        }
        if let Some(parent) = &todo.parent {
            line.push_str(&format!(" (parent: {parent})"));
        }
        lines.push(line);
        at.push(lines.len());
        if let Some(result) = &todo.result {
            lines.push(format!("    result: {}", short(result, 200)));
        }
        if let Some(reason) = &todo.failure_reason {
            lines.push(format!("    reason: {}", short(reason, 300)));
        }
        if todo.attempts > 0 {
            lines.push(format!("    attempts: {}", todo.attempts));
        }
    }
    (lines, at)
}

/// The plan as a Markdown checklist: one todo per line, in the format [`parse`] reads back.
///
/// ```
/// use stategraph_agents::research::{parse, render, Kind, Todo};
/// let plan = vec![
///     Todo::new("t1", "Find the release date", Kind::Research),
///     Todo::new("t2", "Read https://sled.rs/", Kind::Tool).depends_on(["t1"]),
/// ];
/// let markdown = render(&plan);
/// assert!(markdown.contains("- [ ] t2 (tool): Read https://sled.rs/ (after: t1)"));
/// assert_eq!(parse(&markdown).unwrap(), plan);
/// ```
pub fn render(plan: &[Todo]) -> String {
    let (lines, _) = render_lines(plan);
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The 1-based line of the todo at `index` in [`render`]'s output.
pub(crate) fn line_of_todo(plan: &[Todo], index: usize) -> usize {
    let (_, at) = render_lines(plan);
    at.get(index).copied().unwrap_or(HEADER.len() + 1)
}

/// Strips trailing `(after: ...)` and `(parent: ...)` groups off a task.
fn split_suffixes(mut text: &str) -> (String, Vec<String>, Option<String>) {
    let mut after = Vec::new();
    let mut parent = None;
    loop {
        let trimmed = text.trim_end();
        let Some(body) = trimmed.strip_suffix(')') else {
            break;
        };
        let Some(open) = body.rfind(" (") else { break };
        let inner = &body[open + 2..];
        if let Some(list) = inner.strip_prefix("after:") {
            after = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        } else if let Some(p) = inner.strip_prefix("parent:") {
            parent = Some(p.trim().to_string());
        } else {
            break;
        }
        text = &body[..open];
    }
    (text.trim().to_string(), after, parent)
}

fn parse_line(text: &str, n: usize) -> Result<Todo, PlanEditError> {
    let expected = "expected `- [ ] id (kind): task (after: id, id)`";
    let rest = &text[3..];
    let mut chars = rest.chars();
    let (Some(m), Some(']')) = (chars.next(), chars.next()) else {
        return Err(PlanEditError::new(
            n,
            format!("cannot read the checkbox: {expected}"),
        ));
    };
    let status = status_of(m).ok_or_else(|| {
        PlanEditError::new(
            n,
            format!("unknown status mark `[{m}]`: use [ ] pending, [~] in progress, [x] done, [-] blocked or [!] failed"),
        )
    })?;
    let body = chars.as_str().trim();
    let Some((head, task)) = body.split_once(':') else {
        return Err(PlanEditError::new(
            n,
            format!("cannot read this todo (no `:` after its id): {expected}"),
        ));
    };
    let (id, kind) = match head.split_once('(') {
        Some((id, kind)) => {
            let kind_text = kind.trim().strip_suffix(')').ok_or_else(|| {
                PlanEditError::new(n, format!("cannot read the kind `({kind}`: {expected}"))
            })?;
            let kind = Kind::parse(kind_text).ok_or_else(|| {
                PlanEditError::new(
                    n,
                    format!("unknown kind `{}`: use research or tool", kind_text.trim()),
                )
            })?;
            (id.trim(), kind)
        }
        None => (head.trim(), Kind::Research),
    };
    let (task, dependencies, parent) = split_suffixes(task);
    Ok(Todo {
        id: id.to_string(),
        task,
        kind,
        status,
        dependencies,
        parent,
        ..Todo::default()
    })
}

/// Reads a Markdown checklist back into todos, refusing the first problem with its line:
/// a line that cannot be read, a duplicate id, an unknown dependency, or a cycle.
///
/// ```
/// use stategraph_agents::research::parse;
/// let err = parse("- [ ] t1: find X\n- [ ] t2: find Y (after: t9)\n").unwrap_err();
/// assert_eq!(err.line, Some(2));
/// assert!(err.message.contains("unknown dependency `t9`"));
/// // A UTF-8 byte-order mark before the first line is skipped.
/// assert_eq!(parse("\u{feff}# Plan\n- [ ] t1: find X\n").unwrap().len(), 1);
/// ```
pub fn parse(markdown: &str) -> Result<Vec<Todo>, PlanEditError> {
    // Some editors start a UTF-8 file with a byte-order mark: it is not part of the first line.
    let markdown = markdown.strip_prefix('\u{feff}').unwrap_or(markdown);
    let mut todos = Vec::new();
    let mut lines_of = Vec::new();
    for (i, raw) in markdown.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        if line.trim().is_empty()
            || line.starts_with('#')
            || line.starts_with('>')
            || line.starts_with(' ')
            || line.starts_with('\t')
            || line.starts_with("<!--")
        {
            continue;
        }
        if line.starts_with("- [") || line.starts_with("* [") {
            todos.push(parse_line(line, n)?);
            lines_of.push(n);
        } else {
            return Err(PlanEditError::new(
                n,
                format!(
                    "cannot read this line: a todo looks like `- [ ] id (kind): task (after: id, id)`; \
                     indent notes or start them with `>`: {}",
                    short(line, 60)
                ),
            ));
        }
    }
    validate_plan(&todos)
        .map_err(|p| PlanEditError::new(lines_of.get(p.index).copied().unwrap_or(0), p.message))?;
    Ok(todos)
}

/// Parses an edited Markdown plan and keeps, for each todo that was already in `stored`, what
/// the Markdown does not show (result, sources, attempts, reason...). A todo put back to
/// pending starts afresh (attempts and reason cleared). Use the result as an explicit
/// overwrite of the plan (`PlanStateUpdate::default().overwrite_plan(..)`), so removed todos
/// are really removed.
///
/// ```
/// use stategraph_agents::research::{apply_markdown, render, Kind, Status, Todo};
/// let mut done = Todo::new("t1", "a", Kind::Research).with_status(Status::Done);
/// done.result = Some("found it [1]".into());
/// let stored = vec![done, Todo::new("t2", "b", Kind::Research)];
/// let edited = render(&stored).replace("- [ ] t2 (research): b\n", "");
/// let plan = apply_markdown(&stored, &edited).unwrap();
/// assert_eq!(plan.len(), 1);
/// assert_eq!(plan[0].result.as_deref(), Some("found it [1]"));
/// // Every todo deleted: refused, the stored plan stays.
/// assert!(apply_markdown(&stored, "# Plan\n").unwrap_err().message.contains("no todo left"));
/// ```
pub fn apply_markdown(stored: &[Todo], markdown: &str) -> Result<Vec<Todo>, PlanEditError> {
    let edited = parse(markdown)?;
    if edited.is_empty() && !stored.is_empty() {
        // Most likely every line was deleted to abort, as `git commit` reads an empty message;
        // a plan with nothing to do cannot run anyway.
        return Err(PlanEditError::general(
            "the edited plan has no todo left: a plan needs at least one (the plan is kept as \
             it was; to stop a todo, mark it `[-]` blocked)",
        ));
    }
    Ok(edited
        .into_iter()
        .map(|todo| match stored.iter().find(|s| s.id == todo.id) {
            Some(old) if todo.status == Status::Pending && old.status != Status::Pending => Todo {
                escalated: old.escalated,
                followups: old.followups,
                ..todo
            },
            Some(old) => Todo {
                result: old.result.clone(),
                source_ids: old.source_ids.clone(),
                tools_used: old.tools_used.clone(),
                attempts: old.attempts,
                failure_reason: old.failure_reason.clone(),
                escalated: old.escalated,
                followups: old.followups,
                error: old.error.clone(),
                ..todo
            },
            None => todo,
        })
        .collect())
}
