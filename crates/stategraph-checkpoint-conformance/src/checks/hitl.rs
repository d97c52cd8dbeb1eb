//! Human in the loop: static breakpoints (on the graph or per run), dynamic interrupts resumed
//! with a value (the node runs again from its start and receives it), several interrupts
//! answered by id, and answers that are consumed once.

use crate::backends::Backend;
use crate::common::Probe;
use crate::common::{entries, linear, strings, Log, LogUpdate};
use stategraph::checkpoint::InterruptWhen;
use stategraph::graph::GraphError;
use stategraph::runtime::{
    Context, NodeError, Resume, ResumeError, RunConfig, RunError, RunStatus, ThreadStatus,
};
use stategraph::{StateGraph, END, START};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The pauses of an interrupted run: (node, kind).
fn pauses(status: &RunStatus) -> Vec<(String, InterruptWhen)> {
    match status {
        RunStatus::Interrupted { interrupts, .. } => interrupts
            .iter()
            .map(|i| (i.node.clone(), i.when))
            .collect(),
        RunStatus::Done => Vec::new(),
    }
}

pub async fn breakpoints_on_the_compiled_graph(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b", "c", "d"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver())
        .interrupt_before(["b"])
        .unwrap()
        .interrupt_after(["c"])
        .unwrap();

    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(
        pauses(&out.status),
        vec![("b".to_string(), InterruptWhen::Before)]
    );
    assert_eq!(probe.runs("b"), 0);
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(
        (state.next.clone(), state.interrupts.len()),
        (strings(&["b"]), 1)
    );
    assert_eq!(
        graph.threads().await.unwrap()[0].status,
        ThreadStatus::Paused
    );

    // Continue: b runs, c runs, then the run pauses after c.
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        pauses(&out.status),
        vec![("c".to_string(), InterruptWhen::After)]
    );
    assert_eq!(
        graph.get_state("t", None).await.unwrap().next,
        strings(&["d"])
    );

    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["a", "b", "c", "d"]));
    assert_eq!(
        [
            probe.runs("a"),
            probe.runs("b"),
            probe.runs("c"),
            probe.runs("d")
        ],
        [1, 1, 1, 1]
    );
}

pub async fn breakpoints_for_one_run(backend: &dyn Backend) {
    let probe = Probe::default();
    let graph = linear(&probe, &["a", "b", "c"])
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());

    let out = graph
        .invoke(
            entries(&[]),
            RunConfig::new().thread("t").interrupt_after(["a"]),
        )
        .await
        .unwrap();
    assert_eq!(
        pauses(&out.status),
        vec![("a".to_string(), InterruptWhen::After)]
    );
    let out = graph
        .resume(
            "t",
            Resume::Continue,
            RunConfig::new().interrupt_before(["c"]),
        )
        .await
        .unwrap();
    assert_eq!(
        pauses(&out.status),
        vec![("c".to_string(), InterruptWhen::Before)]
    );
    // A run without breakpoints goes to the end: they were for those runs only.
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["a", "b", "c"]));

    let err = graph
        .invoke(entries(&[]), RunConfig::new().interrupt_before(["nope"]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Graph(GraphError::UnknownNode { .. })),
        "{err:?}"
    );
}

pub async fn a_dynamic_interrupt_reruns_the_node_with_the_answer(backend: &dyn Backend) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<Log>::new();
    let count = runs.clone();
    g.add_node("review", move |state: Arc<Log>, ctx: Context| {
        count.fetch_add(1, Ordering::SeqCst);
        async move {
            // Everything above this line runs again on resume.
            let verdict: String = ctx
                .interrupt(serde_json::json!({"approve": state.steps}))
                .await?;
            Ok::<_, NodeError>(LogUpdate::default().steps(vec![format!("review: {verdict}")]))
        }
    });
    g.add_edge(START, "review").add_edge("review", END);
    let graph = g.compile().unwrap().with_checkpointer(backend.saver());

    let out = graph
        .invoke(entries(&["draft"]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, next } = &out.status else {
        panic!("expected a pause, got {:?}", out.status)
    };
    assert_eq!(next, &strings(&["review"]));
    assert_eq!(interrupts.len(), 1);
    assert_eq!(
        (interrupts[0].node.as_str(), interrupts[0].when),
        ("review", InterruptWhen::Dynamic)
    );
    assert_eq!(
        interrupts[0].payload,
        serde_json::json!({"approve": ["draft"]})
    );
    assert_eq!(
        graph.get_state("t", None).await.unwrap().interrupts,
        interrupts.clone()
    );

    // The person answers; the node runs again from its start and gets the answer this time.
    let done = graph
        .resume("t", Resume::value("ship it").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.state.steps, strings(&["draft", "review: ship it"]));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(graph
        .get_state("t", None)
        .await
        .unwrap()
        .interrupts
        .is_empty());

    // Nothing waits any more, so a value has nothing to answer.
    let err = graph
        .resume("t", Resume::value("again").unwrap(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Resume(ResumeError::NothingToAnswer { .. })),
        "{err:?}"
    );
}

/// `START -> (ask_a, ask_b) -> END`: both ask a person in the same superstep.
fn two_questions(runs: &Arc<[AtomicUsize; 2]>) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for (i, name) in ["ask_a", "ask_b"].into_iter().enumerate() {
        let runs = runs.clone();
        g.add_node(name, move |_s: Arc<Log>, ctx: Context| {
            runs[i].fetch_add(1, Ordering::SeqCst);
            async move {
                let answer: String = ctx.interrupt(format!("question from {name}")).await?;
                Ok::<_, NodeError>(LogUpdate::default().steps(vec![format!("{name}: {answer}")]))
            }
        });
        g.add_edge(START, name).add_edge(name, END);
    }
    g
}

pub async fn several_interrupts_are_answered_by_id(backend: &dyn Backend) {
    let runs: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let graph = two_questions(&runs)
        .compile()
        .unwrap()
        .with_checkpointer(backend.saver());
    let count = |i: usize| runs[i].load(Ordering::SeqCst);

    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("expected a pause")
    };
    let ids: BTreeMap<String, String> = interrupts
        .iter()
        .map(|i| (i.node.clone(), i.id.clone()))
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids["ask_a"], ids["ask_b"]);

    // A bare value is ambiguous when two interrupts wait; nothing runs.
    let err = graph
        .resume("t", Resume::value("yes").unwrap(), RunConfig::new())
        .await
        .unwrap_err();
    match err {
        RunError::Resume(ResumeError::Ambiguous { ids: listed, .. }) => {
            let mut expected: Vec<String> = ids.values().cloned().collect();
            let mut listed = listed.clone();
            expected.sort();
            listed.sort();
            assert_eq!(listed, expected);
        }
        other => panic!("expected Ambiguous, got {other:?}"),
    }
    // An id that is not pending is refused too.
    let unknown = Resume::ById([("no-such-id".to_string(), serde_json::json!("x"))].into());
    let err = graph
        .resume("t", unknown, RunConfig::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Resume(ResumeError::UnknownInterrupt { .. })),
        "{err:?}"
    );
    assert_eq!((count(0), count(1)), (1, 1));

    // Answer one by id: it completes, the other asks again.
    let first = Resume::ById([(ids["ask_a"].clone(), serde_json::json!("A"))].into());
    let out = graph.resume("t", first, RunConfig::new()).await.unwrap();
    assert_eq!(
        pauses(&out.status),
        vec![("ask_b".to_string(), InterruptWhen::Dynamic)]
    );
    let state = graph.get_state("t", None).await.unwrap();
    let waiting: Vec<&str> = state.interrupts.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        waiting,
        vec![ids["ask_b"].as_str()],
        "only ask_b's interrupt waits"
    );
    assert_eq!(state.completed, strings(&["ask_a"]));

    // One interrupt waits now, so a bare value answers it.
    let done = graph
        .resume("t", Resume::value("B").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.state.steps, strings(&["ask_a: A", "ask_b: B"]));
    // ask_a: asked, then answered. ask_b: asked, asked again, answered.
    assert_eq!((count(0), count(1)), (2, 3));
}

pub async fn a_consumed_answer_is_never_delivered_again(backend: &dyn Backend) {
    // One node asking twice in one run: the first answer is not reused for the second question.
    let mut g = StateGraph::<Log>::new();
    g.add_node("form", |_s: Arc<Log>, ctx: Context| async move {
        let name: String = ctx.interrupt("name?").await?;
        let email: String = ctx.interrupt("email?").await?;
        Ok::<_, NodeError>(LogUpdate::default().steps(vec![name, email]))
    });
    g.add_edge(START, "form").add_edge("form", END);
    let graph = g.compile().unwrap().with_checkpointer(backend.saver());

    graph
        .invoke(entries(&[]), RunConfig::new().thread("form"))
        .await
        .unwrap();
    let out = graph
        .resume("form", Resume::value("Ada").unwrap(), RunConfig::new())
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("expected the second question")
    };
    assert_eq!(interrupts[0].payload, serde_json::json!("email?"));
    let done = graph
        .resume(
            "form",
            Resume::value("ada@example.com").unwrap(),
            RunConfig::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.state.steps, strings(&["Ada", "ada@example.com"]));

    // One node asking each time it runs, in a loop: each run asks afresh.
    let mut g = StateGraph::<Log>::new();
    g.add_node("ask", |_s: Arc<Log>, ctx: Context| async move {
        let answer: String = ctx.interrupt("next?").await?;
        Ok::<_, NodeError>(LogUpdate::default().steps(vec![answer]))
    });
    g.add_edge(START, "ask");
    g.add_conditional_edges(
        "ask",
        |s: &Log| if s.steps.len() < 3 { "ask" } else { END },
        ["ask", END],
    );
    let graph = g.compile().unwrap().with_checkpointer(backend.saver());

    let mut out = graph
        .invoke(entries(&[]), RunConfig::new().thread("loop"))
        .await
        .unwrap();
    for answer in ["one", "two", "three"] {
        assert!(
            out.is_interrupted(),
            "the node asks again instead of reusing an old answer"
        );
        out = graph
            .resume("loop", Resume::value(answer).unwrap(), RunConfig::new())
            .await
            .unwrap();
    }
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["one", "two", "three"]));
}
