//! The research agent remembers what a user asked across threads when `[settings.memory]`
//! turns it on: the second thread's planner sees the first thread's question (the best matches
//! by text), another user's memories stay apart, and with memory off nothing is kept.

use crate::support;

use serde_json::json;
use stategraph::checkpoint::store::{MemoryStore, SearchRequest, Store};
use stategraph::runtime::{RunConfig, SharedStore};
use stategraph_agents::research::PlanStateUpdate;
use stategraph_llm::FakeChatModel;
use stategraph_store::IndexedStore;
use std::sync::Arc;
use support::*;

/// The user message of the plan request (the last `Plan` request's).
fn plan_prompt(fake: &FakeChatModel) -> String {
    let requests = fake.requests();
    let plan = requests
        .iter()
        .rev()
        .find(|r| kind_of(r) == "Plan")
        .expect("a plan request");
    plan.messages
        .iter()
        .map(|m| m.content.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

fn with_memory(config: RunConfig, store: &Arc<dyn Store>, user: &str) -> RunConfig {
    config
        .setting("yes", true)
        .setting("memory", json!({"enabled": true, "user": user}))
        .with_store(SharedStore(store.clone()))
}

#[tokio::test]
async fn a_second_thread_plans_knowing_what_the_user_asked_before() {
    let docs = corpus();
    let store: Arc<dyn Store> = Arc::new(IndexedStore::new(Arc::new(MemoryStore::new())).unwrap());
    let fake = model(three_todos(), Arc::new(|_| done()));
    let g = compiled(fake.clone());
    let ask = |q: &str| PlanStateUpdate::default().question(q);

    g.invoke(
        ask("How does sled make writes durable?"),
        with_memory(config(docs.path(), "a1"), &store, "ada"),
    )
    .await
    .unwrap();
    assert!(
        !plan_prompt(&fake).contains("earlier conversations"),
        "nothing to recall yet"
    );
    g.invoke(
        ask("What does Tokio's runtime do?"),
        with_memory(config(docs.path(), "b1"), &store, "bo"),
    )
    .await
    .unwrap();

    g.invoke(
        ask("Is sled durable after a crash?"),
        with_memory(config(docs.path(), "a2"), &store, "ada"),
    )
    .await
    .unwrap();
    let prompt = plan_prompt(&fake);
    assert!(prompt.contains("earlier conversations"), "{prompt}");
    assert!(
        prompt.contains("- How does sled make writes durable?"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("Tokio"),
        "bo's questions are not ada's: {prompt}"
    );

    let ada = store
        .search(&SearchRequest::under(&["memories", "ada"]).limit(0))
        .await
        .unwrap();
    let threads: Vec<&str> = ada.iter().map(|h| h.item.key.as_str()).collect();
    assert_eq!(threads, ["a2", "a1"], "one item per thread, newest first");
}

#[tokio::test]
async fn with_memory_off_nothing_is_kept() {
    let docs = corpus();
    let store: Arc<dyn Store> = Arc::new(IndexedStore::new(Arc::new(MemoryStore::new())).unwrap());
    let fake = model(three_todos(), Arc::new(|_| done()));
    let config = config(docs.path(), "off")
        .setting("yes", true)
        .with_store(SharedStore(store.clone()));
    compiled(fake)
        .invoke(PlanStateUpdate::default().question("durability?"), config)
        .await
        .unwrap();
    let all = store
        .search(&SearchRequest::under(&["memories"]))
        .await
        .unwrap();
    assert!(all.is_empty(), "{all:?}");
}
