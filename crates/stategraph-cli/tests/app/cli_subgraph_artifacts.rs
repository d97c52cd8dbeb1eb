//! A graph with artifacts whose node is a subgraph, run through the command line: the artifact
//! files show the root thread's state, so only the root graph's checkpoints write them. A
//! child's checkpoints (saved under its namespace, with the child's own step numbers) are not
//! the thread's state: before, the CLI tried to write the artifacts of each one, failed to find
//! it among the root's checkpoints and warned once per child checkpoint.
//!
//! The built-in graphs have no subgraphs, so the command runs in a child process that is this
//! test binary again (`current_exe`, the hidden `cli_child` test) running the `graph` app with
//! a `notes` graph registered, as a user's own binary would.

use crate::own_binary;

use own_binary::Out;
use serde::{Deserialize, Serialize};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError};
use stategraph::{State, StateGraph, END, START};
use stategraph_artifacts::{Artifact, ArtifactSet};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::path::Path;
use std::sync::Arc;

const CHILD_ENV: &str = "STATEGRAPH_CLI_SUBGRAPH_ARTIFACTS_ARGS";

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Notes {
    topic: String,
    #[state(append)]
    notes: Vec<String>,
}

/// Three steps of its own (`a -> b -> c`), run as the parent's node `work`: the child's
/// checkpoints outnumber the parent's.
fn child() -> CompiledGraph<Notes> {
    let mut g = StateGraph::<Notes>::named("child");
    for name in ["a", "b", "c"] {
        g.add_node(name, move |_s: Arc<Notes>, _c: Context| async move {
            Ok::<_, NodeError>(NotesUpdate::default().notes(vec![format!("child {name}")]))
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END);
    g.compile().unwrap()
}

struct NotesFactory;

impl GraphFactory for NotesFactory {
    type State = Notes;

    fn name(&self) -> &str {
        "notes"
    }

    fn description(&self) -> &str {
        "a child graph writes notes, a last node closes them"
    }

    fn input_field(&self) -> Option<&str> {
        Some("topic")
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Notes>, BuildError> {
        let mut g = StateGraph::<Notes>::named("notes");
        g.add_node("work", child());
        g.add_node("close", |_s: Arc<Notes>, _c: Context| async {
            Ok::<_, NodeError>(NotesUpdate::default().notes(vec!["closed".to_string()]))
        });
        g.add_edge(START, "work")
            .add_edge("work", "close")
            .add_edge("close", END);
        Ok(g.compile()?)
    }

    fn artifacts(&self, _file: &GraphFile) -> Option<ArtifactSet<Notes>> {
        Some(ArtifactSet::new().with(Artifact::markdown(
            "notes",
            "notes.md",
            "work",
            |s: &Notes| format!("# {}\n\n{}\n", s.topic, s.notes.join("\n")),
        )))
    }
}

#[test]
#[ignore = "a child process of the cli_subgraph_artifacts tests, started by them"]
fn cli_child() {
    own_binary::run_if_child(CHILD_ENV, || {
        stategraph_cli::App::new().register(NotesFactory)
    });
}

/// `graph --db DB ARGS...` with `notes` registered, its artifacts under `DB/output`.
fn graph(db: &Path, args: &[&str]) -> Out {
    own_binary::graph_at("cli_subgraph_artifacts::cli_child", CHILD_ENV, db, args)
}

/// Runs `notes` with `extra` flags on a new thread `t` in a new store; the run must finish,
/// warn about nothing and leave `notes.md` holding the root thread's final state, up to date
/// with its newest checkpoint (`graph artifacts`).
fn run_writes_the_roots_state(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    let mut args = vec!["run", "notes", "--thread", "t", "--input", "sled"];
    args.extend_from_slice(extra);
    let run = graph(db, &args);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        !run.stderr.contains("warning"),
        "a child's checkpoint is not the thread's state: nothing to write, nothing to warn about\n{run}"
    );
    let file = db.join("output/notes-v1/notes.md");
    let written =
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}\n{run}", file.display()));
    assert_eq!(
        written, "# sled\n\nchild a\nchild b\nchild c\nclosed\n",
        "the root thread's final state\n{run}"
    );
    let status = graph(db, &["artifacts", "t"]);
    assert_eq!(status.code, 0, "{status}");
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.contains("notes.md") && l.split_whitespace().nth(3) == Some("ok")),
        "{status}"
    );
}

#[test]
fn progress_lines_write_the_roots_artifacts() {
    run_writes_the_roots_state(&[]);
}

/// `--stream debug` passes every checkpoint on, the child's too (with its namespace): only the
/// root's are written (before: a warning per child checkpoint, "thread `t` has no checkpoint").
#[test]
fn a_streamed_childs_checkpoints_write_no_artifacts() {
    run_writes_the_roots_state(&["--stream", "debug"]);
}

/// `--stream updates` passes no checkpoint events on: the files are written for the newest
/// checkpoint once the run ended (before: none were written at all).
#[test]
fn a_stream_without_checkpoint_events_still_writes_the_artifacts() {
    run_writes_the_roots_state(&["--stream", "updates"]);
}

/// The library's [`Artifacts::watch`](stategraph_artifacts::Artifacts::watch) on a stream in
/// `debug` mode, which passes the child's run start and checkpoints on too (with its
/// namespace): it writes the root thread's files only. Before, the child's run start made it
/// follow the child's thread (`t/work:…`), whose checkpoints and final state it then wrote.
#[tokio::test]
async fn watch_writes_the_roots_artifacts_only() {
    use stategraph::checkpoint::MemoryCheckpointer;
    use stategraph::runtime::{RunConfig, StreamMode};
    use stategraph_artifacts::ThreadArtifacts as _;

    let out = tempfile::tempdir().unwrap();
    let file = GraphFile::default();
    let graph = NotesFactory
        .build(&file)
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let artifacts = NotesFactory.artifacts(&file).unwrap().bind(&graph).unwrap();
    artifacts
        .start_version("t", Some(out.path()), "run")
        .await
        .unwrap();
    let input = NotesUpdate::default().topic("sled".to_string());
    let config = RunConfig::new()
        .thread("t")
        .stream_modes([StreamMode::Debug]);
    let watched = artifacts.watch(graph.stream(input, config)).await;
    watched.result.unwrap();
    assert!(
        watched.problems.is_empty(),
        "{:?}",
        watched
            .problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let written = std::fs::read_to_string(out.path().join("notes-v1/notes.md")).unwrap();
    assert_eq!(written, "# sled\n\nchild a\nchild b\nchild c\nclosed\n");
    let folders: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        folders,
        ["notes-v1"],
        "one version folder, the root thread's"
    );
}
