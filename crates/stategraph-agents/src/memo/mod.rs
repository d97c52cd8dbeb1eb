//! The investment-memo pipeline: 13 stages over a company's data room, each leaving an
//! artifact a person can read and edit.
//!
//! ```text
//! START -> deck_analyst -> research -> section_research -> draft -> enrich_trademark
//!       -> enrich_socials -> enrich_links -> enrich_visualizations -> cite
//!       -> validate_citations -> fact_check -> validate -> finalize --(done)--> END
//!                                                                 |
//!                                        draft <--(a reviewer's notes)--+
//! ```
//!
//! | stage | state field | artifact |
//! |---|---|---|
//! | `deck_analyst` | `deck_analysis` | `0-deck-analysis.json` |
//! | `research` | `research` | `1-research.json` |
//! | `section_research` | `section_research` | `1-section-research.json` |
//! | `draft`, `enrich_socials`, `enrich_links`, `enrich_visualizations` | `sections` | `2-sections/NN-name.md` |
//! | `enrich_trademark` | `header` | `header.md` |
//! | `cite`, `finalize` | `final_draft` | `4-final-draft.md` |
//! | `validate_citations`, `fact_check`, `validate` | `validation` | `3-validation.json` |
//!
//! **Two modes.** With a model configured (OpenAI-compatible, Anthropic, Ollama...; see
//! [`provider`]) the judgement stages ask it: the deck is read into a
//! structured [`DeckAnalysis`], research topics are summarised, sections are written from
//! their evidence, and a reviewer's score joins the computed one. Without one the pipeline
//! runs **offline** and says so: fields are extracted from the deck's `- Key: value` lines,
//! research summaries and sections quote the sources, the score is computed. Offline runs are
//! deterministic, so the bundled sample (`examples/dataroom/fernstone/`) runs in seconds with
//! no key. Every model call is journaled (`Context::record`): a stage re-run after a crash
//! does not pay for it again.
//!
//! **Sources.** Research searches the data room with the local corpus search
//! ([`CorpusSearch`]) and the web when `TAVILY_API_KEY` is set; each hit is narrowed to the
//! lines that answer the query and kept verbatim with its file and line, so citations point at
//! real files and `validate_citations` can find each cited passage again. `fact_check` checks
//! the deck's claims against the other documents (verified, contradicted, unverified) and
//! every figure of the draft against all sources.
//!
//! **Review.** `validate` scores the memo from 0 to 10 (saved in `3-validation.json`); below
//! `review_below` (8) `finalize` pauses for a person, who reads the draft and the validation:
//! `approve`, or notes that send it back to `draft` (and through every later stage again).
//! `--yes` approves.
//!
//! **Progress.** Every stage ends with a [`PROGRESS_EVENT`](stategraph::runtime::PROGRESS_EVENT)
//! line: `stage k of 13 · name · time · elapsed · cost (mode) · what it did`.
//!
//! Settings: see [`MemoSettings`] and `graphs/memo.toml`.

mod artifacts;
mod dataroom;
mod figures;
mod nodes;
pub mod outline;
pub mod prompts;
mod sample;
mod settings;
mod state;

pub use artifacts::artifact_set;
pub use nodes::finish::Review;
pub use settings::{slug, MemoSettings, ModeSetting};
pub use state::{
    Citation, CitationProblem, CitationValidation, ClaimCheck, ClaimStatus, DeckAnalysis,
    FactCheck, MemoState, MemoStateUpdate, Metric, Mode, Passage, Person, ResearchNotes, Section,
    SectionEvidence, SectionResearch, Topic, UnsupportedFigure, Validation,
};

use stategraph::graph::{CompiledGraph, RetryPolicy, StateGraph};
use stategraph::runtime::{Context, NodeError};
use stategraph::{END, START};
use stategraph_artifacts::ArtifactSet;
use stategraph_llm::provider::{self, LazyModel};
use stategraph_llm::ChatModel;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, SettingsSchema};
use stategraph_tools::corpus::CorpusSearch;
use stategraph_tools::tavily::TavilySearch;
use stategraph_tools::SearchTool;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the stages share: the model (used in model mode only), an optional web search, and the
/// data room's search index, opened once.
pub struct MemoAgent {
    model: Arc<dyn ChatModel>,
    injected: bool,
    web: Option<Arc<dyn SearchTool>>,
    // A std Mutex: held only to read or store the index, never across an await.
    corpus: Mutex<Option<(PathBuf, CorpusSearch)>>,
}

impl MemoAgent {
    /// An agent whose judgement stages call `model` when the run is in model mode.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stategraph_agents::memo::{graph, MemoAgent};
    /// use stategraph_llm::FakeChatModel;
    /// let compiled = graph(Arc::new(MemoAgent::new(Arc::new(FakeChatModel::new())))).compile().unwrap();
    /// assert_eq!(compiled.node_names().len(), 13);
    /// ```
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        MemoAgent {
            model,
            injected: true,
            web: None,
            corpus: Mutex::new(None),
        }
    }

    /// An agent whose model is built from the settings on its first call; `mode = auto`
    /// runs offline when none is configured.
    fn lazy(model: LazyModel) -> Self {
        MemoAgent {
            model: Arc::new(model),
            injected: false,
            web: None,
            corpus: Mutex::new(None),
        }
    }

    /// Searches the web with `tool` (instead of Tavily) during research.
    pub fn with_web(mut self, tool: Arc<dyn SearchTool>) -> Self {
        self.web = Some(tool);
        self
    }

    pub(crate) fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// True when a model was given rather than left to the environment.
    pub(crate) fn has_model(&self) -> bool {
        self.injected
    }

    /// The web search for this run, if any.
    pub(crate) fn web(&self, settings: &MemoSettings) -> Option<Arc<dyn SearchTool>> {
        if !settings.web {
            return None;
        }
        if let Some(tool) = &self.web {
            return Some(tool.clone());
        }
        TavilySearch::from_env()
            .ok()
            .map(|t| Arc::new(t) as Arc<dyn SearchTool>)
    }

    /// The search index of the data room at `dir`, built on first use.
    pub(crate) async fn corpus(&self, dir: &Path) -> Result<CorpusSearch, NodeError> {
        let cached = self
            .corpus
            .lock()
            .map_err(|_| NodeError::new("corpus cache poisoned"))?
            .as_ref()
            .filter(|(d, _)| d == dir)
            .map(|(_, c)| c.clone());
        if let Some(corpus) = cached {
            return Ok(corpus);
        }
        let path = dir.to_path_buf();
        // Indexing reads every file: keep it off the async threads.
        let corpus = tokio::task::spawn_blocking(move || CorpusSearch::open(path))
            .await
            .map_err(|e| NodeError::new(format!("indexing the data room failed: {e}")))?
            .map_err(|e| NodeError::new(format!("indexing the data room failed: {e}")))?;
        if let Ok(mut slot) = self.corpus.lock() {
            *slot = Some((dir.to_path_buf(), corpus.clone()));
        }
        Ok(corpus)
    }
}

/// The memo graph, uncompiled (see the [module docs](self) for its shape).
pub fn graph(agent: Arc<MemoAgent>) -> StateGraph<MemoState> {
    // Only transient failures (rate limits, 5xx, timeouts) are retried.
    let retry = || RetryPolicy::new(3);
    let mut g = StateGraph::<MemoState>::named("memo");
    macro_rules! stage {
        ($name:literal, agent $f:path) => {{
            let agent = agent.clone();
            g.add_node($name, move |s: Arc<MemoState>, ctx: Context| {
                let agent = agent.clone();
                async move { $f(&agent, s, ctx).await }
            })
            .retry(retry());
        }};
        ($name:literal, $f:path) => {{
            g.add_node($name, $f).retry(retry());
        }};
    }
    stage!("deck_analyst", agent nodes::analyse::run);
    stage!("research", agent nodes::research::research);
    stage!("section_research", agent nodes::research::section_research);
    stage!("draft", agent nodes::draft::run);
    stage!("enrich_trademark", nodes::enrich::trademark);
    stage!("enrich_socials", nodes::enrich::socials);
    stage!("enrich_links", nodes::enrich::links);
    stage!("enrich_visualizations", nodes::visualize::run);
    stage!("cite", nodes::cite::cite);
    stage!("validate_citations", nodes::cite::validate_citations);
    stage!("fact_check", nodes::finish::fact_check);
    stage!("validate", agent nodes::finish::validate);
    stage!("finalize", nodes::finish::finalize);
    g.add_edge(START, "deck_analyst");
    for pair in outline::STAGES.windows(2) {
        g.add_edge(pair[0], pair[1]);
    }
    g.add_conditional_edges(
        "finalize",
        |s: &MemoState| {
            if s.final_memo.is_some() {
                END
            } else {
                "draft"
            }
        },
        [END, "draft"],
    )
    .label("finished, or notes?");
    g
}

/// Registers the memo pipeline under the name `memo`, with `graphs/memo.toml` built in.
///
/// ```
/// use stategraph_agents::memo::Memo;
/// use stategraph_registry::Registry;
/// let mut registry = Registry::new();
/// registry.register(Memo::from_env());
/// let resolved = registry.resolve("memo", &[]).unwrap();
/// assert!(resolved.preflight().is_ok(), "offline mode needs no key");
/// ```
#[derive(Clone, Default)]
pub struct Memo {
    model: Option<Arc<dyn ChatModel>>,
    web: Option<Arc<dyn SearchTool>>,
}

impl Memo {
    /// The factory that builds its model from the settings and the environment (offline when
    /// none is configured and `mode = auto`).
    pub fn from_env() -> Self {
        Memo::default()
    }

    /// A factory whose graphs call `model` (tests, embedders).
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        Memo {
            model: Some(model),
            web: None,
        }
    }

    /// Searches the web with `tool` during research.
    pub fn with_web(mut self, tool: Arc<dyn SearchTool>) -> Self {
        self.web = Some(tool);
        self
    }
}

fn settings_of(file: &GraphFile) -> Result<MemoSettings, BuildError> {
    MemoSettings::from_map(&file.settings).map_err(|message| BuildError::Setting {
        key: "settings".into(),
        message,
    })
}

impl GraphFactory for Memo {
    type State = MemoState;

    fn name(&self) -> &str {
        "memo"
    }

    fn description(&self) -> &str {
        "Investment memo in 13 stages from a company's data room (keyless offline mode)"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/memo.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        Some("company")
    }

    fn output_field(&self) -> Option<&str> {
        Some("final_memo")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Some(SettingsSchema::of::<MemoSettings>())
    }

    fn build(&self, file: &GraphFile) -> Result<CompiledGraph<MemoState>, BuildError> {
        let settings = settings_of(file)?;
        let mut agent = match &self.model {
            Some(model) => MemoAgent::new(model.clone()),
            None => MemoAgent::lazy(LazyModel::new(settings.provider())),
        };
        if let Some(web) = &self.web {
            agent = agent.with_web(web.clone());
        }
        Ok(graph(Arc::new(agent)).compile()?)
    }

    fn artifacts(&self, _file: &GraphFile) -> Option<ArtifactSet<MemoState>> {
        Some(artifact_set())
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        let settings = settings_of(file)?;
        if settings.mode == ModeSetting::Model && self.model.is_none() {
            provider::from_env(settings.provider()).map_err(BuildError::from_model)?;
        }
        Ok(())
    }

    /// A company is only worth a run when its data room is there: a misspelt one is refused
    /// before a thread (or a version folder named for it) exists, naming the rooms there are.
    fn check_input(&self, file: &GraphFile, input: &MemoStateUpdate) -> Result<(), String> {
        let Ok(settings) = settings_of(file) else {
            // A bad setting is preflight's to name.
            return Ok(());
        };
        match (input.dataroom.as_ref(), input.company.as_ref()) {
            (Some(dir), _) => match dir.value() {
                Some(dir) if !Path::new(dir).is_dir() => Err(format!(
                    "the data room {} is not a folder",
                    stategraph::quote::quoted(dir)
                )),
                _ => Ok(()),
            },
            (None, Some(company)) => settings.room(company.value()).map(drop),
            (None, None) => Ok(()),
        }
    }
}
