//! Encryption at rest through the `graph` command: with GRAPH_ENCRYPTION_KEY set every command
//! reads and writes sealed records; the store's files hold no plaintext of the run; a missing or
//! wrong key is exit 2 with the thread named; keys rotate and `graph rekey` moves threads to the
//! newest; a run killed with SIGKILL resumes under encryption without rerunning saved steps.
//! The same on Postgres (`--db postgres://`, a throwaway cluster): the database's rows hold no
//! plaintext, and a paused thread resumes after rekey with the old key dropped.
//! And `graph prune --policy` applies a graph file's `[retention]`.

#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
#[allow(dead_code)]
mod pg_cluster;

use harness::{Db, Output, Project, TestCommand};
use std::path::Path;

const KEY: &str = "GRAPH_ENCRYPTION_KEY";
/// Two keys (32 bytes each, base64): 0x01 x 32 and 0x02 x 32.
const A: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const B: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// The run's input, looked for in the store's files.
const TOPIC: &str = "zanzibar otters";

fn with_key(cmd: TestCommand, keys: &str) -> TestCommand {
    cmd.env(KEY, keys).env_remove("GRAPH_ENCRYPTION_KEY_FILE")
}

fn run_finished(db: &Db, keys: &str) -> String {
    let args = [
        "run",
        "pipeline",
        "--input",
        TOPIC,
        "--yes",
        "--set",
        "step_ms=1",
    ];
    with_key(db.graph(&args), keys).expect(0).thread()
}

/// True when any file under `dir` holds `needle`.
fn files_hold(dir: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            files_hold(&p, needle)
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle)
        }
    })
}

fn state(db: &Db, thread: &str, keys: Option<&str>) -> TestCommand {
    let cmd = db.graph(&["state", thread, "--json"]);
    match keys {
        Some(k) => with_key(cmd, k),
        None => cmd.env_remove(KEY).env_remove("GRAPH_ENCRYPTION_KEY_FILE"),
    }
}

#[test]
fn a_sealed_store_reads_back_and_its_files_hold_no_plaintext() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("k1:{A}"));
    let read = state(&db, &thread, Some(&format!("k1:{A}")))
        .expect(0)
        .json();
    assert!(read["values"].to_string().contains(TOPIC), "{read:#}");
    assert!(
        !files_hold(&db.path().join("threads"), TOPIC.as_bytes()),
        "the input reached the store's files in plaintext"
    );
    // The listing still says where each thread stands without a key.
    let rows = db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(rows[0]["status"], "done", "{rows:#}");
}

fn refused(out: &Output, thread: &str, words: &str) {
    assert!(out.stderr.contains(thread), "{out}");
    assert!(out.stderr.contains(words), "{out}");
    assert!(!out.stderr.contains("damaged"), "{out}");
}

#[test]
fn a_missing_or_wrong_key_is_exit_2_naming_the_thread() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("k1:{A}"));
    let none = state(&db, &thread, None).expect(2);
    refused(&none, &thread, "`k1`");
    let wrong = state(&db, &thread, Some(&format!("k1:{B}"))).expect(2);
    refused(&wrong, &thread, "different key");
    let other = state(&db, &thread, Some(&format!("k2:{B}"))).expect(2);
    refused(&other, &thread, "not among the configured");
    let bad = state(&db, &thread, Some("k1:not-a-key")).expect(2);
    assert!(bad.stderr.contains("base64"), "{bad}");
}

#[test]
fn keys_rotate_and_rekey_lets_the_old_one_go() {
    let db = Db::new();
    let thread = run_finished(&db, &format!("old:{A}"));
    let both = format!("new:{B},old:{A}");
    let before = state(&db, &thread, Some(&both)).expect(0).json()["values"].clone();
    let rekeyed = with_key(db.graph(&["rekey", "--all", "--json"]), &both)
        .expect(0)
        .json();
    assert_eq!(rekeyed["key"], "new");
    assert!(
        rekeyed["threads"][0]["checkpoints"].as_u64().unwrap() > 0,
        "{rekeyed:#}"
    );
    let after = state(&db, &thread, Some(&format!("new:{B}")))
        .expect(0)
        .json();
    assert_eq!(after["values"], before);
    // Without a key, rekey says what to set.
    let no_key = db.graph(&["rekey", &thread]).env_remove(KEY).expect(2);
    assert!(no_key.stderr.contains("GRAPH_ENCRYPTION_KEY"), "{no_key}");
}

#[test]
fn kill_9_then_resume_under_encryption_reruns_no_saved_step() {
    let db = Db::new();
    let keys = format!("k1:{A}");
    let args = [
        "run",
        "pipeline",
        "--input",
        TOPIC,
        "--yes",
        "--set",
        "step_ms=1000",
    ];
    let mut run = with_key(db.graph(&args), &keys).spawn();
    let thread = run.thread();
    run.wait_for("publish started");
    run.signal(libc::SIGKILL);
    assert_eq!(run.finish().code, None);
    let resumed = with_key(db.graph(&["resume", &thread]), &keys).expect(0);
    for node in ["outline", "review"] {
        assert!(
            !resumed.stderr.contains(&format!(": {node} started")),
            "{node} was saved and must not run again\n{resumed}"
        );
    }
    let read = state(&db, &thread, Some(&keys)).expect(0).json();
    let log: Vec<String> = serde_json::from_value(read["values"]["log"].clone()).unwrap();
    assert_eq!(
        log,
        ["outline", "draft 0", "draft 1", "draft 2", "review", "publish"]
    );
    assert!(!files_hold(&db.path().join("threads"), TOPIC.as_bytes()));
}

#[test]
fn prune_by_policy_applies_the_graph_files_retention() {
    let db = Db::new();
    let project = Project::new();
    project.graph_file("pipeline", |text| {
        format!("{text}\n[retention]\nkeep_checkpoints = 2\n")
    });
    let in_project = |args: &[&str]| db.graph(args).current_dir(project.path());
    let done = in_project(&[
        "run",
        "pipeline",
        "--input",
        "x",
        "--yes",
        "--set",
        "step_ms=1",
    ])
    .expect(0)
    .thread();
    let paused = in_project(&["run", "pipeline", "--input", "y", "--set", "step_ms=1"])
        .expect(3)
        .thread();
    let count = |thread: &str| {
        let h = db.graph(&["history", thread, "--json"]).expect(0).json();
        h.as_array().map(Vec::len).unwrap_or(0)
    };
    let paused_before = count(&paused);
    assert!(count(&done) > 2 && paused_before > 2);

    let report = in_project(&["prune", "--policy", "--json"])
        .expect(0)
        .json();
    let graphs = report["graphs"].as_array().unwrap();
    let pipeline = graphs.iter().find(|g| g["graph"] == "pipeline").unwrap();
    assert_eq!(
        pipeline["report"]["pruned"][0]["thread"],
        done.as_str(),
        "{report:#}"
    );
    assert_eq!(count(&done), 2);
    assert_eq!(
        count(&paused),
        paused_before,
        "a paused thread is not touched"
    );
    // The finished thread still reads.
    db.graph(&["state", &done, "--json"]).expect(0);
}

/// With a key set, `graph store put` seals the item's value: the items folder holds no
/// plaintext of it; read without the key it is exit 2 naming the item and the key, with a
/// wrong key exit 2, with the key its value. `graph rekey --all` moves items to a new key, and
/// `graph prune --policy` removes the items past their TTL and says how many.
#[test]
fn store_items_are_sealed_rekeyed_and_expired_ones_pruned() {
    let db = Db::new();
    let old = format!("k1:{A}");
    let secret = "the vault code is 7731";
    let graph = |args: &[&str], keys: Option<&str>| {
        let cmd = db.graph(args).env_remove("GRAPH_EMBEDDINGS_URL");
        match keys {
            Some(k) => with_key(cmd, k),
            None => cmd.env_remove(KEY).env_remove("GRAPH_ENCRYPTION_KEY_FILE"),
        }
    };
    graph(&["store", "put", "users/ada", "vault", secret], Some(&old)).expect(0);
    let note = ["store", "put", "users/ada", "note", "likes tea"];
    graph(&note, Some(&old)).expect(0);
    assert!(db.path().join("items").is_dir());
    assert!(
        !files_hold(&db.path().join("items"), b"7731"),
        "plaintext on disk"
    );

    let get = ["store", "get", "users/ada", "vault", "--json"];
    graph(&get, None).expect(2).stderr_has(&[
        "`vault`",
        "users/ada",
        "`k1`",
        "GRAPH_ENCRYPTION_KEY",
    ]);
    graph(&get, Some(&format!("k1:{B}")))
        .expect(2)
        .stderr_has(&["`vault`", "different key"]);
    let got = graph(&get, Some(&old)).expect(0).json();
    assert_eq!(got["value"], secret);
    let found = graph(&["store", "search", "users", "--json"], Some(&old))
        .expect(0)
        .json();
    assert!(found.to_string().contains(secret), "{found}");

    // Rotation: the new key first, the old one after; rekey --all seals the items again.
    let both = format!("k2:{B},k1:{A}");
    let rekeyed = graph(&["rekey", "--all", "--json"], Some(&both))
        .expect(0)
        .json();
    assert_eq!(rekeyed["items"]["rewritten"], 2, "{rekeyed:#}");
    let only_new = format!("k2:{B}");
    assert_eq!(
        graph(&get, Some(&only_new)).expect(0).json()["value"],
        secret
    );

    // Put last, so the other commands' time does not count against its TTL.
    let brief = ["store", "put", "users/ada", "brief", "gone", "--ttl", "1s"];
    graph(&brief, Some(&only_new)).expect(0);
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    let pruned = graph(&["prune", "--policy"], Some(&only_new)).expect(0);
    pruned.stderr_has(&["removed 1 expired item(s)"]);
    let report = graph(&["prune", "--policy", "--json"], Some(&only_new))
        .expect(0)
        .json();
    assert_eq!(report["items"]["expired_removed"], 0, "{report:#}");
    graph(&get, Some(&only_new)).expect(0);
}

/// The tables of `url` whose stored records (checkpoints, pending writes, journal values,
/// pieces) hold `needle`, read straight from the database.
fn tables_holding(url: &str, needle: &[u8]) -> Vec<&'static str> {
    let (url, needle) = (url.to_string(), needle.to_vec());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let mut found = Vec::new();
            for (table, column) in [
                ("stategraph_checkpoints", "record"),
                ("stategraph_writes", "record"),
                ("stategraph_journal", "value"),
                ("stategraph_pieces", "bytes"),
            ] {
                let rows = client
                    .query(&format!("SELECT {column} FROM {table}"), &[])
                    .await
                    .unwrap();
                assert!(!rows.is_empty() || table != "stategraph_checkpoints");
                if rows.iter().any(|r| {
                    let bytes: Vec<u8> = r.get(0);
                    bytes.windows(needle.len()).any(|w| w == needle.as_slice())
                }) {
                    found.push(table);
                }
            }
            found
        })
    })
    .join()
    .unwrap()
}

#[test]
fn on_postgres_rows_hold_no_plaintext_and_rekey_lets_the_old_key_go() {
    let database = pg_cluster::cluster().database();
    let out = tempfile::tempdir().unwrap();
    let graph = |args: &[&str], keys: Option<&str>| {
        let mut all = args.to_vec();
        all.extend(["--db", database.url()]);
        let cmd = TestCommand::bare(&all)
            .without_model()
            .env("GRAPH_OUT", out.path())
            .env("XDG_DATA_HOME", out.path().join("data-home"));
        match keys {
            Some(k) => with_key(cmd, k),
            None => cmd.env_remove(KEY).env_remove("GRAPH_ENCRYPTION_KEY_FILE"),
        }
    };
    let old = format!("old:{A}");
    let run = ["run", "pipeline", "--input", TOPIC, "--set", "step_ms=1"];
    let paused = graph(&run, Some(&old)).expect(3).thread();
    let finished = graph(&[&run[..], &["--yes"]].concat(), Some(&old))
        .expect(0)
        .thread();
    let none: Vec<&str> = Vec::new();
    assert_eq!(tables_holding(database.url(), TOPIC.as_bytes()), none);
    assert!(!tables_holding(database.url(), b"\"old.").is_empty());

    // A missing or wrong key: exit 2, the thread named, never "damaged".
    let state = |thread: &str, keys: Option<&str>| graph(&["state", thread, "--json"], keys);
    refused(&state(&paused, None).expect(2), &paused, "`old`");
    let wrong = state(&paused, Some(&format!("old:{B}"))).expect(2);
    refused(&wrong, &paused, "different key");

    // Rotated: the new key first; rekey --all rewrites both threads, subgraphs and journal.
    let both = format!("new:{B},{old}");
    let before = state(&paused, Some(&both)).expect(0).json()["values"].clone();
    let rekeyed = graph(&["rekey", "--all", "--json"], Some(&both))
        .expect(0)
        .json();
    assert_eq!(rekeyed["key"], "new", "{rekeyed:#}");
    let threads = rekeyed["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{rekeyed:#}");
    for t in threads {
        assert!(t["error"].is_null(), "{rekeyed:#}");
        assert!(t["checkpoints"].as_u64().unwrap() > 0, "{rekeyed:#}");
    }
    // Checkpoints and journal entries are rewritten in place; a pending write is copied (a
    // store only appends writes), the copy read in its place.
    assert_eq!(
        tables_holding(database.url(), b"\"old."),
        vec!["stategraph_writes"]
    );
    let again = graph(&["rekey", "--all", "--json"], Some(&both))
        .expect(0)
        .json();
    assert_eq!(again["threads"][0]["checkpoints"], 0, "{again:#}");

    // The old key dropped: both threads read, and the paused one resumes to the end.
    let new = format!("new:{B}");
    assert_eq!(
        state(&paused, Some(&new)).expect(0).json()["values"],
        before
    );
    state(&finished, Some(&new)).expect(0);
    graph(&["resume", &paused, "--resume", "yes"], Some(&new)).expect(0);
    let read = state(&paused, Some(&new)).expect(0).json();
    let log: Vec<String> = serde_json::from_value(read["values"]["log"].clone()).unwrap();
    assert_eq!(log.last().map(String::as_str), Some("publish"), "{read:#}");
    assert_eq!(tables_holding(database.url(), TOPIC.as_bytes()), none);
}
