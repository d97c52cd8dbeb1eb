//! Records that broke other Postgres savers: a NUL character in a state (LangGraph #1878: JSONB
//! cannot hold one), a long thread id (#6239: a btree entry holds ~2.7 KB), and states of
//! megabytes, stored as pieces, pruned and read back.

use super::support::pg_cluster::cluster;
use super::{checkpoint, psql, snapshot_of, worker, Log, LogUpdate};
use serde_json::json;
use stategraph::runtime::{Context, NodeError, RunConfig};
use stategraph::{StateGraph, END, START};
use stategraph_checkpoint::{CheckpointError, Checkpointer, PendingKind, PendingWrite};
use std::sync::Arc;

#[tokio::test]
async fn a_nul_character_in_a_state_round_trips() {
    let db = cluster().database();
    let store: Arc<dyn Checkpointer> = Arc::new(worker(&db).await);
    let mut g = StateGraph::<Log>::new();
    g.add_node("echo", |_s: Arc<Log>, _c: Context| async {
        Ok::<_, NodeError>(LogUpdate::default().steps(vec!["bytes \u{0} after a NUL".to_string()]))
    });
    g.add_edge(START, "echo").add_edge("echo", END);
    let graph = g.compile().unwrap().with_checkpointer(store.clone());
    let input = LogUpdate::default().steps(vec!["\u{0}".to_string()]);
    let out = graph
        .invoke(input, RunConfig::new().thread("nul"))
        .await
        .unwrap();
    let read = graph.get_state("nul", None).await.unwrap().values;
    assert_eq!(read, out.state);
    assert_eq!(read.steps, ["\u{0}", "bytes \u{0} after a NUL"]);

    // A journal key and value with one too.
    let key = "call \u{0} key";
    store
        .put_journal("nul", key, &json!("\u{0}"))
        .await
        .unwrap();
    assert_eq!(
        store.get_journal("nul", key).await.unwrap(),
        Some(json!("\u{0}"))
    );
    assert_eq!(store.get_journal("nul", "call ").await.unwrap(), None);
}

#[tokio::test]
async fn thread_ids_and_keys_of_thousands_of_characters_work() {
    let db = cluster().database();
    let store = worker(&db).await;
    // A root id as long as ids may be, and a subgraph nested deep below it: 2,000+ characters.
    let root = "r".repeat(200);
    let path: Vec<String> = (0..130).map(|i| format!("node{i}:{i:08x}")).collect();
    let child = format!("{root}/{}", path.join("/"));
    assert!(child.len() > 2_000, "{}", child.len());

    let top = checkpoint(&root, None, json!({"steps": []}));
    store.put_checkpoint(&top, true).await.unwrap();
    let deep = checkpoint(&child, None, json!({"steps": ["deep"]}));
    store.put_checkpoint(&deep, true).await.unwrap();
    let write = PendingWrite {
        task: 0,
        node: "n".into(),
        kind: PendingKind::Error {
            message: "x".into(),
        },
    };
    store
        .put_writes(&child, deep.id, &[write], true)
        .await
        .unwrap();
    let long_key = format!("{}/{}", deep.id, "k".repeat(10_000));
    store
        .put_journal(&child, &long_key, &json!(7))
        .await
        .unwrap();

    let read = store.get_checkpoint(&child, None).await.unwrap().unwrap();
    assert_eq!(
        (read.id, read.thread_id.as_str()),
        (deep.id, child.as_str())
    );
    assert_eq!(store.get_writes(&child, deep.id).await.unwrap().len(), 1);
    assert_eq!(
        store.get_journal(&child, &long_key).await.unwrap(),
        Some(json!(7))
    );
    assert_eq!(
        store.list_threads().await.unwrap(),
        std::slice::from_ref(&root)
    );

    // The subgraph goes with its root, and so does a pruned checkpoint's recorded call.
    store.delete_checkpoints(&child, &[deep.id]).await.unwrap();
    assert_eq!(store.get_journal(&child, &long_key).await.unwrap(), None);
    store.put_checkpoint(&deep, true).await.unwrap();
    store.delete_thread(&root).await.unwrap();
    assert!(store.get_checkpoint(&child, None).await.unwrap().is_none());
    assert!(store.list_threads().await.unwrap().is_empty());
}

/// Text that content-defined chunking cuts everywhere alike, `len` bytes of it.
fn prose(len: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

#[tokio::test]
async fn a_state_of_megabytes_is_stored_once_as_pieces_pruned_and_read_back() {
    let db = cluster().database();
    let store = worker(&db).await;
    // 6 MB: pieces under two index levels.
    let text = prose(6 * 1024 * 1024, 7);
    let first = checkpoint("big", None, json!({"steps": [text]}));
    store.put_checkpoint(&first, true).await.unwrap();
    let grown = checkpoint("big", Some(first.id), json!({"steps": [text, "one more"]}));
    store.put_checkpoint(&grown, true).await.unwrap();
    let stored = store.stored_bytes("big").await.unwrap() as usize;
    assert!(
        stored < text.len() + text.len() / 10,
        "{stored} bytes for two snapshots of a {}-byte state",
        text.len()
    );

    store.delete_checkpoints("big", &[first.id]).await.unwrap();
    let read = store.get_checkpoint("big", None).await.unwrap().unwrap();
    assert_eq!(snapshot_of(&read), snapshot_of(&grown));

    // The records are the codec's bytes, in BYTEA; the pieces are named by their content.
    let client = psql(&db).await;
    let row = client
        .query_one(
            "SELECT count(*), min(octet_length(hash)) FROM stategraph_pieces",
            &[],
        )
        .await
        .unwrap();
    let (pieces, hash_len): (i64, i32) = (row.get(0), row.get(1));
    assert!(pieces > 1000, "{pieces} pieces");
    assert_eq!(hash_len, 16);

    store.delete_thread("big").await.unwrap();
    assert_eq!(store.stored_bytes("big").await.unwrap(), 0);
}

/// An application's own record in a thread's journal (the `graph` command's record of how a
/// thread was started, `graph/origin`): kept by a prune, which takes only the calls recorded
/// from the checkpoints it removes, and gone with the thread. A record whose bytes were damaged
/// in the database reads as damage, never as no record.
#[tokio::test]
async fn an_applications_record_outlives_a_prune_and_goes_with_its_thread() {
    let db = cluster().database();
    let store = worker(&db).await;
    let origin = json!({"graph": "pipeline", "overrides": ["step_ms=1"]});
    store
        .put_journal("app", "graph/origin", &origin)
        .await
        .unwrap();
    let first = checkpoint("app", None, json!({"steps": ["a"]}));
    store.put_checkpoint(&first, true).await.unwrap();
    let call = format!("{}/search:0", first.id);
    store
        .put_journal("app", &call, &json!("paid"))
        .await
        .unwrap();
    let second = checkpoint("app", Some(first.id), json!({"steps": ["a", "b"]}));
    store.put_checkpoint(&second, true).await.unwrap();

    store.delete_checkpoints("app", &[first.id]).await.unwrap();
    assert_eq!(store.get_journal("app", &call).await.unwrap(), None);
    assert_eq!(
        store.get_journal("app", "graph/origin").await.unwrap(),
        Some(origin.clone())
    );

    let client = psql(&db).await;
    client
        .execute(
            "UPDATE stategraph_journal SET value = '\\x00ff'::bytea WHERE key = $1",
            &[&b"graph/origin".as_slice()],
        )
        .await
        .unwrap();
    let damaged = store.get_journal("app", "graph/origin").await;
    assert!(
        matches!(damaged, Err(CheckpointError::Corrupt { .. })),
        "{damaged:?}"
    );

    store.delete_thread("app").await.unwrap();
    assert_eq!(
        store.get_journal("app", "graph/origin").await.unwrap(),
        None
    );
    assert_eq!(store.list_threads().await.unwrap(), Vec::<String>::new());
}
