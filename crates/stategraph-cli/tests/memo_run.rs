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
fn an_unknown_company_says_where_its_data_room_should_be() {
    let db = Db::new();
    let out = db
        .graph(&["run", "memo", "--input", "Nowhere Co", "--yes"])
        .without_model()
        .output();
    assert_ne!(out.code, Some(0), "{out}");
    out.stderr_has(&[
        "no data room for `Nowhere Co`",
        "nowhere-co",
        "--set dataroom=",
    ]);
}
