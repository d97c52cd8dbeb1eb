//! Static edges, fan-out, joins, routers, Send, commands, deferred nodes.

use super::{visit, Item, Log, LogUpdate};
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{Command, Send, StateGraph, END, START};
use std::sync::Arc;
use std::time::Duration;

/// A node that appends its own name.
fn visitor(g: &mut StateGraph<Log>, name: &'static str) {
    g.add_node(name, move |_s: Arc<Log>, _c: Context| async move {
        Ok(visit(name))
    });
}

#[tokio::test]
async fn a_static_chain_runs_in_order_and_each_node_sees_the_previous_writes() {
    let mut g = StateGraph::<Log>::new();
    visitor(&mut g, "a");
    g.add_node("b", |s: Arc<Log>, _c: Context| async move {
        Ok(LogUpdate::default().visits(vec![format!("b saw {}", s.visits.len())]))
    });
    g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["a", "b saw 1"]);
    assert_eq!(out.step, 2);
}

#[tokio::test]
async fn fan_out_runs_in_one_superstep_and_siblings_do_not_see_each_other() {
    let mut g = StateGraph::<Log>::new();
    visitor(&mut g, "split");
    for name in ["left", "right"] {
        g.add_node(name, move |s: Arc<Log>, _c: Context| async move {
            // Both see only what existed before the step: "split".
            Ok(LogUpdate::default()
                .visits(vec![format!("{name} saw {}", s.visits.len())])
                .total(1))
        });
    }
    visitor(&mut g, "join");
    g.add_edge(START, "split");
    g.add_edge("split", "left").add_edge("split", "right");
    g.add_join(["left", "right"], "join");
    g.add_edge("join", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.visits,
        vec!["split", "left saw 1", "right saw 1", "join"]
    );
    assert_eq!(out.state.total, 2);
    assert_eq!(
        out.step, 3,
        "split, the two branches together, then the join"
    );
}

#[tokio::test]
async fn a_join_waits_for_branches_of_different_lengths() {
    let mut g = StateGraph::<Log>::new();
    for n in ["start", "short", "long1", "long2", "join"] {
        visitor(&mut g, n);
    }
    g.add_edge(START, "start");
    g.add_edge("start", "short")
        .add_edge("start", "long1")
        .add_edge("long1", "long2");
    g.add_join(["short", "long2"], "join");
    g.add_edge("join", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.visits,
        vec!["start", "short", "long1", "long2", "join"]
    );
    assert_eq!(out.state.visits.iter().filter(|v| *v == "join").count(), 1);
}

#[tokio::test]
async fn a_router_may_pick_several_targets_and_loops_until_it_picks_end() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("count", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default().total(1))
    });
    visitor(&mut g, "x");
    visitor(&mut g, "y");
    g.add_edge(START, "count");
    g.add_conditional_edges(
        "count",
        |s: &Log| {
            if s.total < 3 {
                vec!["count"]
            } else {
                vec!["x", "y"]
            }
        },
        ["count", "x", "y"],
    );
    g.add_edge("x", END).add_edge("y", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.total, 3);
    assert_eq!(out.state.visits, vec!["x", "y"]);
}

#[tokio::test]
async fn send_runs_one_task_per_item_and_merges_in_send_order_not_finish_order() {
    let mut g = StateGraph::<Log>::new();
    visitor(&mut g, "plan");
    g.add_node("work", |_s: Arc<Log>, ctx: Context| async move {
        let n: u64 = ctx.arg()?;
        // The first items sleep longest, so they finish last.
        tokio::time::sleep(Duration::from_millis(40 - n * 8)).await;
        Ok::<_, NodeError>(
            LogUpdate::default()
                .visits(vec![format!("work {n}")])
                .total(n as i64),
        )
    });
    g.add_edge(START, "plan");
    g.add_conditional_edges(
        "plan",
        |_s: &Log| (0..5u64).map(|n| Send::new("work", n)).collect::<Vec<_>>(),
        ["work"],
    );
    g.add_edge("work", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.visits,
        vec!["plan", "work 0", "work 1", "work 2", "work 3", "work 4"]
    );
    assert_eq!(out.state.total, 10);
}

#[tokio::test]
async fn a_command_carries_an_update_and_where_to_go() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("decide", |s: Arc<Log>, _c: Context| async move {
        let target = if s.last == "left" { "left" } else { "right" };
        Ok(Command::from_update(visit("decide")).goto(target))
    })
    .destinations(["left", "right"]);
    visitor(&mut g, "left");
    visitor(&mut g, "right");
    g.add_edge(START, "decide")
        .add_edge("left", END)
        .add_edge("right", END);
    let graph = g.compile().unwrap();
    let out = graph
        .invoke(LogUpdate::default().last("left"), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["decide", "left"]);
    let out = graph
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["decide", "right"]);
}

#[tokio::test]
async fn a_command_may_send_with_its_own_input() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("fan", |_s: Arc<Log>, _c: Context| async {
        Ok(Command::<Log>::empty().goto(vec![Send::new("echo", "one"), Send::new("echo", "two")]))
    })
    .destinations(["echo"]);
    g.add_node("echo", |_s: Arc<Log>, ctx: Context| async move {
        let word: String = ctx.arg()?;
        Ok::<_, NodeError>(visit(&word))
    });
    g.add_edge(START, "fan").add_edge("echo", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["one", "two"]);
}

#[tokio::test]
async fn a_deferred_node_runs_once_nothing_else_is_pending() {
    let mut g = StateGraph::<Log>::new();
    for n in ["start", "a", "b1", "b2", "b3"] {
        visitor(&mut g, n);
    }
    g.add_node("collect", |s: Arc<Log>, _c: Context| async move {
        Ok(LogUpdate::default().visits(vec![format!("collect after {}", s.visits.len())]))
    })
    .deferred();
    g.add_edge(START, "start");
    g.add_edge("start", "a").add_edge("start", "b1");
    g.add_edge("b1", "b2").add_edge("b2", "b3");
    g.add_edge("a", "collect").add_edge("b3", "collect");
    g.add_edge("collect", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(
        out.state.visits,
        vec!["start", "a", "b1", "b2", "b3", "collect after 5"]
    );
}

#[tokio::test]
async fn merge_by_id_changes_one_record_without_rewriting_the_list() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("rename", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default().items(vec![Item {
            id: 2,
            label: "second!".into(),
        }]))
    });
    g.add_edge(START, "rename").add_edge("rename", END);
    let input = LogUpdate::default().items(vec![
        Item {
            id: 1,
            label: "first".into(),
        },
        Item {
            id: 2,
            label: "second".into(),
        },
    ]);
    let out = g
        .compile()
        .unwrap()
        .invoke(input, RunConfig::new())
        .await
        .unwrap();
    let labels: Vec<&str> = out.state.items.iter().map(|i| i.label.as_str()).collect();
    assert_eq!(labels, vec!["first", "second!"]);
}

#[tokio::test]
async fn an_explicit_overwrite_bypasses_the_fields_reducer() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("reset", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default().overwrite_visits(vec!["fresh".to_string()]))
    });
    g.add_edge(START, "reset").add_edge("reset", END);
    let input = LogUpdate::default().visits(vec!["old".into(), "older".into()]);
    let out = g
        .compile()
        .unwrap()
        .invoke(input, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.visits, vec!["fresh"]);
}

#[tokio::test]
async fn nodes_read_thread_step_and_settings_from_their_context() {
    let mut g = StateGraph::<Log>::new();
    g.add_node("who", |_s: Arc<Log>, ctx: Context| async move {
        let model: String = ctx.setting("model").unwrap_or_default();
        Ok(LogUpdate::default().last(format!(
            "{} {} {} {}",
            ctx.thread_id(),
            ctx.step(),
            ctx.node(),
            model
        )))
    });
    g.add_edge(START, "who").add_edge("who", END);
    let config = RunConfig::new().thread("t-1").setting("model", "tiny");
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), config)
        .await
        .unwrap();
    assert_eq!(out.state.last, "t-1 1 who tiny");
    assert_eq!(out.thread_id, "t-1");
}

struct Greeter {
    greeting: String,
}

#[async_trait::async_trait]
impl stategraph::graph::Node<Log> for Greeter {
    async fn run(&self, _state: Arc<Log>, _ctx: Context) -> Result<Command<Log>, NodeError> {
        Ok(LogUpdate::default().last(self.greeting.clone()).into())
    }
}

#[tokio::test]
async fn a_type_implementing_node_works_like_a_closure() {
    let mut g = StateGraph::<Log>::new();
    g.add_node_impl(
        "greet",
        Greeter {
            greeting: "hello".into(),
        },
    );
    g.add_edge(START, "greet").add_edge("greet", END);
    let out = g
        .compile()
        .unwrap()
        .invoke(LogUpdate::default(), RunConfig::new())
        .await
        .unwrap();
    assert_eq!(out.state.last, "hello");
}
