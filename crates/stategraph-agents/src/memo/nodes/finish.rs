//! `fact_check` (the deck's claims against the other documents, and every figure of the draft
//! against the sources), `validate` (the overall score; below the threshold a person reviews:
//! approve, or notes that send the memo back to `draft`) and `finalize` (the memo with its
//! validation appendix).

use super::cite::body_of;
use super::{is_approval, messages, mode, Stage};
use crate::memo::dataroom::{mentions, DataRoom};
use crate::memo::figures::{figures, Figure};
use crate::memo::prompts;
use crate::memo::state::{
    ClaimCheck, ClaimStatus, FactCheck, MemoState, MemoStateUpdate, Mode, UnsupportedFigure,
    Validation,
};
use crate::memo::MemoAgent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

/// The heading of the validation appendix `finalize` adds.
const APPENDIX: &str = "## Validation";

pub(crate) async fn fact_check(
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("fact_check", &ctx).await?;
    let room = stage.room(&s)?;
    let deck = s.deck_analysis.clone().unwrap_or_default();
    let draft = s
        .final_draft
        .as_deref()
        .ok_or_else(|| NodeError::new("fact_check needs the draft (4-final-draft.md)"))?;
    let claims: Vec<ClaimCheck> = deck
        .metrics
        .iter()
        .map(|m| check_claim(&room, &deck.source, &m.name, &m.value))
        .collect();
    let known: Vec<Figure> = room.docs.iter().flat_map(|d| figures(&d.text)).collect();
    let mut checked = 0;
    let mut unsupported = Vec::new();
    for line in body_of(draft).lines() {
        let t = line.trim();
        if t.starts_with('#') || t.starts_with("<!--") {
            continue;
        }
        for f in figures(t) {
            checked += 1;
            if !known.iter().any(|k| k.same(&f)) {
                unsupported.push(UnsupportedFigure {
                    figure: f.text,
                    context: t.chars().take(200).collect(),
                });
            }
        }
    }
    let result = FactCheck {
        claims,
        figures_checked: checked,
        figures_supported: checked - unsupported.len(),
        unsupported,
    };
    let contradicted = result
        .claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Contradicted)
        .count();
    let note = format!(
        "{} of {} figures found in the sources; {contradicted} of {} deck claims contradicted",
        result.figures_supported,
        result.figures_checked,
        result.claims.len()
    );
    let validation = Validation {
        fact_check_results: Some(result),
        ..s.validation.clone()
    };
    let update = MemoStateUpdate::default().validation(validation);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// A deck claim against the documents other than the deck: the lines naming the metric, and
/// whether one of them states the same figure.
fn check_claim(room: &DataRoom, deck: &str, name: &str, value: &str) -> ClaimCheck {
    let claimed = figures(value);
    let mut check = ClaimCheck {
        name: name.to_string(),
        deck_value: value.to_string(),
        ..ClaimCheck::default()
    };
    let Some(first) = claimed.first() else {
        return check;
    };
    let mut speaking = Vec::new();
    for doc in room.docs.iter().filter(|d| d.path != deck) {
        for (line, text) in doc.passages() {
            if !mentions(text, name) {
                continue;
            }
            let found: Vec<Figure> = figures(text)
                .into_iter()
                .filter(|f| f.kind == first.kind)
                .collect();
            if found.is_empty() {
                continue;
            }
            let place = format!("{}:{line}: {text}", doc.path);
            if found.iter().any(|f| claimed.iter().any(|c| c.same(f))) {
                check.status = ClaimStatus::Verified;
                check.evidence = vec![place];
                return check;
            }
            speaking.push(place);
        }
    }
    if !speaking.is_empty() {
        check.status = ClaimStatus::Contradicted;
        check.evidence = speaking;
    }
    check
}

/// The model's review (model mode).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Review {
    /// 0 to 10.
    pub score: f64,
    /// What the memo does well.
    pub strengths: Vec<String>,
    /// What it must fix.
    pub weaknesses: Vec<String>,
}

/// The score from the checks alone, and how it was reached.
fn computed_score(s: &MemoState) -> (f64, Vec<String>) {
    let v = &s.validation;
    let cites = v.citation_validation.clone().unwrap_or_default();
    let facts = v.fact_check_results.clone().unwrap_or_default();
    let cite_ratio = if cites.total == 0 {
        0.0
    } else {
        cites.valid as f64
            / (cites.total + cites.problems.iter().filter(|p| p.n == 0).count()) as f64
    };
    let fact_ratio = if facts.figures_checked == 0 {
        1.0
    } else {
        facts.figures_supported as f64 / facts.figures_checked as f64
    };
    let complete = s
        .sections
        .iter()
        .filter(|x| x.body.split_whitespace().count() >= 30 && x.body.contains("[E"))
        .count();
    let contradicted = facts
        .claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Contradicted)
        .count();
    let raw = 10.0 * (0.35 * cite_ratio + 0.35 * fact_ratio + 0.3 * complete as f64 / 10.0)
        - 0.5 * contradicted as f64;
    let score = (raw.clamp(0.0, 10.0) * 10.0).round() / 10.0;
    let breakdown = vec![
        format!(
            "citations: {} of {} hold (35%)",
            cites.valid,
            cites.total + cites.problems.iter().filter(|p| p.n == 0).count()
        ),
        format!(
            "figures: {} of {} found in the sources (35%)",
            facts.figures_supported, facts.figures_checked
        ),
        format!("sections: {complete} of 10 complete and cited (30%)"),
        format!("deck claims contradicted by the documents: {contradicted} (-0.5 each)"),
    ];
    (score, breakdown)
}

pub(crate) async fn validate(
    agent: &MemoAgent,
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let mut stage = Stage::begin("validate", &ctx).await?;
    let (computed, mut breakdown) = computed_score(&s);
    let score = match mode(&s) {
        Mode::Offline => computed,
        Mode::Model => {
            let v = serde_json::to_string_pretty(&s.validation).unwrap_or_default();
            let user = format!(
                "Memo:\n{}\n\nValidation results:\n{v}\n\nScore from the checks alone: {computed}",
                s.final_draft.as_deref().unwrap_or("")
            );
            let review: Review = stage
                .ask(
                    &ctx,
                    agent,
                    "review",
                    messages(prompts::REVIEW, user),
                    |r: &Review| {
                        if (0.0..=10.0).contains(&r.score) {
                            Ok(())
                        } else {
                            Err("score must be from 0 to 10".into())
                        }
                    },
                )
                .await?;
            breakdown.push(format!(
                "reviewer (model): {:.1}; weaknesses: {}",
                review.score,
                review.weaknesses.join("; ")
            ));
            (((computed + review.score) / 2.0) * 10.0).round() / 10.0
        }
    };
    breakdown.insert(0, format!("overall: {score:.1} of 10"));
    let validation = Validation {
        overall_score: Some(score),
        score_breakdown: breakdown.clone(),
        ..s.validation.clone()
    };
    let threshold = stage.settings.review_below;
    let (approved, note) = if score >= threshold {
        (true, format!("score {score:.1}: approved"))
    } else if stage.settings.yes {
        (
            true,
            format!("score {score:.1} is below {threshold}: approved by the `yes` setting"),
        )
    } else {
        (
            false,
            format!("score {score:.1} is below {threshold}: a person reviews it"),
        )
    };
    let update = MemoStateUpdate::default()
        .validation(validation)
        .approved(approved);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// What a reviewer answered: approval, or notes for another draft.
enum Verdict {
    Approved,
    Notes(String),
}

/// Asks a person about a memo that scored below the threshold.
async fn review(s: &MemoState, ctx: &Context) -> Result<Verdict, NodeError> {
    let score = s.validation.overall_score.unwrap_or(0.0);
    let threshold = super::settings(ctx)?.review_below;
    let answer: serde_json::Value = ctx
        .interrupt(serde_json::json!({
            "question": format!(
                "The memo scores {score:.1} of 10, below {threshold}. Approve it (answer \
                 `approve`), or give notes and it goes back to `draft`."
            ),
            "overall_score": score,
            "breakdown": s.validation.score_breakdown,
            "draft": "4-final-draft.md",
        }))
        .await?;
    if is_approval(&answer) {
        return Ok(Verdict::Approved);
    }
    Ok(Verdict::Notes(match answer {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    }))
}

pub(crate) async fn finalize(
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("finalize", &ctx).await?;
    if !s.approved {
        match review(&s, &ctx).await? {
            Verdict::Approved => {}
            Verdict::Notes(notes) => {
                let update = MemoStateUpdate::default()
                    .review_notes(Some(notes))
                    .revisions(1);
                return Ok(stage.done(
                    &ctx,
                    &s,
                    update,
                    "sent back to draft with the reviewer's notes",
                ));
            }
        }
    }
    let draft = s
        .final_draft
        .clone()
        .ok_or_else(|| NodeError::new("finalize needs the draft (4-final-draft.md)"))?;
    let citations = &draft[body_of(&draft).len()..];
    // A draft finalized before (and edited, or sent round again) keeps one appendix.
    let body = body_of(&draft);
    let body = match body.find(&format!("\n{APPENDIX}\n")) {
        Some(at) => &body[..at],
        None => body,
    };
    let body = body.trim_end();
    let memo = format!("{body}\n\n{}\n{citations}", appendix(&s));
    let note = format!(
        "memo of {} words, score {:.1}",
        memo.split_whitespace().count(),
        s.validation.overall_score.unwrap_or(0.0)
    );
    let update = MemoStateUpdate::default()
        .approved(true)
        .final_draft(Some(memo.clone()))
        .final_memo(Some(memo));
    Ok(stage.done(&ctx, &s, update, &note))
}

/// The validation appendix: score, citation and fact-check results.
fn appendix(s: &MemoState) -> String {
    let v = &s.validation;
    let mut out = format!("{APPENDIX}\n\n");
    for line in &v.score_breakdown {
        out.push_str(&format!("- {line}\n"));
    }
    if let Some(c) = &v.citation_validation {
        for p in &c.problems {
            out.push_str(&format!("- citation problem: {} {}\n", p.source, p.problem));
        }
    }
    if let Some(f) = &v.fact_check_results {
        for c in f
            .claims
            .iter()
            .filter(|c| c.status == ClaimStatus::Contradicted)
        {
            out.push_str(&format!(
                "- the deck's {} ({}) is not what the documents say: {}\n",
                c.name,
                c.deck_value,
                c.evidence.join("; ")
            ));
        }
        for u in &f.unsupported {
            out.push_str(&format!("- figure not found in any source: {}\n", u.figure));
        }
    }
    if s.revisions > 0 {
        out.push_str(&format!(
            "- redrafted after review: {} time(s)\n",
            s.revisions
        ));
    }
    out
}
