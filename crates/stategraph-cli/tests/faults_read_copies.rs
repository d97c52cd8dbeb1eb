//! Read copies (`$TMPDIR/stategraph-read-*`, a private copy of a thread's store that a reader
//! opens because sled writes what it opens): private to the user, and never left behind for
//! good. A command killed while it reads leaves its copy; the next command removes it.

#[path = "../../../tests/support/cli.rs"]
mod harness;

use harness::Db;
use std::path::Path;
use std::time::Duration;

fn read_copies(tmp: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("stategraph-read-"))
        .collect();
    names.sort();
    names
}

#[test]
fn copies_left_by_killed_commands_are_removed_by_the_next_command() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::new();
    let thread = db.paused_thread();
    // A copy left by a process that is gone (pid 0x7fff_fff0 is never a live one on Linux).
    let left = tmp.path().join("stategraph-read-2147483632-12345-Ab3dEf");
    std::fs::create_dir_all(left.join("store")).unwrap();
    std::fs::write(left.join("store").join("db"), b"a thread's records").unwrap();
    // Commands killed in their first 80 ms, where a copy is made and not yet removed.
    for ms in (0..80).step_by(4) {
        let args: &[&str] = match ms % 8 {
            0 => &["resume", &thread, "--resume", "yes"],
            _ => &["state", &thread],
        };
        let running = db.graph(args).env("TMPDIR", tmp.path()).spawn();
        std::thread::sleep(Duration::from_millis(ms));
        running.signal(libc::SIGKILL);
        running.finish();
    }
    db.graph(&["threads"]).env("TMPDIR", tmp.path()).expect(0);
    assert_eq!(read_copies(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_copy_of_a_process_still_running_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::new();
    db.finished_thread();
    // This test's own process is alive, and started when /proc says it did.
    let pid = std::process::id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap();
    let live = format!("stategraph-read-{pid}-{start}-Ab3dEf");
    std::fs::create_dir_all(tmp.path().join(&live)).unwrap();
    // The same pid with another start time is a pid reused since: its copy is stale.
    let reused = format!("stategraph-read-{pid}-1-Ab3dEf");
    std::fs::create_dir_all(tmp.path().join(&reused)).unwrap();
    db.graph(&["threads"]).env("TMPDIR", tmp.path()).expect(0);
    assert_eq!(read_copies(tmp.path()), vec![live]);
}
