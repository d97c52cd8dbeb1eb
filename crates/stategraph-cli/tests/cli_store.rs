//! `graph store ls|get|put|rm|search`: the long-term store beside the threads, through the
//! real binary, on a folder of threads (`<db>/items/`) and on a real Postgres database.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
mod pg_cluster;

use harness::{Db, TestCommand};
use serde_json::json;

/// The same commands and expectations on any `--db`.
fn store_commands(graph: &dyn Fn(&[&str]) -> TestCommand) {
    let run = |args: &[&str]| graph(args).env_remove("GRAPH_EMBEDDINGS_URL");
    run(&["store", "ls"]).expect(0).stderr_has(&["no items"]);
    run(&[
        "store",
        "put",
        "users/ada",
        "lang",
        r#"{"likes": "Rust", "kind": "pref"}"#,
    ])
    .expect(0);
    run(&[
        "store",
        "put",
        "users/ada",
        "pet",
        "her cat is called Miso",
        "--ttl",
        "30d",
    ])
    .expect(0);
    run(&[
        "store",
        "put",
        "users/bo",
        "lang",
        r#"{"likes": "Go", "kind": "pref"}"#,
    ])
    .expect(0);

    let got = run(&["store", "get", "users/ada", "lang", "--json"])
        .expect(0)
        .json();
    assert_eq!(got["value"], json!({"likes": "Rust", "kind": "pref"}));
    assert_eq!(got["namespace"], json!(["users", "ada"]));
    let pet = run(&["store", "get", "users/ada", "pet", "--json"])
        .expect(0)
        .json();
    assert_eq!(
        pet["value"], "her cat is called Miso",
        "text that is not JSON is a string"
    );
    let ttl = pet["expires_at_ms"].as_u64().unwrap() - pet["updated_at_ms"].as_u64().unwrap();
    assert_eq!(ttl, 30 * 86_400_000);

    let spaces = run(&["store", "ls", "users", "--json"]).expect(0).json();
    assert_eq!(spaces, json!([["users", "ada"], ["users", "bo"]]));
    let cut = run(&["store", "ls", "--depth", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(cut, json!([["users"]]));

    let prefs = run(&[
        "store",
        "search",
        "users",
        "--filter",
        "kind=pref",
        "--json",
    ])
    .expect(0)
    .json();
    let keys: Vec<(&str, &str)> = prefs
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["namespace"][1].as_str().unwrap(),
                h["key"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys, [("bo", "lang"), ("ada", "lang")], "newest first");
    run(&[
        "store",
        "put",
        "books/ada",
        "b1",
        r#"{"stars": 2, "title": "Go"}"#,
    ])
    .expect(0);
    run(&[
        "store",
        "put",
        "books/ada",
        "b2",
        r#"{"stars": 4, "title": "Rust"}"#,
    ])
    .expect(0);
    run(&[
        "store",
        "put",
        "books/ada",
        "b3",
        r#"{"stars": 5, "title": "Zig"}"#,
    ])
    .expect(0);
    let compared = |filters: &[&str]| {
        let mut args = vec!["store", "search", "books", "--json"];
        for f in filters {
            args.extend(["--filter", f]);
        }
        let hits = run(&args).expect(0).json();
        let mut keys: Vec<String> = (hits.as_array().unwrap().iter())
            .map(|h| h["key"].as_str().unwrap().to_string())
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(compared(&["stars>=4"]), ["b2", "b3"]);
    assert_eq!(compared(&["stars > 2", "stars<5"]), ["b2"]);
    assert_eq!(compared(&["title!=Go", "stars<=4"]), ["b2"]);
    assert_eq!(compared(&["stars=4", "title>A"]), ["b2"]);
    let found = run(&["store", "search", "--query", "cat", "--json"])
        .expect(0)
        .json();
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert_eq!(found[0]["key"], "pet");
    assert!(found[0]["score"].as_f64().unwrap() > 0.0);
    let table = run(&["store", "search", "users/ada"]).expect(0);
    assert!(table.stdout.contains("users/ada  pet"), "{}", table.stdout);

    run(&["store", "rm", "users/ada", "pet"])
        .expect(0)
        .stderr_has(&["deleted `pet`"]);
    run(&["store", "rm", "users/ada", "pet"])
        .expect(0)
        .stderr_has(&["nothing to delete"]);
    run(&["store", "get", "users/ada", "pet"])
        .expect(1)
        .stderr_has(&["no item `pet` in users/ada", "store search users/ada"]);
    run(&["store", "put", "a//b", "", "x"])
        .expect(2)
        .stderr_has(&["invalid key"]);
    run(&["store", "put", "a", "k", "v", "--ttl", "soon"])
        .expect(2)
        .stderr_has(&["not a duration"]);
    for bad in ["nokey", "=3", "stars!3"] {
        run(&["store", "search", "--filter", bad])
            .expect(2)
            .stderr_has(&["FIELD=VALUE", "(stars>=3)"]);
    }
}

#[test]
fn store_commands_on_a_folder_of_threads() {
    let db = Db::new();
    db.graph(&["store", "search", "users"]).expect(0);
    assert!(!db.path().join("items").exists(), "a read made no store");
    store_commands(&|args| db.graph(args));
    assert!(
        db.path().join("items").is_dir(),
        "the store lives beside the threads"
    );
    db.graph(&["threads"]).expect(0).stderr_has(&["no threads"]);
}

#[test]
fn store_commands_on_postgres() {
    let database = pg_cluster::cluster().database();
    let out = tempfile::tempdir().unwrap();
    store_commands(&|args| {
        let mut all = args.to_vec();
        all.extend(["--db", database.url()]);
        TestCommand::bare(&all)
            .without_model()
            .env("GRAPH_OUT", out.path())
            .env("XDG_DATA_HOME", out.path().join("data-home"))
    });
}
