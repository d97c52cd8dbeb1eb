//! Encrypted threads as a user meets them: a graph run over a sealed store reads back; the
//! backend holds no plaintext; keys rotate and `rekey` moves a thread to the newest key; a
//! missing or wrong key and an altered record are clear errors naming the thread.

use serde::{Deserialize, Serialize};
use stategraph::checkpoint::{
    CheckpointError, Checkpointer, MemoryCheckpointer, PendingKind, SealFault, StateData,
};
use stategraph::runtime::{Context, NodeError, RunConfig, RunError};
use stategraph::{State, StateGraph, END, START};
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
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

fn sealed(inner: &Arc<MemoryCheckpointer>, keys: &[(&str, u8)]) -> Arc<EncryptedCheckpointer> {
    Arc::new(EncryptedCheckpointer::new(inner.clone(), ring(keys)))
}

/// Three steps, each noting the secret; the middle one records a call in the journal.
fn graph(store: Arc<dyn Checkpointer>) -> stategraph::graph::CompiledGraph<Notes> {
    let mut g = StateGraph::<Notes>::new();
    g.add_node("ask", |_s: Arc<Notes>, _c: Context| async {
        Ok::<_, NodeError>(NotesUpdate::default().notes(vec![SECRET.to_string()]))
    });
    g.add_node("answer", |_s: Arc<Notes>, _c: Context| async {
        Ok::<_, NodeError>(NotesUpdate::default().notes(vec!["noted".to_string()]))
    });
    g.add_edge(START, "ask")
        .add_edge("ask", "answer")
        .add_edge("answer", END);
    g.compile().unwrap().with_checkpointer(store)
}

/// Every stored checkpoint's bytes, as the backend holds them.
async fn stored_bytes(inner: &MemoryCheckpointer, thread: &str) -> Vec<Vec<u8>> {
    let ids: Vec<_> = (inner.list_checkpoints(thread, None, 100).await.unwrap())
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut out = Vec::new();
    for id in ids {
        inner.tamper(thread, id, |b| out.push(b.clone()));
    }
    out
}

fn sealed_fault(e: &RunError) -> (String, SealFault, String) {
    match e {
        RunError::Checkpoint(CheckpointError::Sealed {
            thread,
            fault,
            detail,
        }) => (thread.clone(), *fault, e.to_string() + " / " + detail),
        other => panic!("expected a sealed-record error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_run_reads_back_and_the_backend_holds_no_plaintext() {
    let inner = Arc::new(MemoryCheckpointer::new());
    let store = sealed(&inner, &[("k1", 1)]);
    let g = graph(store.clone());
    let out = g
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t1"))
        .await
        .unwrap();
    assert_eq!(out.state.notes, vec![SECRET.to_string(), "noted".into()]);
    assert_eq!(g.get_state("t1", None).await.unwrap().values, out.state);
    let history = g.get_state_history("t1", Default::default()).await.unwrap();
    assert!(history.len() >= 3);

    let bytes = stored_bytes(&inner, "t1").await;
    assert!(bytes.len() >= 3);
    for b in &bytes {
        assert!(
            !String::from_utf8_lossy(b).contains("card number"),
            "plaintext reached the backend"
        );
    }
    // The backend's own view: records shaped as ever, states sealed.
    let newest = inner.get_checkpoint("t1", None).await.unwrap().unwrap();
    assert!(newest.frontier.is_done());
    assert!(
        matches!(&newest.state, StateData::Delta(w) if w[0].node == "$sealed")
            || matches!(&newest.state, StateData::Snapshot(raw) if raw.get().starts_with("{\"$sealed\""))
    );
}

#[tokio::test]
async fn keys_rotate_and_rekey_moves_a_thread_to_the_newest() {
    let inner = Arc::new(MemoryCheckpointer::new());
    let old = graph(sealed(&inner, &[("old", 1)]));
    let before = old
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap()
        .state;
    // Writes under the old key, kept for the rekey below to move.
    let id = inner.get_checkpoint("t", None).await.unwrap().unwrap().id;
    let w = stategraph::checkpoint::PendingWrite {
        task: 0,
        node: "answer".into(),
        kind: PendingKind::Error {
            message: format!("failed on {SECRET}"),
        },
    };
    sealed(&inner, &[("old", 1)])
        .put_writes("t", id, &[w], true)
        .await
        .unwrap();

    // A new key first, the old one still configured: everything reads.
    let both = sealed(&inner, &[("new", 2), ("old", 1)]);
    assert_eq!(
        graph(both.clone())
            .get_state("t", None)
            .await
            .unwrap()
            .values,
        before
    );
    // New writes use the new key.
    both.put_journal("t", "j", &serde_json::json!(SECRET))
        .await
        .unwrap();
    let j = inner.get_journal("t", "j").await.unwrap().unwrap();
    assert!(j["$sealed"][0].as_str().unwrap().starts_with("new."));

    let report = both.rekey("t").await.unwrap();
    assert!(report.checkpoints >= 3, "{report:?}");
    assert_eq!(report.writes, 1);
    assert_eq!(both.rekey("t").await.unwrap().checkpoints, 0, "done once");

    // The old key removed: checkpoints and writes still read, the write once.
    let new_only = sealed(&inner, &[("new", 2)]);
    assert_eq!(
        graph(new_only.clone())
            .get_state("t", None)
            .await
            .unwrap()
            .values,
        before
    );
    let writes = new_only.get_writes("t", id).await.unwrap();
    assert_eq!(writes.len(), 1);
    assert!(matches!(&writes[0].kind, PendingKind::Error { message } if message.contains(SECRET)));
    assert_eq!(
        new_only.get_journal("t", "j").await.unwrap(),
        Some(serde_json::json!(SECRET))
    );
}

#[tokio::test]
async fn a_missing_or_wrong_key_is_a_clear_error_naming_the_thread() {
    let inner = Arc::new(MemoryCheckpointer::new());
    graph(sealed(&inner, &[("k1", 1)]))
        .invoke(
            NotesUpdate::default(),
            RunConfig::new().thread("secret-thread"),
        )
        .await
        .unwrap();

    // No key configured at all.
    let none = Arc::new(EncryptedCheckpointer::new(inner.clone(), Keyring::none()));
    let e = graph(none)
        .get_state("secret-thread", None)
        .await
        .unwrap_err();
    let (thread, fault, text) = sealed_fault(&e);
    assert_eq!(
        (thread.as_str(), fault),
        ("secret-thread", SealFault::KeyMissing)
    );
    assert!(text.contains("`k1`") && !text.contains("damaged"), "{text}");

    // Another key under another id, and another key under the same id.
    let e = graph(sealed(&inner, &[("k2", 2)]))
        .get_state("secret-thread", None)
        .await
        .unwrap_err();
    assert_eq!(sealed_fault(&e).1, SealFault::KeyMissing);
    let e = graph(sealed(&inner, &[("k1", 2)]))
        .get_state("secret-thread", None)
        .await
        .unwrap_err();
    let (thread, fault, text) = sealed_fault(&e);
    assert_eq!(
        (thread.as_str(), fault),
        ("secret-thread", SealFault::WrongKey)
    );
    assert!(text.contains("different key"), "{text}");
}

#[tokio::test]
async fn an_altered_or_moved_record_is_tampering() {
    let inner = Arc::new(MemoryCheckpointer::new());
    let store = sealed(&inner, &[("k1", 1)]);
    graph(store.clone())
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap();
    let stored = inner.get_checkpoint("t", None).await.unwrap().unwrap();

    // One character of the sealed text flipped, the record stored again (its checksum is the
    // backend's, recomputed: what an attacker with write access would do).
    let mut flipped = stored.clone();
    let flip = |raw: &serde_json::value::RawValue| {
        let mut text = raw.get().to_string();
        let at = text.len() - 6;
        let c = if &text[at..at + 1] == "A" { "B" } else { "A" };
        text.replace_range(at..at + 1, c);
        serde_json::value::RawValue::from_string(text).unwrap()
    };
    flipped.state = match &stored.state {
        StateData::Snapshot(raw) => StateData::Snapshot(flip(raw)),
        StateData::Delta(w) => {
            let mut w = w.clone();
            w[0].update = flip(&w[0].update);
            StateData::Delta(w)
        }
    };
    inner.put_checkpoint(&flipped, true).await.unwrap();
    let e = store.get_checkpoint("t", None).await.unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Sealed { fault: SealFault::Tampered, thread, .. } if thread == "t"),
        "{e}"
    );

    // A clear field changed (the step), the sealed part intact: tampering too.
    let mut restep = stored.clone();
    restep.step += 1;
    inner.put_checkpoint(&restep, true).await.unwrap();
    let e = store.get_checkpoint("t", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            CheckpointError::Sealed {
                fault: SealFault::Tampered,
                ..
            }
        ),
        "{e}"
    );

    // The intact record copied into another thread does not open there.
    let mut moved = stored.clone();
    moved.thread_id = "other".into();
    inner.put_checkpoint(&moved, true).await.unwrap();
    let e = store.get_checkpoint("other", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            CheckpointError::Sealed {
                fault: SealFault::Tampered,
                ..
            }
        ),
        "{e}"
    );

    // Put back as it was, it reads again.
    inner.put_checkpoint(&stored, true).await.unwrap();
    assert!(store.get_checkpoint("t", None).await.unwrap().is_some());
}

#[tokio::test]
async fn plaintext_is_refused_until_rekey_seals_it() {
    let inner = Arc::new(MemoryCheckpointer::new());
    let plain = graph(inner.clone());
    let out = plain
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap()
        .state;
    let store = sealed(&inner, &[("k1", 1)]);
    let e = graph(store.clone()).get_state("t", None).await.unwrap_err();
    assert_eq!(sealed_fault(&e).1, SealFault::NotSealed);

    let migrating = Arc::new(
        EncryptedCheckpointer::new(inner.clone(), ring(&[("k1", 1)])).reading_plaintext(true),
    );
    assert!(migrating.rekey("t").await.unwrap().checkpoints >= 3);
    assert_eq!(graph(store).get_state("t", None).await.unwrap().values, out);
    for b in stored_bytes(&inner, "t").await {
        assert!(!String::from_utf8_lossy(&b).contains("card number"));
    }
}

/// `pay` records a call (counted in `calls`), then asks a person to confirm: a thread paused
/// there holds a journal entry written mid-step.
fn paying_graph(
    store: Arc<dyn Checkpointer>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
) -> stategraph::graph::CompiledGraph<Notes> {
    use std::sync::atomic::Ordering;
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

#[tokio::test]
async fn a_thread_paused_mid_step_resumes_after_rekey_without_the_old_key() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let inner = Arc::new(MemoryCheckpointer::new());
    let calls = Arc::new(AtomicUsize::new(0));
    let paused = paying_graph(sealed(&inner, &[("old", 1)]), calls.clone())
        .invoke(NotesUpdate::default(), RunConfig::new().thread("t"))
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The call's result waits in the journal, sealed under the old key.
    let keys = inner.list_journal("t").await.unwrap();
    let charge: Vec<&String> = keys.iter().filter(|k| k.ends_with("/charge")).collect();
    assert_eq!(charge.len(), 1, "{keys:?}");
    let stored = inner.get_journal("t", charge[0]).await.unwrap().unwrap();
    assert!(stored["$sealed"][0].as_str().unwrap().starts_with("old."));

    // Rotated: the new key first, the old one kept while rekey reads it.
    let report = sealed(&inner, &[("new", 2), ("old", 1)])
        .rekey("t")
        .await
        .unwrap();
    assert!(report.checkpoints >= 1, "{report:?}");
    assert_eq!(report.journal, 1, "{report:?}");
    let stored = inner.get_journal("t", charge[0]).await.unwrap().unwrap();
    assert!(stored["$sealed"][0].as_str().unwrap().starts_with("new."));
    assert!(!stored.to_string().contains("card number"));
    let again = sealed(&inner, &[("new", 2), ("old", 1)])
        .rekey("t")
        .await
        .unwrap();
    assert_eq!((again.checkpoints, again.journal), (0, 0), "done once");

    // The old key dropped: the paused step resumes, its call not made again.
    let done = paying_graph(sealed(&inner, &[("new", 2)]), calls.clone())
        .resume(
            "t",
            stategraph::runtime::Resume::value("confirmed").unwrap(),
            RunConfig::new(),
        )
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
