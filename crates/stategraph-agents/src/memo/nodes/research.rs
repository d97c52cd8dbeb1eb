//! `research` (company-level topics, `1-research.json`) and `section_research` (evidence per
//! section, `1-section-research.json`): the data room searched with the local corpus tool,
//! each hit narrowed to the lines that answer the query, quoted verbatim with file and line.
//! With `TAVILY_API_KEY` set (and `web = true`) research also searches the web.

use super::{messages, mode, Stage};
use crate::memo::dataroom::DataRoom;
use crate::memo::outline::{TopicSpec, SECTIONS, TOPICS};
use crate::memo::prompts;
use crate::memo::state::{
    MemoState, MemoStateUpdate, Mode, Passage, ResearchNotes, SectionEvidence, SectionResearch,
    Topic,
};
use crate::memo::MemoAgent;
use stategraph::runtime::{Context, NodeError};
use stategraph_tools::SearchTool;
use std::sync::Arc;

/// Passages kept per topic or section.
const MAX_PASSAGES: usize = 5;
/// Lines quoted from one document per query.
const LINES_PER_DOC: usize = 2;

/// The passages of the room that answer `query`: documents ranked by the corpus search, then
/// their best lines. Ids are left empty for the caller to assign.
async fn search_room(
    agent: &MemoAgent,
    room: &DataRoom,
    query: &str,
    max_results: usize,
) -> Result<Vec<Passage>, NodeError> {
    let corpus = agent.corpus(&room.dir).await?;
    let hits = corpus
        .search(query, max_results)
        .await
        .map_err(|e| NodeError::new(format!("searching the data room failed: {e}")))?;
    let mut out: Vec<Passage> = Vec::new();
    for hit in hits {
        let Some(doc) = room.by_url(&hit.url) else {
            continue;
        };
        for (line, quote) in doc.best_lines(query, LINES_PER_DOC) {
            if !out.iter().any(|p| p.source == doc.path && p.line == line) {
                out.push(Passage {
                    id: String::new(),
                    source: doc.path.clone(),
                    line,
                    quote,
                });
            }
        }
    }
    out.truncate(MAX_PASSAGES);
    Ok(out)
}

pub(crate) async fn research(
    agent: &MemoAgent,
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let mut stage = Stage::begin("research", &ctx).await?;
    let room = stage.room(&s)?;
    let web = agent.web(&stage.settings);
    let mut notes = ResearchNotes {
        searched: vec![room.dir.display().to_string()],
        topics: Vec::new(),
    };
    if web.is_some() {
        notes.searched.push("web (Tavily)".into());
    }
    let mut n = 0;
    for spec in &TOPICS {
        let mut findings =
            search_room(agent, &room, spec.query, stage.settings.max_results).await?;
        if let Some(tool) = &web {
            let max = stage.settings.max_results;
            findings.extend(search_web(&ctx, tool.clone(), &s, spec, max).await?);
        }
        for f in &mut findings {
            n += 1;
            f.id = format!("R{n}");
        }
        let summary = summarise_topic(agent, &ctx, &mut stage, &s, spec, &findings).await?;
        notes.topics.push(Topic {
            topic: spec.name.to_string(),
            query: spec.query.to_string(),
            findings,
            summary,
        });
    }
    let found: usize = notes.topics.iter().map(|t| t.findings.len()).sum();
    let note = format!("{found} passages on {} topics", notes.topics.len());
    let update = MemoStateUpdate::default().research(Some(notes));
    Ok(stage.done(&ctx, &s, update, &note))
}

/// The web's passages on the company and topic `spec` (journaled, so a resume does not search
/// again). Ids are left empty for the caller to assign.
async fn search_web(
    ctx: &Context,
    tool: Arc<dyn SearchTool>,
    s: &MemoState,
    spec: &TopicSpec,
    max: usize,
) -> Result<Vec<Passage>, NodeError> {
    let query = format!("{} {}", s.company.trim(), spec.name);
    let hits: Vec<stategraph_tools::SearchHit> = ctx
        .record(&format!("web-{}", spec.name), || async move {
            tool.search(&query, max).await.map_err(|e| {
                if e.is_transient() {
                    NodeError::transient(e.to_string())
                } else {
                    NodeError::new(e.to_string())
                }
            })
        })
        .await?;
    Ok(hits
        .into_iter()
        .map(|h| Passage {
            id: String::new(),
            source: h.url,
            line: 0,
            quote: h.content.chars().take(400).collect(),
        })
        .collect())
}

/// A topic's summary: offline, its first passage; with a model, the model's summary of them.
async fn summarise_topic(
    agent: &MemoAgent,
    ctx: &Context,
    stage: &mut Stage,
    s: &MemoState,
    spec: &TopicSpec,
    findings: &[Passage],
) -> Result<String, NodeError> {
    Ok(match (mode(s), findings.is_empty()) {
        (_, true) => format!("Nothing in the data room speaks to {}.", spec.name),
        (Mode::Offline, false) => findings[0].quote.clone(),
        (Mode::Model, false) => {
            let listed: String = findings
                .iter()
                .map(|p| format!("- ({}:{}) {}\n", p.source, p.line, p.quote))
                .collect();
            let user = format!(
                "Company: {}\nTopic: {}\n\nPassages:\n{listed}",
                s.company.trim(),
                spec.name
            );
            let key = format!("summary-{}", spec.name);
            stage
                .write(ctx, agent, &key, messages(prompts::RESEARCH, user))
                .await?
        }
    })
}

pub(crate) async fn section_research(
    agent: &MemoAgent,
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("section_research", &ctx).await?;
    let room = stage.room(&s)?;
    let deck = s
        .deck_analysis
        .as_ref()
        .ok_or_else(|| NodeError::new("section_research needs the deck analysis"))?;
    let mut ids: Vec<(String, usize)> = Vec::new();
    let mut out = SectionResearch::default();
    for (i, spec) in SECTIONS.iter().enumerate() {
        let mut evidence = if i == 0 {
            deck_lines(&room, deck)
        } else {
            search_room(agent, &room, spec.query, stage.settings.max_results).await?
        };
        // The same passage keeps one id across sections, so it is cited once.
        for p in &mut evidence {
            let key = (p.source.clone(), p.line);
            let at = match ids.iter().position(|k| *k == key) {
                Some(at) => at,
                None => {
                    ids.push(key);
                    ids.len() - 1
                }
            };
            p.id = format!("E{}", at + 1);
        }
        out.sections.push(SectionEvidence {
            section: format!("{:02}-{}", i + 1, spec.slug),
            queries: vec![spec.query.to_string()],
            evidence,
        });
    }
    let note = format!("{} passages for {} sections", ids.len(), out.sections.len());
    let update = MemoStateUpdate::default().section_research(Some(out));
    Ok(stage.done(&ctx, &s, update, &note))
}

/// The deck's lines for the round and its headline figures: what the summary states.
fn deck_lines(room: &DataRoom, deck: &crate::memo::state::DeckAnalysis) -> Vec<Passage> {
    let Some(doc) = room.docs.iter().find(|d| d.path == deck.source) else {
        return Vec::new();
    };
    let mut wanted = vec![
        deck.tagline.clone(),
        deck.raise.clone(),
        deck.valuation.clone(),
    ];
    wanted.extend(deck.metrics.iter().take(6).map(|m| m.value.clone()));
    let mut out: Vec<Passage> = Vec::new();
    for needle in wanted.iter().filter(|w| !w.trim().is_empty()) {
        if let Some((line, quote)) = doc.line_with(needle) {
            if !out.iter().any(|p| p.line == line) {
                out.push(Passage {
                    id: String::new(),
                    source: doc.path.clone(),
                    line,
                    quote,
                });
            }
        }
    }
    out
}
