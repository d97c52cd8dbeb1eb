//! Artifacts: parts of a run's state as files people can read and edit.
//!
//! A graph declares its artifacts in an [`ArtifactSet`]: each is a named view of part of the
//! state written to a path (or a folder of files, `2-sections/{index}-{slug}.md`) of the
//! thread's *run folder*, with a renderer (state → bytes: JSON, Markdown, text) and, when it is
//! editable, a parser (bytes → a state update, validated). Each names the node that produces it.
//!
//! Bound to a compiled graph ([`ArtifactSet::bind`]), the set writes the artifacts of a
//! checkpoint into the thread's current version folder (`output/{graph}-v{N}/` by default; a
//! graph names its own with [`FolderPattern`]), atomically (temporary file, fsync, rename), only
//! the files whose content changed, and records their content hashes with the checkpoint. A
//! file whose hash differs from what was written is an edit: [`ThreadArtifacts::pick_up_edits`]
//! parses and validates every edited file, refuses them all (naming file and line, changing
//! nothing) if one is bad, and otherwise stores each as `update_state` *as the producing node*,
//! so what follows that node runs again with the edit and everything upstream is kept.
//!
//! ```
//! # use std::sync::Arc;
//! # use serde::{Deserialize, Serialize};
//! # use stategraph::{checkpoint::MemoryCheckpointer, runtime::{Context, RunConfig}, State, StateGraph, START, END};
//! use stategraph_artifacts::{Artifact, ArtifactSet, FolderPattern, ThreadArtifacts};
//! #[derive(State, Clone, Default, Serialize, Deserialize)]
//! struct Memo { company: String, notes: Vec<String>, memo: String }
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! # let mut g = StateGraph::<Memo>::named("memo");
//! # g.add_node("research", |_s: Arc<Memo>, _c: Context| async { Ok(MemoUpdate::default().notes(vec!["n".into()])) });
//! # g.add_node("write", |s: Arc<Memo>, _c: Context| async move { Ok(MemoUpdate::default().memo(s.notes.join("\n"))) });
//! # g.add_edge(START, "research").add_edge("research", "write").add_edge("write", END);
//! # let graph = g.compile().unwrap().with_checkpointer(Arc::new(MemoryCheckpointer::new()));
//! # let out = tempfile::tempdir().unwrap();
//! let set = ArtifactSet::new()
//!     .folder(FolderPattern::new("{company}", "v0.0.{N}"))
//!     .with(Artifact::json("notes", "1-research.json", "research", |s: &Memo| s.notes.clone())
//!         .parse_json(|_s, notes: Vec<String>| Ok(MemoUpdate::default().notes(notes))))
//!     .with(Artifact::markdown("memo", "memo.md", "write", |s: &Memo| s.memo.clone()));
//! let artifacts = set.bind(&graph).unwrap();
//! let input = MemoUpdate::default().company("Acme".to_string());
//! let config = RunConfig::new().thread("t1");
//! artifacts.start_version("t1", Some(out.path()), "run").await.unwrap(); // where, and why
//! let outcome = artifacts.watch(graph.stream(input, config)).await;  // written after each checkpoint
//! assert!(outcome.result.is_ok() && outcome.problems.is_empty());
//! assert!(out.path().join("Acme-v0.0.1/1-research.json").exists());
//! // A person edits 1-research.json; then, before resuming:
//! let picked = artifacts.pick_up_edits("t1").await.unwrap();
//! assert!(picked.files.is_empty());
//! # }
//! ```
//!
//! Invariant: knows the graph API and the [`Checkpointer`]
//! trait (its records live in the thread's journal), never a backend or the CLI. The checkpoint
//! is the source of truth: files are derived from it and can always be written again.

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod edits;
mod error;
mod files;
mod pattern;
mod record;
mod spec;
mod sync;

pub use edits::{FileState, FileStatus, PickedFile, PickedUp, Status};
pub use error::{ArtifactError, EditError};
pub use pattern::{slug, FolderPattern};
pub use record::{run_folders, RunFolder};
pub use spec::{Artifact, Entry, Format};
pub use sync::SyncReport;

use async_trait::async_trait;
use futures::StreamExt;
use stategraph::checkpoint::{CheckpointId, Checkpointer};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Event, RunError, RunOutcome, RunStream};
use stategraph::state::State;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// The artifacts a graph declares, and how its run folders are named.
pub struct ArtifactSet<S: State> {
    pub(crate) artifacts: Vec<Artifact<S>>,
    pub(crate) folder: FolderPattern,
}

impl<S: State> Default for ArtifactSet<S> {
    fn default() -> Self {
        ArtifactSet {
            artifacts: Vec::new(),
            folder: FolderPattern::default(),
        }
    }
}

impl<S: State> Clone for ArtifactSet<S> {
    fn clone(&self) -> Self {
        ArtifactSet {
            artifacts: self.artifacts.clone(),
            folder: self.folder.clone(),
        }
    }
}

impl<S: State> ArtifactSet<S> {
    /// No artifacts; folders named `{graph}-v{N}`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the run folders (default `{graph}-v{N}`).
    pub fn folder(mut self, pattern: FolderPattern) -> Self {
        self.folder = pattern;
        self
    }

    /// Adds an artifact.
    pub fn with(mut self, artifact: Artifact<S>) -> Self {
        self.artifacts.push(artifact);
        self
    }

    /// The artifacts, in declaration order.
    pub fn artifacts(&self) -> &[Artifact<S>] {
        &self.artifacts
    }

    /// Checks the declarations against `graph` and binds them to it: names are unique, paths
    /// stay inside the run folder and do not collide, producing nodes exist.
    pub fn bind(&self, graph: &CompiledGraph<S>) -> Result<Artifacts<S>, ArtifactError> {
        let nodes = graph.node_names();
        let mut names = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for a in &self.artifacts {
            let declaration = |message: String| ArtifactError::Declaration {
                artifact: a.name.clone(),
                message,
            };
            if !names.insert(a.name.as_str()) {
                return Err(declaration("two artifacts have this name".into()));
            }
            if let Some(problem) = a.pattern.problem() {
                return Err(declaration(problem));
            }
            if !paths.insert(a.pattern.as_str()) {
                return Err(declaration(format!(
                    "another artifact is written to `{}`",
                    a.pattern.as_str()
                )));
            }
            if !nodes.contains(&a.node.as_str()) {
                return Err(declaration(format!(
                    "its producing node `{}` is not in graph `{}`; its nodes are: {}",
                    a.node,
                    graph.name().unwrap_or("graph"),
                    nodes.join(", ")
                )));
            }
        }
        Ok(Artifacts {
            set: Arc::new(self.clone()),
            graph: graph.clone(),
            graph_name: graph.name().unwrap_or("graph").to_string(),
        })
    }
}

/// An [`ArtifactSet`] bound to a compiled graph (with a checkpointer): what writes, lists,
/// restores and reads back a thread's artifacts. See [`ThreadArtifacts`] for the operations.
pub struct Artifacts<S: State> {
    pub(crate) set: Arc<ArtifactSet<S>>,
    pub(crate) graph: CompiledGraph<S>,
    pub(crate) graph_name: String,
}

impl<S: State> Clone for Artifacts<S> {
    fn clone(&self) -> Self {
        Artifacts {
            set: self.set.clone(),
            graph: self.graph.clone(),
            graph_name: self.graph_name.clone(),
        }
    }
}

/// A run driven by [`Artifacts::watch`]: its result, and what went wrong writing artifacts
/// (which never stops a run: the checkpoints are the truth, the files can be written again).
pub struct Watched<S> {
    /// The run's own result.
    pub result: Result<RunOutcome<S>, RunError>,
    /// Artifact writes that failed, in order.
    pub problems: Vec<ArtifactError>,
}

impl<S: State> Artifacts<S> {
    pub(crate) fn store(&self) -> Result<Arc<dyn Checkpointer>, ArtifactError> {
        self.graph
            .checkpointer()
            .cloned()
            .ok_or(ArtifactError::Run(Box::new(RunError::NoCheckpointer {
                operation: "artifacts",
            })))
    }

    /// Drives a run (from [`CompiledGraph::stream`] or `stream_resume`), writing the thread's
    /// artifacts after each checkpoint it saves and once more when it ends. The files show the
    /// thread's own state: a subgraph's run and checkpoints (events with a namespace, which the
    /// `debug` stream mode passes on) are its child's and write nothing.
    pub async fn watch(&self, mut stream: RunStream<S>) -> Watched<S> {
        let mut problems = Vec::new();
        let mut thread = None;
        while let Some(event) = stream.next().await {
            match event {
                Event::RunStarted {
                    thread_id,
                    namespace,
                    ..
                } if namespace.is_empty() => thread = Some(thread_id),
                Event::CheckpointSaved {
                    checkpoint_id,
                    namespace,
                    ..
                } if namespace.is_empty() => {
                    let (Some(t), Ok(id)) = (&thread, checkpoint_id.parse::<CheckpointId>()) else {
                        continue;
                    };
                    if let Err(e) = self.sync_at(t, Some(id), false).await {
                        problems.push(e);
                    }
                }
                _ => {}
            }
        }
        let result = stream.outcome().await;
        if let Some(t) = &thread {
            if let Err(e) = self.sync_at(t, None, false).await {
                if !matches!(&e, ArtifactError::Run(r) if matches!(**r, RunError::ThreadNotFound { .. }))
                {
                    problems.push(e);
                }
            }
        }
        Watched { result, problems }
    }
}

/// One declared artifact, as listings show it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ArtifactInfo {
    /// Its name.
    pub name: String,
    /// Its path or folder pattern.
    pub path: String,
    /// The node that produces it.
    pub node: String,
    /// How it is written.
    pub format: Format,
    /// Whether edits are read back.
    pub editable: bool,
}

/// The operations on a thread's artifacts, for a graph of any state type (the CLI holds them as
/// `Box<dyn ThreadArtifacts>`). Implemented by [`Artifacts`].
#[async_trait]
pub trait ThreadArtifacts: Send + Sync {
    /// The declared artifacts.
    fn describe(&self) -> Vec<ArtifactInfo>;

    /// Writes the artifacts of the checkpoint (default: the newest) whose content changed since
    /// the folder was last written, and files that were deleted; records hashes with the
    /// checkpoint. The first write of a thread opens its first version folder.
    async fn sync(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<SyncReport, ArtifactError>;

    /// Makes the next write open a new version folder under `base` (default: `output/` in the
    /// current folder for a thread without folders, else beside its current one). `reason` is
    /// kept with it (`run`, `rerun --from X`, `fork of T`).
    async fn start_version(
        &self,
        thread: &str,
        base: Option<&Path>,
        reason: &str,
    ) -> Result<(), ArtifactError>;

    /// Makes an existing version (`v2`, or `2`) the one the thread reads edits from and writes to.
    async fn use_version(&self, thread: &str, label: &str) -> Result<RunFolder, ArtifactError>;

    /// Every file of the current version folder against what was written and the newest
    /// checkpoint.
    async fn status(&self, thread: &str) -> Result<Status, ArtifactError>;

    /// Reads the edits of the current version folder without applying them: `Err` with every
    /// refusal (file and line) if one edit is bad.
    async fn check_edits(&self, thread: &str) -> Result<PickedUp, ArtifactError>;

    /// Reads the edits back and stores each as `update_state` as its artifact's producing node
    /// (the most recently produced first, so the one furthest upstream decides what runs next),
    /// then writes the folder for the new state. If any edit is bad, nothing is applied.
    async fn pick_up_edits(&self, thread: &str) -> Result<PickedUp, ArtifactError>;

    /// Writes every artifact of the newest checkpoint again (edits and damage are overwritten).
    async fn restore(&self, thread: &str) -> Result<SyncReport, ArtifactError>;
}

#[async_trait]
impl<S: State> ThreadArtifacts for Artifacts<S> {
    fn describe(&self) -> Vec<ArtifactInfo> {
        self.set
            .artifacts
            .iter()
            .map(|a| ArtifactInfo {
                name: a.name.clone(),
                path: a.path().to_string(),
                node: a.node.clone(),
                format: a.format,
                editable: a.is_editable(),
            })
            .collect()
    }

    async fn sync(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
    ) -> Result<SyncReport, ArtifactError> {
        self.sync_at(thread, checkpoint, false).await
    }

    async fn start_version(
        &self,
        thread: &str,
        base: Option<&Path>,
        reason: &str,
    ) -> Result<(), ArtifactError> {
        self.mark_new_version(thread, base, reason).await
    }

    async fn use_version(&self, thread: &str, label: &str) -> Result<RunFolder, ArtifactError> {
        self.choose_version(thread, label).await
    }

    async fn status(&self, thread: &str) -> Result<Status, ArtifactError> {
        Ok(self.survey(thread).await?.status)
    }

    async fn check_edits(&self, thread: &str) -> Result<PickedUp, ArtifactError> {
        let survey = self.survey(thread).await?;
        let refused = self.refusals(&survey.status);
        if !refused.is_empty() {
            return Err(ArtifactError::InvalidEdits(refused));
        }
        Ok(self.plan_pick_up(&survey).0)
    }

    async fn pick_up_edits(&self, thread: &str) -> Result<PickedUp, ArtifactError> {
        let survey = self.survey(thread).await?;
        let refused = self.refusals(&survey.status);
        if !refused.is_empty() {
            return Err(ArtifactError::InvalidEdits(refused));
        }
        let (mut picked, order) = self.plan_pick_up(&survey);
        if picked.is_empty() {
            return Ok(picked);
        }
        let mut edits: Vec<Option<edits::Edit<S>>> = survey.edits.into_iter().map(Some).collect();
        for i in order {
            let Some(edit) = edits[i].take() else {
                continue;
            };
            let node = self.set.artifacts[edit.artifact].node.clone();
            let id = self
                .graph
                .update_state(thread, edit.update, Some(&node))
                .await?;
            picked.checkpoint = Some(id);
        }
        self.sync_at(thread, None, false).await?;
        picked.next = self.graph.get_state(thread, None).await?.next;
        Ok(picked)
    }

    async fn restore(&self, thread: &str) -> Result<SyncReport, ArtifactError> {
        self.sync_at(thread, None, true).await
    }
}

impl<S: State> Artifacts<S> {
    /// What picking up the survey's edits does: the files, and the order to apply the edits in
    /// (indices into `survey.edits`).
    fn plan_pick_up(&self, survey: &edits::Survey<S>) -> (PickedUp, Vec<usize>) {
        let mut order: Vec<usize> = (0..survey.edits.len()).collect();
        // Newest producer first: the edit furthest upstream is applied last and decides what
        // runs next; what follows it runs again, including the producers of the other edits.
        order.sort_by_key(|&i| std::cmp::Reverse((survey.edits[i].step, i)));
        let mut picked = PickedUp::default();
        for &i in &order {
            let e = &survey.edits[i];
            let a = &self.set.artifacts[e.artifact];
            for path in &e.files {
                picked.files.push(PickedFile {
                    path: path.clone(),
                    artifact: a.name.clone(),
                    node: a.node.clone(),
                });
            }
        }
        if order.len() > 1 {
            let upstream = &self.set.artifacts[survey.edits[order[order.len() - 1]].artifact];
            for &i in &order[..order.len() - 1] {
                let a = &self.set.artifacts[survey.edits[i].artifact];
                if a.node != upstream.node {
                    picked.notes.push(format!(
                        "`{}` is produced by `{}`, which comes after `{}`: if it runs again after the edit of `{}`, its output replaces this edit",
                        a.path(), a.node, upstream.node, upstream.path()
                    ));
                }
            }
        }
        let with = |state: FileState| {
            survey
                .status
                .files
                .iter()
                .filter(|f| f.state == state)
                .map(|f| f.path.clone())
                .collect::<Vec<_>>()
        };
        picked.deleted = with(FileState::Missing);
        picked.same = with(FileState::Same);
        (picked, order)
    }
}
