//! A task file, `{name}.md`: what one task of the tree asks for, in Markdown a person edits.
//!
//! ```markdown
//! # Extract articles
//!
//! ## Type
//! complex
//!
//! ## Summary
//! Extract the article data from the parsed pages.
//!
//! ### Dependents
//! - [Parse HTML](../parse_html.md)
//! - [Find CSS selectors](find_selectors.md)
//! ```
//!
//! `# Title` comes first. `## Type` is `simple` (solved in one go) or `complex` (decomposed
//! into children first). `## Summary` says what the task is. `### Dependents` lists, as
//! relative Markdown links, the task files this task needs first: they are solved before it.
//! Any other section (details, acceptance criteria...) is part of the task and is kept as
//! written. A task written by a person may leave out `## Type` and `## Summary`: it then
//! has no type (solved directly unless it has children) and its first paragraph is its summary.
//!
//! A file that breaks these rules is refused with the line at fault ([`FormatError`]).

use super::markdown::{escape_link_text, link_dest, one_line, Outline};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a task is to be solved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskType {
    /// Small enough to solve in one go.
    Simple,
    /// Decomposed into child tasks first; solved by integrating their results.
    Complex,
}

impl TaskType {
    /// `simple` or `complex`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::Simple => "simple",
            TaskType::Complex => "complex",
        }
    }
}

/// A link in `### Dependents`: the task named by `target` (relative to the file's folder)
/// is solved first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLink {
    /// The link's text (usually the other task's title).
    pub text: String,
    /// The relative path as written, without any `#fragment`.
    pub target: String,
    /// The 1-based line it stands on.
    pub line: usize,
}

/// A file that cannot be read as a task: the line at fault and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FormatError {
    /// 1-based.
    pub line: usize,
    /// What is wrong, and how to write it instead.
    pub message: String,
}

/// A parsed task file.
///
/// ```
/// use stategraph_agents::tree::{TaskFile, TaskType};
/// let task = TaskFile::parse("# Fetch URLs\n\n## Type\nsimple\n\n## Summary\nDownload each page.\n\n### Dependents\n- [Read the list](read_list.md)\n").unwrap();
/// assert_eq!(task.title, "Fetch URLs");
/// assert_eq!(task.task_type, Some(TaskType::Simple));
/// assert_eq!(task.dependents[0].target, "read_list.md");
/// assert_eq!(TaskFile::parse("## Type\nsimple\n").unwrap_err().line, 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFile {
    /// The `# Title`.
    pub title: String,
    /// `## Type`, when the file has one.
    pub task_type: Option<TaskType>,
    /// `## Summary`, else the first paragraph after the title (may be empty).
    pub summary: String,
    /// `### Dependents`, in order.
    pub dependents: Vec<TaskLink>,
    /// The whole file as read.
    pub text: String,
}

const SUMMARY_LINE: usize = 100;

impl TaskFile {
    /// Reads a task file's text.
    pub fn parse(text: &str) -> Result<TaskFile, FormatError> {
        let fail = |line: usize, message: String| Err(FormatError { line, message });
        if text.trim().is_empty() {
            return fail(
                1,
                "the file is empty; a task file starts with `# Title`".into(),
            );
        }
        let outline = Outline::parse(text);
        let Some(first) = outline.headings.first() else {
            return fail(
                1,
                "no `# Title` heading; a task file starts with its title as `# Title`".into(),
            );
        };
        if first.level != 1 {
            return fail(
                first.line,
                format!(
                    "the first heading is `{} {}`; a task file starts with its title as `# Title`",
                    "#".repeat(first.level.into()),
                    first.text
                ),
            );
        }
        if first.text.is_empty() {
            return fail(first.line, "the title is empty".into());
        }
        let mut task = TaskFile {
            title: first.text.clone(),
            task_type: None,
            summary: String::new(),
            dependents: Vec::new(),
            text: text.to_string(),
        };
        let mut seen: Vec<(&str, usize)> = Vec::new();
        let mut summary = None;
        for (i, heading) in outline.headings.iter().enumerate().skip(1) {
            let section = match heading.text.to_ascii_lowercase().as_str() {
                "type" if heading.level == 2 => "Type",
                "summary" if heading.level == 2 => "Summary",
                "dependents" if matches!(heading.level, 2 | 3) => "Dependents",
                _ => continue,
            };
            if let Some((_, line)) = seen.iter().find(|(s, _)| *s == section) {
                return fail(
                    heading.line,
                    format!("a second `{section}` section (the first is on line {line})"),
                );
            }
            seen.push((section, heading.line));
            let body = outline.section_body(text.len(), i);
            match section {
                "Type" => task.task_type = Some(read_type(text, &outline, heading.line, &body)?),
                "Summary" => summary = Some(text[body].trim().to_string()),
                _ => task.dependents = read_dependents(text, &outline, &body)?,
            }
        }
        task.summary = summary.unwrap_or_else(|| first_paragraph(text, &outline));
        Ok(task)
    }

    /// The summary on one line, cut to a readable length (`(no summary)` when empty).
    pub fn summary_line(&self) -> String {
        if self.summary.trim().is_empty() {
            "(no summary)".to_string()
        } else {
            one_line(&self.summary, SUMMARY_LINE)
        }
    }

    /// True when the file says `complex`.
    pub fn is_complex(&self) -> bool {
        self.task_type == Some(TaskType::Complex)
    }
}

fn read_type(
    text: &str,
    outline: &Outline,
    heading_line: usize,
    body: &std::ops::Range<usize>,
) -> Result<TaskType, FormatError> {
    let section = &text[body.clone()];
    let Some((offset, line)) = section
        .split_inclusive('\n')
        .scan(0usize, |at, l| {
            let start = *at;
            *at += l.len();
            Some((start, l))
        })
        .find(|(_, l)| !l.trim().is_empty())
    else {
        return Err(FormatError {
            line: heading_line,
            message: "`## Type` is empty; write `simple` or `complex` under it".into(),
        });
    };
    let word = line
        .trim()
        .trim_matches(|c: char| matches!(c, '*' | '_' | '`' | '-' | ' '))
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match word.as_str() {
        "simple" => Ok(TaskType::Simple),
        "complex" => Ok(TaskType::Complex),
        _ => Err(FormatError {
            line: outline.line_of(body.start + offset),
            message: format!(
                "`## Type` must be `simple` or `complex`, not `{}`",
                line.trim()
            ),
        }),
    }
}

/// The links of `### Dependents`. Every line must be a list item holding a link, the word
/// `none`, blank, or the indented continuation of an item: a dependency written any other
/// way (`- parse_html.md`) would otherwise be silently ignored.
fn read_dependents(
    text: &str,
    outline: &Outline,
    body: &std::ops::Range<usize>,
) -> Result<Vec<TaskLink>, FormatError> {
    let mut links = Vec::new();
    let first = outline.line_of(body.start);
    let last = outline.line_of(body.end.saturating_sub(1).max(body.start));
    for line in first..=last {
        let range = outline.line_range(text, line);
        let range = range.start.max(body.start)..range.end.min(body.end);
        let raw = &text[range.clone()];
        let trimmed = raw.trim();
        let on_line: Vec<_> = outline.links_in(&range).collect();
        if !on_line.is_empty() {
            for link in on_line {
                links.push(TaskLink {
                    text: link.text.clone(),
                    target: check_target(&link.dest, link.line)?,
                    line: link.line,
                });
            }
            continue;
        }
        let item = trimmed
            .trim_start_matches(['-', '*', '+'])
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches(['.', ')'])
            .trim()
            .trim_matches(|c: char| matches!(c, '(' | ')' | '.' | '_' | '*'))
            .to_ascii_lowercase();
        let continuation = raw.starts_with([' ', '\t']) && !is_list_item(trimmed);
        if trimmed.is_empty() || matches!(item.as_str(), "none" | "n/a" | "") || continuation {
            continue;
        }
        return Err(FormatError {
            line,
            message: format!(
                "`{trimmed}` is not a link; list each task this one needs first as a Markdown \
                 link, e.g. `- [Parse HTML](../parse_html.md)`"
            ),
        });
    }
    Ok(links)
}

fn is_list_item(line: &str) -> bool {
    line.starts_with(['-', '*', '+'])
        || line
            .split_once(['.', ')'])
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A dependent's target: a relative path to a `.md` file, without its `#fragment`.
fn check_target(dest: &str, line: usize) -> Result<String, FormatError> {
    let target = dest.split(['#', '?']).next().unwrap_or_default().trim();
    // A link's destination is a URL: editors write a file name's space as `%20`.
    let decoded = percent_encoding::percent_decode_str(target).decode_utf8();
    let target = decoded.as_deref().unwrap_or(target);
    let problem = if target.is_empty() {
        Some("links to nothing".to_string())
    } else if target.contains("://") || target.starts_with("mailto:") {
        Some(format!("links to `{target}`, which is not a task file"))
    } else if target.starts_with('/') {
        Some(format!(
            "links to the absolute path `{target}`; links are relative to this file's folder"
        ))
    } else if !target.ends_with(".md") {
        Some(format!(
            "links to `{target}`; a dependent is another task file (`.md`)"
        ))
    } else {
        None
    };
    match problem {
        Some(message) => Err(FormatError { line, message }),
        None => Ok(target.to_string()),
    }
}

/// The first top-level paragraph after the title, outside the known sections.
fn first_paragraph(text: &str, outline: &Outline) -> String {
    let title_end = outline.headings[0].range.end;
    let known = |offset: usize| {
        outline
            .headings
            .iter()
            .rev()
            .find(|h| h.range.start <= offset)
            .is_some_and(|h| matches!(h.text.to_ascii_lowercase().as_str(), "type" | "dependents"))
    };
    outline
        .paragraphs
        .iter()
        .find(|p| p.start >= title_end && !known(p.start))
        .map(|p| text[p.clone()].trim().to_string())
        .unwrap_or_default()
}

/// The Markdown of a new task file.
///
/// ```
/// use stategraph_agents::tree::{render_task, TaskFile, TaskType};
/// let text = render_task("Parse HTML", TaskType::Simple, "Parse each page.", &[("Fetch URLs".into(), "fetch_urls.md".into())]);
/// let task = TaskFile::parse(&text).unwrap();
/// assert_eq!(task.dependents[0].target, "fetch_urls.md");
/// ```
pub fn render_task(
    title: &str,
    task_type: TaskType,
    summary: &str,
    dependents: &[(String, String)],
) -> String {
    let mut out = format!(
        "# {}\n\n## Type\n{}\n\n## Summary\n{}\n\n### Dependents\n",
        one_line(title, usize::MAX),
        task_type.as_str(),
        summary.trim()
    );
    if dependents.is_empty() {
        out.push_str("None.\n");
    }
    for (text, target) in dependents {
        out.push_str(&format!(
            "- [{}]({})\n",
            escape_link_text(text),
            link_dest(target)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> FormatError {
        TaskFile::parse(text).unwrap_err()
    }

    #[test]
    fn a_task_written_by_the_engine_reads_back() {
        let text = render_task(
            "Extract [data]",
            TaskType::Complex,
            "Extract the article data\nfrom the parsed pages.",
            &[
                ("Parse HTML".into(), "../parse_html.md".into()),
                ("Find selectors".into(), "find_selectors.md".into()),
            ],
        );
        let task = TaskFile::parse(&text).unwrap();
        assert_eq!(task.title, "Extract [data]");
        assert!(task.is_complex());
        assert_eq!(
            task.summary,
            "Extract the article data\nfrom the parsed pages."
        );
        assert_eq!(
            task.summary_line(),
            "Extract the article data from the parsed pages."
        );
        let targets: Vec<_> = task.dependents.iter().map(|d| d.target.as_str()).collect();
        assert_eq!(targets, ["../parse_html.md", "find_selectors.md"]);
        assert_eq!(task.dependents[0].line, 11);
        let none = render_task("A", TaskType::Simple, "s", &[]);
        assert!(TaskFile::parse(&none).unwrap().dependents.is_empty());
    }

    #[test]
    fn a_task_written_by_a_person_needs_only_a_title() {
        let task = TaskFile::parse(
            "<!-- my scraper -->\n# Web scraper\n\nBuild a polite scraper\nfor news sites.\n\n## Details\n\nUse Python.\n",
        )
        .unwrap();
        assert_eq!(task.title, "Web scraper");
        assert_eq!(task.task_type, None);
        assert_eq!(task.summary, "Build a polite scraper\nfor news sites.");
        let typed = TaskFile::parse("# A\n\n## Type\n**Complex** (big)\n").unwrap();
        assert_eq!(typed.task_type, Some(TaskType::Complex));
    }

    #[test]
    fn what_cannot_be_read_is_refused_with_its_line() {
        assert_eq!(err("").line, 1);
        assert_eq!(err("just text\n").line, 1);
        let e = err("\n\n## Summary\nx\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("# Title"), "{e}");
        let e = err("# A\n\n## Type\n\nmedium\n");
        assert_eq!((e.line, e.message.contains("`medium`")), (5, true), "{e}");
        assert_eq!(err("# A\n## Type\n").line, 2);
        let e = err("# A\n## Type\nsimple\n## Type\ncomplex\n");
        assert_eq!(e.line, 4);
        assert!(e.message.contains("line 2"), "{e}");
    }

    #[test]
    fn a_dependent_must_be_a_relative_link_to_a_task_file() {
        let base = "# A\n\n## Summary\ns\n\n### Dependents\n";
        let e = err(&format!("{base}- parse_html.md\n"));
        assert_eq!(e.line, 7);
        assert!(e.message.contains("not a link"), "{e}");
        assert_eq!(err(&format!("{base}some words\n")).line, 7);
        let e = err(&format!("{base}- [x](https://example.com/a.md)\n"));
        assert!(e.message.contains("not a task file"), "{e}");
        assert!(err(&format!("{base}- [x](/abs/a.md)\n"))
            .message
            .contains("absolute"));
        assert!(err(&format!("{base}- [x](notes.txt)\n"))
            .message
            .contains(".md"));
        let ok = TaskFile::parse(&format!(
            "{base}\n1. [B](b.md#part) needs the\n   output of b\n- none\n"
        ))
        .unwrap();
        assert_eq!(ok.dependents.len(), 1);
        assert_eq!(ok.dependents[0].target, "b.md");
        assert_eq!(ok.dependents[0].line, 8);
    }

    #[test]
    fn headings_inside_code_are_part_of_the_task() {
        let task =
            TaskFile::parse("# A\n\n## Summary\nRun it:\n\n```sh\n## Type\n# x\n```\n").unwrap();
        assert_eq!(task.task_type, None);
        assert!(task.summary.contains("## Type"));
    }
}
