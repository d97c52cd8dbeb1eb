//! The long-term store's conformance checks: what every [`Store`] backend promises (memory,
//! sled, Postgres), each check on a fresh store whose TTLs run on a [`FakeClock`].

use serde_json::json;
use stategraph::checkpoint::store::{
    Clock, FakeClock, NamespaceQuery, SearchRequest, Store, StoreError, StoreOp,
};
use std::sync::Arc;

/// A fresh store under test, on `clock`; whatever it needs (a directory, a database) lives
/// as long as the box.
pub trait StoreUnderTest: Send + Sync {
    /// The store.
    fn store(&self) -> Arc<dyn Store>;
}

/// Makes a fresh store on the clock given.
pub type MakeStore = dyn Fn(Arc<FakeClock>) -> Box<dyn StoreUnderTest> + Send + Sync;

fn ns(labels: &[&str]) -> Vec<String> {
    labels.iter().map(|s| s.to_string()).collect()
}

fn fresh(make: &MakeStore) -> (Box<dyn StoreUnderTest>, Arc<dyn Store>, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::at(1_000_000));
    let owner = make(clock.clone());
    let store = owner.store();
    (owner, store, clock)
}

/// A put is read back; a second put replaces the value and keeps the creation time.
pub async fn put_get_and_replace(make: &MakeStore) {
    let (_owner, store, clock) = fresh(make);
    assert_eq!(
        store.get(&ns(&["users", "ada"]), "lang").await.unwrap(),
        None
    );
    store
        .put(&["users", "ada"], "lang", json!({"likes": "Rust"}))
        .await
        .unwrap();
    let first = store
        .get(&ns(&["users", "ada"]), "lang")
        .await
        .unwrap()
        .expect("put");
    assert_eq!(first.value, json!({"likes": "Rust"}));
    assert_eq!(first.created_at_ms, 1_000_000);
    clock.advance(5);
    store
        .put(&["users", "ada"], "lang", json!({"likes": "Zig"}))
        .await
        .unwrap();
    let second = store
        .get(&ns(&["users", "ada"]), "lang")
        .await
        .unwrap()
        .expect("put");
    assert_eq!(second.value, json!({"likes": "Zig"}));
    assert_eq!(
        (second.created_at_ms, second.updated_at_ms),
        (1_000_000, 1_000_005)
    );
}

/// Any JSON is kept as given: a NUL character, unicode, nesting, numbers.
pub async fn values_are_kept_exactly(make: &MakeStore) {
    let (_owner, store, _) = fresh(make);
    let value = json!({"text": "a\u{0}b — ünïcode 🦀", "n": 1.5, "big": u64::MAX, "list": [null, true, {"x": []}]});
    store
        .put(&["odd labels", "ünï"], "k/with slash", value.clone())
        .await
        .unwrap();
    let item = store
        .get(&ns(&["odd labels", "ünï"]), "k/with slash")
        .await
        .unwrap();
    assert_eq!(item.map(|i| i.value), Some(value));
}

/// Delete removes; deleting what is not there is fine; namespaces keep keys apart.
pub async fn delete_and_namespaces_apart(make: &MakeStore) {
    let (_owner, store, _) = fresh(make);
    store.put(&["a"], "k", json!(1)).await.unwrap();
    store.put(&["a", "b"], "k", json!(2)).await.unwrap();
    store.put(&["ab"], "k", json!(3)).await.unwrap();
    store.delete(&["a"], "k").await.unwrap();
    store.delete(&["a"], "never-there").await.unwrap();
    assert_eq!(store.get(&ns(&["a"]), "k").await.unwrap(), None);
    let kept = store
        .get(&ns(&["a", "b"]), "k")
        .await
        .unwrap()
        .map(|i| i.value);
    assert_eq!(kept, Some(json!(2)));
    let under_a = store.search(&SearchRequest::under(&["a"])).await.unwrap();
    assert_eq!(
        under_a.len(),
        1,
        "`a` is a prefix of [a, b] but not of [ab]: {under_a:?}"
    );
}

/// A search selects by namespace prefix and field filters, newest first, a page at a time.
pub async fn search_filters_orders_and_pages(make: &MakeStore) {
    let (_owner, store, clock) = fresh(make);
    for i in 0..5 {
        let kind = if i % 2 == 0 { "pref" } else { "fact" };
        let value =
            json!({"kind": kind, "n": i, "who": {"name": "ada"}, "tags": ["t", format!("t{i}")]});
        store
            .put(&["users", "ada", "mem"], &format!("m{i}"), value)
            .await
            .unwrap();
        clock.advance(10);
    }
    store
        .put(&["users", "bo"], "m9", json!({"kind": "pref"}))
        .await
        .unwrap();
    let keys = |hits: Vec<stategraph::checkpoint::store::SearchHit>| {
        hits.into_iter().map(|h| h.item.key).collect::<Vec<_>>()
    };
    let all = store
        .search(&SearchRequest::under(&["users", "ada"]))
        .await
        .unwrap();
    assert_eq!(keys(all), ["m4", "m3", "m2", "m1", "m0"], "newest first");
    let prefs = store
        .search(&SearchRequest::under(&["users"]).filter("kind", "pref"))
        .await
        .unwrap();
    assert_eq!(keys(prefs), ["m9", "m4", "m2", "m0"]);
    let nested = SearchRequest::under(&["users"])
        .filter("who.name", "ada")
        .filter("tags", "t3");
    assert_eq!(keys(store.search(&nested).await.unwrap()), ["m3"]);
    let wildcard = SearchRequest::under(&["*", "ada"]).limit(2).offset(1);
    assert_eq!(keys(store.search(&wildcard).await.unwrap()), ["m3", "m2"]);
    let none = SearchRequest::under(&["users"]).filter("kind", "nope");
    assert!(store.search(&none).await.unwrap().is_empty());
}

/// A filter compares a field (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`): numbers as numbers,
/// text as text; a missing field meets only `$ne`.
pub async fn search_filters_compare(make: &MakeStore) {
    let (_owner, store, clock) = fresh(make);
    let values = [
        json!({"stars": 1, "name": "bo"}),
        json!({"stars": 3.5, "name": "ada"}),
        json!({"stars": 5, "name": "cy"}),
        json!({"name": "di"}),
    ];
    for (i, value) in values.into_iter().enumerate() {
        store.put(&["docs"], &format!("d{i}"), value).await.unwrap();
        clock.advance(10);
    }
    let keys = |filter: serde_json::Value| {
        let mut request = SearchRequest::under(&["docs"]);
        request.filter = filter.as_object().unwrap().clone();
        let store = &store;
        async move {
            let mut found: Vec<String> = (store.search(&request).await.unwrap().into_iter())
                .map(|h| h.item.key)
                .collect();
            found.sort();
            found
        }
    };
    assert_eq!(
        keys(json!({"stars": {"$gt": 1, "$lte": 5}})).await,
        ["d1", "d2"]
    );
    assert_eq!(keys(json!({"stars": {"$gte": 3.5}})).await, ["d1", "d2"]);
    assert_eq!(keys(json!({"stars": {"$lt": 3.5}})).await, ["d0"]);
    assert_eq!(keys(json!({"stars": {"$eq": 5.0}})).await, ["d2"]);
    assert_eq!(keys(json!({"stars": {"$ne": 5}})).await, ["d0", "d1", "d3"]);
    assert_eq!(keys(json!({"name": {"$gt": "bo"}})).await, ["d2", "d3"]);
    assert_eq!(
        keys(json!({"name": {"$gt": 1}})).await,
        Vec::<String>::new()
    );
}

/// A backend refuses a text query instead of answering it wrongly: an index answers those.
pub async fn text_query_needs_an_index(make: &MakeStore) {
    let (_owner, store, _) = fresh(make);
    store.put(&["a"], "k", json!("hello")).await.unwrap();
    let result = store
        .search(&SearchRequest::under(&["a"]).text("hello"))
        .await;
    assert!(matches!(result, Err(StoreError::NeedsIndex)), "{result:?}");
}

/// Namespaces are listed by prefix, suffix and depth, sorted, once each, a page at a time.
pub async fn namespaces_listed(make: &MakeStore) {
    let (_owner, store, _) = fresh(make);
    for (labels, key) in [
        (&["users", "ada", "prefs"][..], "1"),
        (&["users", "ada", "facts"], "1"),
        (&["users", "bo", "prefs"], "1"),
        (&["teams", "x", "prefs"], "1"),
        (&["users", "ada", "prefs"], "2"),
    ] {
        store.put(labels, key, json!(1)).await.unwrap();
    }
    let list = |q: NamespaceQuery| {
        let store = store.clone();
        async move { store.list_namespaces(&q).await.unwrap() }
    };
    assert_eq!(list(NamespaceQuery::default()).await.len(), 4);
    let users = NamespaceQuery {
        prefix: ns(&["users"]),
        max_depth: Some(2),
        ..Default::default()
    };
    assert_eq!(
        list(users).await,
        [ns(&["users", "ada"]), ns(&["users", "bo"])]
    );
    let prefs = NamespaceQuery {
        suffix: ns(&["prefs"]),
        ..Default::default()
    };
    assert_eq!(
        list(prefs).await,
        [
            ns(&["teams", "x", "prefs"]),
            ns(&["users", "ada", "prefs"]),
            ns(&["users", "bo", "prefs"])
        ]
    );
    let any = NamespaceQuery {
        prefix: ns(&["*", "ada"]),
        limit: 1,
        offset: 1,
        ..Default::default()
    };
    assert_eq!(list(any).await, [ns(&["users", "ada", "prefs"])]);
}

/// An item put with a TTL is gone from every read once it expires, and a sweep removes it.
pub async fn ttl_expires_and_sweeps(make: &MakeStore) {
    let (_owner, store, clock) = fresh(make);
    let op = StoreOp::Put {
        namespace: ns(&["s"]),
        key: "short".into(),
        value: json!(1),
        ttl_ms: Some(1_000),
    };
    store.batch(&[op]).await.unwrap();
    store.put(&["s"], "kept", json!(2)).await.unwrap();
    clock.advance(999);
    assert!(
        store.get(&ns(&["s"]), "short").await.unwrap().is_some(),
        "1 ms to go"
    );
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
    clock.advance(1);
    assert_eq!(store.get(&ns(&["s"]), "short").await.unwrap(), None);
    let hits = store.search(&SearchRequest::under(&["s"])).await.unwrap();
    assert_eq!(hits.len(), 1, "only the item without a TTL: {hits:?}");
    store.put(&["gone"], "x", json!(0)).await.unwrap();
    store.delete(&["gone"], "x").await.unwrap();
    assert_eq!(store.sweep_expired().await.unwrap(), 1);
    assert_eq!(store.sweep_expired().await.unwrap(), 0, "already swept");
    assert!(store.get(&ns(&["s"]), "kept").await.unwrap().is_some());
}

/// A read asked to refresh an item's TTL (`get_with(.., Some(true))`, a search with
/// `refresh_ttl`) keeps it living past its first expiry; a read that does not ask (the
/// default) leaves it to expire. Only the items a search returns are refreshed.
pub async fn ttl_refreshed_on_read(make: &MakeStore) {
    let (_owner, store, clock) = fresh(make);
    let start = clock.now_ms();
    let put = |key: &str, kind: &str| {
        StoreOp::put(&["r"], key, json!({ "kind": kind })).with_ttl_ms(1_000)
    };
    store
        .batch(&[
            put("got", "a"),
            put("plain", "a"),
            put("found", "b"),
            put("unreturned", "c"),
        ])
        .await
        .unwrap();
    store
        .put(&["r"], "forever", json!({"kind": "b"}))
        .await
        .unwrap();
    clock.advance(600);
    let got = store
        .get_with(&ns(&["r"]), "got", Some(true))
        .await
        .unwrap();
    let got = got.expect("live at 600 ms");
    assert_eq!(
        got.expires_at_ms,
        Some(start + 1_600),
        "the item read shows its new expiry"
    );
    assert_eq!(got.updated_at_ms, start, "a refresh is not a put");
    assert!(store.get(&ns(&["r"]), "plain").await.unwrap().is_some());
    let no = store
        .get_with(&ns(&["r"]), "unreturned", Some(false))
        .await
        .unwrap();
    assert_eq!(no.and_then(|i| i.expires_at_ms), Some(start + 1_000));
    let hits = store
        .search(
            &SearchRequest::under(&["r"])
                .filter("kind", "b")
                .refresh_ttl(true),
        )
        .await
        .unwrap();
    let keys: Vec<&str> = hits.iter().map(|h| h.item.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let found = hits.iter().find(|h| h.item.key == "found").unwrap();
    assert_eq!(found.item.expires_at_ms, Some(start + 1_600));
    let forever = hits.iter().find(|h| h.item.key == "forever").unwrap();
    assert_eq!(
        forever.item.expires_at_ms, None,
        "no TTL, nothing to refresh"
    );
    clock.advance(600);
    let live = |key: &'static str| {
        let store = store.clone();
        async move {
            store
                .get_with(&ns(&["r"]), key, Some(false))
                .await
                .unwrap()
                .is_some()
        }
    };
    assert!(live("got").await, "refreshed by get: lives until 1600 ms");
    assert!(
        live("found").await,
        "refreshed by search: lives until 1600 ms"
    );
    assert!(
        !live("plain").await,
        "read without refresh: expired at 1000 ms"
    );
    assert!(
        !live("unreturned").await,
        "not returned by the search: expired at 1000 ms"
    );
    assert!(live("forever").await);
    clock.advance(400);
    assert!(!live("got").await, "one refresh buys one TTL");
    assert_eq!(
        store
            .get_with(&ns(&["r"]), "got", Some(true))
            .await
            .unwrap(),
        None,
        "an expired item is not revived by a refreshing read"
    );
    assert_eq!(store.sweep_expired().await.unwrap(), 4);
}

/// A batch applies in order; an invalid op refuses the whole batch.
pub async fn batches_in_order_and_whole(make: &MakeStore) {
    let (_owner, store, _) = fresh(make);
    store
        .batch(&[
            StoreOp::put(&["b"], "x", json!(1)),
            StoreOp::delete(&["b"], "x"),
            StoreOp::put(&["b"], "y", json!(2)),
            StoreOp::put(&["b"], "y", json!(3)),
        ])
        .await
        .unwrap();
    assert_eq!(store.get(&ns(&["b"]), "x").await.unwrap(), None);
    assert_eq!(
        store.get(&ns(&["b"]), "y").await.unwrap().map(|i| i.value),
        Some(json!(3))
    );
    for bad in [
        StoreOp::put(&[], "k", json!(1)),
        StoreOp::put(&["a", ""], "k", json!(1)),
        StoreOp::put(&["a/b"], "k", json!(1)),
        StoreOp::put(&["a"], "", json!(1)),
    ] {
        let result = store
            .batch(&[StoreOp::put(&["b"], "z", json!(1)), bad.clone()])
            .await;
        assert!(result.is_err(), "{bad:?} was accepted");
    }
    assert_eq!(
        store.get(&ns(&["b"]), "z").await.unwrap(),
        None,
        "a refused batch wrote nothing"
    );
}

/// Every check, for `run_store_checks` and `store_suite!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_store_checks {
    ($callback:path { $($args:tt)* }) => {
        $callback!($($args)*;
            put_get_and_replace,
            values_are_kept_exactly,
            delete_and_namespaces_apart,
            search_filters_orders_and_pages,
            search_filters_compare,
            text_query_needs_an_index,
            namespaces_listed,
            ttl_expires_and_sweeps,
            ttl_refreshed_on_read,
            batches_in_order_and_whole,
        );
    };
}

/// Runs every store check, each on a fresh store from `make`.
pub async fn run_store_checks(make: &MakeStore) {
    macro_rules! each {
        (; $($check:ident),* $(,)?) => {
            $( $check(make).await; )*
        };
    }
    crate::__with_store_checks!(each {});
}

/// Instantiates every store check for one backend as `#[tokio::test]`s:
/// `store_suite!(sled: |clock| Box::new(MySled::new(clock)) as Box<dyn StoreUnderTest>);`.
#[macro_export]
macro_rules! store_suite {
    ($backend:ident: $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_store_checks!($crate::__store_tests { $make });
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __store_tests {
    ($make:expr; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let make = $make;
                $crate::store_checks::$check(&make).await;
            }
        )*
    };
}
