//! `--db postgres://...` (or `GRAPH_DB`): every command that works on a store directory works on
//! a real Postgres database (a throwaway cluster, `stategraph-postgres/tests/support`), a run
//! killed with SIGKILL resumes without running a saved step again, a database that cannot be
//! reached says what failed within a second or two, and no printed command holds a password.

#[path = "../../../tests/support/cli.rs"]
mod harness;

#[allow(dead_code)]
#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
mod pg_cluster;

use harness::{Output, TestCommand};
use pg_cluster::{cluster, TestDatabase, PASSWORD, PASSWORD_USER};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A database of its own, and a folder for the runs' files.
struct Pg {
    db: TestDatabase,
    out: tempfile::TempDir,
}

impl Pg {
    fn new() -> Pg {
        Pg {
            db: cluster().database(),
            out: tempfile::tempdir().unwrap(),
        }
    }

    /// `graph <args> --db URL`.
    fn graph(&self, args: &[&str]) -> TestCommand {
        let mut all = args.to_vec();
        all.extend(["--db", self.db.url()]);
        self.plain(&all)
    }

    /// `graph <args>` with the database in `GRAPH_DB`, as the README tells people to give it.
    fn by_env(&self, args: &[&str]) -> TestCommand {
        self.plain(args).env("GRAPH_DB", self.db.url())
    }

    fn plain(&self, args: &[&str]) -> TestCommand {
        TestCommand::bare(args)
            .without_model()
            .env("GRAPH_OUT", self.out.path())
            // The default store directory is never touched: it would be here.
            .env("XDG_DATA_HOME", self.out.path().join("data-home"))
    }

    fn history(&self, thread: &str) -> Vec<Value> {
        let out = self.graph(&["history", thread, "--json"]).expect(0);
        out.json().as_array().unwrap().clone()
    }
}

fn ids(history: &[Value]) -> Vec<String> {
    history
        .iter()
        .map(|h| h["checkpoint_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_thread_command_works_on_postgres() {
    let pg = Pg::new();
    let paused = pg
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "durable agents",
            "--set",
            "step_ms=1",
        ])
        .expect(3);
    let thread = paused.thread();
    // The follow-up command repeats the database (no password in it, so as given).
    let repeated = format!("--db '{}'", pg.db.url());
    paused.stderr_has(&[&format!("graph resume {thread}"), &repeated]);
    assert!(
        !pg.out.path().join("data-home").exists(),
        "nothing was written to the default store directory"
    );

    let listed = pg.by_env(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed}");
    assert_eq!(listed[0]["status"], "paused");
    assert_eq!(listed[0]["graph"], "pipeline");
    let table = pg.by_env(&["threads"]).expect(0);
    assert!(table.stdout.contains(&thread), "{table}");

    let state = pg.graph(&["state", &thread, "--json"]).expect(0).json();
    assert_eq!(state["next"], json!(["review"]));
    assert_eq!(state["values"]["topic"], "durable agents");
    let history = pg.history(&thread);
    assert_eq!(history.len(), 3, "input, outline, drafts: {history:?}");

    // update: approve as if `review` had run.
    pg.graph(&[
        "update",
        &thread,
        "--set-json",
        r#"{"approved": true, "title": "Edited"}"#,
        "--as-node",
        "review",
    ])
    .expect(0);
    assert_eq!(
        pg.graph(&["state", &thread, "--json"]).expect(0).json()["next"],
        json!(["publish"])
    );

    // fork the checkpoint before the edit, under a new id; the copy keeps its origin.
    let before_edit = history[0]["checkpoint_id"].as_str().unwrap().to_string();
    let forked = pg
        .graph(&[
            "fork",
            &thread,
            "--checkpoint",
            &before_edit,
            "--to",
            "copy",
        ])
        .expect(0);
    assert_eq!(forked.stdout.trim(), "copy");
    pg.graph(&[
        "fork",
        &thread,
        "--checkpoint",
        &before_edit,
        "--to",
        "copy",
    ])
    .expect(2)
    .stderr_has(&["already exists"]);
    let copy = pg.graph(&["state", "copy", "--json"]).expect(0).json();
    assert_eq!(copy["next"], json!(["review"]));

    // resume and rerun.
    let done = pg.graph(&["resume", &thread]).expect(0);
    assert!(done.stdout.starts_with("# Edited"), "{done}");
    let copy_done = pg.graph(&["resume", "copy", "--resume", "yes"]).expect(0);
    assert!(
        copy_done.stdout.starts_with("# A short guide"),
        "{copy_done}"
    );
    let rerun = pg.graph(&["rerun", &thread, "--from", "publish"]).expect(0);
    assert!(rerun.stdout.starts_with("# Edited"), "{rerun}");
    assert!(
        !rerun.stderr.contains("draft"),
        "only publish ran again\n{rerun}"
    );

    // A new run on an existing id is refused; so is one on an unknown thread's resume.
    pg.graph(&["run", "pipeline", "--input", "x", "--thread", &thread])
        .expect(2)
        .stderr_has(&["already exists", "graph resume"]);
    pg.graph(&["resume", "ghost"])
        .expect(2)
        .stderr_has(&["no thread `ghost`"]);

    // prune: every thread down to its newest checkpoint, which still reads.
    let before = pg.history(&thread).len();
    let pruned = pg
        .graph(&["prune", "--keep", "1", "--json"])
        .expect(0)
        .json();
    let removed = pruned["removed"].as_u64().unwrap() as usize;
    assert!(removed >= before - 1, "{pruned}");
    assert_eq!(pg.history(&thread).len(), 1);
    let state = pg.graph(&["state", &thread, "--json"]).expect(0).json();
    assert!(state["values"]["document"]
        .as_str()
        .unwrap()
        .starts_with("# Edited"));

    // repair: nothing to mend in a sound thread.
    pg.graph(&["repair", &thread])
        .expect(0)
        .stderr_has(&["is healthy", "nothing was changed"]);

    // delete.
    pg.graph(&["delete", "copy"]).expect(0);
    for args in [["state", "copy"], ["delete", "copy"], ["history", "copy"]] {
        pg.graph(&args).expect(2).stderr_has(&["no thread `copy`"]);
    }
    let listed = pg.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

#[test]
fn artifacts_are_written_and_restored_from_postgres() {
    let pg = Pg::new();
    let out = pg
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "sled",
            "--yes",
            "--set",
            "step_ms=1",
            "--set",
            "artifacts=true",
        ])
        .expect(0);
    let thread = out.thread();
    let listed = pg.graph(&["artifacts", &thread, "--json"]).expect(0).json();
    let text = listed.to_string();
    assert!(
        text.contains("document.md") && text.contains("outline.json"),
        "{listed}"
    );
    let folder = listed["folder"]["dir"].as_str().unwrap().to_string();
    let document = std::path::Path::new(&folder).join("document.md");
    std::fs::remove_file(&document).unwrap();
    pg.graph(&["artifacts", &thread, "--restore"]).expect(0);
    let again = std::fs::read_to_string(&document).unwrap();
    assert!(again.starts_with("# A short guide to sled"), "{again}");
}

#[test]
fn a_killed_run_resumes_without_running_a_saved_step_again() {
    let pg = Pg::new();
    let mut running = pg
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "kill",
            "--yes",
            "--set",
            "step_ms=1500",
        ])
        .spawn();
    let thread = running.thread();
    // While it runs, the thread is its alone.
    running.wait_for("outline started");
    assert_eq!(
        pg.graph(&["threads", "--json"]).expect(0).json()[0]["status"],
        "running"
    );
    pg.graph(&["delete", &thread])
        .expect(1)
        .stderr_has(&["busy"]);
    pg.graph(&["run", "pipeline", "--input", "x", "--thread", &thread])
        .expect(1)
        .stderr_has(&["busy"]);
    // Killed in the middle of the parallel drafts: the first (the shortest) has finished and
    // its result is saved (a task is reported done before its write is saved: waited for).
    running.wait_for("draft #0 done");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pg.graph(&["state", &thread, "--json"]).expect(0).json()["completed"]
        .as_array()
        .is_none_or(|c| c.is_empty())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first draft's result was never saved"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.signal(libc::SIGKILL);
    let killed = running.finish();
    assert_eq!(killed.code, None, "killed by a signal\n{killed}");
    let at_kill = pg.history(&thread);
    let state = pg.graph(&["state", &thread, "--json"]).expect(0).json();
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    let (next, saved) = (list(&state["next"]), list(&state["completed"]));
    assert!(!next.is_empty(), "the kill came mid-run: {state}");

    // The lease of the dead process binds no more: the resume continues from the newest step,
    // without the tasks whose results were saved.
    let done = pg.graph(&["resume", &thread]).expect(0);
    assert!(done.stdout.starts_with("# A short guide to kill"), "{done}");
    // How many tasks of `node` the resume started.
    let started = |node: &str| {
        let (alone, task) = (format!(": {node} started"), format!(": {node} #"));
        done.stderr
            .lines()
            .filter(|l| l.ends_with(" started") && (l.contains(&alone) || l.contains(&task)))
            .count()
    };
    assert!(
        !saved.is_empty(),
        "a draft was saved before the kill: {state}"
    );
    for node in saved.iter().chain(&next) {
        let waiting = next.iter().filter(|n| *n == node).count();
        assert_eq!(
            started(node),
            waiting,
            "the resume ran {node} {} time(s), and exactly the {waiting} task(s) not saved \
             before the kill should have run\n{state}\n{done}",
            started(node)
        );
    }
    assert_eq!(started("outline"), 0, "outline ran again\n{done}");
    let after = pg.history(&thread);
    let (before_ids, after_ids) = (ids(&at_kill), ids(&after));
    assert!(
        after_ids.ends_with(&before_ids),
        "every checkpoint saved before the kill is still in the chain, and no step was run \
         again on another branch:\nbefore {before_ids:?}\nafter {after_ids:?}"
    );
    let steps: Vec<i64> = after.iter().map(|h| h["step"].as_i64().unwrap()).collect();
    assert!(
        steps.windows(2).all(|w| w[0] == w[1] + 1),
        "one checkpoint per step, newest first: {steps:?}"
    );
}

/// A port of 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn timed(command: TestCommand) -> (Output, Duration) {
    let start = Instant::now();
    let out = command.output();
    (out, start.elapsed())
}

#[test]
fn a_database_that_cannot_be_used_says_what_failed_at_once() {
    let port = cluster().port();
    let pg = Pg::new();
    let cases = [
        (
            format!(
                "postgres://postgres@127.0.0.1:{}/db?sslmode=disable",
                closed_port()
            ),
            "cannot reach Postgres at 127.0.0.1:",
        ),
        (
            format!(
                "postgres://{PASSWORD_USER}:Zq9-not-it@127.0.0.1:{port}/postgres?sslmode=disable"
            ),
            "refused user `sg_password_user`",
        ),
        (
            format!("postgres://postgres@127.0.0.1:{port}/no_such_db?sslmode=disable"),
            "database `no_such_db` does not exist",
        ),
    ];
    // A server that accepts connections and never answers (not Postgres, or hung).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!(
        "postgres://postgres@{}/db?sslmode=disable",
        silent.local_addr().unwrap()
    );
    let (out, took) = timed(pg.plain(&["threads", "--db", &silent_url]));
    assert_eq!(out.code, Some(1), "{out}");
    assert!(out.stderr.contains("did not finish the handshake"), "{out}");
    assert!(took < Duration::from_millis(3500), "took {took:?}\n{out}");
    eprintln!("a server that never answers: reported in {took:?}");
    for (url, said) in cases {
        for command in [
            pg.plain(&["threads", "--db", &url]),
            pg.plain(&["run", "pipeline", "--input", "x"])
                .env("GRAPH_DB", &url),
        ] {
            let (out, took) = timed(command);
            assert_eq!(out.code, Some(1), "{out}");
            assert!(out.stderr.contains(said), "{said:?}\n{out}");
            assert!(out.stderr.contains("--db (or GRAPH_DB)"), "{out}");
            assert!(
                !out.stderr.contains("Zq9-not-it"),
                "the password is never printed\n{out}"
            );
            assert!(took < Duration::from_millis(2500), "took {took:?}\n{out}");
            eprintln!("{said:?} in {took:?}");
        }
    }
    pg.plain(&[
        "threads",
        "--db",
        "postgres://postgres@127.0.0.1:notaport/db",
    ])
    .expect(2)
    .stderr_has(&["invalid Postgres connection string"]);
}

#[test]
fn a_password_is_never_printed_in_a_follow_up_command() {
    let pg = Pg::new();
    cluster()
        .admin(&format!(
            "ALTER DATABASE \"{}\" OWNER TO {PASSWORD_USER}",
            pg.db.name()
        ))
        .unwrap();
    let url = format!(
        "postgres://{PASSWORD_USER}:{PASSWORD}@127.0.0.1:{}/{}?sslmode=disable",
        cluster().port(),
        pg.db.name()
    );
    let paused = pg
        .plain(&[
            "run",
            "pipeline",
            "--input",
            "x",
            "--set",
            "step_ms=1",
            "--db",
            &url,
        ])
        .expect(3);
    let thread = paused.thread();
    paused.stderr_has(&[
        &format!("graph resume {thread} --resume <ANSWER> --db \"$GRAPH_DB\""),
        "keep the URL in GRAPH_DB",
    ]);
    assert!(!paused.stderr.contains(PASSWORD), "{paused}");
    // As printed, with the URL in GRAPH_DB (the shell expands "$GRAPH_DB"): it works.
    pg.plain(&["resume", &thread, "--resume", "yes", "--db", &url])
        .env("GRAPH_DB", &url)
        .expect(0)
        .stderr_has(&["keep the URL in GRAPH_DB"]);
    pg.plain(&["threads"]).env("GRAPH_DB", &url).expect(0);
}

#[test]
fn a_damaged_record_of_how_a_thread_started_is_detected_and_repaired() {
    let pg = Pg::new();
    let thread = pg
        .graph(&["run", "pipeline", "--input", "x", "--set", "step_ms=1"])
        .expect(3)
        .thread();
    cluster()
        .sql(
            pg.db.name(),
            "UPDATE stategraph_journal SET value = '\\x00ff'::bytea WHERE key = 'graph/origin'::bytea",
        )
        .unwrap();
    let listed = pg.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(listed[0]["status"], "damaged", "{listed}");
    pg.graph(&["threads"])
        .expect(0)
        .stderr_has(&["damaged threads: `graph repair <THREAD> --db"]);
    pg.graph(&["resume", &thread, "--resume", "yes"])
        .expect(1)
        .stderr_has(&["cannot be read", "graph repair"]);
    pg.graph(&["state", &thread])
        .expect(0)
        .stderr_has(&["warning: the record of how thread"]);
    pg.graph(&["repair", &thread])
        .expect(0)
        .stderr_has(&["repaired thread", "now names graph `pipeline`"]);
    pg.graph(&["resume", &thread, "--resume", "yes"]).expect(0);

    // A checkpoint that does not read: damage in the database, said, never read as an older
    // state; `repair` cannot mend it there and says so; the thread can still be deleted.
    let broken = pg
        .graph(&["run", "pipeline", "--input", "y", "--set", "step_ms=1"])
        .expect(3)
        .thread();
    let newest = pg.history(&broken)[0]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    cluster()
        .sql(
            pg.db.name(),
            &format!(
                "UPDATE stategraph_checkpoints SET record = '\\x00ff'::bytea WHERE id = '{newest}'"
            ),
        )
        .unwrap();
    let listed = pg.graph(&["threads", "--json"]).expect(0).json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["thread_id"] == broken.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["status"], "damaged", "{listed}");
    pg.graph(&["resume", &broken, "--resume", "yes"]).expect(1);
    pg.graph(&["repair", &broken])
        .expect(1)
        .stderr_has(&["does not read back", "restore the database from a backup"]);
    pg.graph(&["delete", &broken]).expect(0);
    pg.graph(&["state", &broken])
        .expect(2)
        .stderr_has(&["no thread"]);
}

/// The worker library continues a thread the CLI started: the thread's graph and its record of
/// how it started are where a worker on another machine finds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_continues_a_thread_the_cli_started() {
    use stategraph_postgres::queue::{Status, Submission};
    use stategraph_worker::{Worker, WorkerOptions};
    let pg = Pg::new();
    let thread = pg
        .graph(&[
            "run",
            "pipeline",
            "--input",
            "handover",
            "--set",
            "step_ms=1",
        ])
        .expect(3)
        .thread();
    let before = ids(&pg.history(&thread));

    let mut registry = stategraph_registry::Registry::new();
    registry.extend(stategraph_agents::builtin_factories());
    let options = WorkerOptions::new(pg.db.url()).idle_poll(Duration::from_millis(20));
    let worker = Worker::connect(registry, options).await.unwrap();
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run().await.unwrap() }
    });
    let submitted = Submission::resume("pipeline", &thread, Some(json!("yes")));
    let run = worker.queue().submit(submitted).await.unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    let info = loop {
        let info = worker.queue().get(run).await.unwrap().unwrap();
        if info.status.is_final() {
            break info;
        }
        assert!(Instant::now() < give_up, "still {info:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    worker.drain().await;
    running.await.unwrap();
    assert_eq!(info.status, Status::Done, "{info:?}");

    let state = pg.graph(&["state", &thread, "--json"]).expect(0).json();
    assert!(
        state["values"]["document"]
            .as_str()
            .unwrap()
            .starts_with("# A short guide to handover"),
        "{state}"
    );
    // It went on from where the CLI paused it: the CLI's checkpoints are the chain's start.
    assert!(ids(&pg.history(&thread)).ends_with(&before));
}
