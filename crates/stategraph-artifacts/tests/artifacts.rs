//! Artifacts through the library: a three-stage graph whose research notes (JSON), sections
//! (a folder of Markdown files) and memo (Markdown) are written after every checkpoint, read
//! back when a person edits them, and redone downstream of the edit only.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Context, Resume, RunConfig};
use stategraph::{CompiledGraph, State, StateGraph, END, START};
use stategraph_artifacts::{
    Artifact, ArtifactError, ArtifactSet, Artifacts, EditError, Entry, FileState, Format,
    ThreadArtifacts,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Memo {
    company: String,
    notes: Vec<String>,
    sections: Vec<(String, String)>,
    memo: String,
}

type Runs = Arc<Mutex<BTreeMap<String, usize>>>;

fn count(runs: &Runs, node: &str) {
    *runs.lock().unwrap().entry(node.to_string()).or_default() += 1;
}

fn graph(runs: &Runs) -> CompiledGraph<Memo> {
    let mut g = StateGraph::<Memo>::named("memo");
    let r = runs.clone();
    g.add_node("research", move |s: Arc<Memo>, _c: Context| {
        count(&r, "research");
        let notes = vec![
            format!("{} makes widgets", s.company),
            "founded 2020".into(),
        ];
        async move { Ok(MemoUpdate::default().notes(notes)) }
    });
    let r = runs.clone();
    g.add_node("draft", move |s: Arc<Memo>, _c: Context| {
        count(&r, "draft");
        let sections = vec![
            (
                "Summary".to_string(),
                format!("# Summary\n\n{}\n", s.notes.join("; ")),
            ),
            ("Team".to_string(), "# Team\n\nTwo founders.\n".to_string()),
        ];
        async move { Ok(MemoUpdate::default().sections(sections)) }
    });
    let r = runs.clone();
    g.add_node("finalize", move |s: Arc<Memo>, _c: Context| {
        count(&r, "finalize");
        let memo: String = s.sections.iter().map(|(_, t)| t.as_str()).collect();
        async move { Ok(MemoUpdate::default().memo(memo)) }
    });
    g.add_edge(START, "research")
        .add_edge("research", "draft")
        .add_edge("draft", "finalize")
        .add_edge("finalize", END);
    g.compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

fn set() -> ArtifactSet<Memo> {
    ArtifactSet::new()
        .with(
            Artifact::json("research", "1-research.json", "research", |s: &Memo| {
                s.notes.clone()
            })
            .parse_json(|_s: &Memo, notes: Vec<String>| {
                if notes.is_empty() {
                    return Err(EditError::new("keep at least one note"));
                }
                Ok(MemoUpdate::default().notes(notes))
            }),
        )
        .with(
            Artifact::folder(
                "sections",
                "2-sections/{index}-{slug}.md",
                "draft",
                Format::Markdown,
                |s: &Memo| {
                    s.sections
                        .iter()
                        .map(|(slug, text)| Entry::new(slug.clone(), text.clone()))
                        .collect()
                },
            )
            .parse_entries(|_s: &Memo, entries: Vec<Entry>| {
                let mut sections = Vec::new();
                for e in entries {
                    sections.push((e.slug.clone(), e.text()?.to_string()));
                }
                Ok(MemoUpdate::default().sections(sections))
            }),
        )
        .with(Artifact::markdown(
            "memo",
            "4-final-draft.md",
            "finalize",
            |s: &Memo| s.memo.clone(),
        ))
}

async fn run(artifacts: &Artifacts<Memo>, graph: &CompiledGraph<Memo>, thread: &str, out: &Path) {
    artifacts
        .start_version(thread, Some(out), "run")
        .await
        .unwrap();
    let input = MemoUpdate::default().company("Acme".to_string());
    let watched = artifacts
        .watch(graph.stream(input, RunConfig::new().thread(thread)))
        .await;
    watched.result.unwrap();
    assert!(watched.problems.is_empty(), "{:?}", watched.problems.len());
}

fn runs_of(runs: &Runs) -> BTreeMap<String, usize> {
    runs.lock().unwrap().clone()
}

#[tokio::test]
async fn a_run_writes_its_artifacts_into_a_new_version_folder() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t1", out.path()).await;
    let v1 = out.path().join("memo-v1");
    let notes: Vec<String> =
        serde_json::from_slice(&std::fs::read(v1.join("1-research.json")).unwrap()).unwrap();
    assert_eq!(notes, vec!["Acme makes widgets", "founded 2020"]);
    assert!(v1.join("2-sections/01-summary.md").exists());
    assert!(v1.join("2-sections/02-team.md").exists());
    assert!(std::fs::read_to_string(v1.join("4-final-draft.md"))
        .unwrap()
        .contains("Two founders"));
    let status = artifacts.status("t1").await.unwrap();
    assert!(status.partials.is_empty());
    assert_eq!(status.files.len(), 4);
    for f in &status.files {
        assert_eq!(f.state, FileState::Unchanged, "{}", f.path);
    }
    let research = status
        .files
        .iter()
        .find(|f| f.artifact == "research")
        .unwrap();
    assert_eq!(
        (research.node.as_deref(), research.step),
        (Some("research"), Some(1))
    );
    assert_eq!(research.edit_as, "research");

    // Another thread in the same place gets the next version; the first is left alone.
    run(&artifacts, &graph, "t2", out.path()).await;
    assert!(out.path().join("memo-v2/1-research.json").exists());
    assert_eq!(
        artifacts.status("t2").await.unwrap().folder.unwrap().label,
        "v2"
    );
}

#[tokio::test]
async fn an_edit_reruns_exactly_the_nodes_after_its_producer() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let file = out.path().join("memo-v1/1-research.json");
    std::fs::write(&file, "[\"Acme makes gears\"]").unwrap();

    let status = artifacts.status("t").await.unwrap();
    let research = status
        .files
        .iter()
        .find(|f| f.artifact == "research")
        .unwrap();
    assert_eq!(research.state, FileState::Edited);

    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert_eq!(picked.files.len(), 1);
    assert_eq!(picked.files[0].path, "1-research.json");
    assert_eq!(picked.files[0].node, "research");
    assert_eq!(picked.next, vec!["draft"]);
    // Written back in the artifact's own form.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[\n  \"Acme makes gears\"\n]\n"
    );

    let before = runs_of(&runs);
    let watched = artifacts
        .watch(graph.stream_resume("t", Resume::Continue, RunConfig::new()))
        .await;
    let state = watched.result.unwrap().state;
    let after = runs_of(&runs);
    assert_eq!(after["research"], before["research"], "upstream is kept");
    assert_eq!(after["draft"], before["draft"] + 1);
    assert_eq!(after["finalize"], before["finalize"] + 1);
    assert!(state.memo.contains("Acme makes gears"), "{}", state.memo);
    let memo = std::fs::read_to_string(out.path().join("memo-v1/4-final-draft.md")).unwrap();
    assert!(memo.contains("Acme makes gears"));
    // Nothing left to pick up.
    assert!(artifacts.pick_up_edits("t").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_folder_edit_is_read_whole_and_attributed_to_its_producer() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let team = out.path().join("memo-v1/2-sections/02-team.md");
    std::fs::write(&team, "# Team\n\nThree founders.\n").unwrap();
    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert_eq!(picked.files[0].node, "draft");
    assert_eq!(picked.next, vec!["finalize"]);
    let before = runs_of(&runs);
    let state = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap()
        .state;
    let after = runs_of(&runs);
    assert_eq!(after["draft"], before["draft"]);
    assert_eq!(after["finalize"], before["finalize"] + 1);
    assert!(state.memo.contains("Three founders"));
}

#[tokio::test]
async fn an_invalid_edit_is_refused_naming_file_and_line_and_nothing_changes() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let head = graph.get_state("t", None).await.unwrap().checkpoint_id;
    let file = out.path().join("memo-v1/1-research.json");
    std::fs::write(&file, "[\n  \"a\",\n  42\n]\n").unwrap();
    let err = artifacts.pick_up_edits("t").await.unwrap_err();
    let ArtifactError::InvalidEdits(errors) = &err else {
        panic!("{err}")
    };
    assert_eq!(errors[0].file.as_deref(), Some("1-research.json"));
    assert_eq!(errors[0].line, Some(3), "{err}");
    assert!(err.to_string().contains("1-research.json:3"), "{err}");
    // A validation failure is refused too.
    std::fs::write(&file, "[]").unwrap();
    let err = artifacts.pick_up_edits("t").await.unwrap_err();
    assert!(err.to_string().contains("keep at least one note"), "{err}");
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        head
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[]",
        "the edit is left for fixing"
    );
}

#[tokio::test]
async fn deleted_truncated_and_changed_files_are_reported_and_restored() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let v1 = out.path().join("memo-v1");
    let research = std::fs::read(v1.join("1-research.json")).unwrap();
    std::fs::write(v1.join("1-research.json"), &research[..research.len() / 2]).unwrap();
    std::fs::remove_file(v1.join("2-sections/01-summary.md")).unwrap();
    std::fs::write(v1.join("4-final-draft.md"), "scribbled").unwrap();
    let status = artifacts.status("t").await.unwrap();
    let state_of = |p: &str| {
        status
            .files
            .iter()
            .find(|f| f.path == p)
            .unwrap()
            .state
            .clone()
    };
    assert!(matches!(
        state_of("1-research.json"),
        FileState::Truncated { .. }
    ));
    assert_eq!(state_of("2-sections/01-summary.md"), FileState::Missing);
    assert_eq!(state_of("4-final-draft.md"), FileState::Changed);
    let err = artifacts.pick_up_edits("t").await.unwrap_err().to_string();
    assert!(err.contains("1-research.json: truncated"), "{err}");
    assert!(err.contains("4-final-draft.md: changed"), "{err}");

    let restored = artifacts.restore("t").await.unwrap();
    assert_eq!(restored.written.len() + restored.restored.len(), 4);
    assert_eq!(std::fs::read(v1.join("1-research.json")).unwrap(), research);
    for f in artifacts.status("t").await.unwrap().files {
        assert_eq!(f.state, FileState::Unchanged, "{}", f.path);
    }
}

#[tokio::test]
async fn a_deleted_file_is_not_read_as_empty() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let file = out.path().join("memo-v1/1-research.json");
    std::fs::remove_file(&file).unwrap();
    let head = graph.get_state("t", None).await.unwrap().checkpoint_id;
    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert_eq!(picked.deleted, vec!["1-research.json"]);
    assert!(picked.files.is_empty() && picked.checkpoint.is_none());
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        head
    );
    // It is written again from the checkpoint.
    assert!(file.exists());
    std::fs::remove_file(&file).unwrap();
    let report = artifacts.sync("t", None).await.unwrap();
    assert_eq!(report.restored, vec!["1-research.json"]);
    assert!(file.exists());
}

#[tokio::test]
async fn declarations_are_checked_against_the_graph() {
    let runs = Runs::default();
    let graph = graph(&runs);
    let bad =
        ArtifactSet::<Memo>::new().with(Artifact::text("x", "x.txt", "nope", |_s| String::new()));
    let err = bad.bind(&graph).err().unwrap().to_string();
    assert!(
        err.contains("`nope`") && err.contains("research, draft, finalize"),
        "{err}"
    );
    let bad = ArtifactSet::<Memo>::new()
        .with(Artifact::text("x", "../x.txt", "draft", |_s| String::new()));
    assert!(bad.bind(&graph).is_err());
    let bad = ArtifactSet::<Memo>::new()
        .with(Artifact::text("x", "x.txt", "draft", |_s| String::new()))
        .with(Artifact::text("y", "x.txt", "draft", |_s| String::new()));
    assert!(bad.bind(&graph).is_err());
}

#[tokio::test]
async fn files_of_a_checkpoint_newer_than_the_record_are_not_edits() {
    // A writer killed after renaming a checkpoint's files but before recording their hashes,
    // while the run had already saved a newer checkpoint.
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let notes = |n: &str| MemoUpdate::default().notes(vec![n.to_string()]);
    graph
        .update_state("t", notes("second"), Some("research"))
        .await
        .unwrap();
    let file = out.path().join("memo-v1/1-research.json");
    std::fs::write(&file, "[\n  \"second\"\n]\n").unwrap();
    graph
        .update_state("t", notes("third"), Some("research"))
        .await
        .unwrap();
    let status = artifacts.status("t").await.unwrap();
    let research = status
        .files
        .iter()
        .find(|f| f.artifact == "research")
        .unwrap();
    assert_eq!(research.state, FileState::Behind);
    assert!(artifacts.pick_up_edits("t").await.unwrap().files.is_empty());
    // A real edit is still seen as one; made on the file of an older checkpoint, taking it
    // would undo what followed ("third"), so it is refused until the file is current.
    std::fs::write(&file, "[\"mine\"]").unwrap();
    let refused = artifacts.pick_up_edits("t").await.unwrap_err().to_string();
    assert!(refused.contains("would undo that change"), "{refused}");
    artifacts.sync("t", None).await.unwrap();
    std::fs::write(&file, "[\"mine\"]").unwrap();
    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert_eq!(picked.files.len(), 1);
}

#[tokio::test]
async fn a_file_rewritten_with_the_same_content_is_no_edit_and_nothing_runs_again() {
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let before = graph.get_state("t", None).await.unwrap().checkpoint_id;
    // The same notes, as an editor might save them: on one line.
    let file = out.path().join("memo-v1/1-research.json");
    std::fs::write(&file, r#"["Acme makes widgets","founded 2020"]"#).unwrap();
    let status = artifacts.status("t").await.unwrap();
    let research = status.files.iter().find(|f| f.artifact == "research");
    assert_eq!(research.unwrap().state, FileState::Same);
    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert!(picked.files.is_empty() && picked.next.is_empty());
    assert_eq!(picked.same, ["1-research.json"]);
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        before
    );
    let ran = runs_of(&runs);
    graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(runs_of(&runs), ran, "nothing ran again");
    // A real change among the same lines is still an edit.
    std::fs::write(&file, r#"["Acme makes gadgets","founded 2020"]"#).unwrap();
    assert_eq!(artifacts.pick_up_edits("t").await.unwrap().files.len(), 1);
}

#[tokio::test]
async fn files_written_for_a_checkpoint_that_was_then_lost_are_not_edits() {
    // Async durability: a checkpoint's files were written, then the process was killed before
    // the checkpoint reached the disk (and before the files' hashes were recorded).
    let out = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let graph = graph(&runs);
    let artifacts = set().bind(&graph).unwrap();
    run(&artifacts, &graph, "t", out.path()).await;
    let store = graph.checkpointer().unwrap().clone();
    let kept = graph.get_state("t", None).await.unwrap().checkpoint_id;
    let kept_manifest = store
        .get_journal("t", &format!("{kept}/artifacts"))
        .await
        .unwrap()
        .unwrap();
    let mut sections = graph.get_state("t", None).await.unwrap().values.sections;
    sections.push(("Risks".into(), "# Risks\n\nNone known.\n".into()));
    let update = MemoUpdate::default()
        .notes(vec!["lost".to_string()])
        .sections(sections);
    let lost = graph
        .update_state("t", update, Some("research"))
        .await
        .unwrap();
    artifacts.sync("t", None).await.unwrap();
    let v1 = out.path().join("memo-v1");
    assert!(v1.join("2-sections/03-risks.md").exists());
    // The loss: the checkpoint is gone, and the folder's record is the one before it.
    store
        .put_journal("t", "artifacts/last/v1", &kept_manifest)
        .await
        .unwrap();
    store.delete_checkpoints("t", &[lost]).await.unwrap();
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        kept
    );

    let status = artifacts.status("t").await.unwrap();
    for f in &status.files {
        assert!(!f.state.is_changed(), "{} reads as {:?}", f.path, f.state);
    }
    let risks = status
        .files
        .iter()
        .find(|f| f.path.ends_with("03-risks.md"));
    assert_eq!(risks.unwrap().state, FileState::Behind);
    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert!(picked.is_empty(), "{:?}", picked.files);
    // The next write puts the folder right: the kept checkpoint's files, nothing more.
    let report = artifacts.sync("t", None).await.unwrap();
    assert_eq!(report.restored, ["1-research.json"]);
    assert_eq!(report.removed, ["2-sections/03-risks.md"]);
    assert!(!v1.join("2-sections/03-risks.md").exists());
    let status = artifacts.status("t").await.unwrap();
    assert!(status.files.iter().all(|f| f.state == FileState::Unchanged));
    // A person's edit afterwards is one.
    std::fs::write(v1.join("1-research.json"), "[\"mine\"]").unwrap();
    assert_eq!(artifacts.pick_up_edits("t").await.unwrap().files.len(), 1);
}
