//! The memo pipeline's artifacts, through the library (offline, on the bundled data room):
//! each stage's file in `output/{company}-v0.0.{N}/`, an edited `1-research.json` picked up by
//! a resume, a corrupt artifact refused with its file and line, and a rerun from `cite` into a
//! new version folder.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Resume, RunConfig};
use stategraph::CompiledGraph;
use stategraph_agents::memo::{artifact_set, graph, MemoAgent, MemoState, MemoStateUpdate};
use stategraph_artifacts::{ArtifactError, Artifacts, ThreadArtifacts};
use stategraph_llm::FakeChatModel;

fn config() -> RunConfig {
    RunConfig::new()
        .setting("mode", "offline")
        .setting("yes", true)
}

fn memo_graph() -> CompiledGraph<MemoState> {
    // A fake model that would fail the test if called: offline mode never calls it.
    let agent = MemoAgent::new(Arc::new(FakeChatModel::new()));
    graph(Arc::new(agent))
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()))
}

async fn run(graph: &CompiledGraph<MemoState>, artifacts: &Artifacts<MemoState>, out: &Path) {
    artifacts
        .start_version("t", Some(out), "run")
        .await
        .unwrap();
    let input = MemoStateUpdate::default().company("Fernstone".to_string());
    let watched = artifacts
        .watch(graph.stream(input, config().thread("t")))
        .await;
    let state = watched.result.unwrap().state;
    assert!(state.final_memo.is_some());
    assert!(watched.problems.is_empty());
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn count(state: &MemoState, stage: &str) -> usize {
    state.log.iter().filter(|s| *s == stage).count()
}

#[tokio::test]
async fn each_stage_writes_its_artifact_into_the_version_folder() {
    let out = tempfile::tempdir().unwrap();
    let graph = memo_graph();
    let artifacts = artifact_set().bind(&graph).unwrap();
    run(&graph, &artifacts, out.path()).await;
    let dir = out.path().join("Fernstone-v0.0.1");

    let deck: Value = serde_json::from_str(&read(&dir.join("0-deck-analysis.json"))).unwrap();
    assert_eq!(deck["company"], "Fernstone, Inc.");
    let research: Value = serde_json::from_str(&read(&dir.join("1-research.json"))).unwrap();
    assert_eq!(research["topics"].as_array().unwrap().len(), 6);
    let evidence: Value =
        serde_json::from_str(&read(&dir.join("1-section-research.json"))).unwrap();
    assert_eq!(evidence["sections"].as_array().unwrap().len(), 10);
    let mut sections: Vec<String> = std::fs::read_dir(dir.join("2-sections"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    sections.sort();
    assert_eq!(sections.len(), 10, "{sections:?}");
    assert_eq!(sections[3], "04-team.md");
    assert!(read(&dir.join("2-sections/04-team.md")).contains("linkedin.com/in/"));
    assert!(read(&dir.join("2-sections/06-traction.md")).contains("<!-- viz:"));
    assert!(read(&dir.join("header.md")).starts_with("# Fernstone®"));
    let draft = read(&dir.join("4-final-draft.md"));
    assert!(draft.contains("[^1]") && draft.contains("## Citations"));
    let validation: Value = serde_json::from_str(&read(&dir.join("3-validation.json"))).unwrap();
    for key in ["citation_validation", "fact_check_results", "overall_score"] {
        assert!(!validation[key].is_null(), "3-validation.json lacks {key}");
    }
    let state: Value = serde_json::from_str(&read(&dir.join("state.json"))).unwrap();
    assert_eq!(state["final_memo"].as_str(), Some(draft.as_str()));

    // Each file was first written with the state of the stage that produces it.
    let status = artifacts.status("t").await.unwrap();
    let step_of = |path: &str| {
        status
            .files
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("no {path} in {:?}", status.files))
            .step
    };
    assert_eq!(step_of("0-deck-analysis.json"), Some(1));
    assert_eq!(step_of("1-research.json"), Some(2));
    assert_eq!(step_of("1-section-research.json"), Some(3));
    assert_eq!(step_of("header.md"), Some(5), "enrich_trademark");
    assert_eq!(
        step_of("2-sections/06-traction.md"),
        Some(8),
        "enrich_visualizations"
    );
    for name in &sections {
        let step = step_of(&format!("2-sections/{name}")).unwrap();
        assert!(
            (4..=8).contains(&step),
            "{name}: step {step}, not draft..enrich_visualizations"
        );
    }
    assert_eq!(step_of("3-validation.json"), Some(12), "validate");
    assert_eq!(step_of("4-final-draft.md"), Some(13), "finalize");
}

#[tokio::test]
async fn an_edited_research_file_is_used_by_everything_after_research() {
    let out = tempfile::tempdir().unwrap();
    let graph = memo_graph();
    let artifacts = artifact_set().bind(&graph).unwrap();
    run(&graph, &artifacts, out.path()).await;
    let file = out.path().join("Fernstone-v0.0.1/1-research.json");
    let mut research: Value = serde_json::from_str(&read(&file)).unwrap();
    let edit = "EDITED: analysts put the serviceable market lower than the deck does.";
    research["topics"][0]["summary"] = Value::String(edit.into());
    std::fs::write(&file, serde_json::to_string_pretty(&research).unwrap()).unwrap();

    let picked = artifacts.pick_up_edits("t").await.unwrap();
    assert_eq!(picked.files.len(), 1);
    assert_eq!(picked.next, vec!["section_research"]);
    let watched = artifacts
        .watch(graph.stream_resume("t", Resume::Continue, config()))
        .await;
    let state = watched.result.unwrap().state;
    assert!(state.final_memo.as_deref().unwrap().contains(edit));
    assert_eq!(
        count(&state, "research"),
        1,
        "research is kept: {:?}",
        state.log
    );
    assert_eq!(count(&state, "section_research"), 2);
    assert_eq!(count(&state, "finalize"), 2);
    let draft = read(&out.path().join("Fernstone-v0.0.1/4-final-draft.md"));
    assert!(draft.contains(edit));
    assert_eq!(draft.matches("## Validation").count(), 1);
}

#[tokio::test]
async fn a_corrupt_artifact_is_refused_with_its_file_and_line() {
    let out = tempfile::tempdir().unwrap();
    let graph = memo_graph();
    let artifacts = artifact_set().bind(&graph).unwrap();
    run(&graph, &artifacts, out.path()).await;
    let head = graph.get_state("t", None).await.unwrap().checkpoint_id;
    let file = out.path().join("Fernstone-v0.0.1/1-section-research.json");
    let text = read(&file);
    // Cut short, as a crash of an editor or a full disk would leave it.
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let err = artifacts.pick_up_edits("t").await.unwrap_err().to_string();
    assert!(err.contains("1-section-research.json: truncated"), "{err}");
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        head
    );

    // Broken in the middle: the file and the line are named.
    let broken = text.replacen("\"line\": ", "\"line\" ", 1);
    std::fs::write(&file, &broken).unwrap();
    let err = artifacts.pick_up_edits("t").await.unwrap_err();
    let ArtifactError::InvalidEdits(errors) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        errors[0].file.as_deref(),
        Some("1-section-research.json"),
        "{err}"
    );
    assert!(errors[0].line.is_some(), "{err}");
    assert_eq!(
        graph.get_state("t", None).await.unwrap().checkpoint_id,
        head
    );

    // Two passages under one id are refused too: drafts cite passages by id.
    let mut evidence: Value = serde_json::from_str(&text).unwrap();
    let first = evidence["sections"][1]["evidence"][0]["id"].clone();
    evidence["sections"][2]["evidence"][0]["id"] = first;
    std::fs::write(&file, serde_json::to_string_pretty(&evidence).unwrap()).unwrap();
    let err = artifacts.pick_up_edits("t").await.unwrap_err().to_string();
    assert!(err.contains("names two passages"), "{err}");
}

#[tokio::test]
async fn a_rerun_from_cite_writes_a_new_version_and_keeps_the_old_one() {
    let out = tempfile::tempdir().unwrap();
    let graph = memo_graph();
    let artifacts = artifact_set().bind(&graph).unwrap();
    run(&graph, &artifacts, out.path()).await;
    let first = read(&out.path().join("Fernstone-v0.0.1/4-final-draft.md"));

    artifacts
        .start_version("t", None, "rerun --from cite")
        .await
        .unwrap();
    let state = graph.rerun_from("t", "cite", config()).await.unwrap().state;
    artifacts.sync("t", None).await.unwrap();
    let second = read(&out.path().join("Fernstone-v0.0.2/4-final-draft.md"));
    assert_eq!(second, first, "offline runs are deterministic");
    assert_eq!(
        read(&out.path().join("Fernstone-v0.0.1/4-final-draft.md")),
        first
    );
    assert!(out
        .path()
        .join("Fernstone-v0.0.2/2-sections/04-team.md")
        .exists());
    // The rerun branches from the checkpoint before `cite`: its history has each stage once.
    assert_eq!(state.log.len(), 13, "{:?}", state.log);
}
