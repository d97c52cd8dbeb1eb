//! `execute`: carries out the current todo and summarises what it found, citing sources.
//!
//! - research todos (and tool todos without a URL) search: the web or the local corpus;
//! - tool todos fetch the first `http(s)://` URL in their task;
//! - a todo split into sub-todos (all done now) synthesises their results instead.
//!
//! A tool failure (nothing found, page unreachable) is not a node failure: it is kept on the
//! todo (`error`) for `reflect` to count as a failed attempt. Transient errors fail the node,
//! so its retry policy, or a resume, tries again.

use super::{journaled_text, settings, system};
use crate::research::state::{PlanState, PlanStateUpdate, Source, Status, Todo};
use crate::research::{prompts, ResearchAgent, ResearchSettings};
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::Message;
use stategraph_tools::{SearchHit, ToolError};
use std::sync::Arc;

/// The first `http://` or `https://` URL in `text`, without trailing punctuation.
pub(crate) fn find_url(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| {
            w.trim_end_matches(|c: char| {
                matches!(c, '.' | ',' | ';' | ':' | ')' | ']' | '"' | '\'' | '>')
            })
            .to_string()
        })
}

/// A tool error as either a recorded failure of the attempt (`Ok(Err(message))`) or, when
/// the service is failing (already retried by the HTTP client), a node error; only a failure
/// no layer below retried is retried by the node.
fn tool_outcome(e: ToolError) -> Result<Result<Vec<SearchHit>, String>, NodeError> {
    if e.should_retry() {
        Err(NodeError::transient(e.to_string()))
    } else if e.is_transient() {
        Err(NodeError::new(e.to_string()))
    } else {
        Ok(Err(e.to_string()))
    }
}

/// A source as cited in the prompt: its number among the thread's sources, title, URL, text.
type Numbered = (usize, String, String, String);

/// What the summary is written from.
#[derive(Default)]
struct Material {
    numbered: Vec<Numbered>,
    /// The sub-todos' findings (synthesis only).
    notes: String,
    /// Hits not among the thread's sources yet, numbered after them.
    new_sources: Vec<Source>,
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let Some(current) = s.current() else {
        return Err(NodeError::new(format!(
            "execute found no current todo (`{}`); was it removed from the plan?",
            s.current_task_id.as_deref().unwrap_or("none")
        )));
    };
    let mut todo = Todo {
        status: Status::InProgress,
        attempts: current.attempts + 1,
        error: None,
        ..current.clone()
    };
    let material = match gather(agent, &ctx, &settings, &s, &mut todo).await? {
        Ok(material) => material,
        Err(message) => return Ok(failed_attempt(todo, message)),
    };
    let messages = vec![
        system(&settings.prompts.execute, prompts::EXECUTE),
        Message::user(prompt(&s, &todo, &material)),
    ];
    // Journaled: if the process dies after the model answered, the resumed node gets this
    // reply back instead of paying for the call again.
    let (summary, usage) = journaled_text(
        &ctx,
        agent,
        ("summary", "execute"),
        messages,
        &settings,
        "summarising the sources failed",
    )
    .await?;
    todo.result = Some(summary.trim().to_string());
    todo.source_ids = material.numbered.iter().map(|(n, ..)| *n).collect();
    let mut update = PlanStateUpdate::default()
        .executions(1)
        .usage(usage)
        .log(vec![format!(
            "{} attempt {}: {} sources",
            todo.id,
            todo.attempts,
            todo.source_ids.len()
        )])
        .plan(vec![todo]);
    if !material.new_sources.is_empty() {
        update = update.sources(material.new_sources);
    }
    Ok(update)
}

/// What `todo`'s summary is written from: the sources its sub-todos cited, once all of them
/// are done (a synthesis), else what its tool found; or why the tool found nothing.
async fn gather(
    agent: &ResearchAgent,
    ctx: &Context,
    settings: &ResearchSettings,
    s: &PlanState,
    todo: &mut Todo,
) -> Result<Result<Material, String>, NodeError> {
    let children: Vec<&Todo> = s
        .plan
        .iter()
        .filter(|t| t.parent.as_deref() == Some(todo.id.as_str()))
        .collect();
    if !children.is_empty() && children.iter().all(|c| c.status == Status::Done) {
        todo.tools_used.push("synthesis".into());
        return Ok(Ok(synthesis_material(s, &children)));
    }
    Ok(use_tool(agent, ctx, settings, todo)
        .await?
        .map(|hits| number_hits(s, hits, &todo.id)))
}

/// An attempt whose tool found nothing: the todo keeps why, for `reflect` to count.
fn failed_attempt(mut todo: Todo, message: String) -> PlanStateUpdate {
    todo.error = Some(message.clone());
    todo.result = None;
    PlanStateUpdate::default()
        .executions(1)
        .log(vec![format!(
            "{} attempt {}: {message}",
            todo.id, todo.attempts
        )])
        .plan(vec![todo])
}

/// A synthesis works from its sub-todos' results and the sources they cited.
fn synthesis_material(s: &PlanState, children: &[&Todo]) -> Material {
    let mut material = Material::default();
    for child in children {
        material.notes.push_str(&format!(
            "Sub-task {} ({}): {}\n",
            child.id,
            child.task,
            child.result.as_deref().unwrap_or("")
        ));
        for &n in &child.source_ids {
            if let Some(src) = s.sources.get(n.wrapping_sub(1)) {
                if !material.numbered.iter().any(|(m, ..)| *m == n) {
                    material.numbered.push((
                        n,
                        src.title.clone(),
                        src.url.clone(),
                        src.excerpt.clone(),
                    ));
                }
            }
        }
    }
    material
}

/// Fetches the todo's URL (a tool todo naming one) or searches for its task, recording the
/// tool used on the todo. `Ok(Err(message))` is a failed attempt, not a node failure.
async fn use_tool(
    agent: &ResearchAgent,
    ctx: &Context,
    settings: &ResearchSettings,
    todo: &mut Todo,
) -> Result<Result<Vec<SearchHit>, String>, NodeError> {
    match find_url(&todo.task).filter(|_| todo.kind == crate::research::Kind::Tool) {
        Some(url) => {
            todo.tools_used.push("fetch".into());
            let fetcher = agent.fetcher()?;
            ctx.record("fetch", || async move {
                match fetcher.fetch(&url).await {
                    Ok(page) => Ok(Ok(vec![page.to_hit()])),
                    Err(e) => tool_outcome(e),
                }
            })
            .await
        }
        None => {
            let (tool, name) = agent.search_tool(&settings.search).await?;
            todo.tools_used.push(name.into());
            let query = todo.task.clone();
            let max = settings.search.max_results;
            ctx.record("search", || async move {
                match tool.search(&query, max).await {
                    Ok(hits) if hits.is_empty() => Ok(Err(format!("no results for `{query}`"))),
                    Ok(hits) => Ok(Ok(hits)),
                    Err(e) => tool_outcome(e),
                }
            })
            .await
        }
    }
}

/// Numbers each hit as it will be cited: its place among the sources, existing or new.
fn number_hits(s: &PlanState, hits: Vec<SearchHit>, found_by: &str) -> Material {
    let mut material = Material::default();
    for hit in hits {
        let n = match s.sources.iter().position(|x| x.url == hit.url) {
            Some(i) => i + 1,
            None => match material.new_sources.iter().position(|x| x.url == hit.url) {
                Some(i) => s.sources.len() + i + 1,
                None => {
                    material.new_sources.push(Source {
                        url: hit.url.clone(),
                        title: hit.title.clone(),
                        excerpt: hit.content.chars().take(2000).collect(),
                        found_by: found_by.to_string(),
                    });
                    s.sources.len() + material.new_sources.len()
                }
            },
        };
        if !material.numbered.iter().any(|(m, ..)| *m == n) {
            material.numbered.push((
                n,
                hit.title,
                hit.url,
                hit.content.chars().take(4000).collect(),
            ));
        }
    }
    material
}

/// The user message: the question, the task, the sub-tasks' findings and the numbered sources.
fn prompt(s: &PlanState, todo: &Todo, material: &Material) -> String {
    let mut sources = String::new();
    for (n, title, url, text) in &material.numbered {
        sources.push_str(&format!("[{n}] {title} ({url})\n{text}\n\n"));
    }
    format!(
        "Research question: {}\nTask: {}\n\n{}Sources:\n{}",
        s.question.trim(),
        todo.task,
        if material.notes.is_empty() {
            String::new()
        } else {
            format!("Findings of the sub-tasks:\n{}\n", material.notes)
        },
        if sources.is_empty() {
            "(none)\n".to_string()
        } else {
            sources
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::Kind;

    fn source(url: &str) -> Source {
        Source {
            url: url.into(),
            title: format!("T {url}"),
            excerpt: format!("about {url}"),
            found_by: "t0".into(),
        }
    }

    fn hit(url: &str) -> SearchHit {
        SearchHit {
            title: format!("T {url}"),
            url: url.into(),
            content: format!("new on {url}"),
        }
    }

    #[test]
    fn a_synthesis_cites_its_sub_todos_sources_once_each_by_their_numbers() {
        let s = PlanState {
            question: " Why? ".into(),
            sources: vec![source("a"), source("b"), source("c")],
            ..PlanState::default()
        };
        let mut one = Todo::new("t1.1", "first", Kind::Research);
        one.result = Some("found A".into());
        one.source_ids = vec![3, 1];
        let mut two = Todo::new("t1.2", "second", Kind::Research);
        two.source_ids = vec![1, 9];
        let material = synthesis_material(&s, &[&one, &two]);
        let numbers: Vec<usize> = material.numbered.iter().map(|(n, ..)| *n).collect();
        assert_eq!(numbers, [3, 1], "a number outside the sources is left out");
        assert_eq!(
            material.notes,
            "Sub-task t1.1 (first): found A\nSub-task t1.2 (second): \n"
        );
        assert!(material.new_sources.is_empty());
        let todo = Todo::new("t1", "both", Kind::Research);
        assert_eq!(
            prompt(&s, &todo, &material),
            "Research question: Why?\nTask: both\n\nFindings of the sub-tasks:\n\
             Sub-task t1.1 (first): found A\nSub-task t1.2 (second): \n\nSources:\n\
             [3] T c (c)\nabout c\n\n[1] T a (a)\nabout a\n\n"
        );
    }

    #[test]
    fn hits_are_numbered_after_the_known_sources_and_a_repeated_url_keeps_its_number() {
        let s = PlanState {
            sources: vec![source("a"), source("b")],
            ..PlanState::default()
        };
        let material = number_hits(&s, vec![hit("x"), hit("b"), hit("y"), hit("x")], "t2");
        let numbers: Vec<usize> = material.numbered.iter().map(|(n, ..)| *n).collect();
        assert_eq!(numbers, [3, 2, 4]);
        let new: Vec<(&str, &str)> = material
            .new_sources
            .iter()
            .map(|x| (x.url.as_str(), x.found_by.as_str()))
            .collect();
        assert_eq!(new, [("x", "t2"), ("y", "t2")]);
        assert_eq!(
            material.numbered[1].3, "new on b",
            "the hit's text is cited"
        );
        let empty = prompt(
            &s,
            &Todo::new("t2", "look", Kind::Research),
            &Material::default(),
        );
        assert!(
            empty.ends_with("Task: look\n\nSources:\n(none)\n"),
            "{empty}"
        );
    }
}
