//! A todo split into sub-todos is run once more when they are all done: as a synthesis, its
//! summary written from their findings and the sources they cited, with no search of its own.

#[path = "research_support.rs"]
mod support;

use serde_json::json;
use stategraph::agents::research::{PlanStateUpdate, Status};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

#[tokio::test]
async fn a_split_todo_whose_sub_todos_are_done_is_synthesised_from_their_findings() {
    let docs = corpus();
    let plan = json!({"todos": [
        {"id": "t1", "task": "How does sled make writes durable", "kind": "research", "dependencies": []},
        {"id": "t2", "task": "What is the Tokio runtime", "kind": "research", "dependencies": []}
    ]});
    // t1's first two results are refused, so it is split; everything after that is accepted.
    let t1_reviews = Arc::new(AtomicUsize::new(0));
    let fake = model(
        plan,
        Arc::new(move |id| {
            if id == "t1" && t1_reviews.fetch_add(1, Ordering::SeqCst) < 2 {
                failed()
            } else {
                done()
            }
        }),
    );
    let out = compiled(fake.clone())
        .invoke(
            PlanStateUpdate::default().question("durability?"),
            config(docs.path(), "synthesis").setting("yes", true),
        )
        .await
        .unwrap();
    let s = &out.state;
    let (t1, a, b) = (
        s.todo("t1").unwrap(),
        s.todo("t1.1").unwrap(),
        s.todo("t1.2").unwrap(),
    );
    assert_eq!((a.status, b.status), (Status::Done, Status::Done));
    assert_eq!(t1.status, Status::Done, "{:?}", t1.failure_reason);
    assert_eq!(
        t1.tools_used.last().map(String::as_str),
        Some("synthesis"),
        "the last attempt searched nothing: {:?}",
        t1.tools_used
    );
    let cited: BTreeSet<usize> = a.source_ids.iter().chain(&b.source_ids).copied().collect();
    assert!(!cited.is_empty());
    assert_eq!(
        t1.source_ids.iter().copied().collect::<BTreeSet<_>>(),
        cited,
        "the synthesis cites what its sub-todos cited"
    );

    // The synthesis's request carries the sub-todos' findings.
    let requests = fake.requests();
    let synthesis = requests
        .iter()
        .rev()
        .find(|r| kind_of(r) == "Summary" && task_of(r).as_deref() == Some(t1.task.as_str()))
        .expect("a summary request for t1");
    let user = &synthesis.messages[1].content;
    for sub in [a, b] {
        assert!(
            user.contains(&format!("Sub-task {} ({}): ", sub.id, sub.task)),
            "{user}"
        );
        assert!(
            user.contains(sub.result.as_deref().unwrap()),
            "{} is missing from: {user}",
            sub.id
        );
    }
}
