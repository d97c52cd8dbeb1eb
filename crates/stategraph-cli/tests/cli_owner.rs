//! A second terminal reading threads while other processes run them, with real processes: the
//! owner channel works whatever the thread id's length and the store's depth (its socket path is
//! hashed, never built from them), and `graph threads` shows each thread's true step, whether it
//! was killed, paused, resumed then killed, or is running (then read through its owner).

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use serde_json::json;

/// The longest thread id the store takes (200 bytes).
fn longest_id() -> String {
    format!("long-{}", "a".repeat(195))
}

/// The STATUS and STEPS columns of `thread` in the `graph threads` table.
fn table_row(db: &Db, thread: &str) -> (String, u64) {
    let table = db.graph(&["threads"]).expect(0);
    let line = table
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{thread} ")))
        .unwrap_or_else(|| panic!("{thread} is not in the table\n{table}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    (cols[2].to_string(), cols[3].parse().expect("a step count"))
}

#[test]
fn a_running_thread_with_a_200_byte_id_in_a_deep_store_is_read_through_its_owner() {
    // A store path of over 200 bytes: with the thread id, far past a Unix socket path's limit.
    let parent = tempfile::tempdir().unwrap();
    let deep = parent.path().join("d".repeat(100)).join("e".repeat(100));
    std::fs::create_dir_all(&deep).unwrap();
    let db = Db::new_in(&deep);
    let thread = longest_id();
    assert_eq!(thread.len(), 200);
    let mut run = db
        .run_pipeline(2000, &["--yes", "--thread", &thread])
        .spawn();
    run.wait_for("step 2: draft #0 started");

    let listed = db.row(&thread);
    assert_eq!(listed["status"], "running", "{listed:#}");
    assert_eq!(listed["step"], 1, "{listed:#}");
    assert!(listed["created_at_ms"].is_u64(), "{listed:#}");
    assert_eq!(table_row(&db, &thread), ("running".to_string(), 1));
    // Served by the process that holds the thread's store (sled lets no other open it).
    let state = db.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["status"], "running");
    assert_eq!(state["step"], 1);
    assert_eq!(state["values"]["topic"], "sled");
    assert_eq!(state["next"], json!(["draft", "draft", "draft"]));
    let history = db.graph(&["history", &thread, "--json"]).expect(0).json();
    assert_eq!(history[0]["step"], 1, "{history:#}");
    assert!(run.is_running(), "the run is still going");

    let done = run.finish();
    assert_eq!(done.code, Some(0), "{done}");
    let listed = db.row(&thread);
    assert_eq!(
        (&listed["status"], &listed["step"]),
        (&json!("done"), &json!(4))
    );
}

#[test]
fn threads_shows_the_true_step_of_killed_paused_resumed_and_running_threads() {
    let db = Db::new();
    let slow = |thread: &str| {
        db.run_pipeline(1000, &["--yes", "--thread", thread])
            .spawn()
    };
    // Killed during publish (step 4): its last checkpoint is step 3.
    let mut killed = slow("killed");
    killed.wait_for("step 4: publish started");
    killed.signal(libc::SIGKILL);
    killed.finish();

    // Paused at review (step 2), then resumed and killed during publish: the index its first
    // process left says "paused, 2"; the store says step 3.
    let paused = db.run_pipeline(1, &["--thread", "paused"]).expect(3);
    paused.stderr_has(&["paused at step 2"]);
    db.run_pipeline(1, &["--thread", "still-paused"]).expect(3);
    let mut resumed = db
        .graph(&[
            "resume",
            "paused",
            "--resume",
            "yes",
            "--set",
            "step_ms=1000",
        ])
        .spawn();
    resumed.wait_for("step 4: publish started");
    resumed.signal(libc::SIGKILL);
    resumed.finish();

    let mut running = db
        .run_pipeline(5000, &["--yes", "--thread", "running"])
        .spawn();
    running.wait_for("step 2: draft #0 started");

    // The running one first, while its drafts (5 s or more) are still being written.
    let expected = [
        ("running", "running", 1),
        ("killed", "stopped", 3),
        ("paused", "stopped", 3),
        ("still-paused", "paused", 2),
    ];
    for (thread, status, step) in expected {
        let listed = db.row(thread);
        assert_eq!(
            (&listed["status"], &listed["step"]),
            (&json!(status), &json!(step)),
            "{thread}: {listed:#}"
        );
        assert_eq!(
            table_row(&db, thread),
            (status.to_string(), step),
            "{thread}"
        );
        // The same step as `state` and `history` say (for the running one, through its owner).
        let state = db.graph(&["state", thread, "--json"]).expect(0).json();
        assert_eq!(state["step"], step, "{thread}: {state:#}");
        let history = db.graph(&["history", thread, "--json"]).expect(0).json();
        assert_eq!(history[0]["step"], step, "{thread}: {history:#}");
    }
}
