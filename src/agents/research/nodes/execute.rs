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
use crate::agents::research::state::{PlanState, PlanStateUpdate, Source, Status, Todo};
use crate::agents::research::{prompts, ResearchAgent};
use crate::llm::Message;
use crate::runtime::{Context, NodeError};
use crate::tools::{SearchHit, ToolError};
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

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let Some(current) = s.current().cloned() else {
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
    let children: Vec<&Todo> = s
        .plan
        .iter()
        .filter(|t| t.parent.as_deref() == Some(current.id.as_str()))
        .collect();
    let synthesis = !children.is_empty() && children.iter().all(|c| c.status == Status::Done);

    // Gather the material: sources already numbered (synthesis) or new hits.
    let mut new_sources: Vec<Source> = Vec::new();
    let mut numbered: Vec<(usize, String, String, String)> = Vec::new(); // (n, title, url, text)
    let mut notes = String::new();
    if synthesis {
        todo.tools_used.push("synthesis".into());
        for child in &children {
            notes.push_str(&format!(
                "Sub-task {} ({}): {}\n",
                child.id,
                child.task,
                child.result.as_deref().unwrap_or("")
            ));
            for &n in &child.source_ids {
                if let Some(src) = s.sources.get(n.wrapping_sub(1)) {
                    if !numbered.iter().any(|(m, ..)| *m == n) {
                        numbered.push((n, src.title.clone(), src.url.clone(), src.excerpt.clone()));
                    }
                }
            }
        }
    } else {
        let hits = match find_url(&todo.task)
            .filter(|_| todo.kind == crate::agents::research::Kind::Tool)
        {
            Some(url) => {
                todo.tools_used.push("fetch".into());
                let fetcher = agent.fetcher()?;
                ctx.record("fetch", || async move {
                    match fetcher.fetch(&url).await {
                        Ok(page) => Ok(Ok(vec![page.to_hit()])),
                        Err(e) => tool_outcome(e),
                    }
                })
                .await?
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
                .await?
            }
        };
        let hits = match hits {
            Ok(hits) => hits,
            Err(message) => {
                todo.error = Some(message.clone());
                todo.result = None;
                return Ok(PlanStateUpdate::default()
                    .executions(1)
                    .log(vec![format!(
                        "{} attempt {}: {message}",
                        todo.id, todo.attempts
                    )])
                    .plan(vec![todo]));
            }
        };
        // Number each hit as it will be cited: its place among the sources, existing or new.
        for hit in hits {
            let n = match s.sources.iter().position(|x| x.url == hit.url) {
                Some(i) => i + 1,
                None => match new_sources.iter().position(|x| x.url == hit.url) {
                    Some(i) => s.sources.len() + i + 1,
                    None => {
                        new_sources.push(Source {
                            url: hit.url.clone(),
                            title: hit.title.clone(),
                            excerpt: hit.content.chars().take(2000).collect(),
                            found_by: todo.id.clone(),
                        });
                        s.sources.len() + new_sources.len()
                    }
                },
            };
            if !numbered.iter().any(|(m, ..)| *m == n) {
                numbered.push((
                    n,
                    hit.title,
                    hit.url,
                    hit.content.chars().take(4000).collect(),
                ));
            }
        }
    }

    let mut material = String::new();
    for (n, title, url, text) in &numbered {
        material.push_str(&format!("[{n}] {title} ({url})\n{text}\n\n"));
    }
    let user = format!(
        "Research question: {}\nTask: {}\n\n{}Sources:\n{}",
        s.question.trim(),
        todo.task,
        if notes.is_empty() {
            String::new()
        } else {
            format!("Findings of the sub-tasks:\n{notes}\n")
        },
        if material.is_empty() {
            "(none)\n".to_string()
        } else {
            material
        }
    );
    let messages = vec![
        system(&settings.prompts.execute, prompts::EXECUTE),
        Message::user(user),
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
    todo.source_ids = numbered.iter().map(|(n, ..)| *n).collect();
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
    if !new_sources.is_empty() {
        update = update.sources(new_sources);
    }
    Ok(update)
}
