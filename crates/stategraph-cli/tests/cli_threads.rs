//! Inspecting and editing threads: threads, state, history, update, fork, rerun, delete, prune,
//! graphs, draw, and the errors of each.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::json;
use stategraph_sled::{SledCheckpointer, SledOptions};

#[test]
fn threads_lists_each_thread_with_graph_status_and_steps() {
    let db = Db::new();
    db.graph(&["threads"])
        .expect(0)
        .stderr_has(&["no threads in", "run <GRAPH>"]);
    let done = db.finished_thread();
    let paused = db.paused_thread();
    let table = db.graph(&["threads"]).expect(0);
    let line = |id: &str| {
        table
            .stdout
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} missing\n{table}"))
            .to_string()
    };
    assert!(
        line(&done).contains("pipeline")
            && line(&done).contains(" done ")
            && line(&done).contains(" 4 "),
        "{table}"
    );
    assert!(
        line(&paused).contains(" paused ") && line(&paused).contains(" 2 "),
        "{table}"
    );
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[0]["thread_id"], paused.as_str(), "newest first");
}

#[test]
fn state_shows_values_next_and_what_waits_at_any_checkpoint() {
    let db = Db::new();
    let thread = db.paused_thread();
    let text = db.graph(&["state", &thread]).expect(0);
    for needle in [
        "status      paused",
        "next        review",
        "`review` asks",
        "continue    graph resume",
        "\"topic\": \"sled\"",
    ] {
        assert!(text.stdout.contains(needle), "missing {needle:?}\n{text}");
    }
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let first = history.as_array().unwrap().last().unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let old = db
        .graph(&["state", &thread, "--checkpoint", &first, "--json"])
        .expect(0)
        .json();
    assert_eq!(old["step"], 0);
    assert_eq!(old["next"], json!(["outline"]));
    assert_eq!(old["values"]["outline"], json!([]));
}

#[test]
fn history_lists_checkpoints_newest_first() {
    let db = Db::new();
    let thread = db.finished_thread();
    let text = db.graph(&["history", &thread]).expect(0);
    let rows: Vec<&str> = text.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert!(
        rows[0].contains("publish") && rows[4].contains("input"),
        "{text}"
    );
    let limited = db
        .graph(&["history", &thread, "--limit", "2", "--json"])
        .expect(0)
        .json();
    assert_eq!(limited.as_array().unwrap().len(), 2);
}

#[test]
fn update_edits_the_state_and_as_node_chooses_what_runs_next() {
    let db = Db::new();
    let thread = db.paused_thread();
    // Approve by editing the state as if `review` had run: its router sends the run to publish.
    let out = db
        .graph(&[
            "update",
            &thread,
            "--set-json",
            r#"{"approved": true, "title": "Edited"}"#,
            "--as-node",
            "review",
        ])
        .expect(0);
    assert_eq!(
        out.stdout.trim().len(),
        36,
        "prints the new checkpoint id\n{out}"
    );
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["publish"]));
    assert_eq!(state["metadata"]["source"], "update");
    let done = db.graph(&["resume", &thread]).expect(0);
    assert!(done.stdout.starts_with("# Edited"), "{done}");
    // The edit shows in the history.
    let history = db.graph(&["history", &thread]).expect(0);
    assert!(history.stdout.contains("update"), "{history}");
}

#[test]
fn update_refuses_bad_edits_and_changes_nothing() {
    let db = Db::new();
    let thread = db.paused_thread();
    let before = db.graph(&["history", &thread, "--json"]).expect(0).json();
    db.graph(&["update", &thread, "--set-json", r#"{"revisions": "many"}"#])
        .expect(2)
        .stderr_has(&["--set-json", "field `revisions` expects a whole number"]);
    db.graph(&["update", &thread, "--set-json", r#"{"nope": 1}"#])
        .expect(2)
        .stderr_has(&["--set-json", "the state has no field `nope`"]);
    db.graph(&["update", &thread, "--set-json", "{"])
        .expect(2)
        .stderr_has(&["line 1 column 1"]);
    db.graph(&["update", &thread, "--set-json", "{}", "--as-node", "nobody"])
        .expect(2)
        .stderr_has(&["no node named `nobody`"]);
    db.graph(&["update", "ghost", "--set-json", "{}"])
        .expect(2)
        .stderr_has(&[
            "no thread `ghost`",
            &format!(
                "list the threads there are with:\n  graph threads --db {}",
                db.path().display()
            ),
        ]);
    let after = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(before, after);
}

#[test]
fn fork_copies_a_checkpoint_into_a_new_thread_and_leaves_the_old_one() {
    let db = Db::new();
    let thread = db.finished_thread();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    // The checkpoint after the drafts, before review.
    let at = history
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["next"] == json!(["review"]))
        .unwrap()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = db
        .graph(&["fork", &thread, "--checkpoint", &at, "--to", "copy"])
        .expect(0);
    assert_eq!(out.stdout.trim(), "copy");
    let copy = db.graph(&["state", "copy", "--json"]).expect(0).json();
    assert_eq!(copy["next"], json!(["review"]));
    assert_eq!(copy["values"]["document"], json!(null));
    // The copy remembers --yes from the original run, so it publishes without a pause.
    let done = db.graph(&["resume", "copy"]).expect(0);
    assert!(done.stdout.starts_with("# A short guide to sled"), "{done}");
    assert_eq!(
        db.graph(&["history", &thread, "--json"]).expect(0).json(),
        history
    );

    db.graph(&["fork", &thread, "--checkpoint", &at, "--to", "copy"])
        .expect(2)
        .stderr_has(&["already exists"]);
    db.graph(&["fork", &thread, "--checkpoint", "not-an-id"])
        .expect(2)
        .stderr_has(&["not a checkpoint id"]);
    let unknown = "01a20197-0000-7000-8000-000000000000";
    let history = format!(
        "list its checkpoints with:\n  graph history {thread} --db {}",
        db.path().display()
    );
    db.graph(&["fork", &thread, "--checkpoint", unknown])
        .expect(2)
        .stderr_has(&["has no checkpoint", &history]);
    db.graph(&["state", &thread, "--checkpoint", unknown])
        .expect(2)
        .stderr_has(&["has no checkpoint"]);
}

#[test]
fn rerun_replays_from_a_node_on_a_new_branch() {
    let db = Db::new();
    let thread = db.finished_thread();
    let out = db.graph(&["rerun", &thread, "--from", "publish"]).expect(0);
    assert!(out.stdout.starts_with("# A short guide to sled"), "{out}");
    assert!(
        out.stderr.contains("publish started") && !out.stderr.contains("draft"),
        "only publish ran again\n{out}"
    );
    // With a new setting, everything from the outline on is redone.
    let out = db
        .graph(&[
            "rerun",
            &thread,
            "--from",
            "outline",
            "--set",
            "title=Second {topic}",
        ])
        .expect(0);
    assert!(out.stdout.starts_with("# Second sled"), "{out}");
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert!(history
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["metadata"]["source"] == "fork"));
    db.graph(&["rerun", &thread, "--from", "nowhere"])
        .expect(2)
        .stderr_has(&["no node named `nowhere`"]);
    db.graph(&["rerun", "ghost", "--from", "draft"])
        .expect(2)
        .stderr_has(&["no thread `ghost`"]);
}

#[test]
fn delete_removes_a_thread_and_unknown_threads_are_exit_2() {
    let db = Db::new();
    let thread = db.finished_thread();
    db.graph(&["delete", &thread]).expect(0);
    assert!(!db.path().join("threads").join(&thread).exists());
    db.graph(&["threads"]).expect(0).stderr_has(&["no threads"]);
    for args in [
        vec!["delete", thread.as_str()],
        vec!["state", thread.as_str()],
        vec!["history", thread.as_str()],
        vec!["resume", thread.as_str()],
    ] {
        db.graph(&args).expect(2).stderr_has(&["no thread"]);
    }
}

#[test]
fn prune_keeps_the_newest_checkpoints_and_the_thread_still_reads() {
    let db = Db::new();
    let thread = db.finished_thread();
    let paused = db.paused_thread();
    let out = db
        .graph(&["prune", "--keep", "2", "--json"])
        .expect(0)
        .json();
    assert_eq!(out["removed"], 3 + 1);
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(history.as_array().unwrap().len(), 2);
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert!(state["values"]["document"]
        .as_str()
        .unwrap()
        .starts_with("# A short guide"));
    // A pruned paused thread still resumes.
    db.graph(&["resume", &paused, "--resume", "yes"]).expect(0);
    db.graph(&["prune", "--thread", "ghost"]).expect(2);
}

#[test]
fn prune_of_a_thread_with_a_large_state_says_what_it_removed_and_finds_no_false_damage() {
    // A 512 000-character topic: its snapshots are kept as shared pieces under a multi-level
    // index, which prune's sweep of unused pieces reads (issue 30, item 5).
    let db = Db::new();
    let input = db.path().join("big.json");
    std::fs::write(&input, json!({"topic": "x".repeat(512_000)}).to_string()).unwrap();
    let args = ["run", "pipeline", "--thread", "bsz", "--input-file"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend([input.to_str().unwrap(), "--yes", "--set", "step_ms=1"]);
    db.graph(&args).expect(0);
    let rows = |db: &Db| {
        let history = db.graph(&["history", "bsz", "--json"]).expect(0).json();
        history.as_array().unwrap().len()
    };
    let before = rows(&db);
    assert!(before > 2, "{before}");

    let pruned = db
        .graph(&["prune", "--thread", "bsz", "--keep", "2"])
        .expect(0);
    let text = format!("{}{}", pruned.stdout, pruned.stderr);
    assert!(
        !text.contains("skipped") && !text.contains("damaged"),
        "{text}"
    );
    let removed = format!("removed {} checkpoint(s)", before - 2);
    assert!(text.contains(&format!("bsz: {removed}")), "{text}");
    assert_eq!(rows(&db), 2);

    let pruned = db
        .graph(&["prune", "--thread", "bsz", "--keep", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(pruned["removed"], 1, "{pruned}");
    assert_eq!(pruned["threads"][0]["removed"], 1, "{pruned}");
    assert!(pruned["threads"][0].get("skipped").is_none(), "{pruned}");
    assert_eq!(rows(&db), 1);
    // The thread is fine, and reads whole.
    let listed = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "done", "{listed}");
    let state = db.graph(&["state", "bsz", "--json"]).expect(0).json();
    assert_eq!(state["values"]["topic"].as_str().unwrap().len(), 512_000);
}

#[test]
fn graphs_lists_what_can_run_and_draw_shows_it() {
    let db = Db::new();
    let list = db.graph(&["graphs"]).expect(0);
    assert!(
        list.stdout.contains("--input fills `company`")
            && list.stdout.contains("--input fills `topic`"),
        "{list}"
    );
    let json = db.graph(&["graphs", "--json"]).expect(0).json();
    let pipeline = json
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "pipeline")
        .unwrap_or_else(|| panic!("no pipeline in {json}"));
    assert_eq!(
        pipeline["nodes"],
        json!(["outline", "draft", "review", "publish"])
    );
    let mermaid = db.graph(&["draw", "pipeline"]).expect(0);
    assert!(
        mermaid.stdout.starts_with("graph TD;") && mermaid.stdout.contains("approved?"),
        "{mermaid}"
    );
    let dot = db.graph(&["draw", "pipeline", "--format", "dot"]).expect(0);
    assert!(dot.stdout.starts_with("digraph \"pipeline\""), "{dot}");
    db.graph(&["draw", "nosuch"])
        .expect(2)
        .stderr_has(&["no graph named `nosuch`"]);
}

#[test]
fn a_store_that_cannot_be_opened_is_a_clear_failure() {
    let db = Db::new();
    let file = db.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let out = harness::TestCommand::bare(&[
        "--db",
        file.to_str().unwrap(),
        "run",
        "pipeline",
        "--input",
        "x",
    ])
    .expect(1);
    out.stderr_has(&["cannot open the store", "not a directory"]);
}

#[test]
fn a_damaged_checkpoint_is_reported_not_read_as_something_else() {
    let db = Db::new();
    let thread = db.finished_thread();
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    let newest: uuid::Uuid = history[0]["checkpoint_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    {
        let store =
            SledCheckpointer::open_with(db.store_dir(&thread), SledOptions::small()).unwrap();
        store
            .tamper(&thread, newest, |bytes| {
                let last = bytes.len() - 2;
                bytes[last] ^= 0x20;
            })
            .unwrap();
        futures::executor::block_on(stategraph::checkpoint::Checkpointer::flush(&store)).unwrap();
    }
    let out = db.graph(&["state", &thread]).expect(1);
    out.stderr_has(&["checkpoint store is damaged", "checksum mismatch"]);
    // Older checkpoints still read.
    let older = history[1]["checkpoint_id"].as_str().unwrap();
    db.graph(&["state", &thread, "--checkpoint", older])
        .expect(0);
}

#[test]
fn a_damaged_or_missing_index_never_hides_an_intact_thread() {
    let db = Db::new();
    let thread = db.finished_thread();
    let index = db.path().join("threads").join(&thread).join("index.json");
    assert!(index.exists(), "the run indexed its thread");
    for damage in [Some("{not json"), None] {
        match damage {
            Some(text) => std::fs::write(&index, text).unwrap(),
            None => std::fs::remove_file(&index).unwrap(),
        }
        let listed = db.graph(&["threads", "--json"]).expect(0).json();
        assert_eq!(listed[0]["thread_id"], thread.as_str());
        assert_eq!(listed[0]["status"], "done");
        assert_eq!(listed[0]["step"], 4);
        db.graph(&["state", &thread]).expect(0);
    }
}
