//! Real processes: a command that waits for a thread another process holds without serving it
//! (the folder store waits a few seconds for such a holder to let go:
//! `checkpoint/folders/take.rs`) and gets Ctrl+C, SIGTERM or SIGHUP ends at once, not when the
//! wait would have: the signal's code, the thread as it was, the command that continues it,
//! and no error of the wait it gave up. The holder still holds the thread when the command
//! ends, so the wait had not ended on its own.

use crate::fake_openai;
use crate::harness;
use crate::own_binary;
use crate::task_plans;

use harness::{Db, Output, Running};

/// Where `holding_child` finds the store, the thread and how to hold it (joined by U+001F).
const CHILD_ENV: &str = "STATEGRAPH_HOLDING_CHILD";

/// The line the command logs (`-v`) when it starts to wait for the thread.
const WAITING: &str = "waiting for the thread";

/// How `holding_child` holds its thread, serving nobody.
#[derive(Clone, Copy)]
enum Hold {
    /// Only the thread's lock, as a process has it between taking the lock and serving the
    /// thread: a writer waits for it; a reader copies the store.
    Lock,
    /// Taken by `FolderCheckpointer::hold` in a program without a tokio runtime, which cannot
    /// serve reads: its store is open, so a reader waits for it too.
    Store,
}

#[test]
#[ignore = "a child process of the cli_stop_while_waiting tests, started by them"]
fn holding_child() {
    let Some(spec) = own_binary::child_spec(CHILD_ENV) else {
        return;
    };
    let [db, thread, how] = &spec[..] else {
        panic!("db, thread and how: {spec:?}");
    };
    if how == "lock" {
        let lock = own_binary::hold_thread_lock(std::path::Path::new(db), thread);
        eprintln!("holding {thread}");
        std::thread::sleep(std::time::Duration::from_secs(300));
        drop(lock);
        return;
    }
    let store = stategraph_sled::FolderCheckpointer::open(db).expect("open the store");
    futures::executor::block_on(store.hold(thread)).expect("hold the thread");
    eprintln!("holding {thread}");
    std::thread::sleep(std::time::Duration::from_secs(300));
}

/// This test binary running `holding_child`: a process that holds `thread` in `db` as `how`
/// says, serving nobody, until it is killed.
fn holding(db: &Db, thread: &str, how: Hold) -> Running {
    let exe = std::env::current_exe().expect("the test binary's path");
    let child = own_binary::child_test_args("cli_stop_while_waiting::holding_child");
    let how = match how {
        Hold::Lock => "lock",
        Hold::Store => "store",
    };
    let spec = own_binary::command_line(&[
        db.path().display().to_string(),
        thread.to_string(),
        how.to_string(),
    ]);
    let mut running =
        harness::TestCommand::program(&exe, &child, "cli_stop_while_waiting::holding_child")
            .env(CHILD_ENV, spec)
            .spawn();
    running.wait_for(&format!("holding {thread}"));
    running
}

/// Runs `args` (a command that waits for a thread `holder` holds), sends it `signal` once it
/// says it waits, and checks that it ended with `code` before the holder let go, with no error.
fn stopped_while_waiting(
    db: &Db,
    holder: &mut Running,
    args: &[&str],
    (signal, code): (i32, i32),
) -> Output {
    let mut args = args.to_vec();
    args.insert(0, "-v");
    let mut waiting = db.graph(&args).spawn();
    waiting.wait_for(WAITING);
    waiting.signal(signal);
    let out = waiting.finish();
    assert!(
        holder.is_running(),
        "the holder ended before the command did"
    );
    assert_eq!(out.code, Some(code), "{out}");
    assert!(
        !out.stderr.contains("error"),
        "the wait ran on to its end: {out}"
    );
    out
}

#[test]
fn a_resume_waiting_to_take_its_thread_ends_at_once_on_sigterm_and_the_thread_resumes_later() {
    let db = Db::new();
    let thread = db.paused_thread();
    let mut holder = holding(&db, &thread, Hold::Lock);
    let resume = ["resume", &thread, "--resume", "yes"];
    let out = stopped_while_waiting(&db, &mut holder, &resume, (libc::SIGTERM, 143));
    out.stderr_has(&[
        "stopping on SIGTERM: the run has not started",
        &format!("stopped (SIGTERM) before the run started: thread {thread} is as it was"),
        &format!("resume {thread} --resume yes"),
    ]);
    holder.signal(libc::SIGKILL);
    holder.finish();
    assert_eq!(db.row(&thread)["status"], "paused");
    db.graph(&resume).expect(0);
}

#[test]
fn a_resume_and_a_rerun_waiting_to_read_their_thread_end_at_once_on_a_signal() {
    let db = Db::new();
    let thread = db.paused_thread();
    let mut holder = holding(&db, &thread, Hold::Store);
    let resume = ["resume", &thread, "--json"];
    let out = stopped_while_waiting(&db, &mut holder, &resume, (libc::SIGINT, 130));
    let doc = out.json();
    assert_eq!(doc["started"], false, "{doc:#}");
    assert_eq!(doc["stopped_by"], "Ctrl+C", "{doc:#}");
    let rerun = ["rerun", &thread, "--from", "draft"];
    stopped_while_waiting(&db, &mut holder, &rerun, (libc::SIGHUP, 129)).stderr_has(&[
        &format!("stopped (SIGHUP) before the run started: thread {thread} is as it was"),
        &format!("rerun {thread} --from draft"),
    ]);
    holder.signal(libc::SIGKILL);
    holder.finish();
    assert_eq!(db.row(&thread)["status"], "paused");
    db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
}

#[test]
fn a_run_waiting_to_make_its_thread_ends_at_once_on_sigterm_making_nothing() {
    let db = Db::new();
    let mut holder = holding(&db, "taken", Hold::Lock);
    let run = [
        "run", "pipeline", "--input", "sled", "--yes", "--thread", "taken",
    ];
    stopped_while_waiting(&db, &mut holder, &run, (libc::SIGTERM, 143))
        .stderr_has(&["stopped (SIGTERM) before the run started: no thread was kept"]);
    holder.signal(libc::SIGKILL);
    holder.finish();
    assert!(db.thread_ids().is_empty(), "{:?}", db.thread_ids());
    db.graph(&run).expect(0);
}

#[test]
fn a_resume_that_waited_out_its_patience_names_the_process_holding_the_thread() {
    let db = Db::new();
    let thread = db.paused_thread();
    let holder = holding(&db, &thread, Hold::Lock);
    // No lease to read (it is no run): the thread's lock says who holds it.
    let out = db.graph(&["resume", &thread, "--resume", "yes"]).expect(1);
    out.stderr_has(&[&format!(
        "thread `{thread}` is busy: another process (pid {}) holds it",
        holder.id()
    )]);
    assert!(!out.stderr.contains("pid 0"), "{out}");
    assert!(!out.stderr.contains("lease lapses"), "{out}");
    holder.signal(libc::SIGKILL);
    holder.finish();
    db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
}

#[test]
fn a_thread_whose_run_is_suspended_is_read_as_last_saved_and_its_resume_says_the_run_is_stopped() {
    let db = Db::new();
    let mut run = db.run_pipeline(60_000, &["--yes"]).spawn();
    let thread = run.thread();
    // Ctrl+Z: it holds the thread and answers nobody until it goes on.
    run.signal(libc::SIGSTOP);
    // Reads are served from what it saved, at once (no wait for a holder that cannot answer),
    // said to be possibly behind.
    let behind = format!(
        "warning: thread {thread} is held by process {}, which does not answer",
        run.id()
    );
    let state = db.graph(&["state", &thread]).expect(0);
    state.stderr_has(&[&behind, "possibly behind"]);
    db.graph(&["history", &thread])
        .expect(0)
        .stderr_has(&[&behind]);
    let listed = db.graph(&["threads"]).expect(0);
    assert!(listed.stdout.contains(&thread), "{listed}");
    assert!(!listed.stdout.contains("unknown"), "{listed}");
    // A writer is refused at once, told why the thread stays held and what to do.
    let out = db.graph(&["resume", &thread]).expect(1);
    out.stderr_has(&[
        &format!("is held by process {}, which is stopped", run.id()),
        &format!("kill -CONT {}", run.id()),
    ]);
    assert!(!out.stderr.contains("sled"), "{out}");
    run.signal(libc::SIGCONT);
    run.signal(libc::SIGTERM);
    assert_eq!(run.finish().code, Some(143));
    db.graph(&["state", &thread]).expect(0);
}

#[test]
fn a_decompose_stopped_before_its_new_run_on_an_existing_tree_thread_keeps_that_thread() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tasks/web_scraper.md");
    let task = dir.path().join("web_scraper.md");
    std::fs::copy(example, &task).expect("copy the example task");
    let task = task.display().to_string();
    let model = fake_openai::FakeOpenAi::answering(|call| {
        task_plans::task_plan(
            &call.key,
            &[("fetch", "simple", &[]), ("parse", "simple", &[])],
        )
        .to_string()
    });
    let db = Db::new();
    let decompose = |verbose: bool| {
        let args: &[&str] = match verbose {
            true => &["-v", "decompose", &task],
            false => &["decompose", &task],
        };
        db.graph(args).with_model_at(&model.base_url())
    };
    // Decomposed and paused: a decompose of it again starts a new run on the same thread.
    let thread = decompose(false).expect(3).thread();
    let holder = holding(&db, &thread, Hold::Lock);
    let mut again = decompose(true).spawn();
    again.wait_for(WAITING);
    // Stopped before it took the thread, which it then gets: its run never starts.
    again.signal(libc::SIGTERM);
    holder.signal(libc::SIGKILL);
    holder.finish();
    let out = again.finish();
    assert_eq!(out.code, Some(143), "{out}");
    out.stderr_has(&["before the run started"]);
    assert_eq!(db.row(&thread)["status"], "paused", "{out}");
}
