//! `finalize`: the answer, citing sources `[n]`, with the numbered source list appended.

use super::{journaled_text, settings, system};
use crate::research::state::{PlanState, PlanStateUpdate, Status, Todo};
use crate::research::{prompts, ResearchAgent};
use stategraph::runtime::{Context, NodeError};
use stategraph_llm::Message;
use std::sync::Arc;

/// The `[n]` numbers cited in `text`.
pub(crate) fn citations(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        if let Some(close) = rest.find(']') {
            if let Ok(n) = rest[..close].trim().parse::<usize>() {
                out.push(n);
            }
        }
    }
    out
}

pub(crate) async fn run(
    agent: &ResearchAgent,
    s: Arc<PlanState>,
    ctx: Context,
) -> Result<PlanStateUpdate, NodeError> {
    let settings = settings(&ctx)?;
    let done: Vec<_> = s
        .plan
        .iter()
        .filter(|t| t.status == Status::Done && t.result.is_some())
        .collect();
    let open: Vec<String> = s
        .plan
        .iter()
        .filter(|t| t.status != Status::Done)
        .map(|t| {
            format!(
                "- {} ({}): {}",
                t.task,
                t.status.as_str(),
                t.failure_reason.as_deref().unwrap_or("not run")
            )
        })
        .collect();
    let mut update = PlanStateUpdate::default().current_task_id(None);
    let mut answer = if done.is_empty() {
        // Nothing to write from: say so without paying for a model call.
        format!(
            "The research could not answer \"{}\": no todo of the plan succeeded.\n\n{}",
            s.question.trim(),
            open.join("\n")
        )
    } else {
        let user = answer_prompt(&s, &done, &open);
        let messages = vec![
            system(&settings.prompts.finalize, prompts::FINALIZE),
            Message::user(user),
        ];
        let (text, usage) = journaled_text(
            &ctx,
            agent,
            ("answer", "finalize"),
            messages,
            &settings,
            "writing the answer failed",
        )
        .await?;
        update = update.usage(usage);
        text.trim().to_string()
    };
    let mut log = Vec::new();
    let unknown: Vec<usize> = citations(&answer)
        .into_iter()
        .filter(|&n| n == 0 || n > s.sources.len())
        .collect();
    if !unknown.is_empty() {
        log.push(format!(
            "the answer cites sources that do not exist: {unknown:?}"
        ));
    }
    answer.push_str(&appendix(&s));
    log.push("answer written".to_string());
    Ok(update.answer(Some(answer)).log(log))
}

/// What the model writes the answer from: the findings of the done todos, what was not
/// found, and the sources by number.
fn answer_prompt(s: &PlanState, done: &[&Todo], open: &[String]) -> String {
    let findings: Vec<String> = done
        .iter()
        .map(|t| format!("- {}: {}", t.task, t.result.as_deref().unwrap_or("")))
        .collect();
    let sources: Vec<String> = s
        .sources
        .iter()
        .enumerate()
        .map(|(i, src)| format!("[{}] {} ({})", i + 1, src.title, src.url))
        .collect();
    format!(
        "Research question: {}\n\nFindings:\n{}\n\nNot found:\n{}\n\nSources:\n{}",
        s.question.trim(),
        findings.join("\n"),
        if open.is_empty() {
            "(nothing)".to_string()
        } else {
            open.join("\n")
        },
        sources.join("\n")
    )
}

/// What follows the answer: its sources by number, and the verifications run, if any.
fn appendix(s: &PlanState) -> String {
    let mut out = String::new();
    if !s.sources.is_empty() {
        out.push_str("\n\nSources:\n");
        for (i, src) in s.sources.iter().enumerate() {
            out.push_str(&format!("[{}] {} — {}\n", i + 1, src.title, src.url));
        }
    }
    if !s.verifications.is_empty() {
        out.push_str("\n\nVerification:\n");
        for line in &s.verifications {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out
}
