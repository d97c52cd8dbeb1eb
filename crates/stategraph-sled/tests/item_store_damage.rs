//! A damaged item of `SledStore` is reported as damage naming it, never read as absent or as
//! another value; the rest of the store stays readable, and putting the item again mends it.

use stategraph_checkpoint::store::{SearchRequest, Store, StoreError};
use stategraph_sled::SledStore;

#[tokio::test]
async fn a_flipped_byte_is_reported_naming_the_item() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("items");
    {
        let store = SledStore::open(&path).unwrap();
        store
            .put(&["users", "ada"], "lang", serde_json::json!("Rust"))
            .await
            .unwrap();
        store
            .put(&["users", "bo"], "lang", serde_json::json!("Go"))
            .await
            .unwrap();
    }
    {
        // Flip one byte of ada's item, as a failing disk would, through sled itself.
        let db = sled::open(&path).unwrap();
        let (key, value) = db
            .iter()
            .map(Result::unwrap)
            .find(|(k, _)| k.starts_with(b"users\x1fada"))
            .unwrap();
        let mut bytes = value.to_vec();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        db.insert(key, bytes).unwrap();
        db.flush().unwrap();
    }
    let store = SledStore::open(&path).unwrap();
    let ada = vec!["users".to_string(), "ada".to_string()];
    let err = store.get(&ada, "lang").await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("users/ada") && text.contains("`lang`"),
        "{text}"
    );
    let search = store.search(&SearchRequest::under(&["users"])).await;
    assert!(
        matches!(search, Err(StoreError::Corrupt { .. })),
        "a search does not skip it"
    );
    let bo = vec!["users".to_string(), "bo".to_string()];
    assert!(
        store.get(&bo, "lang").await.unwrap().is_some(),
        "the rest reads"
    );
    store
        .put(&["users", "ada"], "lang", serde_json::json!("Rust"))
        .await
        .unwrap();
    assert!(
        store.get(&ada, "lang").await.unwrap().is_some(),
        "a put mends it"
    );
}
