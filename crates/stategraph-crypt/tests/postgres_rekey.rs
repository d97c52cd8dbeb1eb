//! `rekey` over Postgres: a thread paused mid-step under an old key is rewritten in place under
//! the holder's lease (fenced: a holder whose lease was taken over rewrites nothing), the
//! database's rows then hold no plaintext, and the thread resumes with the old key dropped.

#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
#[allow(dead_code)]
mod pg_cluster;

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{now_ms, CheckpointError, Checkpointer, Lease};
use stategraph::runtime::{Context, NodeError, Resume, RunConfig};
use stategraph::{State, StateGraph, END, START};
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
use stategraph_postgres::PostgresCheckpointer;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SECRET: &str = "the user's card number is 4111";

#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Notes {
    #[state(append)]
    notes: Vec<String>,
}

fn ring(keys: &[(&str, u8)]) -> Keyring {
    Keyring::new(
        keys.iter()
            .map(|(id, b)| Key::new(id, [*b; 32]).unwrap())
            .collect(),
    )
    .unwrap()
}

fn sealed(inner: &Arc<PostgresCheckpointer>, keys: &[(&str, u8)]) -> Arc<EncryptedCheckpointer> {
    Arc::new(EncryptedCheckpointer::new(inner.clone(), ring(keys)))
}

/// `pay` records a call (counted), then asks a person to confirm it.
fn paying(
    store: Arc<dyn Checkpointer>,
    calls: Arc<AtomicUsize>,
) -> stategraph::graph::CompiledGraph<Notes> {
    let mut g = StateGraph::<Notes>::new();
    g.add_node("pay", move |_s: Arc<Notes>, ctx: Context| {
        let calls = calls.clone();
        async move {
            let receipt: String = ctx
                .record("charge", || async move {
                    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok::<_, NodeError>(format!("receipt #{n} for {SECRET}"))
                })
                .await?;
            let answer: String = ctx.interrupt(&receipt).await?;
            Ok::<_, NodeError>(NotesUpdate::default().notes(vec![receipt, answer]))
        }
    });
    g.add_edge(START, "pay").add_edge("pay", END);
    g.compile().unwrap().with_checkpointer(store)
}

fn lease(owner: &str, expires_at_ms: u64) -> Lease {
    Lease {
        owner: owner.into(),
        pid: std::process::id(),
        host: "test".into(),
        expires_at_ms,
    }
}

/// The key id every sealed value of the thread's rows names, from the rows themselves.
async fn row_key_ids(url: &str) -> (Vec<String>, bool) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut ids = Vec::new();
    let mut plaintext = false;
    for table in [
        "stategraph_checkpoints",
        "stategraph_writes",
        "stategraph_pieces",
    ] {
        let column = if table == "stategraph_pieces" {
            "bytes"
        } else {
            "record"
        };
        for row in client
            .query(&format!("SELECT {column} FROM {table}"), &[])
            .await
            .unwrap()
        {
            let bytes: Vec<u8> = row.get(0);
            plaintext |= String::from_utf8_lossy(&bytes).contains("card number");
        }
    }
    for row in client
        .query("SELECT value FROM stategraph_journal", &[])
        .await
        .unwrap()
    {
        let bytes: Vec<u8> = row.get(0);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        plaintext |= text.contains("card number");
        for id in ["old.", "new."] {
            if text.contains(id) {
                ids.push(id.trim_end_matches('.').to_string());
            }
        }
    }
    (ids, plaintext)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_thread_is_rekeyed_in_place_under_a_fenced_lease_and_resumes() {
    let db = pg_cluster::cluster().database();
    let connect = || async { Arc::new(PostgresCheckpointer::connect(db.url()).await.unwrap()) };
    let calls = Arc::new(AtomicUsize::new(0));
    let first = connect().await;
    let paused = paying(sealed(&first, &[("old", 1)]), calls.clone())
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    let (ids, plaintext) = row_key_ids(db.url()).await;
    assert_eq!(
        ids,
        vec!["old"],
        "the recorded call, sealed under the old key"
    );
    assert!(!plaintext, "no plaintext in the database's rows");

    // A holder whose lease lapsed and was taken over by another: its rewrite is refused by
    // the fence, inside the transaction, and changes nothing.
    let stale = connect().await;
    let lapsed = lease("stale", now_ms() - 1);
    assert_eq!(
        stale.swap_lease("t", None, Some(&lapsed)).await.unwrap(),
        Ok(())
    );
    let other = connect().await;
    let taker = lease("other", now_ms() + 60_000);
    assert_eq!(
        other
            .swap_lease("t", Some(&lapsed), Some(&taker))
            .await
            .unwrap(),
        Ok(())
    );
    let e = sealed(&stale, &[("new", 2), ("old", 1)])
        .rekey("t")
        .await
        .unwrap_err();
    assert!(matches!(e, CheckpointError::ThreadBusy { .. }), "{e}");
    let newest = first.get_checkpoint("t", None).await.unwrap().unwrap();
    assert!(
        serde_json::to_string(&newest).unwrap().contains("\"old."),
        "a refused rewrite left the checkpoint as it was"
    );
    assert_eq!(row_key_ids(db.url()).await.0, vec!["old"]);

    // The live holder rewrites the thread in place: checkpoints, writes, the journal entry.
    let count = |store: &Arc<PostgresCheckpointer>| {
        let store = store.clone();
        async move { store.list_checkpoints("t", None, 100).await.unwrap().len() }
    };
    let before = count(&first).await;
    let report = sealed(&other, &[("new", 2), ("old", 1)])
        .rekey("t")
        .await
        .unwrap();
    assert_eq!(report.checkpoints, before, "{report:?}");
    assert_eq!(report.journal, 1, "{report:?}");
    assert_eq!(count(&first).await, before, "rewritten in place, not added");
    let (ids, plaintext) = row_key_ids(db.url()).await;
    assert_eq!(ids, vec!["new"]);
    assert!(!plaintext);
    assert_eq!(
        other.swap_lease("t", Some(&taker), None).await.unwrap(),
        Ok(())
    );

    // The old key dropped, on a handle of its own: the paused step resumes, its call reused.
    let done = paying(sealed(&connect().await, &[("new", 2)]), calls.clone())
        .resume("t", Resume::value("confirmed").unwrap(), RunConfig::new())
        .await
        .unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the recorded call was reused"
    );
    assert_eq!(
        done.state.notes,
        vec![format!("receipt #1 for {SECRET}"), "confirmed".to_string()]
    );
}
