//! Real processes: Ctrl+C, SIGTERM and SIGHUP in the first moments of `graph run`, `resume`,
//! `rerun`, `decompose` and `solve`, before their run starts (resolving the graph, reading the input, taking the
//! thread). Each must end the command with the signal's code and say what became of the
//! thread, leaving it either whole and resumable or not made at all; never a thread folder
//! that is not a thread, a damaged one, or a lock the next command waits on.
//!
//! A signal that comes before the process can listen at all (while it is being loaded) still
//! ends it by default; it has made nothing yet, and the checks say so.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::{Db, Output, Project, Running};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A step long enough that no run sent a signal in its first moments gets past its first node.
const LONG: u64 = 5000;

/// The signals, their names in messages and the exit codes they end a command with.
const SIGNALS: [(i32, &str, i32); 3] = [
    (libc::SIGINT, "Ctrl+C", 130),
    (libc::SIGTERM, "SIGTERM", 143),
    (libc::SIGHUP, "SIGHUP", 129),
];

/// Delays (ms) from a command's start to its signal: from before it listens to after its run
/// started, through everything between on a fast or a loaded machine.
const DELAYS_MS: [u64; 12] = [0, 1, 2, 3, 5, 8, 12, 17, 25, 35, 50, 80];

/// The thread folders in the store (not its own dot-files), whether or not they are threads.
fn thread_folders(db: &Db) -> Vec<String> {
    match std::fs::read_dir(db.path().join("threads")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.'))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot list the store's threads: {e}"),
    }
}

/// Every folder in the store is a listed thread, none damaged: nothing is half-made.
fn assert_whole(db: &Db, context: &str) -> Vec<String> {
    let listed = db.listed();
    for row in &listed {
        assert_ne!(row["status"], "damaged", "{context}\n{listed:#?}");
    }
    let mut ids = db.thread_ids();
    let mut folders = thread_folders(db);
    ids.sort();
    folders.sort();
    assert_eq!(
        folders, ids,
        "a thread folder that is no listed thread\n{context}"
    );
    ids
}

/// `graph run` stopped by `signal` at some moment: ended with the signal's code (or by the
/// signal itself before it could listen, having made nothing), saying whether it kept a
/// thread; a kept thread is listed as stopped and resumes to the end.
fn check_a_stopped_run(
    db: &Db,
    before: &[String],
    out: &Output,
    (_, name, code): (i32, &str, i32),
) {
    let context = out.to_string();
    let kept: Vec<String> = assert_whole(db, &context)
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    match out.code {
        None => assert!(kept.is_empty(), "killed before it listened: {context}"),
        Some(c)
            if out
                .stderr
                .contains("before the run started: no thread was kept") =>
        {
            assert_eq!(c, code, "{context}");
            out.stderr_has(&[&format!("stopped ({name}) before the run started")]);
            assert!(kept.is_empty(), "{context}");
        }
        Some(c) => {
            assert_eq!(c, code, "{context}");
            let thread = out.thread();
            said_how_it_stopped(db, out, &thread, name, 0);
            out.stderr_has(&[&format!("graph resume {thread}")]);
            assert_eq!(kept, std::slice::from_ref(&thread), "{context}");
            assert_eq!(db.row(&thread)["status"], "stopped", "{context}");
            db.graph(&["resume", &thread, "--set", "step_ms=1"])
                .expect(0);
            assert_eq!(db.row(&thread)["status"], "done", "{context}");
        }
    }
}

/// A run signalled once started says where it stopped: at the step of its last checkpoint or,
/// for SIGTERM, which drains, that the step in flight finished and is saved. Either names the
/// step the store now holds, at or after `from`, where the command started. (Which step that is
/// depends on how far the run got before the signal, and an earlier drain may have moved the
/// thread on.)
fn said_how_it_stopped(db: &Db, out: &Output, thread: &str, name: &str, from: u64) {
    let stopped = step_after(
        &out.stderr,
        "stopped at step ",
        &format!(" of thread {thread} ({name})"),
    );
    let drained = step_after(
        &out.stderr,
        &format!("drained on {name}: step "),
        &format!(" of thread {thread} finished and is saved"),
    )
    .filter(|_| name == "SIGTERM");
    let Some(step) = stopped.or(drained) else {
        panic!(
            "said neither that it stopped at a step nor, for SIGTERM, that it drained one\n{out}"
        );
    };
    assert!(step >= from, "stopped at step {step}, before {from}\n{out}");
    assert_eq!(
        db.row(thread)["step"],
        step,
        "the store holds the step it named\n{out}"
    );
}

/// The step number in `text` between `before` and `after`, if they are there.
fn step_after(text: &str, before: &str, after: &str) -> Option<u64> {
    text.match_indices(before).find_map(|(at, _)| {
        let rest = &text[at + before.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        rest[digits..]
            .starts_with(after)
            .then(|| rest[..digits].parse().ok())
            .flatten()
    })
}

fn spawn_and_signal(db: &Db, args: &[&str], delay_ms: u64, signal: i32) -> Output {
    let run = db.graph(args).spawn();
    std::thread::sleep(Duration::from_millis(delay_ms));
    run.signal(signal);
    run.finish()
}

#[test]
fn a_run_signalled_in_its_first_moments_ends_cleanly_with_or_without_its_thread() {
    let db = Db::new();
    let step = format!("step_ms={LONG}");
    let args = [
        "run", "pipeline", "--input", "sled", "--yes", "--set", &step,
    ];
    for (i, delay) in DELAYS_MS.iter().enumerate() {
        let signal = SIGNALS[i % SIGNALS.len()];
        let before = db.thread_ids();
        let out = spawn_and_signal(&db, &args, *delay, signal.0);
        check_a_stopped_run(&db, &before, &out, signal);
    }
    // Nothing left behind makes the next run wait or fail.
    let next = db.run_pipeline(1, &["--yes"]).expect(0);
    assert_eq!(db.row(&next.thread())["status"], "done");
}

/// A thread paused before its drafts (`--interrupt-before draft`), at step 1.
fn paused_before_the_drafts(db: &Db) -> String {
    db.run_pipeline(1, &["--yes", "--interrupt-before", "draft"])
        .expect(3)
        .thread()
}

#[test]
fn a_resume_signalled_in_its_first_moments_leaves_its_thread_resumable() {
    let db = Db::new();
    let thread = paused_before_the_drafts(&db);
    let step = format!("step_ms={LONG}");
    for (i, delay) in DELAYS_MS.iter().enumerate() {
        let (signal, name, code) = SIGNALS[i % SIGNALS.len()];
        let out = spawn_and_signal(&db, &["resume", &thread, "--set", &step], *delay, signal);
        let context = out.to_string();
        assert_eq!(assert_whole(&db, &context), std::slice::from_ref(&thread));
        if out.code.is_some() {
            assert_eq!(out.code, Some(code), "{context}");
            let not_started = format!("stopped ({name}) before the run started: thread {thread} is as it was. Continue with:\n  graph resume {thread}");
            if !out.stderr.contains(&not_started) {
                said_how_it_stopped(&db, &out, &thread, name, 1);
                out.stderr_has(&[&format!("Continue with:\n  graph resume {thread}")]);
            }
        }
        let status = db.row(&thread)["status"].clone();
        assert!(status == "paused" || status == "stopped", "{context}");
    }
    db.graph(&["resume", &thread, "--set", "step_ms=1"])
        .expect(0);
    assert_eq!(db.row(&thread)["status"], "done");
}

#[test]
fn a_rerun_signalled_in_its_first_moments_says_how_to_do_it_again() {
    let db = Db::new();
    let thread = db.finished_thread();
    let step = format!("step_ms={LONG}");
    for (i, delay) in DELAYS_MS.iter().enumerate() {
        let (signal, name, code) = SIGNALS[i % SIGNALS.len()];
        let args = ["rerun", &thread, "--from", "publish", "--set", &step];
        let out = spawn_and_signal(&db, &args, *delay, signal);
        let context = out.to_string();
        assert_eq!(assert_whole(&db, &context), std::slice::from_ref(&thread));
        if out.code.is_none() {
            assert_eq!(db.row(&thread)["status"], "done", "{context}");
            continue;
        }
        assert_eq!(out.code, Some(code), "{context}");
        let not_started = format!(
            "stopped ({name}) before the run started: thread {thread} is as it was. Continue with:\n  graph rerun {thread} --from publish"
        );
        if out.stderr.contains(&not_started) {
            assert_eq!(db.row(&thread)["status"], "done", "{context}");
        } else {
            // Stopped once started: the rerun goes on with a resume.
            said_how_it_stopped(&db, &out, &thread, name, 3);
            assert_eq!(db.row(&thread)["status"], "stopped", "{context}");
            db.graph(&["resume", &thread, "--set", "step_ms=1"])
                .expect(0);
        }
    }
    assert_eq!(db.row(&thread)["status"], "done");
}

/// A named pipe for `--input-file`: the run waits in the middle of setting up, reading its
/// input, until the test writes it.
struct InputPipe {
    path: PathBuf,
}

impl InputPipe {
    fn new(dir: &Path) -> InputPipe {
        InputPipe::at(dir.join("input.fifo"))
    }

    fn at(path: PathBuf) -> InputPipe {
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
        InputPipe { path }
    }

    /// Waits until `run` opened the pipe to read its input, and returns its write end. (A
    /// write end opens without waiting only once a reader is there.)
    fn opened_by(&self, run: &mut Running) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt;
        let start = Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.path)
            {
                Ok(file) => return file,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    assert!(run.is_running(), "ended before reading its input");
                    assert!(start.elapsed() < Duration::from_secs(60), "never read it");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("cannot open the input pipe: {e}"),
            }
        }
    }
}

/// `graph run pipeline --input-file PIPE`, waiting on its input.
fn a_run_reading_its_input(db: &Db, pipe: &InputPipe) -> (Running, std::fs::File) {
    a_run_reading_its_input_with(db, pipe, LONG, None)
}

/// [`a_run_reading_its_input`] with steps of `step_ms`, started ignoring `ignoring`.
fn a_run_reading_its_input_with(
    db: &Db,
    pipe: &InputPipe,
    step_ms: u64,
    ignoring: Option<i32>,
) -> (Running, std::fs::File) {
    let input = pipe.path.to_str().unwrap();
    let step = format!("step_ms={step_ms}");
    let args = [
        "run",
        "pipeline",
        "--input-file",
        input,
        "--yes",
        "--set",
        &step,
    ];
    let command = db.graph(&args);
    let mut run = match ignoring {
        Some(signal) => command.ignoring(signal),
        None => command,
    }
    .spawn();
    let writer = pipe.opened_by(&mut run);
    (run, writer)
}

/// Before the fix, the signal's default effect ended the process where it waited.
#[test]
fn a_signal_while_the_run_reads_its_input_stops_it_before_any_thread_is_made() {
    for (signal, name, code) in SIGNALS {
        let db = Db::new();
        let pipe = InputPipe::new(db.path());
        let (mut run, mut writer) = a_run_reading_its_input(&db, &pipe);
        run.signal(signal);
        run.wait_for("the run has not started and will not");
        std::io::Write::write_all(&mut writer, br#"{"topic": "sled"}"#).unwrap();
        drop(writer);
        let out = run.finish();
        assert_eq!(out.code, Some(code), "{out}");
        out.stderr_has(&[&format!(
            "stopped ({name}) before the run started: no thread was kept; run the same command again to start it"
        )]);
        assert!(
            !out.stderr.lines().any(|l| l.starts_with("thread ")),
            "no thread was named\n{out}"
        );
        assert!(assert_whole(&db, &out.to_string()).is_empty());
        db.run_pipeline(1, &["--yes"]).expect(0);
    }
}

#[test]
fn a_second_signal_before_the_run_started_quits_at_once() {
    let db = Db::new();
    let pipe = InputPipe::new(db.path());
    let (mut run, _writer) = a_run_reading_its_input(&db, &pipe);
    run.signal(libc::SIGTERM);
    run.wait_for(
        "stopping on SIGTERM: the run has not started and will not (SIGTERM again quits at once)",
    );
    // Still waiting for its input, which never comes: only quitting ends it.
    run.signal(libc::SIGTERM);
    let out = run.finish();
    assert_eq!(out.code, Some(143), "{out}");
    out.stderr_has(&["quit; the run had not started"]);
    assert!(assert_whole(&db, &out.to_string()).is_empty());
}

#[test]
fn json_says_a_run_stopped_before_it_started_was_not_started() {
    let db = Db::new();
    let pipe = InputPipe::new(db.path());
    let input = pipe.path.to_str().unwrap();
    let args = ["run", "pipeline", "--input-file", input, "--yes", "--json"];
    let mut run = db.graph(&args).spawn();
    let mut writer = pipe.opened_by(&mut run);
    run.signal(libc::SIGHUP);
    run.wait_for("the run has not started");
    std::io::Write::write_all(&mut writer, br#"{"topic": "sled"}"#).unwrap();
    drop(writer);
    let out = run.finish();
    assert_eq!(out.code, Some(129), "{out}");
    let doc = out.json();
    assert_eq!(doc["stopped_by"], "SIGHUP", "{out}");
    assert_eq!(doc["started"], false, "{out}");
    assert_eq!(doc["status"], "not started", "{out}");
}

#[test]
fn a_run_started_ignoring_sigterm_is_not_stopped_by_it_early_either() {
    let db = Db::new();
    let pipe = InputPipe::new(db.path());
    let (run, mut writer) = a_run_reading_its_input_with(&db, &pipe, 1, Some(libc::SIGTERM));
    run.signal(libc::SIGTERM);
    std::io::Write::write_all(&mut writer, br#"{"topic": "sled"}"#).unwrap();
    drop(writer);
    let out = run.finish();
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(db.row(&out.thread())["status"], "done");
}

/// Runs `args` (`resume` or `rerun` of a thread whose run used the graph file `file`) with
/// that file made a named pipe, sends `signal` while the command waits reading it, in the middle
/// of setting up, before it takes the thread; then lets it read the file and returns how it
/// ended. Before the fix, the signal's default effect ended the process there.
fn signalled_while_reading_its_graph_file(
    db: &Db,
    file: &Path,
    args: &[&str],
    signal: i32,
) -> Output {
    let text = std::fs::read(file).unwrap();
    std::fs::remove_file(file).unwrap();
    let pipe = InputPipe::at(file.to_path_buf());
    let mut run = db.graph(args).spawn();
    let mut writer = pipe.opened_by(&mut run);
    run.signal(signal);
    run.wait_for("the run has not started and will not");
    // Any later read finds the file itself.
    let spare = file.with_extension("spare");
    std::fs::write(&spare, &text).unwrap();
    std::fs::rename(&spare, file).unwrap();
    std::io::Write::write_all(&mut writer, &text).unwrap();
    drop(writer);
    run.finish()
}

/// A project's own graph file, and a thread of its pipeline run from it, paused: at a
/// breakpoint before the drafts (`--yes`), or for review (without).
fn paused_from_a_graph_file(db: &Db, project: &Project, extra: &[&str]) -> (PathBuf, String) {
    let file = project.graph_file("pipeline", str::to_string);
    let thread = db
        .run_pipeline(1, extra)
        .current_dir(project.path())
        .expect(3)
        .thread();
    (file, thread)
}

/// Says the thread is as it was and what continues it (`next`), which then works.
fn assert_as_it_was(db: &Db, out: &Output, (name, code): (&str, i32), thread: &str, next: &str) {
    assert_eq!(out.code, Some(code), "{out}");
    out.stderr_has(&[&format!(
        "stopped ({name}) before the run started: thread {thread} is as it was. Continue with:\n  {next}"
    )]);
    assert_eq!(assert_whole(db, &out.to_string()), [thread.to_string()]);
    assert_eq!(db.row(thread)["status"], "paused", "{out}");
}

#[test]
fn a_signal_while_resume_or_rerun_reads_the_graph_file_leaves_the_thread_as_it_was() {
    let cases = [
        ("resume", SIGNALS[0]),
        ("rerun", SIGNALS[1]),
        ("resume", SIGNALS[2]),
    ];
    for (command, (signal, name, code)) in cases {
        let db = Db::new();
        let project = Project::new();
        let (file, thread) =
            paused_from_a_graph_file(&db, &project, &["--yes", "--interrupt-before", "draft"]);
        let (args, next) = match command {
            "resume" => (vec!["resume", &thread], format!("graph resume {thread}")),
            _ => (
                vec!["rerun", &thread, "--from", "outline"],
                format!("graph rerun {thread} --from outline"),
            ),
        };
        let out = signalled_while_reading_its_graph_file(&db, &file, &args, signal);
        assert_as_it_was(&db, &out, (name, code), &thread, &next);
        let mut again: Vec<&str> = next.split(' ').skip(1).collect();
        again.extend(["--set", "step_ms=1"]);
        db.graph(&again).expect(0);
        assert_eq!(db.row(&thread)["status"], "done");
    }
}

/// The answer was not given yet: the command that continues gives it again.
#[test]
fn a_resume_with_an_answer_stopped_before_it_started_says_to_give_it_again() {
    let db = Db::new();
    let project = Project::new();
    let (file, thread) = paused_from_a_graph_file(&db, &project, &[]);
    let args = ["resume", &thread, "--resume", "yes"];
    let out = signalled_while_reading_its_graph_file(&db, &file, &args, libc::SIGTERM);
    let next = format!("graph resume {thread} --resume yes");
    assert_as_it_was(&db, &out, ("SIGTERM", 143), &thread, &next);
    db.graph(&["resume", &thread, "--resume", "yes"]).expect(0);
    assert_eq!(db.row(&thread)["status"], "done");
}

/// A folder whose run died (`kill -9`, or a second signal quitting at once) before its thread's
/// first record reached the disk is no thread: not listed (before: listed as damaged, and
/// `state` and `resume` sent the user to `graph repair`), `state` says there is no such thread,
/// and a run of the same id takes it over.
fn assert_no_thread_or_a_whole_one(db: &Db, context: &str) {
    let listed = db.listed();
    for row in &listed {
        assert_ne!(row["status"], "damaged", "{context}\n{listed:#?}");
    }
    let ids = db.thread_ids();
    for folder in thread_folders(db) {
        if ids.contains(&folder) {
            db.graph(&["resume", &folder, "--set", "step_ms=1"])
                .expect(0);
            continue;
        }
        db.graph(&["state", &folder])
            .expect(2)
            .stderr_has(&[&format!("no thread `{folder}`")]);
        let args = ["--thread", &folder, "--yes"];
        db.run_pipeline(1, &args).expect(0);
        assert_eq!(db.row(&folder)["status"], "done", "{context}");
    }
}

#[test]
fn a_run_killed_or_quit_at_once_in_its_first_moments_leaves_no_damaged_thread() {
    let step = format!("step_ms={LONG}");
    let args = [
        "run", "pipeline", "--input", "sled", "--yes", "--set", &step,
    ];
    for (i, delay) in DELAYS_MS.iter().enumerate() {
        let db = Db::new();
        let run = db.graph(&args).spawn();
        std::thread::sleep(Duration::from_millis(*delay));
        if i % 2 == 0 {
            run.signal(libc::SIGKILL);
        } else {
            // A second Ctrl+C quits at once, wherever the first left the command.
            run.signal(libc::SIGINT);
            std::thread::sleep(Duration::from_millis(2));
            run.signal(libc::SIGINT);
        }
        let out = run.finish();
        assert_no_thread_or_a_whole_one(&db, &out.to_string());
    }
}

/// The commands a graph runs (a tool's shell command, say) start with the signal mask of the
/// thread that starts them: no thread of a run may block Ctrl+C, SIGTERM or SIGHUP, or those
/// commands would not hear them either. (An earlier fix held the signals back by blocking them
/// in every thread until the run listened.)
#[test]
fn no_thread_of_a_run_blocks_the_signals_its_commands_must_hear() {
    let db = Db::new();
    let mut run = db.run_pipeline(LONG, &["--yes"]).spawn();
    run.wait_for("outline started");
    let tasks = format!("/proc/{}/task", run.id());
    let mut seen = 0;
    for task in std::fs::read_dir(&tasks).unwrap() {
        let status = std::fs::read_to_string(task.unwrap().path().join("status"));
        // A thread that ended meanwhile has no status any more.
        let Ok(status) = status else { continue };
        let blocked = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap())
            .unwrap();
        for (signal, name, _) in SIGNALS {
            assert_eq!(
                blocked & (1 << (signal - 1)),
                0,
                "a thread blocks {name}: {status}"
            );
        }
        seen += 1;
    }
    assert!(seen > 1, "the run's threads were read");
    run.signal(libc::SIGTERM);
    assert_eq!(run.finish().code, Some(143));
}

/// The example task, for `graph decompose` and `graph solve` to read from a pipe.
fn example_task() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks/web_scraper.md");
    std::fs::read_to_string(path).expect("the example task")
}

/// `graph decompose|solve TASK.md` stopped by `signal` while it reads the task file from a pipe
/// (the model it would call is never reached: nothing listens at its address). It ends with the
/// signal's code, its run never started: no thread, and no task file written beside the task.
fn a_tree_command_stopped_while_reading_its_task(
    command: &str,
    (signal, name, code): (i32, &str, i32),
) {
    let db = Db::new();
    let folder = tempfile::tempdir().expect("a temporary folder");
    let pipe = InputPipe::at(folder.path().join("web_scraper.md"));
    let task = pipe.path.to_str().unwrap().to_string();
    let mut run = db
        .graph(&[command, &task])
        .with_model_at("http://127.0.0.1:9/v1")
        .spawn();
    let mut writer = pipe.opened_by(&mut run);
    run.signal(signal);
    run.wait_for("the run has not started and will not");
    std::io::Write::write_all(&mut writer, example_task().as_bytes()).unwrap();
    drop(writer);
    let out = run.finish();
    assert_eq!(out.code, Some(code), "{command}, {name}\n{out}");
    out.stderr_has(&[&format!("stopped ({name}) before the run started")]);
    assert!(assert_whole(&db, &out.to_string()).is_empty(), "{out}");
    let beside: Vec<_> = std::fs::read_dir(folder.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        beside,
        ["web_scraper.md"],
        "nothing written beside the task\n{out}"
    );
}

#[test]
fn a_signal_while_decompose_reads_its_task_stops_it_before_its_run() {
    for signal in SIGNALS {
        a_tree_command_stopped_while_reading_its_task("decompose", signal);
    }
}

#[test]
fn a_signal_while_solve_reads_its_task_stops_it_before_its_run() {
    a_tree_command_stopped_while_reading_its_task("solve", SIGNALS[1]);
}
