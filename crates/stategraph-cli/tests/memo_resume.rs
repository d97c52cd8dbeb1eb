//! The memo pipeline killed with SIGKILL at each of its 13 stage boundaries, then resumed: the
//! memo is the one an uninterrupted run writes, and no finished stage ran again, offline (the
//! stage log in the state, the progress lines the resumed process printed) and in model mode
//! (the requests a stand-in OpenAI-compatible server received).

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;

use fake_openai::{Call, FakeOpenAi};
use harness::Db;
use serde_json::{json, Value};

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

/// How many stages a thread has saved: its newest checkpoint's step (step `k` follows stage `k`).
fn saved_stages(db: &Db, thread: &str) -> usize {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    state["step"].as_u64().expect("a step") as usize
}

fn log_of(db: &Db, thread: &str) -> Vec<String> {
    let state = db.graph(&["state", thread, "--json"]).expect(0).json();
    state["values"]["log"]
        .as_array()
        .expect("a log")
        .iter()
        .map(|x| x.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Runs the memo with a pause at each stage's start, kills it with SIGKILL once the checkpoint
/// before stage `k` (1-based) is saved, so the kill lands inside stage `k` (or, on a loaded
/// machine, a later one: [`saved_stages`] says where), and returns the thread.
fn killed_before(db: &Db, k: usize, model: Option<&str>) -> String {
    let cmd = db.graph(&[
        "run",
        "memo",
        "--input",
        "Fernstone",
        "--yes",
        "--set",
        "stage_ms=250",
    ]);
    let cmd = match model {
        Some(url) => cmd.with_model_at(url),
        None => cmd.without_model(),
    };
    let mut run = cmd.spawn();
    let thread = run.thread();
    run.wait_for(&format!("checkpoint saved; next: {}\n", STAGES[k - 1]));
    run.signal(libc::SIGKILL);
    let out = run.finish();
    assert_eq!(out.code, None, "killed by a signal\n{out}");
    thread
}

#[test]
fn a_kill_at_every_stage_boundary_resumes_to_the_same_memo_without_rerunning_a_stage() {
    let db = Db::new();
    let baseline = db
        .graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .without_model()
        .expect(0);
    let memo = baseline.stdout.clone();
    assert!(memo.contains("## Citations"), "{baseline}");
    for k in 1..=STAGES.len() {
        let thread = killed_before(&db, k, None);
        // What the store saved decides what runs again, not when the kill was sent.
        let saved = saved_stages(&db, &thread);
        assert!(
            saved + 1 >= k,
            "killed in stage {k}, yet only {saved} stages saved"
        );
        let resumed = db
            .graph(&["resume", &thread, "--set", "stage_ms=0"])
            .without_model()
            .expect(0);
        assert_eq!(
            resumed.stdout, memo,
            "killed in stage {k}: the resumed memo differs"
        );
        for (j, stage) in STAGES.iter().enumerate() {
            let line = format!("stage {} of 13 · {stage} · ", j + 1);
            assert_eq!(
                resumed.stderr.contains(&line),
                j + 1 > saved,
                "killed after {saved} saved stages: stage {} ran {} the resume\n{resumed}",
                j + 1,
                if j + 1 > saved { "not in" } else { "again in" }
            );
        }
        assert_eq!(
            log_of(&db, &thread),
            STAGES,
            "killed in stage {k}: each stage completed exactly once"
        );
    }
}

/// What the stand-in model says: a deck analysis, topic summaries, sections that cite the
/// evidence they were given, and a review.
fn respond(call: &Call) -> String {
    let user = call.body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    match call.kind.as_str() {
        "DeckAnalysis" => json!({
            "company": "Fernstone, Inc.", "tagline": "Cold storage that pays for its own electricity bill",
            "stage": "Series A", "raise": "$12M", "valuation": "$48M",
            "headquarters": "Denver, Colorado", "founded": "March 2022",
            "sector": "Climate tech", "website": "https://fernstone.example",
            "metrics": [{"name": "ARR", "value": "$3.1M"}, {"name": "Net revenue retention", "value": "131%"}],
            "team": [{"name": "Maren Okafor", "role": "CEO", "background": "11 years in cold storage"}],
            "competitors": ["Glacio Systems", "VoltKeep"],
            "use_of_funds": "45% engineering, 35% sales and marketing, 20% hardware working capital",
            "source": ""
        })
        .to_string(),
        "Review" => json!({"score": 9.0, "strengths": ["sourced"], "weaknesses": ["thin market data"]})
            .to_string(),
        _ if user.contains("\nSection: ") => {
            // Cite each piece of evidence offered: `[E3] (file:line) quote`.
            let cited: Vec<String> = user
                .lines()
                .filter_map(|l| {
                    let (id, rest) = l.strip_prefix('[')?.split_once("] (")?;
                    let (_, quote) = rest.split_once(") ")?;
                    Some(format!("{quote} [{id}]"))
                })
                .collect();
            format!("The analyst's reading of the evidence.\n\n{}", cited.join("\n\n"))
        }
        _ => "The passages agree with the deck on this topic.".to_string(),
    }
}

fn requests(server: &FakeOpenAi) -> Vec<String> {
    let mut keys: Vec<String> = server
        .calls()
        .iter()
        .map(|c| {
            let user = c.body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default();
            let about = user
                .lines()
                .find(|l| l.starts_with("Topic: ") || l.starts_with("Section: "))
                .unwrap_or_default();
            format!("{} {about}", c.kind)
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn model_mode_pays_for_each_call_once_across_kills() {
    let straight = FakeOpenAi::answering(respond);
    let db = Db::new();
    let baseline = db
        .graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .with_model_at(&straight.base_url())
        .expect(0);
    baseline.stderr_has(&["(model mode)", "stage 13 of 13 · finalize"]);
    let paid = requests(&straight);
    // 1 deck analysis + 6 topic summaries + 10 sections + 1 review.
    assert_eq!(paid.len(), 18, "{paid:#?}");
    let state = db
        .graph(&["state", &baseline.thread(), "--json"])
        .expect(0)
        .json();
    assert_eq!(state["values"]["mode"], "model");
    assert_eq!(
        state["values"]["validation"]["citation_validation"]["problems"],
        json!([]),
        "the model's citations all hold"
    );

    // Killed in `draft` (after the deck and research calls) and again in `validate`.
    let server = FakeOpenAi::answering(respond);
    let thread = killed_before(&db, 4, Some(&server.base_url()));
    let resumed = db
        .graph(&["resume", &thread, "--set", "stage_ms=250"])
        .with_model_at(&server.base_url())
        .spawn();
    let mut resumed = resumed;
    resumed.wait_for("checkpoint saved; next: validate\n");
    resumed.signal(libc::SIGKILL);
    resumed.finish();
    let done = db
        .graph(&["resume", &thread, "--set", "stage_ms=0"])
        .with_model_at(&server.base_url())
        .expect(0);
    assert_eq!(done.stdout, baseline.stdout, "the same memo");
    assert_eq!(requests(&server), paid, "no model call was paid for twice");
    let log: Value =
        db.graph(&["state", &thread, "--json"]).expect(0).json()["values"]["log"].clone();
    assert_eq!(log, json!(STAGES));
}

/// An exported `OPENAI_BASE_URL` (a local server's, no key) switches the keyless memo to model mode: the
/// first stage says so and why before it calls the model, and how to run without it;
/// `--set mode=offline` does, with the variable still set.
#[test]
fn an_exported_openai_base_url_is_named_as_what_put_the_memo_in_model_mode() {
    let server = FakeOpenAi::answering(respond);
    let db = Db::new();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "memo", "--input", "Fernstone", "--yes"];
        args.extend_from_slice(extra);
        db.graph(&args)
            .without_model()
            .env("OPENAI_BASE_URL", server.base_url())
            .env("GRAPH_MODEL", "local")
            .expect(0)
    };
    run(&[]).stderr_has(&[
        "stage 1 of 13 · deck_analyst",
        "model mode (OPENAI_BASE_URL is set; `--set mode=offline` runs without a model)",
    ]);
    assert_eq!(requests(&server).len(), 18);
    let offline = run(&["--set", "mode=offline"]);
    offline.stderr_has(&["offline mode: the setting `mode` is `offline`"]);
    assert!(!offline.stderr.contains("model mode"), "{offline}");
    assert_eq!(requests(&server).len(), 18, "no request when offline");
    // Said before the first call: also when the server is not there.
    db.graph(&["run", "memo", "--input", "Fernstone", "--yes"])
        .without_model()
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("GRAPH_MODEL", "local")
        .expect(1)
        .stderr_has(&[
            "model mode (OPENAI_BASE_URL is set; `--set mode=offline` runs without a model)",
            "cannot reach the model at http://127.0.0.1:9/v1",
        ]);
}
