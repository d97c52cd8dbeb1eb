//! A keyless function graph (the functional API, `stategraph::functional`): a plain async
//! function whose durable tasks are the workflow.
//!
//! ```text
//! brief(topic):
//!   notes  = task "fetch"(topic)                      one note per `notes` template
//!   lines  = join_all(task "draft"(note) per note)     run together
//!   answer = interrupt("publish this brief?")          unless the setting `yes` is true
//!   task "publish"(topic, lines)                       the brief, as Markdown
//! ```
//!
//! Each task waits `step_ms` (the work it stands for) and its result is saved in the thread's
//! journal as it finishes, so a run killed in `publish` resumes with `fetch` and the drafts
//! replayed, not run; an answer other than `yes` is taken as the reason not to publish. The
//! state is the function's (`input`, `output`); settings in `graphs/brief.toml`.

use serde::{Deserialize, Serialize};
use stategraph::functional::{entrypoint, FunctionContext, FunctionState};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::NodeError;
use stategraph_registry::{BuildError, GraphFactory, GraphFile, SettingsSchema};
use std::time::Duration;

/// The settings the function reads, as `graphs/brief.toml` documents them.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
struct BriefSettings {
    /// How long each task works, in milliseconds.
    step_ms: u64,
    /// One note per template; `{topic}` is the run's input.
    notes: Vec<String>,
    /// Publish without asking.
    yes: bool,
}

impl Default for BriefSettings {
    fn default() -> Self {
        BriefSettings {
            step_ms: 0,
            notes: vec!["{topic} matters".into()],
            yes: false,
        }
    }
}

/// Registers the function graph under the name `brief`, with `graphs/brief.toml` built in.
///
/// ```
/// use stategraph_registry::GraphFactory;
/// let graph = stategraph_agents::brief::Brief.build(&Default::default()).unwrap();
/// assert_eq!(graph.node_names(), ["brief"]);
/// ```
pub struct Brief;

impl GraphFactory for Brief {
    type State = FunctionState;

    fn name(&self) -> &str {
        "brief"
    }

    fn description(&self) -> &str {
        "Keyless function graph: durable tasks fetch notes, draft lines together, ask, publish"
    }

    fn graph_file(&self) -> Option<&'static str> {
        Some(include_str!("../../../../graphs/brief.toml"))
    }

    fn input_field(&self) -> Option<&str> {
        Some("input")
    }

    fn output_field(&self) -> Option<&str> {
        Some("output")
    }

    fn settings_schema(&self) -> Option<SettingsSchema> {
        Some(SettingsSchema::of::<BriefSettings>())
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<FunctionState>, BuildError> {
        Ok(entrypoint("brief", brief)?)
    }
}

/// The function: the topic in, the brief (or why it was not published) out.
pub async fn brief(topic: String, ctx: FunctionContext) -> Result<String, NodeError> {
    let settings: BriefSettings = serde_path_to_error::deserialize(serde_json::Value::Object(
        ctx.context().settings().clone(),
    ))
    .map_err(|e| NodeError::new(format!("setting `{}`: {}", e.path(), e.inner())))?;
    let work = Duration::from_millis(settings.step_ms);
    let notes: Vec<String> = ctx
        .task(
            "fetch",
            (topic.clone(), settings.notes),
            |(topic, templates): (String, Vec<String>)| async move {
                tokio::time::sleep(work).await;
                Ok::<_, NodeError>(
                    templates
                        .iter()
                        .map(|t| t.replace("{topic}", &topic))
                        .collect(),
                )
            },
        )
        .await?;
    let drafts = notes.into_iter().map(|note| {
        ctx.task("draft", note, move |note: String| async move {
            tokio::time::sleep(work).await;
            Ok::<_, NodeError>(format!("- {note}."))
        })
    });
    let lines = futures::future::try_join_all(drafts).await?;
    if !settings.yes {
        let answer: String = ctx
            .interrupt(serde_json::json!({
                "question": format!(
                    "publish this brief? answer yes, or say why not\n{}",
                    lines.join("\n")
                ),
                "lines": lines,
            }))
            .await?;
        if answer.trim() != "yes" {
            return Ok(format!("not published: {}", answer.trim()));
        }
    }
    ctx.task(
        "publish",
        (topic, lines),
        move |(topic, lines): (String, Vec<String>)| async move {
            tokio::time::sleep(work).await;
            Ok::<_, NodeError>(format!("# {topic}\n\n{}\n", lines.join("\n")))
        },
    )
    .await
}
