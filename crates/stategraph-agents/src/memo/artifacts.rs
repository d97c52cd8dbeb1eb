//! The memo's artifacts: which state field is which file of `output/{company}-v0.0.{N}/`, and
//! how an edited file is read back. An edit counts as the output of the stage that last writes
//! the file, so a resume runs what follows that stage with the edit and keeps what precedes.

use super::state::{
    DeckAnalysis, MemoState, MemoStateUpdate, ResearchNotes, Section, SectionResearch,
};
use stategraph_artifacts::{Artifact, ArtifactSet, EditError, Entry, FolderPattern, Format};

/// The memo's artifacts and run folders.
///
/// ```
/// let set = stategraph_agents::memo::artifact_set();
/// let paths: Vec<&str> = set.artifacts().iter().map(|a| a.path()).collect();
/// assert!(paths.contains(&"2-sections/{index}-{slug}.md"));
/// ```
pub fn artifact_set() -> ArtifactSet<MemoState> {
    // Each editable file comes with the check its edit must pass; the last two are written to
    // be read, and an edit of them is not read back.
    ArtifactSet::new()
        .folder(FolderPattern::new("{company}", "v0.0.{N}"))
        .with(deck_analysis())
        .with(research())
        .with(section_research())
        .with(sections())
        .with(header())
        .with(final_draft())
        .with(Artifact::json(
            "validation",
            "3-validation.json",
            "validate",
            |s: &MemoState| s.validation.clone(),
        ))
        .with(Artifact::json(
            "state",
            "state.json",
            "finalize",
            |s: &MemoState| s.clone(),
        ))
}

/// `0-deck-analysis.json`: an edit must still name the company.
fn deck_analysis() -> Artifact<MemoState> {
    Artifact::json(
        "deck_analysis",
        "0-deck-analysis.json",
        "deck_analyst",
        |s: &MemoState| s.deck_analysis.clone(),
    )
    .parse_json(|_s, a: DeckAnalysis| {
        if a.company.trim().is_empty() {
            return Err(EditError::new("`company` is empty: name the company"));
        }
        Ok(MemoStateUpdate::default().deck_analysis(Some(a)))
    })
}

/// `1-research.json`: any notes that parse.
fn research() -> Artifact<MemoState> {
    Artifact::json(
        "research",
        "1-research.json",
        "research",
        |s: &MemoState| s.research.clone(),
    )
    .parse_json(|_s, r: ResearchNotes| Ok(MemoStateUpdate::default().research(Some(r))))
}

/// `1-section-research.json`: its evidence ids must stay unique.
fn section_research() -> Artifact<MemoState> {
    Artifact::json(
        "section_research",
        "1-section-research.json",
        "section_research",
        |s: &MemoState| s.section_research.clone(),
    )
    .parse_json(|_s, r: SectionResearch| {
        check_ids(&r)?;
        Ok(MemoStateUpdate::default().section_research(Some(r)))
    })
}

/// `2-sections/`: one Markdown file per section, read back by [`read_sections`].
fn sections() -> Artifact<MemoState> {
    Artifact::folder(
        "sections",
        "2-sections/{index}-{slug}.md",
        "enrich_visualizations",
        Format::Markdown,
        |s: &MemoState| {
            s.sections
                .iter()
                .map(|x| Entry::new(x.slug.clone(), x.body.clone()))
                .collect()
        },
    )
    .parse_entries(read_sections)
}

/// `header.md`: any text.
fn header() -> Artifact<MemoState> {
    Artifact::markdown(
        "header",
        "header.md",
        "enrich_trademark",
        |s: &MemoState| s.header.clone().unwrap_or_default(),
    )
    .parse_text(|_s, text| Ok(MemoStateUpdate::default().header(Some(text.to_string()))))
}

/// `4-final-draft.md`: an edit must keep the citations list, which validation reads.
fn final_draft() -> Artifact<MemoState> {
    Artifact::markdown(
        "final_draft",
        "4-final-draft.md",
        "cite",
        |s: &MemoState| s.final_draft.clone().unwrap_or_default(),
    )
    .parse_text(|_s, text| {
        if !text.contains(super::nodes::cite::CITATIONS) {
            return Err(EditError::new(
                "the draft lost its `## Citations` list; keep it (validation reads it)",
            ));
        }
        Ok(MemoStateUpdate::default().final_draft(Some(text.to_string())))
    })
}

/// Evidence ids must stay unique: drafts cite them.
fn check_ids(r: &SectionResearch) -> Result<(), EditError> {
    let mut seen: Vec<(&str, &str, usize)> = Vec::new();
    for p in r.sections.iter().flat_map(|s| s.evidence.iter()) {
        if let Some(other) = seen.iter().find(|(id, ..)| *id == p.id) {
            if (other.1, other.2) != (p.source.as_str(), p.line) {
                return Err(EditError::new(format!(
                    "evidence id `{}` names two passages; give each passage its own id",
                    p.id
                )));
            }
        }
        seen.push((&p.id, &p.source, p.line));
    }
    Ok(())
}

/// The section files back as sections: numbered by their `{index}`, titled by their heading.
fn read_sections(s: &MemoState, entries: Vec<Entry>) -> Result<MemoStateUpdate, EditError> {
    let mut sections = Vec::new();
    for entry in &entries {
        let body = entry.text()?.to_string();
        let title = body
            .lines()
            .find_map(|l| l.strip_prefix("## "))
            .map(|h| h.split_once(". ").map_or(h, |(_, t)| t).trim().to_string())
            .or_else(|| {
                s.sections
                    .iter()
                    .find(|x| x.number == entry.index)
                    .map(|x| x.title.clone())
            })
            .unwrap_or_default();
        sections.push(Section {
            number: entry.index,
            slug: entry.slug.clone(),
            title,
            body,
        });
    }
    if sections.is_empty() {
        return Err(EditError::new(
            "no section files are left in 2-sections/; restore them or rerun `draft`",
        ));
    }
    Ok(MemoStateUpdate::default().sections(sections))
}
