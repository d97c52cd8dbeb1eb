//! The memo's state: one field per artifact (so each stage's output is a file a person can
//! read and edit), plus what the run decided, cost and did.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph::State;
use stategraph_llm::UsageLedger;

/// How the judgement stages work: through the configured model, or offline from the sources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No model: fields are extracted, passages quoted and scores computed, deterministically.
    #[default]
    Offline,
    /// The configured model analyses the deck, summarises research, drafts and reviews.
    Model,
}

impl Mode {
    /// `offline` or `model`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Offline => "offline",
            Mode::Model => "model",
        }
    }
}

/// One figure the deck states, e.g. `ARR` = `$3.1M (September 30, 2026)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Metric {
    /// What is measured, as the deck names it.
    pub name: String,
    /// The value as written.
    pub value: String,
}

/// One member of the team as the deck presents them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Person {
    /// Full name.
    pub name: String,
    /// Role, e.g. `CEO`.
    pub role: String,
    /// One line of background.
    pub background: String,
}

/// `0-deck-analysis.json`: what the deck says, field by field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeckAnalysis {
    /// The company's name as the deck writes it.
    pub company: String,
    /// Its one-line pitch.
    pub tagline: String,
    /// Funding stage, e.g. `Series A`.
    pub stage: String,
    /// The amount raised, e.g. `$12M`.
    pub raise: String,
    /// Pre-money valuation.
    pub valuation: String,
    /// Where it is based.
    pub headquarters: String,
    /// When it was founded.
    pub founded: String,
    /// Its sector.
    pub sector: String,
    /// Its website.
    pub website: String,
    /// The figures it claims (traction, financials).
    pub metrics: Vec<Metric>,
    /// The team.
    pub team: Vec<Person>,
    /// Competitors named.
    pub competitors: Vec<String>,
    /// How the money will be spent, as written.
    pub use_of_funds: String,
    /// The deck file analysed.
    pub source: String,
}

/// A passage quoted from a source: the unit of evidence and of citation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Passage {
    /// `E1`, `E2`...: what drafts cite (`[E3]`).
    pub id: String,
    /// The source file, as a path from where the run was started.
    pub source: String,
    /// The 1-based line the passage starts on.
    pub line: usize,
    /// The passage, verbatim.
    pub quote: String,
}

/// What the research found on one topic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Topic {
    /// e.g. `market`.
    pub topic: String,
    /// The query searched.
    pub query: String,
    /// The passages found, best first.
    pub findings: Vec<Passage>,
    /// What they say, in a sentence or a paragraph (edit it: the draft uses it).
    pub summary: String,
}

/// `1-research.json`: company-level research.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResearchNotes {
    /// Where the passages were searched: the data room folder, and the web when searched.
    pub searched: Vec<String>,
    /// One entry per topic.
    pub topics: Vec<Topic>,
}

/// Evidence gathered for one section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SectionEvidence {
    /// e.g. `03-market-opportunity`.
    pub section: String,
    /// The queries searched.
    pub queries: Vec<String>,
    /// The passages, best first; ids are shared across sections for the same passage.
    pub evidence: Vec<Passage>,
}

/// `1-section-research.json`: evidence per section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SectionResearch {
    /// One entry per section, in memo order.
    pub sections: Vec<SectionEvidence>,
}

impl SectionResearch {
    /// Every passage once, by id.
    pub fn passage(&self, id: &str) -> Option<&Passage> {
        self.sections
            .iter()
            .flat_map(|s| s.evidence.iter())
            .find(|p| p.id == id)
    }
}

/// One section of the memo: `2-sections/NN-slug.md` holds its body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// 1 to 10.
    pub number: usize,
    /// e.g. `team`, so the file is `04-team.md`.
    pub slug: String,
    /// e.g. `Team`.
    pub title: String,
    /// The section as Markdown, heading included; cites evidence as `[E3]` until `cite`.
    pub body: String,
}

impl Section {
    /// `NN-slug`, the file's stem.
    pub fn stem(&self) -> String {
        format!("{:02}-{}", self.number, self.slug)
    }
}

/// One numbered citation of the final draft.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// Its number: `[^n]`.
    pub n: usize,
    /// The source file.
    pub source: String,
    /// The line the passage starts on.
    pub line: usize,
    /// The passage cited.
    pub quote: String,
}

/// A citation that does not hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CitationProblem {
    /// The citation's number, or 0 for a marker with no citation.
    pub n: usize,
    /// The source named.
    pub source: String,
    /// What is wrong.
    pub problem: String,
}

/// The `citation_validation` part of `3-validation.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CitationValidation {
    /// Citations listed.
    pub total: usize,
    /// Those whose passage is in their source.
    pub valid: usize,
    /// The others, and markers that cite nothing.
    pub problems: Vec<CitationProblem>,
}

/// How a deck claim compares with the other documents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// A document states the same figure.
    Verified,
    /// Documents speak of it with other figures.
    Contradicted,
    /// No document other than the deck speaks of it.
    #[default]
    Unverified,
}

/// A deck claim checked against the documents.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The metric.
    pub name: String,
    /// What the deck says.
    pub deck_value: String,
    /// The verdict.
    pub status: ClaimStatus,
    /// The lines that decided it, as `file:line: text`.
    pub evidence: Vec<String>,
}

/// A figure of the draft not found in any source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnsupportedFigure {
    /// The figure as written.
    pub figure: String,
    /// The line of the draft it is on.
    pub context: String,
}

/// The `fact_check_results` part of `3-validation.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactCheck {
    /// The deck's claims against the other documents.
    pub claims: Vec<ClaimCheck>,
    /// Figures in the draft.
    pub figures_checked: usize,
    /// Of those, found in a source.
    pub figures_supported: usize,
    /// The others.
    pub unsupported: Vec<UnsupportedFigure>,
}

/// `3-validation.json`: filled in by `validate_citations`, `fact_check` and `validate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// Whether each cited passage is in its source.
    pub citation_validation: Option<CitationValidation>,
    /// Figures against the sources.
    pub fact_check_results: Option<FactCheck>,
    /// 0 to 10; below the review threshold the run pauses for a person.
    pub overall_score: Option<f64>,
    /// How the score was reached, one line per part.
    #[serde(default)]
    pub score_breakdown: Vec<String>,
}

/// The usage reducer: a stage's update carries only its own calls.
pub fn merge_usage(current: &mut UsageLedger, incoming: UsageLedger) {
    current.merge(&incoming);
}

/// The memo pipeline's state.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoState {
    /// The company (the run's input), e.g. `Fernstone`.
    pub company: String,
    /// Offline or model, decided by the first stage and kept for the whole run.
    pub mode: Option<Mode>,
    /// The data room folder, as resolved by the first stage.
    pub dataroom: Option<String>,
    /// `0-deck-analysis.json`.
    pub deck_analysis: Option<DeckAnalysis>,
    /// `1-research.json`.
    pub research: Option<ResearchNotes>,
    /// `1-section-research.json`.
    pub section_research: Option<SectionResearch>,
    /// `2-sections/NN-slug.md`, in memo order.
    pub sections: Vec<Section>,
    /// `header.md`.
    pub header: Option<String>,
    /// `4-final-draft.md`.
    pub final_draft: Option<String>,
    /// The citations numbered by `cite`.
    pub citations: Vec<Citation>,
    /// `3-validation.json`.
    pub validation: Validation,
    /// A reviewer's notes for the next draft.
    pub review_notes: Option<String>,
    /// Whether the memo was approved (score at or above the threshold, the `yes` setting, or a person).
    pub approved: bool,
    /// Drafts written again after review notes.
    #[state(add)]
    pub revisions: u32,
    /// The finished memo.
    pub final_memo: Option<String>,
    /// Model calls per stage, with cost when prices are set.
    #[state(with = merge_usage)]
    pub usage: UsageLedger,
    /// Milliseconds spent in stages, summed.
    #[state(add)]
    pub elapsed_ms: u64,
    /// Every stage run that completed, in order: a resumed run shows nothing ran twice.
    #[state(append)]
    pub log: Vec<String>,
}
