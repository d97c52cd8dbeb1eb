//! A document pipeline that needs no model and no key: it shows the engine's moving parts with
//! nodes that only wait and fill templates.
//!
//! ```text
//! START -> outline -> draft (one task per section, in parallel, via Send) -> review -> publish -> END
//!                       ^                                                      |
//!                       +------------------ notes for a revision --------------+
//!
//! draft, a subgraph per section (`section`):  START -> write -> polish -> END
//! ```
//!
//! Each `draft` task runs the `section` graph as a child: its steps are checkpointed in the
//! thread under the task's namespace (`draft:<task id>`), so a run killed between a section's
//! `write` and `polish` resumes in `polish`, and the child's own state can be read
//! (`get_state_with_subgraphs`) and addressed as `THREAD/draft:<task id>`.
//!
//! `review` pauses with a dynamic interrupt asking a person to approve (unless the setting
//! `yes` is true). An answer of `yes` publishes; any other text is taken as notes and every
//! section is drafted again with them. Settings (see `graphs/pipeline.toml`): `step_ms` (how
//! long each node works), `title`, `sections`, `section_template`, `audience`, `yes`.

use serde::{Deserialize, Serialize};
use stategraph::graph::{CompiledGraph, StateGraph};
use stategraph::runtime::{Context, NodeError, Subgraph};
use stategraph::{Keyed, Send, State, END, START};
use stategraph_artifacts::{Artifact, ArtifactSet, EditError, Entry, Format};
use stategraph_registry::{BuildError, GraphFactory, GraphFile, SettingsSchema};
use std::sync::Arc;
use std::time::Duration;

/// The pipeline's state.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Doc {
    /// What the document is about (the run's text input).
    pub topic: String,
    /// The title, set by `outline`.
    pub title: String,
    /// Section headings, set by `outline`.
    pub outline: Vec<String>,
    /// Drafted sections; a revision replaces a section in place.
    #[state(merge_by_id)]
    pub sections: Vec<Section>,
    /// The reviewer's notes for the next revision.
    pub notes: Option<String>,
    /// Whether the reviewer approved the draft.
    pub approved: bool,
    /// How many times the sections were drafted again.
    #[state(add)]
    pub revisions: u32,
    /// The published document, as Markdown.
    pub document: Option<String>,
    /// Every node run that completed, in order: a resumed run shows nothing ran twice.
    #[state(append)]
    pub log: Vec<String>,
}

/// One drafted section.
#[derive(Keyed, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// Its position in the outline.
    #[key]
    pub index: usize,
    /// Its heading.
    pub heading: String,
    /// Its text.
    pub body: String,
}

/// One section as its `section` subgraph drafts it.
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
pub struct SectionDraft {
    /// Its position in the outline.
    pub index: usize,
    /// Its heading.
    pub heading: String,
    /// What the document is about.
    pub topic: String,
    /// The reviewer's notes for this revision.
    pub notes: Option<String>,
    /// The text so far.
    pub body: String,
    /// Its nodes that completed, in order.
    #[state(append)]
    pub log: Vec<String>,
}

/// One `draft` task's input.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct DraftJob {
    index: usize,
    heading: String,
}

/// The settings the pipeline's nodes read, as `graphs/pipeline.toml` documents them (its
/// schema is what `--set` is checked against).
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(default)]
struct PipelineSettings {
    /// How long each node works, in milliseconds.
    step_ms: u64,
    /// Who the document is for.
    audience: String,
    /// The title; `{topic}` is the run's input.
    title: String,
    /// One heading per section.
    sections: Vec<String>,
    /// The text of a drafted section.
    section_template: String,
    /// Skip the review pause.
    yes: bool,
    /// Write the run's files (outline.json, sections/, document.md) into a version folder.
    artifacts: bool,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            step_ms: 0,
            audience: "readers".into(),
            title: "{topic}".into(),
            sections: vec!["About {topic}".into()],
            section_template: "{heading}.".into(),
            yes: false,
            artifacts: false,
        }
    }
}

impl PipelineSettings {
    fn of(ctx: &Context) -> Result<PipelineSettings, NodeError> {
        serde_path_to_error::deserialize(serde_json::Value::Object(ctx.settings().clone()))
            .map_err(|e| NodeError::new(format!("setting `{}`: {}", e.path(), e.inner())))
    }
}

/// Registers the pipeline under the name `pipeline`, with `graphs/pipeline.toml` built in.
pub struct Pipeline;

impl GraphFactory for Pipeline {
    type State = Doc;

    fn name(&self) -> &str {
        "pipeline"
    }

    fn description(&self) -> &str {
        "Keyless demo: outline a document, draft sections in parallel, pause for review, publish"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/pipeline.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        Some("topic")
    }

    fn output_field(&self) -> Option<&str> {
        Some("document")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Some(SettingsSchema::of::<PipelineSettings>())
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Doc>, BuildError> {
        Ok(graph().compile()?)
    }

    fn artifacts(&self, file: &GraphFile) -> Option<ArtifactSet<Doc>> {
        // Opt-in for the demo (`--set artifacts=true`), so its quick runs leave no folders.
        let on = file.settings.get("artifacts") == Some(&serde_json::Value::Bool(true));
        on.then(artifacts)
    }
}

/// The outline as editable JSON (`outline.json`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutlineFile {
    title: String,
    sections: Vec<String>,
}

/// The pipeline's files: `outline.json` (by `outline`; an edit drafts every section again),
/// `sections/{index}-{slug}.md` (by `draft`; an edit goes back to review) and `document.md`
/// (by `publish`, read-only).
pub fn artifacts() -> ArtifactSet<Doc> {
    let outline = Artifact::json("outline", "outline.json", "outline", |s: &Doc| {
        (!s.outline.is_empty()).then(|| OutlineFile {
            title: s.title.clone(),
            sections: s.outline.clone(),
        })
    })
    .parse_json(|_s: &Doc, f: OutlineFile| {
        if f.sections.iter().all(|h| h.trim().is_empty()) {
            return Err(EditError::new("`sections` needs at least one heading"));
        }
        Ok(DocUpdate::default().title(f.title).outline(f.sections))
    });
    let sections = Artifact::folder(
        "sections",
        "sections/{index}-{slug}.md",
        "draft",
        Format::Markdown,
        |s: &Doc| {
            let mut sections = s.sections.clone();
            sections.sort_by_key(|x| x.index);
            sections
                .iter()
                .map(|x| {
                    Entry::new(
                        x.heading.clone(),
                        format!("## {}\n\n{}\n", x.heading, x.body),
                    )
                })
                .collect()
        },
    )
    .parse_entries(|_s: &Doc, entries: Vec<Entry>| {
        let mut sections = Vec::new();
        for (index, e) in entries.iter().enumerate() {
            let text = e.text()?;
            let (first, body) = text.split_once('\n').unwrap_or((text, ""));
            let Some(heading) = first.strip_prefix("## ").filter(|h| !h.trim().is_empty()) else {
                return Err(
                    EditError::new("the first line must be the heading: `## Heading`")
                        .at_line(1)
                        .in_file(e.path.clone()),
                );
            };
            sections.push(Section {
                index,
                heading: heading.trim().to_string(),
                body: body.trim().to_string(),
            });
        }
        Ok(DocUpdate::default().sections(sections))
    });
    let document = Artifact::markdown("document", "document.md", "publish", |s: &Doc| {
        s.document.clone().unwrap_or_default()
    });
    ArtifactSet::new()
        .with(outline)
        .with(sections)
        .with(document)
}

/// The pipeline's graph, uncompiled.
pub fn graph() -> StateGraph<Doc> {
    let mut g = StateGraph::<Doc>::named("pipeline");
    g.add_node("outline", outline);
    g.add_node("draft", draft_subgraph());
    g.add_node("review", review);
    g.add_node("publish", publish);
    g.add_edge(START, "outline");
    g.add_conditional_edges("outline", |s: &Doc| drafts(s), ["draft"])
        .label("one draft per section");
    g.add_edge("draft", "review");
    g.add_conditional_edges(
        "review",
        |s: &Doc| {
            if s.approved {
                "publish".into()
            } else {
                drafts(s)
            }
        },
        ["publish", "draft"],
    )
    .label("approved?");
    g.add_edge("publish", END);
    g
}

/// One `draft` task per heading.
fn drafts(s: &Doc) -> stategraph::Route {
    let jobs: Vec<Send> = s
        .outline
        .iter()
        .enumerate()
        .map(|(index, heading)| {
            Send::new(
                "draft",
                DraftJob {
                    index,
                    heading: heading.clone(),
                },
            )
        })
        .collect();
    jobs.into()
}

fn fill(template: &str, pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .fold(template.to_string(), |text, (key, value)| {
            text.replace(&format!("{{{key}}}"), value)
        })
}

/// Waits `step_ms` times `factor`, so a person can watch, interrupt or kill the run.
async fn work(settings: &PipelineSettings, factor: f64) {
    let ms = settings.step_ms as f64 * factor;
    if ms > 0.0 {
        tokio::time::sleep(Duration::from_millis(ms as u64)).await;
    }
}

async fn outline(s: Arc<Doc>, ctx: Context) -> Result<DocUpdate, NodeError> {
    if s.topic.trim().is_empty() {
        return Err(NodeError::new(
            "the document has no topic: give one as the run's input (the `topic` field)",
        ));
    }
    let settings = PipelineSettings::of(&ctx)?;
    work(&settings, 1.0).await;
    let topic = s.topic.trim();
    let (title, headings) = (settings.title, settings.sections);
    if headings.is_empty() {
        return Err(NodeError::new(
            "setting `sections` is empty: list at least one heading",
        ));
    }
    let outline: Vec<String> = headings
        .iter()
        .map(|h| fill(h, &[("topic", topic)]))
        .collect();
    Ok(DocUpdate::default()
        .title(fill(&title, &[("topic", topic)]))
        .outline(outline)
        .log(vec!["outline".to_string()]))
}

/// The `section` graph: `write` fills the section's template, `polish` works the reviewer's
/// notes in.
pub fn section_graph() -> StateGraph<SectionDraft> {
    let mut g = StateGraph::<SectionDraft>::named("section");
    g.add_node("write", write);
    g.add_node("polish", polish);
    g.add_edge(START, "write")
        .add_edge("write", "polish")
        .add_edge("polish", END);
    g
}

/// The `draft` node: the `section` graph run as a child per `Send`, its heading from the task's
/// argument, its finished section merged into the document by index.
fn draft_subgraph() -> Subgraph<Doc, SectionDraft> {
    let section = section_graph()
        .compile()
        .expect("the section graph's nodes and edges are fixed and valid");
    Subgraph::new(
        section,
        |doc: &Doc, ctx: &Context| {
            let job: DraftJob = ctx.arg()?;
            Ok(SectionDraftUpdate::default()
                .index(job.index)
                .heading(job.heading)
                .topic(doc.topic.trim().to_string())
                .notes(doc.notes.clone()))
        },
        |_doc: &Doc, done: SectionDraft| {
            DocUpdate::default()
                .sections(vec![Section {
                    index: done.index,
                    heading: done.heading,
                    body: done.body,
                }])
                .log(vec![format!("draft {}", done.index)])
        },
    )
}

/// Half of a section's drafting time: sections take different times, so the parallel drafts
/// finish out of order.
async fn section_work(settings: &PipelineSettings, index: usize) {
    work(settings, (1.0 + index as f64 * 0.25) / 2.0).await;
}

async fn write(s: Arc<SectionDraft>, ctx: Context) -> Result<SectionDraftUpdate, NodeError> {
    let settings = PipelineSettings::of(&ctx)?;
    section_work(&settings, s.index).await;
    let body = fill(
        &settings.section_template,
        &[
            ("heading", &s.heading),
            ("topic", &s.topic),
            ("audience", &settings.audience),
        ],
    );
    Ok(SectionDraftUpdate::default()
        .body(body)
        .log(vec!["write".to_string()]))
}

async fn polish(s: Arc<SectionDraft>, ctx: Context) -> Result<SectionDraftUpdate, NodeError> {
    section_work(&PipelineSettings::of(&ctx)?, s.index).await;
    let mut body = s.body.clone();
    if let Some(notes) = &s.notes {
        body.push_str(&format!(" (Revised: {notes}.)"));
    }
    Ok(SectionDraftUpdate::default()
        .body(body)
        .log(vec!["polish".to_string()]))
}

fn is_approval(answer: &serde_json::Value) -> bool {
    match answer {
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => {
            matches!(
                s.trim().to_lowercase().as_str(),
                "y" | "yes" | "ok" | "approve" | "approved" | "lgtm"
            )
        }
        _ => false,
    }
}

async fn review(s: Arc<Doc>, ctx: Context) -> Result<DocUpdate, NodeError> {
    let words: usize = s
        .sections
        .iter()
        .map(|x| x.body.split_whitespace().count())
        .sum();
    let answer = if PipelineSettings::of(&ctx)?.yes {
        serde_json::Value::Bool(true)
    } else {
        ctx.interrupt(serde_json::json!({
            "question": "Publish this document? Answer yes, or give notes for a revision.",
            "title": s.title,
            "sections": s.sections.len(),
            "words": words,
            "revisions": s.revisions,
        }))
        .await?
    };
    let update = DocUpdate::default().log(vec!["review".to_string()]);
    if is_approval(&answer) {
        return Ok(update.approved(true));
    }
    let notes = match answer {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    };
    Ok(update.approved(false).notes(Some(notes)).revisions(1))
}

async fn publish(s: Arc<Doc>, ctx: Context) -> Result<DocUpdate, NodeError> {
    work(&PipelineSettings::of(&ctx)?, 1.0).await;
    let mut doc = format!("# {}\n", s.title);
    for section in &s.sections {
        doc.push_str(&format!("\n## {}\n\n{}\n", section.heading, section.body));
    }
    Ok(DocUpdate::default()
        .document(Some(doc))
        .log(vec!["publish".to_string()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stategraph::checkpoint::MemoryCheckpointer;
    use stategraph::runtime::{Resume, RunConfig};
    use std::collections::BTreeMap;

    fn config() -> RunConfig {
        RunConfig::new()
            .setting("sections", serde_json::json!(["A {topic}", "B {topic}"]))
            .setting("title", "On {topic}")
    }

    #[tokio::test]
    async fn pauses_for_review_then_publishes_on_yes() {
        let g = graph()
            .compile()
            .unwrap()
            .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
        let input = DocUpdate::default().topic("sled");
        let paused = g.invoke(input, config().thread("t")).await.unwrap();
        assert!(paused.is_interrupted());
        assert_eq!(paused.state.sections.len(), 2);
        let done = g
            .resume("t", Resume::value("yes").unwrap(), config())
            .await
            .unwrap();
        let doc = done.state.document.unwrap();
        assert!(
            doc.starts_with("# On sled\n") && doc.contains("## B sled"),
            "{doc}"
        );
        assert_eq!(
            done.state.log,
            ["outline", "draft 0", "draft 1", "review", "publish"]
        );
    }

    #[tokio::test]
    async fn notes_send_every_section_back_for_a_revision() {
        let g = graph()
            .compile()
            .unwrap()
            .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
        g.invoke(DocUpdate::default().topic("x"), config().thread("t"))
            .await
            .unwrap();
        let again = g
            .resume("t", Resume::value("shorter").unwrap(), config())
            .await
            .unwrap();
        assert!(again.is_interrupted());
        assert_eq!(again.state.revisions, 1);
        assert!(again.state.sections[0].body.contains("Revised: shorter"));
    }

    #[tokio::test]
    async fn each_section_is_drafted_by_its_own_child_graph_kept_under_its_task() {
        use futures::StreamExt;
        use stategraph::runtime::{Event, StreamMode};
        let g = graph()
            .compile()
            .unwrap()
            .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
        let config = config().thread("t").stream_modes([StreamMode::Updates]);
        let mut run = g.stream(DocUpdate::default().topic("sled"), config);
        let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
        while let Some(event) = run.next().await {
            if let Event::Updates {
                namespace, node, ..
            } = event
            {
                if !namespace.is_empty() {
                    children.entry(namespace).or_default().push(node);
                }
            }
        }
        let paused = run.outcome().await.unwrap();
        assert_eq!(paused.state.log, ["outline", "draft 0", "draft 1"]);
        // One child per section, under its `draft` task, each writing then polishing.
        assert_eq!(children.len(), 2, "{children:?}");
        for (namespace, nodes) in &children {
            assert!(namespace.starts_with("draft:"), "{namespace}");
            assert_eq!(nodes, &["write", "polish"], "{namespace}");
            let child = g
                .subgraph_state(&format!("t/{namespace}"), None)
                .await
                .unwrap();
            assert_eq!(child.values["log"], serde_json::json!(["write", "polish"]));
            assert!(child.values["body"]
                .as_str()
                .is_some_and(|b| b.contains("sled")));
        }
    }

    #[tokio::test]
    async fn yes_skips_the_pause() {
        let g = graph().compile().unwrap();
        let out = g
            .invoke(
                DocUpdate::default().topic("x"),
                config().setting("yes", true),
            )
            .await
            .unwrap();
        assert!(out.state.document.is_some());
    }
}
