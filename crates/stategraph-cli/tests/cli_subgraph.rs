//! Real processes: the pipeline's sections are drafted by a child graph per section (`section`:
//! write, then polish). A run killed with `kill -9` while its children work is seen child by
//! child (`graph state` nests them; `THREAD/draft:TASK` addresses one), and its resume goes on
//! inside each child: no finished child step runs again.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use std::time::{Duration, Instant};

/// The namespaces `graph state` lists under the thread (`subgraph    THREAD/draft:TASK ...`),
/// with the node each waits at.
fn children(db: &Db, thread: &str) -> Vec<(String, String)> {
    let out = db.graph(&["state", thread]).expect(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("subgraph ") {
            let path = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            let next = lines
                .get(i + 1)
                .and_then(|l| l.trim().strip_prefix("next"))
                .map(|n| n.trim().to_string())
                .unwrap_or_default();
            found.push((path, next));
        }
    }
    found
}

#[test]
fn a_run_killed_inside_its_section_children_resumes_in_each_child_without_writing_a_section_twice()
{
    let db = Db::new();
    // Section k's drafting takes (1 + k/4) steps of 1.2 s, half writing, half polishing.
    let mut run = db.run_pipeline(1200, &["--yes"]).spawn();
    let thread = run.thread();
    // Until the first section has written and waits to polish, while the others still write.
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let now = children(&db, &thread);
        if now.iter().any(|(_, next)| next == "polish") {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "no child reached polish: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    run.signal(libc::SIGKILL);
    run.finish();

    let after = children(&db, &thread);
    assert_eq!(after.len(), 3, "one child per section: {after:?}");
    assert!(after
        .iter()
        .all(|(path, _)| path.starts_with(&format!("{thread}/draft:"))));
    let (polishing, _) = after
        .iter()
        .find(|(_, next)| next == "polish")
        .unwrap_or_else(|| panic!("a child waits at polish after the kill: {after:?} ({seen:?})"));
    // One child addressed alone: its own history and state.
    let history = db.graph(&["history", polishing]).expect(0);
    assert!(history.stdout.contains("write"), "{history}");

    let done = db.graph(&["resume", &thread]).expect(0);
    assert!(done.stdout.contains("sled"), "{done}");
    // The child that had written went on at polish: write ran once in it.
    let child = db.graph(&["state", polishing, "--json"]).expect(0).json();
    assert_eq!(
        child["values"]["log"],
        serde_json::json!(["write", "polish"])
    );
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(
        state["values"]["log"],
        serde_json::json!(["outline", "draft 0", "draft 1", "draft 2", "review", "publish"])
    );
}

#[test]
fn draw_xray_shows_the_section_graph_inside_draft() {
    let db = Db::new();
    let out = db
        .graph(&["draw", "pipeline", "--format", "mermaid", "--xray"])
        .expect(0);
    for needle in ["subgraph draft", "draft__write", "draft__polish"] {
        assert!(out.stdout.contains(needle), "{needle}: {out}");
    }
}
