//! A parent's state with its children nested, a child namespace's history and edits, and
//! forks that carry children: a fork of a run paused inside a child, and a fork from a
//! checkpoint inside a child (namespaced time travel), on every backend.

use crate::checks::subgraphs::{chain, parent_of, per_item, qa_graph, two_levels, QaUpdate};
use crate::common::{entries, strings, Log, LogUpdate, Probe};
use serde_json::json;
use stategraph::checkpoint::Checkpointer;
use stategraph::runtime::{
    Context, HistoryQuery, NodeError, Resume, RunConfig, RunError, RunStatus,
};
use stategraph::{StateGraph, END, START};
use std::sync::Arc;

pub async fn a_paused_run_shows_each_childs_state_under_its_task(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = per_item(&probe, true, &["a", "b"])
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    assert!(graph
        .get_state("t", None)
        .await
        .unwrap()
        .subgraphs
        .is_empty());

    let state = graph.get_state_with_subgraphs("t", None).await.unwrap();
    let children: Vec<_> = state
        .subgraphs
        .iter()
        .map(|c| (c.node.as_str(), c.task, c.declared))
        .collect();
    assert_eq!(children, vec![("research", 0, true), ("research", 1, true)]);
    for (child, question) in state.subgraphs.iter().zip(["a", "b"]) {
        assert!(child.thread.starts_with("t/research:"), "{}", child.thread);
        assert_eq!(child.state.values["question"], json!(question));
        assert_eq!(
            child.state.values["trail"],
            json!([format!("think {question}")])
        );
        assert_eq!(child.state.next, strings(&["ask"]));
        assert_eq!(child.state.interrupts.len(), 1);
        assert_eq!(
            child.state.interrupts[0].payload,
            json!(format!("answer {question}?"))
        );
        // The same child read by its path.
        let direct = graph.subgraph_state(&child.thread, None).await.unwrap();
        assert_eq!(direct.values, child.state.values);
        assert_eq!(direct.checkpoint_id, child.state.checkpoint_id);
    }
}

pub async fn a_grandchilds_state_is_nested_under_its_child(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = two_levels(&probe).with_checkpointer(saver.clone());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let state = graph.get_state_with_subgraphs("t", None).await.unwrap();
    assert_eq!(state.next, strings(&["child"]));
    let [child] = state.subgraphs.as_slice() else {
        panic!("one child expected: {:?}", state.subgraphs);
    };
    assert_eq!(child.state.next, strings(&["inner"]));
    assert_eq!(child.state.values["steps"], json!(["before", "m1"]));
    let [grandchild] = child.state.subgraphs.as_slice() else {
        panic!("one grandchild expected: {:?}", child.state.subgraphs);
    };
    assert_eq!(grandchild.node, "inner");
    assert!(
        grandchild
            .thread
            .starts_with(&format!("{}/inner:", child.thread)),
        "{}",
        grandchild.thread
    );
    assert_eq!(grandchild.state.next, strings(&["asker"]));
    assert_eq!(
        grandchild.state.values["steps"],
        json!(["before", "m1", "prep"])
    );
    assert_eq!(grandchild.state.interrupts[0].payload, json!("first?"));
}

/// A node that runs `qa` itself; declared with `NodeSpec::subgraph` when `declare`.
fn runs_qa_itself(probe: &Probe, declare: bool) -> StateGraph<Log> {
    let qa = qa_graph(probe, true);
    let mut g = StateGraph::<Log>::named("caller");
    let run = qa.clone();
    let mut spec = g.add_node("asks", move |_s: Arc<Log>, ctx: Context| {
        let qa = run.clone();
        async move {
            let out = ctx
                .run_subgraph(&qa, QaUpdate::default().question("one".to_string()))
                .await?;
            Ok::<_, NodeError>(LogUpdate::default().steps(vec![out.answer]))
        }
    });
    if declare {
        spec.subgraph(&qa);
    }
    g.add_edge(START, "asks").add_edge("asks", END);
    g
}

pub async fn an_undeclared_child_is_listed_without_its_values(saver: Arc<dyn Checkpointer>) {
    for declare in [false, true] {
        let probe = Probe::default();
        let graph = runs_qa_itself(&probe, declare)
            .compile()
            .unwrap()
            .with_checkpointer(saver.clone());
        let thread = format!("t-{declare}");
        graph
            .invoke(entries(&[]), RunConfig::new().thread(&thread))
            .await
            .unwrap();
        let state = graph.get_state_with_subgraphs(&thread, None).await.unwrap();
        let [child] = state.subgraphs.as_slice() else {
            panic!("one child expected: {:?}", state.subgraphs);
        };
        assert_eq!(child.declared, declare);
        assert_eq!(child.state.next, strings(&["ask"]));
        assert_eq!(child.state.interrupts.len(), 1);
        if declare {
            assert_eq!(child.state.values["question"], json!("one"));
        } else {
            assert_eq!(child.state.values, serde_json::Value::Null);
            let err = graph
                .update_subgraph_state(&child.thread, json!({"question": "x"}), None)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("NodeSpec::subgraph"), "{err}");
        }
    }
}

pub async fn a_paused_childs_state_is_edited_and_the_resume_uses_it(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = per_item(&probe, true, &["q"])
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let state = graph.get_state_with_subgraphs("t", None).await.unwrap();
    let child = state.subgraphs[0].thread.clone();

    // The child's own history, newest first: the step before `ask`, then its input.
    let history = graph
        .history(&child, HistoryQuery::default())
        .await
        .unwrap();
    let next: Vec<_> = history.iter().map(|h| h.next.clone()).collect();
    assert_eq!(next, vec![strings(&["ask"]), strings(&["think"])]);

    let bad = graph
        .update_subgraph_state(&child, json!({"question": 5}), None)
        .await
        .unwrap_err();
    assert!(
        matches!(bad, RunError::InvalidInput(_)) && bad.to_string().contains("question"),
        "{bad}"
    );
    graph
        .update_subgraph_state(&child, json!({"question": "edited"}), None)
        .await
        .unwrap();
    let edited = graph.subgraph_state(&child, None).await.unwrap();
    assert_eq!(edited.values["question"], json!("edited"));
    assert_eq!(
        edited.next,
        strings(&["ask"]),
        "the child still waits at ask"
    );
    assert_eq!(
        graph
            .history(&child, HistoryQuery::default())
            .await
            .unwrap()
            .len(),
        3
    );

    let out = graph
        .resume("t", Resume::value("42").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["edited=42"]));
    assert_eq!(
        probe.runs("think"),
        1,
        "the child's finished step did not run again"
    );
}

pub async fn a_fork_of_a_run_paused_inside_a_child_resumes_inside_it(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = two_levels(&probe).with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let paused_at = out.checkpoint_id.unwrap();
    graph.fork("t", paused_at, Some("f".into())).await.unwrap();

    let forked = graph.get_state_with_subgraphs("f", None).await.unwrap();
    assert_eq!(
        forked.interrupts.len(),
        1,
        "the fork waits for the same answer"
    );
    let grandchild = &forked.subgraphs[0].state.subgraphs[0];
    assert!(
        grandchild.thread.starts_with("f/child:"),
        "{}",
        grandchild.thread
    );
    assert_eq!(grandchild.state.next, strings(&["asker"]));

    for answer in ["one", "two"] {
        graph
            .resume("f", Resume::value(answer).unwrap(), RunConfig::new())
            .await
            .unwrap();
    }
    let done = graph.get_state("f", None).await.unwrap();
    assert!(done.next.is_empty());
    assert_eq!(
        done.values.steps,
        strings(&["before", "m1", "prep", "one+two", "after"])
    );
    for node in ["before", "m1", "prep"] {
        assert_eq!(probe.runs(node), 1, "{node} ran again in the fork");
    }
    // The source thread still waits where it was.
    let source = graph.get_state_with_subgraphs("t", None).await.unwrap();
    assert_eq!(source.checkpoint_id, paused_at);
    assert_eq!(
        source.subgraphs[0].state.subgraphs[0].state.next,
        strings(&["asker"])
    );
}

pub async fn a_fork_from_a_checkpoint_inside_a_child_reruns_only_what_follows_it(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let child = chain(&probe, &["a", "b", "c"]).compile().unwrap();
    let graph = parent_of(&probe, child)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(
        out.state.steps,
        strings(&["before", "a", "b", "c", "after"])
    );

    // The parent's checkpoint from which `child` ran lists the child it started.
    let history = graph.history("t", HistoryQuery::default()).await.unwrap();
    let ran_child = history
        .iter()
        .find(|h| h.next == strings(&["child"]))
        .unwrap();
    let at = graph
        .get_state_with_subgraphs("t", Some(ran_child.checkpoint_id))
        .await
        .unwrap();
    let thread = at.subgraphs[0].thread.clone();
    assert!(at.subgraphs[0].state.next.is_empty(), "the child finished");

    // Back to the child's checkpoint before `b`.
    let child_history = graph
        .history(&thread, HistoryQuery::default())
        .await
        .unwrap();
    let before_b = child_history
        .iter()
        .find(|h| h.next == strings(&["b"]))
        .unwrap();
    graph
        .fork(&thread, before_b.checkpoint_id, Some("f".into()))
        .await
        .unwrap();
    let forked = graph.get_state_with_subgraphs("f", None).await.unwrap();
    assert_eq!(forked.next, strings(&["child"]));
    assert_eq!(forked.values.steps, strings(&["before"]));
    assert_eq!(forked.subgraphs[0].state.next, strings(&["b"]));
    assert_eq!(
        forked.subgraphs[0].state.values["steps"],
        json!(["before", "a"])
    );

    let out = graph
        .resume("f", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.steps,
        strings(&["before", "a", "b", "c", "after"])
    );
    let runs: Vec<usize> = ["before", "a", "b", "c", "after"]
        .iter()
        .map(|n| probe.runs(n))
        .collect();
    assert_eq!(runs, vec![1, 1, 2, 2, 2], "{:?}", probe.all_runs());
    // The source is untouched.
    let source = graph.get_state("t", None).await.unwrap();
    assert_eq!(source.values.steps, out.state.steps);
    assert!(source.next.is_empty());

    let err = graph
        .fork("t/child:00000000", before_b.checkpoint_id, Some("g".into()))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::CheckpointNotFound { .. }), "{err}");
}
