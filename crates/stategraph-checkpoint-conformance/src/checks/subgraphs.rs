//! Subgraphs: a compiled graph as a node (same state), a mapped subgraph (another state) run
//! once per Send item, and a node that runs one itself. Their steps are checkpointed in the
//! parent's thread under a namespace (`{thread}/{node}:{task}`), pauses inside them pause the
//! whole run and are answered through it, failures name the path, and the namespaces go with
//! their thread.

use crate::common::{entries, strings, Log, LogUpdate, Probe};
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{Checkpointer, InterruptWhen, Source};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{
    Context, NodeError, Resume, RunConfig, RunError, RunStatus, Subgraph, ThreadPath,
};
use stategraph::{Send, State, StateGraph, END, START};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `START -> names... -> END` over `Log`, each node an appender.
pub(crate) fn chain(probe: &Probe, names: &[&str]) -> StateGraph<Log> {
    crate::common::linear(probe, names)
}

/// A node that appends the thread id it runs in, prefixed with `at:`.
fn where_am_i(g: &mut StateGraph<Log>, name: &str) {
    g.add_node(name, |_s: Arc<Log>, ctx: Context| async move {
        Ok::<_, NodeError>(entries(&[&format!("at:{}", ctx.thread_id())]))
    });
}

/// The thread ids the `where_am_i` nodes saw.
fn seen_threads(log: &Log) -> Vec<String> {
    log.steps
        .iter()
        .filter_map(|s| s.strip_prefix("at:").map(str::to_string))
        .collect()
}

/// `START -> before -> child -> after -> END` where `child` is `child_graph`.
pub(crate) fn parent_of(probe: &Probe, child_graph: CompiledGraph<Log>) -> StateGraph<Log> {
    let mut g = StateGraph::<Log>::named("parent");
    g.add_node("before", probe.appender("before"));
    g.add_node("child", child_graph);
    g.add_node("after", probe.appender("after"));
    g.add_edge(START, "before")
        .add_edge("before", "child")
        .add_edge("child", "after")
        .add_edge("after", END);
    g
}

pub async fn a_compiled_graph_is_a_node_and_checkpoints_under_a_namespace(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let mut child = chain(&probe, &["a", "b"]);
    where_am_i(&mut child, "where");
    child.add_edge("b", "where").add_edge("where", END);
    let graph = parent_of(&probe, child.compile().unwrap())
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&["in"]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let threads = seen_threads(&out.state);
    assert_eq!(threads.len(), 1, "{:?}", out.state.steps);
    // What the child appended is appended once, after what the parent had.
    let mut expected = strings(&["in", "before", "a", "b"]);
    expected.push(format!("at:{}", threads[0]));
    expected.push("after".into());
    assert_eq!(out.state.steps, expected);

    let path: ThreadPath = threads[0].parse().unwrap();
    assert_eq!((path.root(), path.nodes()), ("t", vec!["child"]));
    let store = saver;
    let child_history = store
        .list_checkpoints(&threads[0], None, 100)
        .await
        .unwrap();
    // input, a, b, where: the child's own steps, saved in the parent's store.
    assert_eq!(child_history.len(), 4, "the child's checkpoints");
    assert_eq!(
        store.list_threads().await.unwrap(),
        strings(&["t"]),
        "a namespace is part of its thread, not a thread"
    );
    assert_eq!(
        graph.threads().await.unwrap().len(),
        1,
        "threads() lists the root only"
    );

    graph.delete_thread("t").await.unwrap();
    assert!(store
        .get_checkpoint(&threads[0], None)
        .await
        .unwrap()
        .is_none());
}

/// The child's state: a question in, an answer out.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Qa {
    pub question: String,
    pub answer: String,
    #[state(append)]
    trail: Vec<String>,
}

/// `START -> think -> ask -> END` over `Qa`; `ask` pauses for a person when `pause`.
pub(crate) fn qa_graph(probe: &Probe, pause: bool) -> CompiledGraph<Qa> {
    let think = probe.counter("think");
    let ask = probe.counter("ask");
    let mut g = StateGraph::<Qa>::named("qa");
    g.add_node("think", move |s: Arc<Qa>, _c: Context| {
        think.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            Ok::<_, NodeError>(QaUpdate::default().trail(vec![format!("think {}", s.question)]))
        }
    });
    g.add_node("ask", move |s: Arc<Qa>, ctx: Context| {
        ask.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            let answer: String = if pause {
                ctx.interrupt(format!("answer {}?", s.question)).await?
            } else {
                format!("auto {}", s.question)
            };
            Ok::<_, NodeError>(QaUpdate::default().answer(answer))
        }
    });
    g.add_edge(START, "think")
        .add_edge("think", "ask")
        .add_edge("ask", END);
    g.compile().unwrap()
}

/// `START -(Send per question)-> research -> END`, `research` a mapped `qa_graph`.
pub(crate) fn per_item(probe: &Probe, pause: bool, questions: &[&str]) -> StateGraph<Log> {
    let research = Subgraph::new(
        qa_graph(probe, pause),
        |_p: &Log, ctx: &Context| Ok(QaUpdate::default().question(ctx.arg::<String>()?)),
        |_p: &Log, c: Qa| entries(&[&format!("{}={}", c.question, c.answer)]),
    );
    let questions: Vec<String> = strings(questions);
    let mut g = StateGraph::<Log>::named("per_item");
    g.add_node("research", research);
    g.add_conditional_edges(
        START,
        move |_s: &Log| {
            questions
                .iter()
                .map(|q| Send::new("research", q))
                .collect::<Vec<_>>()
        },
        ["research"],
    );
    g.add_edge("research", END);
    g
}

pub async fn a_mapped_subgraph_runs_once_per_send_item(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = per_item(&probe, false, &["x", "y", "z"])
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("m"))
        .await
        .unwrap();
    // Task order, whatever order the children finished in.
    assert_eq!(
        out.state.steps,
        strings(&["x=auto x", "y=auto y", "z=auto z"])
    );
    assert_eq!(probe.runs("think"), 3);
}

/// The pauses of a run, as (node, namespace's nodes).
fn paused_at(status: &RunStatus) -> Vec<(String, Vec<String>)> {
    match status {
        RunStatus::Interrupted { interrupts, .. } => interrupts
            .iter()
            .map(|i| {
                let path = ThreadPath::root_of("t")
                    .with_namespace(&i.namespace)
                    .unwrap();
                let nodes = path.nodes().into_iter().map(str::to_string).collect();
                (i.node.clone(), nodes)
            })
            .collect(),
        RunStatus::Done => Vec::new(),
    }
}

pub async fn an_interrupt_in_a_child_pauses_the_run_and_resumes_inside_it(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let graph = per_item(&probe, true, &["q"])
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(
        paused_at(&out.status),
        vec![("ask".to_string(), strings(&["research"]))]
    );
    let state = graph.get_state("t", None).await.unwrap();
    assert_eq!(state.next, strings(&["research"]));
    assert_eq!(state.interrupts.len(), 1);
    assert_eq!(state.interrupts[0].payload, serde_json::json!("answer q?"));
    assert!(state.interrupts[0].namespace.starts_with("research:"));

    let out = graph
        .resume("t", Resume::value("forty-two").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["q=forty-two"]));
    // The child's finished step did not run again; the paused node ran twice (ask, answer).
    assert_eq!((probe.runs("think"), probe.runs("ask")), (1, 2));
}

pub async fn parallel_children_pause_together_and_are_answered_by_id(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let graph = per_item(&probe, true, &["a", "b"])
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("expected a pause, got {:?}", out.status);
    };
    assert_eq!(interrupts.len(), 2);
    assert_ne!(interrupts[0].namespace, interrupts[1].namespace);
    let err = graph
        .resume("t", Resume::value("?").unwrap(), RunConfig::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::Resume(_)), "{err}");

    // Answer the second only: the first stays paused, with the same id.
    let second = interrupts[1].id.clone();
    let answers = BTreeMap::from([(second, serde_json::json!("B"))]);
    let out = graph
        .resume("t", Resume::ById(answers), RunConfig::new())
        .await
        .unwrap();
    let RunStatus::Interrupted {
        interrupts: left, ..
    } = &out.status
    else {
        panic!(
            "expected the first child to still wait, got {:?}",
            out.status
        );
    };
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, interrupts[0].id);
    let out = graph
        .resume("t", Resume::value("A").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["a=A", "b=B"]));
    assert_eq!(probe.runs("think"), 2, "each child's first step ran once");
}

/// A grandchild that asks twice, inside a child, inside the root.
pub(crate) fn two_levels(probe: &Probe) -> CompiledGraph<Log> {
    let asks = probe.counter("asker");
    let mut inner = StateGraph::<Log>::named("inner");
    inner.add_node("prep", probe.appender("prep"));
    inner.add_node("asker", move |_s: Arc<Log>, ctx: Context| {
        asks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            let first: String = ctx.interrupt("first?").await?;
            let second: String = ctx.interrupt("second?").await?;
            Ok::<_, NodeError>(entries(&[&format!("{first}+{second}")]))
        }
    });
    inner
        .add_edge(START, "prep")
        .add_edge("prep", "asker")
        .add_edge("asker", END);
    let mut middle = StateGraph::<Log>::named("middle");
    middle.add_node("m1", probe.appender("m1"));
    middle.add_node("inner", inner.compile().unwrap());
    middle
        .add_edge(START, "m1")
        .add_edge("m1", "inner")
        .add_edge("inner", END);
    parent_of(probe, middle.compile().unwrap())
        .compile()
        .unwrap()
}

pub async fn a_grandchild_that_asks_twice_is_answered_through_two_levels(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let graph = two_levels(&probe).with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert_eq!(
        paused_at(&out.status),
        vec![("asker".to_string(), strings(&["child", "inner"]))]
    );
    let out = graph
        .resume("t", Resume::value("one").unwrap(), RunConfig::new())
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("expected the second question, got {:?}", out.status);
    };
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0].payload, serde_json::json!("second?"));
    assert_eq!(
        graph.get_state("t", None).await.unwrap().interrupts,
        interrupts.clone(),
        "get_state lists the pause that waits now, not the answered one"
    );
    let out = graph
        .resume("t", Resume::value("two").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(
        out.state.steps,
        strings(&["before", "m1", "prep", "one+two", "after"])
    );
    let once = [("before", 1), ("m1", 1), ("prep", 1), ("after", 1)];
    for (node, runs) in once {
        assert_eq!(probe.runs(node), runs, "{node}: {:?}", probe.all_runs());
    }
    assert_eq!(probe.runs("asker"), 3, "asked, asked again, answered");
}

pub async fn a_breakpoint_in_a_child_pauses_the_run(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let child = chain(&probe, &["a", "b"])
        .compile()
        .unwrap()
        .interrupt_before(["b"])
        .unwrap();
    let graph = parent_of(&probe, child)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, next } = &out.status else {
        panic!("expected a pause, got {:?}", out.status);
    };
    assert_eq!(
        (
            interrupts[0].node.as_str(),
            interrupts[0].when,
            next.clone()
        ),
        ("b", InterruptWhen::Before, strings(&["child"]))
    );
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.state.steps, strings(&["before", "a", "b", "after"]));
    assert_eq!(probe.runs("a"), 1);
}

pub async fn a_failing_child_names_its_path_and_a_resume_reruns_only_what_failed(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let child = chain(&probe, &["a", "b"]).compile().unwrap();
    let graph = parent_of(&probe, child)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    probe.break_node("b");
    let err = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    let RunError::NodeFailed { node, step, .. } = &err else {
        panic!("expected a node failure, got {err}");
    };
    assert_eq!((node.as_str(), *step), ("child > b", 2));
    let text = err.to_string();
    assert!(
        text.contains("child > b") && text.contains("subgraph `t/child:"),
        "{text}"
    );

    probe.heal("b");
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.steps, strings(&["before", "a", "b", "after"]));
    assert_eq!((probe.runs("a"), probe.runs("b")), (1, 2));
}

/// A child's first step where a sibling finished beside one that failed: the finished one's
/// result is saved against the child's input record (written without a flush of its own, made
/// durable by the result's), so the resume runs only the failed one.
pub async fn a_childs_first_step_keeps_a_finished_sibling_beside_a_failed_one(
    saver: Arc<dyn Checkpointer>,
) {
    let probe = Probe::default();
    let mut child = StateGraph::<Log>::named("child");
    child.add_node("x", probe.appender("x"));
    child.add_node("y", probe.appender("y"));
    child
        .add_edge(START, "x")
        .add_edge(START, "y")
        .add_edge("x", END)
        .add_edge("y", END);
    let graph = parent_of(&probe, child.compile().unwrap())
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    probe.break_node("y");
    let err = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, .. } if node == "child > y"),
        "{err}"
    );
    let state = graph.get_state_with_subgraphs("t", None).await.unwrap();
    let thread = state.subgraphs[0].thread.clone();
    let records = saver.list_checkpoints(&thread, None, 100).await.unwrap();
    assert_eq!(records.len(), 1, "only the child's input: {records:?}");
    assert_eq!(records[0].metadata.source, Source::Input);
    let writes = saver.get_writes(&thread, records[0].id).await.unwrap();
    let kept: Vec<&str> = writes.iter().map(|w| w.node.as_str()).collect();
    assert_eq!(
        kept,
        vec!["x", "y"],
        "x's result and y's failure: {writes:?}"
    );

    probe.heal("y");
    let out = graph
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.steps, strings(&["before", "x", "y", "after"]));
    assert_eq!((probe.runs("x"), probe.runs("y")), (1, 2));
}

/// A node that runs two subgraphs itself, one after the other, and keeps both results.
pub async fn a_node_runs_subgraphs_itself(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let qa = qa_graph(&probe, true);
    let mut g = StateGraph::<Log>::named("caller");
    g.add_node("both", move |_s: Arc<Log>, ctx: Context| {
        let qa = qa.clone();
        async move {
            let first = ctx
                .run_subgraph(&qa, QaUpdate::default().question("one".to_string()))
                .await?;
            let second = ctx
                .run_subgraph(&qa, QaUpdate::default().question("two".to_string()))
                .await?;
            Ok::<_, NodeError>(LogUpdate::default().steps(vec![first.answer, second.answer]))
        }
    });
    g.add_edge(START, "both").add_edge("both", END);
    let graph = g.compile().unwrap().with_checkpointer(saver.clone());
    let out = graph
        .invoke(entries(&[]), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(out.is_interrupted());
    let out = graph
        .resume("t", Resume::value("1").unwrap(), RunConfig::new())
        .await
        .unwrap();
    let RunStatus::Interrupted { interrupts, .. } = &out.status else {
        panic!("expected the second child to ask, got {:?}", out.status);
    };
    assert_eq!(interrupts[0].payload, serde_json::json!("answer two?"));
    let out = graph
        .resume("t", Resume::value("2").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.steps, strings(&["1", "2"]));
    // Each child's `think` ran once: the first child was done when the node ran again.
    assert_eq!(probe.runs("think"), 2);
}

/// A node that appends `{name}:{run id}:{setting model}` and the thread it runs in.
fn run_recorder(g: &mut StateGraph<Log>, name: &'static str) {
    g.add_node(name, move |_s: Arc<Log>, ctx: Context| async move {
        let model: String = ctx.setting("model").unwrap_or_default();
        Ok::<_, NodeError>(entries(&[
            &format!("{name}:{}:{model}", ctx.run_id()),
            &format!("at:{}", ctx.thread_id()),
        ]))
    });
}

/// A child's run is part of its parent's `invoke` or `resume` (as in LangGraph, where a
/// subgraph runs with its parent's config): its nodes see that call's run id and settings,
/// and its checkpoints carry that run id.
pub async fn a_child_runs_as_part_of_its_parents_run(saver: Arc<dyn Checkpointer>) {
    let probe = Probe::default();
    let mut child = StateGraph::<Log>::named("child");
    run_recorder(&mut child, "seen");
    run_recorder(&mut child, "b");
    child
        .add_edge(START, "seen")
        .add_edge("seen", "b")
        .add_edge("b", END);
    let child = child.compile().unwrap().interrupt_before(["b"]).unwrap();
    let graph = parent_of(&probe, child)
        .compile()
        .unwrap()
        .with_checkpointer(saver.clone());
    let first = graph
        .invoke(
            entries(&[]),
            RunConfig::new().thread("t").setting("model", "small"),
        )
        .await
        .unwrap();
    assert!(first.is_interrupted(), "paused before the child's `b`");
    let second = graph
        .resume(
            "t",
            Resume::Continue,
            RunConfig::new().setting("model", "large"),
        )
        .await
        .unwrap();
    let threads = seen_threads(&second.state);
    assert_eq!(threads.len(), 2, "{:?}", second.state.steps);
    assert_eq!(threads[0], threads[1], "one child, resumed");
    let steps: Vec<&str> = second
        .state
        .steps
        .iter()
        .map(String::as_str)
        .filter(|s| !s.starts_with("at:"))
        .collect();
    let seen = format!("seen:{}:small", first.run_id);
    let b = format!("b:{}:large", second.run_id);
    assert_eq!(steps, vec!["before", &seen, &b, "after"]);

    let child_history = saver
        .list_checkpoints(&threads[0], None, 100)
        .await
        .unwrap();
    let run_ids: Vec<&str> = child_history
        .iter()
        .map(|c| c.metadata.run_id.as_str())
        .collect();
    // Newest first: `b` (the resume), `seen` and the child's input (the first run).
    assert_eq!(
        run_ids,
        vec![
            second.run_id.as_str(),
            first.run_id.as_str(),
            first.run_id.as_str()
        ]
    );
}
