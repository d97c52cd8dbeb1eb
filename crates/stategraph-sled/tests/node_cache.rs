//! `SledCache`: entries survive the cache being dropped and opened again (as by another
//! process), clear by graph and node, and a damaged entry is reported as damaged, never read
//! as another value.

use stategraph_checkpoint::{CacheEntry, CacheError, CacheKey, NodeCache};
use stategraph_sled::{tamper_cache_entries, SledCache};

fn entry(n: u32) -> CacheEntry {
    let raw = serde_json::value::to_raw_value(&serde_json::json!({ "n": n })).unwrap();
    CacheEntry::new(raw, 1, None)
}

#[tokio::test]
async fn entries_are_kept_cleared_and_damage_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = SledCache::of_store(tmp.path());
    let a = CacheKey::new("g1", "fetch", "k1");
    let b = CacheKey::new("g1", "rank", "k1");
    let c = CacheKey::new("g2", "fetch", "k1");
    assert!(cache.get(&a).await.unwrap().is_none());
    assert!(!cache.dir().exists(), "a read made nothing");
    for (i, k) in [&a, &b, &c].into_iter().enumerate() {
        cache.put(k, &entry(i as u32)).await.unwrap();
    }
    drop(cache);

    let again = SledCache::of_store(tmp.path());
    let got = again.get(&b).await.unwrap().unwrap();
    assert_eq!(got.value.get(), r#"{"n":1}"#);
    assert_eq!(again.clear(None, Some("fetch")).await.unwrap(), 2);
    assert!(again.get(&a).await.unwrap().is_none());
    assert!(again.get(&c).await.unwrap().is_none());
    assert!(again.get(&b).await.unwrap().is_some());

    again.put(&a, &entry(7)).await.unwrap();
    assert_eq!(tamper_cache_entries(again.dir()).unwrap(), 2);
    match again.get(&a).await {
        Err(CacheError::Damaged { key, .. }) => assert_eq!(key, a),
        other => panic!("a damaged entry read as {other:?}"),
    }
    assert_eq!(again.clear(Some("g1"), None).await.unwrap(), 2);
    assert_eq!(again.clear(Some("g1"), None).await.unwrap(), 0);
}
