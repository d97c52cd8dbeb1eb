//! `EncryptedStore`: the long-term store's checks over memory and sled with every value sealed,
//! and what encryption adds: no plaintext value reaches the backend (nor sled's files), a
//! missing key, a wrong key, a flipped byte and an item moved to another key are each their
//! own clear error naming the item, and rotation with `rekey_items`.

use serde_json::json;
use stategraph_checkpoint::store::{
    FakeClock, Item, MemoryStore, SearchRequest, Store, StoreError, StoreOp,
};
use stategraph_checkpoint::SealFault;
use stategraph_checkpoint_conformance::store_checks::StoreUnderTest;
use stategraph_checkpoint_conformance::store_suite;
use stategraph_crypt::{rekey_items, EncryptedStore, Envelope, Key, Keyring};
use stategraph_sled::SledStore;
use std::sync::Arc;

fn keys(list: &[(&str, u8)]) -> Keyring {
    Keyring::new(
        list.iter()
            .map(|(id, byte)| Key::new(id, [*byte; 32]).unwrap())
            .collect(),
    )
    .unwrap()
}

fn ns(labels: &[&str]) -> Vec<String> {
    labels.iter().map(|s| s.to_string()).collect()
}

struct Sealed {
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

impl StoreUnderTest for Sealed {
    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }
}

fn over_memory(clock: Arc<FakeClock>) -> Box<dyn StoreUnderTest> {
    let backend = Arc::new(MemoryStore::with_clock(clock));
    Box::new(Sealed {
        store: Arc::new(EncryptedStore::new(backend, keys(&[("k1", 1)]))),
        _dir: None,
    })
}

fn over_sled(clock: Arc<FakeClock>) -> Box<dyn StoreUnderTest> {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(SledStore::open_with_clock(dir.path().join("items"), clock).unwrap());
    Box::new(Sealed {
        store: Arc::new(EncryptedStore::new(backend, keys(&[("k1", 1)]))),
        _dir: Some(dir),
    })
}

store_suite!(sealed_memory: super::over_memory);
store_suite!(sealed_sled: super::over_sled);

const SECRET: &str = "the door code is 4512";

fn fault_of(result: Result<Option<Item>, StoreError>) -> (SealFault, String) {
    match result {
        Err(e @ StoreError::Sealed { fault, .. }) => (fault, e.to_string()),
        other => panic!("expected a sealed-item error, got {other:?}"),
    }
}

#[tokio::test]
async fn no_plaintext_reaches_the_backend_or_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("items");
    {
        let backend = Arc::new(SledStore::open(&path).unwrap());
        let store = EncryptedStore::new(backend.clone(), keys(&[("k1", 1)]));
        store
            .put(&["users", "ada"], "door", json!({"note": SECRET}))
            .await
            .unwrap();
        let stored = backend.get(&ns(&["users", "ada"]), "door").await.unwrap();
        let stored = stored.unwrap();
        assert!(Envelope::from_value(&stored.value).is_some(), "{stored:?}");
        assert!(!stored.value.to_string().contains("4512"));
        let read = store.get(&ns(&["users", "ada"]), "door").await.unwrap();
        assert_eq!(read.unwrap().value["note"], SECRET);
        backend.flush().await.unwrap();
    }
    let mut files = vec![path];
    let mut seen = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            let bytes = std::fs::read(&p).unwrap();
            seen += bytes.len();
            assert!(
                !bytes.windows(4).any(|w| w == b"4512"),
                "{} holds the plaintext",
                p.display()
            );
        }
    }
    assert!(seen > 0, "sled wrote files");
}

#[tokio::test]
async fn missing_key_wrong_key_flipped_byte_and_moved_item_are_told_apart() {
    let backend = Arc::new(MemoryStore::new());
    let store = EncryptedStore::new(backend.clone(), keys(&[("k1", 1)]));
    let at = ns(&["users", "ada"]);
    store
        .put(&["users", "ada"], "door", json!(SECRET))
        .await
        .unwrap();

    let (fault, message) = fault_of(
        EncryptedStore::new(backend.clone(), Keyring::none())
            .get(&at, "door")
            .await,
    );
    assert_eq!(fault, SealFault::KeyMissing);
    assert!(
        message.contains("`door`") && message.contains("users/ada"),
        "{message}"
    );
    assert!(message.contains("k1"), "names the key it needs: {message}");

    let wrong = EncryptedStore::new(backend.clone(), keys(&[("k1", 2)]));
    let (fault, message) = fault_of(wrong.get(&at, "door").await);
    assert_eq!(fault, SealFault::WrongKey, "{message}");

    let other_id = EncryptedStore::new(backend.clone(), keys(&[("k2", 1)]));
    assert_eq!(
        fault_of(other_id.get(&at, "door").await).0,
        SealFault::KeyMissing
    );

    // One byte of the sealed text flipped.
    let stored = backend.get(&at, "door").await.unwrap().unwrap();
    let mut env = Envelope::from_value(&stored.value).unwrap();
    let segment = &mut env.segments[0];
    let flip_at = segment.len() - 5;
    let flipped = if &segment[flip_at..flip_at + 1] == "A" {
        "B"
    } else {
        "A"
    };
    segment.replace_range(flip_at..flip_at + 1, flipped);
    let tampered = StoreOp::put(&["users", "ada"], "door", env.to_value());
    backend.batch(&[tampered]).await.unwrap();
    let (fault, message) = fault_of(store.get(&at, "door").await);
    assert_eq!(fault, SealFault::Tampered, "{message}");
    assert!(message.contains("`door`"), "{message}");
    // A search meeting it fails too: damage is never read as absent.
    let searched = store.search(&SearchRequest::under(&["users"])).await;
    assert!(matches!(
        searched,
        Err(StoreError::Sealed {
            fault: SealFault::Tampered,
            ..
        })
    ));

    // A sealed value moved to another key (or namespace) does not open.
    store
        .put(&["users", "ada"], "door", json!(SECRET))
        .await
        .unwrap();
    let sealed = backend.get(&at, "door").await.unwrap().unwrap().value;
    backend
        .batch(&[
            StoreOp::put(&["users", "ada"], "moved", sealed.clone()),
            StoreOp::put(&["users", "bo"], "door", sealed),
        ])
        .await
        .unwrap();
    assert_eq!(
        fault_of(store.get(&at, "moved").await).0,
        SealFault::Tampered
    );
    let (fault, _) = fault_of(store.get(&ns(&["users", "bo"]), "door").await);
    assert_eq!(fault, SealFault::Tampered);

    // Plaintext put behind its back is refused while encryption is on, unless allowed.
    backend
        .put(&["users", "ada"], "plain", json!("hi"))
        .await
        .unwrap();
    assert_eq!(
        fault_of(store.get(&at, "plain").await).0,
        SealFault::NotSealed
    );
    let lenient = EncryptedStore::new(backend.clone(), keys(&[("k1", 1)])).reading_plaintext(true);
    assert_eq!(
        lenient.get(&at, "plain").await.unwrap().unwrap().value,
        "hi"
    );
}

#[tokio::test]
async fn filters_run_on_opened_values_and_page() {
    let store = EncryptedStore::new(Arc::new(MemoryStore::new()), keys(&[("k1", 1)]));
    for i in 0..5 {
        let kind = if i % 2 == 0 { "even" } else { "odd" };
        store
            .put(&["n"], &format!("{i}"), json!({"kind": kind, "i": i}))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let hits = store
        .search(&SearchRequest::under(&["n"]).filter("kind", "even").limit(2))
        .await
        .unwrap();
    let keys: Vec<&str> = hits.iter().map(|h| h.item.key.as_str()).collect();
    assert_eq!(keys, ["4", "2"], "newest first, two of three");
    let text = store
        .search(&SearchRequest::under(&["n"]).text("even"))
        .await;
    assert!(matches!(text, Err(StoreError::NeedsIndex)));
}

#[tokio::test]
async fn rotation_then_rekey_items_lets_the_old_key_go() {
    let backend = Arc::new(MemoryStore::new());
    let old = EncryptedStore::new(backend.clone(), keys(&[("old", 1)]));
    old.put(&["a"], "1", json!("first")).await.unwrap();
    old.batch(&[StoreOp::put(&["a"], "2", json!("second")).with_ttl_ms(3_600_000)])
        .await
        .unwrap();
    backend.put(&["a"], "3", json!("plain")).await.unwrap();
    let expiry = backend
        .get(&ns(&["a"]), "2")
        .await
        .unwrap()
        .unwrap()
        .expires_at_ms;

    // Rotated: new writes under `new`, old items still read while `old` is configured.
    let both = EncryptedStore::new(backend.clone(), keys(&[("new", 2), ("old", 1)]));
    both.put(&["a"], "4", json!("fourth")).await.unwrap();
    assert_eq!(
        both.get(&ns(&["a"]), "1").await.unwrap().unwrap().value,
        "first"
    );
    let stored = backend.get(&ns(&["a"]), "4").await.unwrap().unwrap();
    assert_eq!(
        Envelope::from_value(&stored.value).unwrap().key_id(),
        Some("new")
    );

    let report = rekey_items(&both).await.unwrap();
    assert_eq!((report.resealed, report.current), (3, 1));
    let again = rekey_items(&both).await.unwrap();
    assert_eq!(
        (again.resealed, again.current),
        (0, 4),
        "nothing left to do"
    );

    let only_new = EncryptedStore::new(backend.clone(), keys(&[("new", 2)]));
    for (key, value) in [
        ("1", "first"),
        ("2", "second"),
        ("3", "plain"),
        ("4", "fourth"),
    ] {
        let item = only_new.get(&ns(&["a"]), key).await.unwrap().unwrap();
        assert_eq!(item.value, value);
    }
    let kept = backend
        .get(&ns(&["a"]), "2")
        .await
        .unwrap()
        .unwrap()
        .expires_at_ms;
    let (before, after) = (expiry.unwrap(), kept.unwrap());
    assert!(
        after.abs_diff(before) < 60_000,
        "expiry kept: {before} {after}"
    );

    let none = EncryptedStore::new(backend, Keyring::none());
    assert!(matches!(
        rekey_items(&none).await,
        Err(StoreError::Sealed {
            fault: SealFault::KeyMissing,
            ..
        })
    ));
}
