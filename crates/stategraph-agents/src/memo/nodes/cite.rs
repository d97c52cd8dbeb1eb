//! `cite` numbers the sections' `[E3]` markers as footnotes `[^1]` in order of first use and
//! assembles `4-final-draft.md` (header, sections, citations); `validate_citations` reads the
//! draft's citation list back and checks that each cited passage is in its source file.

use super::Stage;
use crate::memo::dataroom::contains_passage;
use crate::memo::state::{
    Citation, CitationProblem, CitationValidation, MemoState, MemoStateUpdate, Validation,
};
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

/// The heading that starts the citation list.
pub(crate) const CITATIONS: &str = "## Citations";

/// The `[E12]` / `[E3, E5]` markers of `text`: (start, end, ids).
fn markers(text: &str) -> Vec<(usize, usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("[E").map(|i| i + from) {
        let Some(close) = text[open..].find(']').map(|i| i + open) else {
            break;
        };
        let ids: Vec<String> = text[open + 1..close]
            .split(',')
            .map(|p| p.trim().to_string())
            .collect();
        let valid = ids.iter().all(|id| {
            id.len() > 1 && id.starts_with('E') && id[1..].chars().all(|c| c.is_ascii_digit())
        });
        if valid {
            out.push((open, close + 1, ids));
        }
        from = open + 2;
    }
    out
}

pub(crate) async fn cite(s: Arc<MemoState>, ctx: Context) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("cite", &ctx).await?;
    let evidence = s
        .section_research
        .as_ref()
        .ok_or_else(|| NodeError::new("cite needs the section research"))?;
    let mut citations: Vec<(String, Citation)> = Vec::new();
    let mut body = String::new();
    for section in &s.sections {
        let text = &section.body;
        let mut out = String::new();
        let mut last = 0;
        for (start, end, ids) in markers(text) {
            out.push_str(&text[last..start]);
            let mut known = Vec::new();
            for id in &ids {
                let Some(p) = evidence.passage(id) else {
                    continue;
                };
                let n = match citations.iter().position(|(k, _)| k == id) {
                    Some(i) => i + 1,
                    None => {
                        citations.push((
                            id.clone(),
                            Citation {
                                n: citations.len() + 1,
                                source: p.source.clone(),
                                line: p.line,
                                quote: p.quote.clone(),
                            },
                        ));
                        citations.len()
                    }
                };
                known.push(format!("[^{n}]"));
            }
            // A marker naming no known passage stays as written, for validation to report.
            if known.len() == ids.len() {
                out.push_str(&known.concat());
            } else {
                out.push_str(&text[start..end]);
            }
            last = end;
        }
        out.push_str(&text[last..]);
        body.push_str(out.trim_end());
        body.push_str("\n\n");
    }
    let mut draft = s.header.clone().unwrap_or_default();
    draft.push('\n');
    draft.push_str(&body);
    draft.push_str(CITATIONS);
    draft.push_str("\n\n");
    for (_, c) in &citations {
        draft.push_str(&format!(
            "[^{}]: {}:{} — \"{}\"\n",
            c.n, c.source, c.line, c.quote
        ));
    }
    let citations: Vec<Citation> = citations.into_iter().map(|(_, c)| c).collect();
    let note = format!("{} numbered citations", citations.len());
    let update = MemoStateUpdate::default()
        .final_draft(Some(draft))
        .citations(citations);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// The citation list of a draft, as written: `[^n]: source:line — "quote"`.
pub(crate) fn parse_citations(draft: &str) -> Vec<Citation> {
    let Some(at) = draft.find(CITATIONS) else {
        return Vec::new();
    };
    draft[at..]
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("[^")?;
            let (n, rest) = rest.split_once("]: ")?;
            let (place, quote) = rest.split_once(" — \"")?;
            let (source, line_no) = place.rsplit_once(':')?;
            Some(Citation {
                n: n.parse().ok()?,
                source: source.to_string(),
                line: line_no.parse().unwrap_or(0),
                quote: quote.strip_suffix('"').unwrap_or(quote).to_string(),
            })
        })
        .collect()
}

/// The draft without its citation list.
pub(crate) fn body_of(draft: &str) -> &str {
    draft.find(CITATIONS).map_or(draft, |at| &draft[..at])
}

pub(crate) async fn validate_citations(
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("validate_citations", &ctx).await?;
    let draft = s
        .final_draft
        .as_deref()
        .ok_or_else(|| NodeError::new("validate_citations needs the draft (4-final-draft.md)"))?;
    let result = check_citations(draft);
    let note = format!(
        "{} of {} citations found in their sources",
        result.valid, result.total
    );
    let validation = Validation {
        citation_validation: Some(result),
        ..s.validation.clone()
    };
    let update = MemoStateUpdate::default().validation(validation);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// Checks every citation of `draft` against its source file, and every footnote marker of the
/// body against the list.
pub(crate) fn check_citations(draft: &str) -> CitationValidation {
    let listed = parse_citations(draft);
    let mut problems = Vec::new();
    let mut valid = 0;
    for c in &listed {
        let problem = match std::fs::read_to_string(&c.source) {
            Err(e) => Some(format!("the source cannot be read: {e}")),
            Ok(text) if !contains_passage(&text, &c.quote) => {
                Some("the cited passage is not in the source".to_string())
            }
            Ok(_) => None,
        };
        match problem {
            Some(problem) => problems.push(CitationProblem {
                n: c.n,
                source: c.source.clone(),
                problem,
            }),
            None => valid += 1,
        }
    }
    let body = body_of(draft);
    for (_, _, ids) in markers(body) {
        problems.push(CitationProblem {
            n: 0,
            source: String::new(),
            problem: format!(
                "[{}] names no passage of 1-section-research.json",
                ids.join(", ")
            ),
        });
    }
    let mut from = 0;
    while let Some(at) = body[from..].find("[^").map(|i| i + from) {
        from = at + 2;
        let Some(end) = body[from..].find(']').map(|i| i + from) else {
            break;
        };
        if let Ok(n) = body[from..end].parse::<usize>() {
            if !listed.iter().any(|c| c.n == n) && !problems.iter().any(|p| p.n == n) {
                problems.push(CitationProblem {
                    n,
                    source: String::new(),
                    problem: format!("[^{n}] is used but not listed under {CITATIONS}"),
                });
            }
        }
    }
    CitationValidation {
        total: listed.len(),
        valid,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_round_trip_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("a.md");
        std::fs::write(&src, "# A\nRevenue grew 10%.\n").unwrap();
        let draft = format!(
            "Text[^1][^3] and [E9].\n\n{CITATIONS}\n\n[^1]: {p}:2 — \"Revenue grew 10%.\"\n[^2]: {p}:2 — \"Revenue grew 20%.\"\n",
            p = src.display()
        );
        let parsed = parse_citations(&draft);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].line, 2);
        let v = check_citations(&draft);
        assert_eq!((v.total, v.valid), (2, 1));
        let texts: Vec<&str> = v.problems.iter().map(|p| p.problem.as_str()).collect();
        assert_eq!(texts.len(), 3, "{texts:?}");
        assert!(texts[0].contains("not in the source"));
        assert!(texts[1].contains("[E9]"));
        assert!(texts[2].contains("[^3]"));
    }
}
