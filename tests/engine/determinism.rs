//! The same graph and input give the same state whatever order tasks finish in.

use super::{Log, LogUpdate};
use proptest::prelude::*;
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{Send, StateGraph, END, START};
use std::sync::Arc;
use std::time::Duration;

/// Ten parallel workers plus a Send fan-out, each sleeping a delay taken from `delays`.
fn graph(delays: Arc<Vec<u64>>) -> stategraph::CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    g.add_node("split", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    g.add_edge(START, "split");
    let workers: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    for (i, w) in workers.iter().enumerate() {
        let delays = delays.clone();
        let name = w.clone();
        g.add_node(w.clone(), move |_s: Arc<Log>, _c: Context| {
            let (delays, name) = (delays.clone(), name.clone());
            async move {
                tokio::time::sleep(Duration::from_micros(delays[i])).await;
                Ok(LogUpdate::default().visits(vec![name]).total(i as i64))
            }
        });
        g.add_edge("split", w.clone());
    }
    g.add_join(workers.clone(), "fan");
    g.add_node("fan", |_s: Arc<Log>, _c: Context| async {
        Ok(LogUpdate::default())
    });
    let d = delays.clone();
    g.add_node("item", move |_s: Arc<Log>, ctx: Context| {
        let d = d.clone();
        async move {
            let n: usize = ctx.arg()?;
            tokio::time::sleep(Duration::from_micros(d[10 + n])).await;
            Ok::<_, NodeError>(LogUpdate::default().visits(vec![format!("item{n}")]))
        }
    });
    g.add_conditional_edges(
        "fan",
        |_s: &Log| {
            (0..6usize)
                .map(|n| Send::new("item", n))
                .collect::<Vec<_>>()
        },
        ["item"],
    );
    g.add_edge("item", END);
    g.compile().unwrap()
}

fn expected() -> Vec<String> {
    let mut v: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    v.extend((0..6).map(|n| format!("item{n}")));
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn updates_merge_in_task_order_whatever_the_finish_order(delays in proptest::collection::vec(0u64..3000, 16)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let out = rt.block_on(graph(Arc::new(delays)).invoke(LogUpdate::default(), RunConfig::new())).unwrap();
        prop_assert_eq!(out.state.visits, expected());
        prop_assert_eq!(out.state.total, 45);
    }

    #[test]
    fn appends_fold_like_concatenation_in_task_order(parts in proptest::collection::vec(proptest::collection::vec(0u8..255, 0..4), 1..6)) {
        use stategraph::state::{State, TaggedUpdate};
        let mut state = Log::default();
        let mut batch: Vec<TaggedUpdate<LogUpdate>> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| TaggedUpdate::new(format!("n{i}"), LogUpdate::default().visits(p.iter().map(|b| b.to_string()).collect::<Vec<_>>())))
            .collect();
        state.apply(&mut batch).unwrap();
        let flat: Vec<String> = parts.iter().flatten().map(|b| b.to_string()).collect();
        prop_assert_eq!(state.visits, flat);
    }
}
