//! `draft`: writes the 10 sections (`2-sections/NN-slug.md`), each citing its evidence as
//! `[E3]`. Offline, a section is a lead built from the deck analysis and the research summary,
//! then its evidence quoted; with a model, the model writes it from the same material. A
//! reviewer's notes (sent back from `validate`) are passed on.

use super::{messages, mode, Stage};
use crate::memo::outline::{SectionSpec, SECTIONS};
use crate::memo::prompts;
use crate::memo::state::{DeckAnalysis, MemoState, MemoStateUpdate, Mode, Passage, Section};
use crate::memo::MemoAgent;
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

pub(crate) async fn run(
    agent: &MemoAgent,
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let mut stage = Stage::begin("draft", &ctx).await?;
    let (Some(deck), Some(evidence)) = (&s.deck_analysis, &s.section_research) else {
        return Err(NodeError::new(
            "draft needs the deck analysis and the section research",
        ));
    };
    let mut sections = Vec::new();
    for (i, spec) in SECTIONS.iter().enumerate() {
        let stem = format!("{:02}-{}", i + 1, spec.slug);
        let passages: &[Passage] = evidence
            .sections
            .iter()
            .find(|e| e.section == stem)
            .map(|e| e.evidence.as_slice())
            .unwrap_or(&[]);
        let summary = spec.topic.and_then(|topic| {
            s.research
                .as_ref()?
                .topics
                .iter()
                .find(|t| t.topic == topic)
                .map(|t| t.summary.clone())
        });
        let text = match mode(&s) {
            Mode::Offline => offline(i + 1, spec, deck, summary.as_deref(), passages, &s),
            Mode::Model => {
                let user = model_brief(spec, deck, summary.as_deref(), passages, &s);
                let key = format!("section-{stem}");
                stage
                    .write(&ctx, agent, &key, messages(prompts::DRAFT, user))
                    .await?
            }
        };
        sections.push(Section {
            number: i + 1,
            slug: spec.slug.to_string(),
            title: spec.title.to_string(),
            body: format!("## {}. {}\n\n{}\n", i + 1, spec.title, text.trim()),
        });
    }
    let words: usize = sections
        .iter()
        .map(|x| x.body.split_whitespace().count())
        .sum();
    let note = match &s.review_notes {
        Some(_) => format!(
            "{} sections, {words} words, with the reviewer's notes",
            sections.len()
        ),
        None => format!("{} sections, {words} words", sections.len()),
    };
    let update = MemoStateUpdate::default().sections(sections);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// A section from the sources alone: a lead, then the evidence quoted with its ids.
fn offline(
    number: usize,
    spec: &SectionSpec,
    deck: &DeckAnalysis,
    summary: Option<&str>,
    passages: &[Passage],
    s: &MemoState,
) -> String {
    let name = if deck.company.is_empty() {
        s.company.trim()
    } else {
        deck.company.as_str()
    };
    let mut text = deck_lead(spec, deck, name);
    if let Some(summary) = summary {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("Research summary: {summary}"));
    }
    // The reviewer's notes are said once, in the first section.
    if number == 1 {
        if let Some(notes) = &s.review_notes {
            text.push_str(&format!(
                "\n\n> Revised after review. The reviewer's notes: {notes}"
            ));
        }
    }
    text.push_str(&quoted_evidence(passages));
    text
}

/// What the deck says on the section's subject, for the sections it speaks to; empty for the
/// others.
fn deck_lead(spec: &SectionSpec, deck: &DeckAnalysis, name: &str) -> String {
    match spec.slug {
        "executive-summary" => {
            let claims: Vec<String> = deck
                .metrics
                .iter()
                .filter(|m| !m.value.is_empty())
                .map(|m| format!("{} {}", m.name, m.value))
                .collect();
            format!(
                "{name} ({}) is raising {} at a {} pre-money valuation ({}). The deck claims: {}. \
                 The sections below test these claims against the data room; the validation \
                 appendix lists those the documents do not support.",
                deck.tagline,
                deck.raise,
                deck.valuation,
                deck.stage,
                claims.join("; ")
            )
        }
        "company-overview" => format!(
            "{name} is based in {} and was founded in {}. Sector: {}. Website: {}.",
            deck.headquarters, deck.founded, deck.sector, deck.website
        ),
        "team" => {
            let people: Vec<String> = deck
                .team
                .iter()
                .map(|p| format!("{} ({})", p.name, p.role))
                .collect();
            format!("The deck presents {}.", people.join(", "))
        }
        "financials-and-terms" if !deck.use_of_funds.is_empty() => {
            format!(
                "Use of funds, per the deck: {}.",
                deck.use_of_funds.trim_end_matches('.')
            )
        }
        "risks-and-recommendation" => format!(
            "Recommendation: continue diligence on {name}'s {} round; the risks below and the \
             deck claims flagged in the validation appendix are the questions to settle first.",
            deck.stage
        ),
        _ => String::new(),
    }
}

/// The section's evidence quoted with the ids drafts cite, or a line saying there is none.
fn quoted_evidence(passages: &[Passage]) -> String {
    if passages.is_empty() {
        return "\n\nThe data room holds no evidence for this section.".to_string();
    }
    let mut text = "\n\nFrom the data room:\n".to_string();
    for p in passages {
        text.push_str(&format!("\n- {} [{}]", p.quote, p.id));
    }
    text
}

/// What the model is given for one section.
fn model_brief(
    spec: &SectionSpec,
    deck: &DeckAnalysis,
    summary: Option<&str>,
    passages: &[Passage],
    s: &MemoState,
) -> String {
    let deck_json = serde_json::to_string_pretty(deck).unwrap_or_default();
    let evidence: String = passages
        .iter()
        .map(|p| format!("[{}] ({}:{}) {}\n", p.id, p.source, p.line, p.quote))
        .collect();
    let mut user = format!(
        "Company: {}\nSection: {}\nCover: {}\n\nDeck analysis:\n{deck_json}\n\nEvidence:\n{}",
        s.company.trim(),
        spec.title,
        spec.brief,
        if evidence.is_empty() {
            "(none)\n".to_string()
        } else {
            evidence
        }
    );
    if let Some(summary) = summary {
        user.push_str(&format!("\nResearch summary: {summary}\n"));
    }
    if let Some(notes) = &s.review_notes {
        user.push_str(&format!(
            "\nThe reviewer sent the draft back with these notes: {notes}\n"
        ));
    }
    user
}
