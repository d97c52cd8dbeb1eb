//! A graph file's `[retention]` applied by `sweep`, with a fake clock: finished threads go after
//! their days, any thread after `keep_days`, paused ones only when told, a finished thread keeps
//! its newest checkpoints, a held thread is never swept, another graph's threads are not
//! touched, and the report says what went.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{now_ms, Checkpointer, Lease, MemoryCheckpointer};
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_registry::{sweep, GraphFile, RetentionPolicy, Sweep};
use std::sync::Arc;

const DAY: u64 = 24 * 60 * 60 * 1000;

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Log {
    #[state(append)]
    steps: Vec<String>,
}

fn graph(name: &str, store: Arc<dyn Checkpointer>) -> stategraph::graph::CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::named(name);
    for node in ["a", "b", "c"] {
        g.add_node(node, move |_s: Arc<Log>, _c: Context| async move {
            Ok::<_, NodeError>(LogUpdate::default().steps(vec![node.to_string()]))
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END);
    g.compile().unwrap().with_checkpointer(store)
}

async fn run(g: &stategraph::graph::CompiledGraph<Log>, thread: &str, pause_at: Option<&str>) {
    let mut config = RunConfig::new().thread(thread);
    if let Some(node) = pause_at {
        config = config.interrupt_before([node]);
    }
    g.invoke(LogUpdate::default(), config).await.unwrap();
}

fn policy(text: &str) -> RetentionPolicy {
    let file = GraphFile::parse(
        &format!("graph = \"chat\"\n[retention]\n{text}"),
        "test",
        &[],
    );
    file.unwrap().retention.unwrap()
}

async fn threads(store: &MemoryCheckpointer) -> Vec<String> {
    let mut t = store.list_threads().await.unwrap();
    t.sort();
    t
}

#[tokio::test]
async fn a_sweep_applies_the_graph_files_rules_and_reports_them() {
    let store = Arc::new(MemoryCheckpointer::new());
    let chat = graph("chat", store.clone());
    run(&chat, "done-1", None).await;
    run(&chat, "done-2", None).await;
    run(&chat, "paused", Some("b")).await;
    run(&chat, "held", None).await;
    run(&graph("other", store.clone()), "other-done", None).await;
    // A run writing `held` right now: its lease is live.
    let lease = Lease {
        owner: "a-run".into(),
        pid: std::process::id(),
        host: "here".into(),
        expires_at_ms: now_ms() + 60_000,
    };
    store
        .swap_lease("held", None, Some(&lease))
        .await
        .unwrap()
        .unwrap();

    // Three days on: nothing is old enough.
    let rules = policy("finished_days = 7\nkeep_days = 30\n");
    let at = |days: u64| now_ms() + days * DAY;
    let sweep_at = |days: u64, rules: &RetentionPolicy| {
        let rules = rules.clone();
        let store = store.clone();
        async move {
            sweep(Sweep {
                store: store.as_ref(),
                graph: "chat",
                policy: &rules,
                now_ms: at(days),
                pruner: None,
            })
            .await
            .unwrap()
        }
    };
    let report = sweep_at(3, &rules).await;
    assert!(
        report.deleted.is_empty() && report.skipped.is_empty(),
        "{report:?}"
    );

    // Eight days on: the finished threads of `chat` go, but not the held one, not the paused
    // one, not the other graph's.
    let report = sweep_at(8, &rules).await;
    let deleted: Vec<_> = report
        .deleted
        .iter()
        .map(|r| (r.thread.as_str(), r.rule))
        .collect();
    assert_eq!(
        deleted,
        vec![("done-1", "finished_days"), ("done-2", "finished_days")]
    );
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].thread, "held");
    assert!(report.skipped[0].reason.contains("busy"), "{report:?}");
    assert_eq!(threads(&store).await, vec!["held", "other-done", "paused"]);

    // Past `keep_days`, a paused thread stays unless the policy says otherwise.
    assert!(sweep_at(31, &rules).await.deleted.is_empty());
    let with_paused = policy("keep_days = 30\ninclude_paused = true\n");
    let report = sweep_at(31, &with_paused).await;
    assert_eq!(report.deleted.len(), 1);
    assert_eq!(
        (report.deleted[0].thread.as_str(), report.deleted[0].rule),
        ("paused", "keep_days")
    );
    assert_eq!(report.deleted[0].idle_days, 31);

    // The writer let go: the next sweep takes the held thread too.
    store
        .swap_lease("held", Some(&lease), None)
        .await
        .unwrap()
        .unwrap();
    let report = sweep_at(8, &rules).await;
    assert_eq!(report.deleted.len(), 1);
    assert_eq!(threads(&store).await, vec!["other-done"]);
}

#[tokio::test]
async fn a_finished_thread_keeps_its_newest_checkpoints() {
    let store = Arc::new(MemoryCheckpointer::new());
    let chat = graph("chat", store.clone());
    run(&chat, "long", None).await;
    run(&chat, "stopped", Some("c")).await;
    assert!(
        store
            .list_checkpoints("stopped", None, 10)
            .await
            .unwrap()
            .len()
            > 2
    );
    let before = chat.get_state("long", None).await.unwrap().values;
    let paused = store
        .list_checkpoints("stopped", None, 10)
        .await
        .unwrap()
        .len();
    let long = store
        .list_checkpoints("long", None, 10)
        .await
        .unwrap()
        .len();
    let rules = policy("keep_checkpoints = 2\ninclude_paused = true\n");
    let s = |pruner| Sweep {
        store: store.as_ref(),
        graph: "chat",
        policy: &rules,
        now_ms: now_ms(),
        pruner,
    };
    // Without the graph, a thread over the limit is reported, not half done.
    let report = sweep(s(None)).await.unwrap();
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(report.pruned.is_empty());

    let report = sweep(s(Some(&chat))).await.unwrap();
    assert_eq!(report.pruned.len(), 1, "{report:?}");
    assert_eq!(report.pruned[0].thread, "long");
    assert_eq!(report.pruned[0].removed, long - 2);
    assert_eq!(
        store
            .list_checkpoints("long", None, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(chat.get_state("long", None).await.unwrap().values, before);
    // Not finished (paused before `c`), though over the limit: all its checkpoints stay.
    assert_eq!(
        store
            .list_checkpoints("stopped", None, 10)
            .await
            .unwrap()
            .len(),
        paused
    );
}

#[test]
fn a_misspelt_rule_is_refused() {
    let err =
        GraphFile::parse("graph = \"g\"\n[retention]\nkeep_dayz = 3\n", "test", &[]).unwrap_err();
    assert!(err.to_string().contains("keep_dayz"), "{err}");
}

#[test]
fn item_settings_and_fractional_days_are_read_and_checked() {
    let p = policy("finished_days = 0.5\nitems_ttl_days = 0.25\nitems_refresh_on_read = true\n");
    assert_eq!(p.finished_days, Some(0.5));
    let ttl = p.items_ttl();
    assert_eq!(ttl.default_ttl_ms, Some(DAY / 4));
    assert!(ttl.refresh_on_read);
    assert!(policy("keep_days = 3\n").items_ttl() == Default::default());
    for bad in ["items_ttl_dayz = 1", "items_refresh_on_reads = true"] {
        let text = format!("graph = \"g\"\n[retention]\n{bad}\n");
        let err = GraphFile::parse(&text, "test", &[]).unwrap_err();
        assert!(
            err.to_string().contains(bad.split(' ').next().unwrap()),
            "{err}"
        );
    }
    let err =
        GraphFile::parse("graph = \"g\"\n[retention]\nkeep_days = -1\n", "test", &[]).unwrap_err();
    assert!(err.to_string().contains("number of days"), "{err}");
}

/// Half a day is twelve hours: a finished thread idle for 13 hours goes, one idle for 11 stays.
#[tokio::test]
async fn fractional_days_sweep_by_the_hour() {
    let store = Arc::new(MemoryCheckpointer::new());
    let chat = graph("chat", store.clone());
    run(&chat, "done", None).await;
    let rules = policy("finished_days = 0.5\n");
    let at = |hours: u64| now_ms() + hours * DAY / 24;
    let sweep_at = |now_ms| {
        let (store, rules) = (store.clone(), rules.clone());
        async move {
            let s = Sweep {
                store: store.as_ref(),
                graph: "chat",
                policy: &rules,
                now_ms,
                pruner: None,
            };
            sweep(s).await.unwrap()
        }
    };
    assert!(sweep_at(at(11)).await.deleted.is_empty());
    assert_eq!(threads(&store).await, ["done"]);
    let report = sweep_at(at(13)).await;
    assert_eq!(report.deleted.len(), 1, "{report:?}");
    assert!(threads(&store).await.is_empty());
}
