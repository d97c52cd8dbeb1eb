//! The research agent remembers a user across threads through the real `graph` binary: with
//! `--set memory.enabled=true` each run's question is kept in the long-term store beside the
//! threads, the next run's planner is shown it, and `graph store` lists it. Against a stand-in
//! OpenAI-compatible server on 127.0.0.1 and a local corpus.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../tests/support/research_agent.rs"]
mod research_support;

use research::{Research, QUESTION};

#[test]
fn a_second_thread_plans_knowing_the_first_threads_question() {
    let r = Research::new();
    let corpus = format!("search.corpus={}", r.docs.path().display());
    let memory = [
        "--set",
        "memory.enabled=true",
        "--set",
        "memory.user=ada",
        "--yes",
    ];
    let first = r.run(&memory).expect(0);
    let mut second = vec![
        "run",
        "research",
        "--input",
        "Is sled durable after a crash?",
    ];
    second.extend(["--set", corpus.as_str()]);
    second.extend(memory);
    let second = r.graph(&second).expect(0);

    let plans: Vec<String> = r
        .server
        .calls()
        .into_iter()
        .filter(|c| c.kind == "Plan")
        .map(|c| c.body["messages"].to_string())
        .collect();
    assert_eq!(plans.len(), 2);
    assert!(!plans[0].contains("earlier conversations"), "{}", plans[0]);
    assert!(
        plans[1].contains("earlier conversations") && plans[1].contains(QUESTION),
        "{}",
        plans[1]
    );

    let kept = r
        .graph(&["store", "search", "memories/ada", "--json"])
        .expect(0)
        .json();
    let threads: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        threads,
        [second.thread(), first.thread()],
        "newest first, one per thread"
    );
}
