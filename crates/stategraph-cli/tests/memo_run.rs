//! The memo pipeline run by the real `graph` binary on the bundled sample data room, offline
//! (no key): every stage runs once, in order, and the memo cites real files.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::Value;

const STAGES: [&str; 13] = [
    "deck_analyst",
    "research",
    "section_research",
    "draft",
    "enrich_trademark",
    "enrich_socials",
    "enrich_links",
    "enrich_visualizations",
    "cite",
    "validate_citations",
    "fact_check",
    "validate",
    "finalize",
];

fn values(db: &Db, thread: &str) -> Value {
    let out = db.graph(&["state", thread, "--json"]).expect(0);
    out.json()["values"].clone()
}

#[test]
fn offline_run_writes_a_cited_checked_memo_in_13_stages() {
    let db = Db::new();
    let out = db
        .graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .without_model()
        .expect(0);
    out.stderr_has(&[
        "offline mode: no model configured",
        "stage 13 of 13 · finalize",
    ]);
    for (k, stage) in STAGES.iter().enumerate() {
        let line = format!("stage {} of 13 · {stage} · ", k + 1);
        out.stderr_has(&[line.as_str()]);
    }
    let memo = &out.stdout;
    assert!(memo.starts_with("# Fernstone® — Investment Memo"), "{memo}");
    assert!(memo.contains("## 10. Risks and Recommendation"), "{memo}");
    assert!(memo.contains("[^1]"), "{memo}");
    assert!(memo.contains("linkedin.com/in/maren-okafor"), "{memo}");
    assert!(
        memo.contains("<!-- viz: bar chart \"ARR by quarter\""),
        "{memo}"
    );
    // The deck's 131% net revenue retention is not what the financials say (124%).
    assert!(
        memo.contains("the deck's Net revenue retention (131%) is not what the documents say"),
        "{memo}"
    );

    let v = values(&db, &out.thread());
    let log: Vec<&str> = v["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(log, STAGES, "each stage ran once, in order");
    assert_eq!(v["mode"], "offline");
    assert_eq!(v["sections"].as_array().unwrap().len(), 10);
    let validation = &v["validation"];
    let cites = &validation["citation_validation"];
    assert!(cites["total"].as_u64().unwrap() > 10);
    assert_eq!(cites["valid"], cites["total"], "{cites}");
    let facts = &validation["fact_check_results"];
    assert_eq!(
        facts["figures_supported"], facts["figures_checked"],
        "{facts}"
    );
    assert!(validation["overall_score"].as_f64().unwrap() >= 8.0);
    // Every citation names a file of the data room that holds the quoted passage.
    for c in v["citations"].as_array().unwrap() {
        let source = c["source"].as_str().unwrap();
        assert!(source.contains("examples/dataroom/fernstone/"), "{c}");
    }
}

#[test]
fn an_unknown_company_is_bad_input_refused_before_a_thread_or_a_folder_exists() {
    let db = Db::new();
    for (company, folder) in [("Nowhere Co", "nowhere-co"), ("Acme", "acme")] {
        let out = db
            .graph(&["run", "memo", "--input", company, "--yes"])
            .without_model()
            .expect(2);
        out.stderr_has(&[
            &format!("no data room for \"{company}\""),
            folder,
            // The rooms there are, so a misspelling is seen at once.
            "The data rooms there are for: fernstone",
            "--set dataroom=",
        ]);
    }
    // Nothing was made: no thread, no version folder named for the company.
    assert_eq!(db.thread_ids(), Vec::<String>::new());
    assert!(
        !db.out().exists(),
        "{:?}",
        std::fs::read_dir(db.out()).map(|d| d.count())
    );
}

/// Each maximal run of digits as one `0`: the shape of a line whose numbers vary.
fn shape(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('0') {
            out.push('0');
        }
    }
    out
}

/// `stage K of 13 · NAME · T.TTs · elapsed E.EEs · ...`: the numbers of a stage line.
fn stage_times(line: &str) -> (f64, f64) {
    let parts: Vec<&str> = line.split(" · ").collect();
    let secs = |p: &str| p.trim_end_matches('s').parse::<f64>().unwrap();
    (
        secs(parts[2]),
        secs(parts[3].strip_prefix("elapsed ").unwrap()),
    )
}

#[test]
fn a_stage_line_per_stage_as_the_readme_shows_it_its_time_with_its_wait() {
    let db = Db::new();
    let out = db
        .graph(&[
            "run",
            "memo",
            "--input",
            "Fernstone",
            "--yes",
            "--set",
            "stage_ms=120",
        ])
        .without_model()
        .expect(0);
    let lines: Vec<&str> = (out.stderr.lines())
        .filter(|l| l.starts_with("stage "))
        .collect();
    assert_eq!(lines.len(), 13, "one line per stage\n{out}");
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let shown = (readme.lines())
        .find(|l| l.starts_with("stage 9 of 13 · cite · "))
        .expect("the README shows the stage line of cite");
    assert_eq!(shape(lines[8]), shape(shown), "{out}");
    // Its time includes its wait, and elapsed adds the stages' times up.
    let mut sum = 0.0;
    for (k, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!("stage {} of 13 · {} · ", k + 1, STAGES[k])),
            "{line}"
        );
        assert!(line.contains(" · USD 0.0000 (offline mode)"), "{line}");
        let (time, elapsed) = stage_times(line);
        assert!(time >= 0.12, "the stage's wait is in its time: {line}");
        sum += time;
        assert!(
            (elapsed - sum).abs() <= 0.01 * (k + 1) as f64,
            "{line}\n{out}"
        );
        // The step's own log line says no less than the stage's.
        let done = format!("step {}: {} done in ", k + 1, STAGES[k]);
        let step_line = (out.stderr.lines())
            .find(|l| l.contains(&done))
            .unwrap_or_else(|| panic!("no {done:?}\n{out}"));
        let step_secs: f64 = step_line
            .rsplit(' ')
            .next()
            .unwrap()
            .trim_end_matches('s')
            .parse()
            .unwrap();
        assert!(step_secs + 0.01 >= time, "{line}\n{step_line}");
    }
}
