//! Schema versions: a thread saved by an older version of the state type is read through the
//! type's migration, or refused with a clear error.

use crate::backends::Backend;
use serde::{Deserialize, Serialize};
use stategraph::checkpoint::Checkpointer;
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError, Resume, RunConfig, RunError};
use stategraph::{State, StateGraph, END, START};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Version 1 of a note-taking state.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct NotesV1 {
    title: String,
    #[state(append)]
    notes: Vec<String>,
}

/// Version 2 adds a field that old states lack; the migration fills it in.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[state(version = 2, migrate = notes_from_v1)]
struct NotesV2 {
    title: String,
    #[state(append)]
    notes: Vec<String>,
    migrated_from: u32,
}

fn notes_from_v1(version: u32, mut value: serde_json::Value) -> Result<serde_json::Value, String> {
    match version {
        1 => {
            value["migrated_from"] = serde_json::json!(1);
            Ok(value)
        }
        other => Err(format!("no migration from version {other}")),
    }
}

/// Version 2 again, without a migration.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[state(version = 2)]
struct NotesV2Strict {
    title: String,
    #[state(append)]
    notes: Vec<String>,
    migrated_from: u32,
}

/// `draft -> publish`, paused before `publish` by the v1 build; `publish` counts its runs.
fn v1_graph(store: Arc<dyn Checkpointer>) -> CompiledGraph<NotesV1> {
    let mut g = StateGraph::<NotesV1>::new();
    g.add_node("draft", |_s: Arc<NotesV1>, _c: Context| async {
        Ok::<_, NodeError>(NotesV1Update::default().notes(vec!["drafted".to_string()]))
    });
    g.add_node("publish", |_s: Arc<NotesV1>, _c: Context| async {
        Ok::<_, NodeError>(NotesV1Update::default().notes(vec!["published by v1".to_string()]))
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "publish")
        .add_edge("publish", END);
    g.compile()
        .unwrap()
        .with_checkpointer(store)
        .interrupt_before(["publish"])
        .unwrap()
}

/// Saves a v1 thread `t` paused before `publish`.
async fn saved_by_v1(store: Arc<dyn Checkpointer>) {
    let v1 = v1_graph(store);
    let out = v1
        .invoke(
            NotesV1Update::default().title("groceries"),
            RunConfig::new().thread("t"),
        )
        .await
        .unwrap();
    assert!(out.is_interrupted());
}

pub async fn an_old_thread_is_read_through_the_migration(backend: &dyn Backend) {
    let store = backend.saver();
    saved_by_v1(store.clone()).await;

    let publishes = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<NotesV2>::new();
    g.add_node("draft", |_s: Arc<NotesV2>, _c: Context| async {
        Ok::<_, NodeError>(NotesV2Update::default())
    });
    let count = publishes.clone();
    g.add_node("publish", move |_s: Arc<NotesV2>, _c: Context| {
        count.fetch_add(1, Ordering::SeqCst);
        async {
            Ok::<_, NodeError>(NotesV2Update::default().notes(vec!["published by v2".to_string()]))
        }
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "publish")
        .add_edge("publish", END);
    let v2 = g.compile().unwrap().with_checkpointer(store);

    // Reading: the stored v1 state, migrated.
    let state = v2.get_state("t", None).await.unwrap();
    assert_eq!(
        state.metadata.schema_version, 1,
        "the checkpoint itself is unchanged"
    );
    assert_eq!(
        state.values,
        NotesV2 {
            title: "groceries".into(),
            notes: vec!["drafted".into()],
            migrated_from: 1,
        }
    );

    // Resuming: the run continues on the migrated state and writes version-2 checkpoints, the
    // first of them whole (a v2 delta on top of a v1 state could not be read back).
    let done = v2
        .resume("t", Resume::Continue, RunConfig::new())
        .await
        .unwrap();
    assert_eq!(publishes.load(Ordering::SeqCst), 1);
    assert_eq!(done.state.notes, vec!["drafted", "published by v2"]);
    assert_eq!(done.state.migrated_from, 1);
    let history = v2.history("t", Default::default()).await.unwrap();
    assert_eq!(history[0].metadata.schema_version, 2);
    assert!(history[0].snapshot);
    assert_eq!(v2.get_state("t", None).await.unwrap().values, done.state);
}

pub async fn an_old_thread_without_a_migration_is_a_schema_error(backend: &dyn Backend) {
    let store = backend.saver();
    saved_by_v1(store.clone()).await;

    let publishes = Arc::new(AtomicUsize::new(0));
    let mut g = StateGraph::<NotesV2Strict>::new();
    g.add_node("draft", |_s: Arc<NotesV2Strict>, _c: Context| async {
        Ok::<_, NodeError>(NotesV2StrictUpdate::default())
    });
    let count = publishes.clone();
    g.add_node("publish", move |_s: Arc<NotesV2Strict>, _c: Context| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, NodeError>(NotesV2StrictUpdate::default()) }
    });
    g.add_edge(START, "draft")
        .add_edge("draft", "publish")
        .add_edge("publish", END);
    let strict = g.compile().unwrap().with_checkpointer(store);

    let check = |err: RunError| {
        let message = err.to_string();
        match err {
            RunError::SchemaVersion {
                thread_id,
                found,
                expected,
                ..
            } => {
                assert_eq!((thread_id.as_str(), found, expected), ("t", 1, 2));
                assert!(
                    message.contains("version 1") && message.contains("version 2"),
                    "{message}"
                );
            }
            other => panic!("expected a schema version error, got {other:?}"),
        }
    };
    check(strict.get_state("t", None).await.unwrap_err());
    check(
        strict
            .resume("t", Resume::Continue, RunConfig::new())
            .await
            .unwrap_err(),
    );
    assert_eq!(publishes.load(Ordering::SeqCst), 0);
}

/// Version 3 renames `notes` to `entries`: old snapshots and old updates both need carrying over.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[state(version = 3, migrate = rename_notes, migrate_update = rename_notes)]
struct NotesV3 {
    title: String,
    #[state(append)]
    entries: Vec<String>,
}

/// The same rename without `migrate_update`: the old deltas cannot be read.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[state(version = 3, migrate = rename_notes)]
struct NotesV3NoUpdateMigration {
    title: String,
    #[state(append)]
    entries: Vec<String>,
}

fn rename_notes(_version: u32, mut value: serde_json::Value) -> Result<serde_json::Value, String> {
    if let Some(map) = value.as_object_mut() {
        if let Some(notes) = map.remove("notes") {
            map.insert("entries".to_string(), notes);
        }
    }
    Ok(value)
}

fn v3_reader<S: State>(store: Arc<dyn Checkpointer>) -> CompiledGraph<S> {
    let mut g = StateGraph::<S>::new();
    g.add_node("publish", |_s: Arc<S>, _c: Context| async {
        Ok::<_, NodeError>(stategraph::Command::<S>::empty())
    });
    g.add_edge(START, "publish").add_edge("publish", END);
    g.compile().unwrap().with_checkpointer(store)
}

pub async fn old_updates_go_through_migrate_update_or_fail_clearly(backend: &dyn Backend) {
    let store = backend.saver();
    saved_by_v1(store.clone()).await;
    // The paused v1 checkpoint holds `draft`'s write as a delta over the input snapshot.
    let v1 = v1_graph(store.clone());
    let latest = v1.history("t", Default::default()).await.unwrap();
    assert!(
        !latest[0].snapshot,
        "the v1 thread ends in a delta: {latest:?}"
    );

    let v3 = v3_reader::<NotesV3>(store.clone());
    let read = v3.get_state("t", None).await.unwrap();
    assert_eq!(read.values.title, "groceries");
    assert_eq!(read.values.entries, vec!["drafted".to_string()]);

    let strict = v3_reader::<NotesV3NoUpdateMigration>(store);
    let err = strict.get_state("t", None).await.unwrap_err();
    assert!(
        matches!(
            err,
            RunError::SchemaVersion {
                found: 1,
                expected: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("`notes`") && text.contains("migrate_update"),
        "{text}"
    );
}
