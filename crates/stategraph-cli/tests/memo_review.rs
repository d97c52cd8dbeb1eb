//! Review and validation of the memo pipeline, run by the real `graph` binary offline on copies
//! of the sample data room: a deck whose figures the documents contradict scores below 8 and
//! pauses for a person, whose notes send it back to `draft`; a cited passage removed from its
//! source is reported by `validate_citations`.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A copy of the sample data room under `dir/rooms/fernstone`, with `edit` applied to `file`.
fn room_copy(dir: &Path, file: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom/fernstone");
    let rooms = dir.join("rooms");
    let dst = rooms.join("fernstone");
    std::fs::create_dir_all(&dst).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = if name == file { edit(text) } else { text };
        std::fs::write(dst.join(&name), text).unwrap();
    }
    rooms
}

/// A deck whose traction and financials slides claim more than the documents show.
fn inflated(deck: String) -> String {
    [
        ("ARR: $3.1M", "ARR: $4.5M"),
        ("Customers: 17", "Customers: 25"),
        ("Gross margin: 68%", "Gross margin: 75%"),
        ("Monthly net burn: $410K", "Monthly net burn: $300K"),
        ("Cash: $5.3M", "Cash: $8M"),
        ("Runway: 13 months", "Runway: 26 months"),
        ("Headcount: 28", "Headcount: 35"),
    ]
    .iter()
    .fold(deck, |text, (from, to)| {
        assert!(text.contains(from), "the sample deck lost {from:?}");
        text.replace(from, to)
    })
}

fn values(db: &Db, thread: &str) -> Value {
    db.graph(&["state", thread, "--json"]).expect(0).json()["values"].clone()
}

fn count(log: &Value, stage: &str) -> usize {
    log.as_array()
        .unwrap()
        .iter()
        .filter(|x| x.as_str() == Some(stage))
        .count()
}

#[test]
fn below_8_pauses_for_review_notes_redraft_and_approval_finishes() {
    let db = Db::new();
    let rooms = room_copy(db.path(), "deck.md", inflated);
    let room = format!("dataroom={}", rooms.display());
    let paused = db
        .graph(&["run", "memo", "--input", "Fernstone", "--set", &room])
        .without_model()
        .expect(3);
    paused.stderr_has(&["below 8", "approve"]);
    let thread = paused.thread();
    let v = values(&db, &thread);
    let score = v["validation"]["overall_score"].as_f64().unwrap();
    assert!(score < 8.0, "the score is saved before the pause: {score}");
    assert_eq!(v["approved"], false);
    assert!(v["final_memo"].is_null());

    let notes = "Lead with the gap between the deck and the financial statements.";
    db.graph(&["resume", &thread, "--resume", notes])
        .without_model()
        .expect(3);
    let v = values(&db, &thread);
    assert_eq!(v["revisions"], 1);
    assert_eq!(v["review_notes"], notes);
    assert_eq!(count(&v["log"], "draft"), 2, "{}", v["log"]);
    assert_eq!(count(&v["log"], "deck_analyst"), 1, "{}", v["log"]);
    assert_eq!(
        count(&v["log"], "finalize"),
        1,
        "the pause left no run behind: {}",
        v["log"]
    );
    assert!(
        v["sections"][0]["body"].as_str().unwrap().contains(notes),
        "the redraft carries the notes"
    );

    let done = db
        .graph(&["resume", &thread, "--resume", "approve"])
        .without_model()
        .expect(0);
    let v = values(&db, &thread);
    let score = v["validation"]["overall_score"].as_f64().unwrap();
    assert!(score < 8.0, "{score}");
    assert_eq!(v["approved"], true);
    let contradicted = v["validation"]["fact_check_results"]["claims"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "contradicted")
        .count();
    assert!(contradicted >= 7, "{}", v["validation"]);
    assert!(done
        .stdout
        .contains("the deck's ARR ($4.5M (September 30, 2026)) is not what the documents say"));
    assert!(done.stdout.contains("redrafted after review: 1 time(s)"));
}

#[test]
fn yes_approves_a_memo_below_8() {
    let db = Db::new();
    let rooms = room_copy(db.path(), "deck.md", inflated);
    let room = format!("dataroom={}", rooms.display());
    let out = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            &room,
        ])
        .without_model()
        .expect(0);
    out.stderr_has(&["is below 8: approved by the `yes` setting"]);
}

#[test]
fn a_cited_passage_gone_from_its_source_is_reported() {
    let db = Db::new();
    let rooms = room_copy(db.path(), "none", |t| t);
    let room = format!("dataroom={}", rooms.display());
    // The run stops just before citations are checked (a pause, not a timed kill: it stops
    // there and nowhere else).
    let paused = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            &room,
            "--interrupt-before",
            "validate_citations",
        ])
        .without_model()
        .expect(3);
    let thread = paused.thread();
    // While the run is stopped, someone rewrites a line the memo cites.
    let financials = rooms.join("fernstone/financials.md");
    let text = std::fs::read_to_string(&financials).unwrap();
    let line = "Runway at current burn: 13 months.";
    assert!(text.contains(line));
    std::fs::write(
        &financials,
        text.replace(line, "Runway at current burn: 11 months."),
    )
    .unwrap();
    db.graph(&["resume", &thread, "--set", "stage_ms=0"])
        .without_model()
        .expect(0);
    let v = values(&db, &thread);
    let cites = &v["validation"]["citation_validation"];
    let problems = cites["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{cites}");
    assert!(problems[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("financials.md"));
    assert_eq!(
        problems[0]["problem"],
        "the cited passage is not in the source"
    );
    assert_eq!(
        cites["valid"].as_u64().unwrap() + 1,
        cites["total"].as_u64().unwrap()
    );
}
