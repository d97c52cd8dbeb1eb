//! A store's files copied into a fresh temporary directory, to be opened there: sled 0.34 has
//! no read-only mode and writes a store it opens, so a reader (`read_copy.rs`) and the blob
//! checks, which ask sled itself how it would open a store (`blobs.rs`), both open copies.
//!
//! The copy goes to the temporary directory, or to `/dev/shm` when that fails (a full disk):
//! reading must work when the disk is full. It is private (mode 0700: it holds a thread's
//! records) and named for the process that made it, `stategraph-read-<pid>-<start>-<random>`
//! (`<start>`: when the process started, so a reused pid is not taken for it). A process
//! killed before its copy was removed leaves it behind; the next one to open a store removes
//! the copies whose process is gone ([`sweep_stale_copies`]).

use super::layout::{copy_linking_blobs, copy_tree, process_is_alive};
use stategraph_checkpoint::CheckpointError;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The start of every copy's name.
const PREFIX: &str = "stategraph-read-";

/// How old a copy named the way earlier versions named them (no process in the name) must be
/// to be taken for a leftover: a read holds its copy for moments, not a day.
const UNNAMED_STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// Copies a store into a fresh temporary directory (as `<tmp>/store`).
pub(super) fn copy_to_temp(store_dir: &Path) -> Result<tempfile::TempDir, CheckpointError> {
    to_temp(store_dir, |from, to| copy_tree(from, to).map(drop))
}

/// Copies a store into a fresh temporary directory (as `<tmp>/store`), its blob files
/// hard-linked where the directory is on the store's file system
/// ([`copy_linking_blobs`]): for a copy that is only read, whose blobs sled never rewrites.
pub(super) fn link_to_temp(store_dir: &Path) -> Result<tempfile::TempDir, CheckpointError> {
    to_temp(store_dir, copy_linking_blobs)
}

/// A store's files put into a fresh temporary directory (as `<tmp>/store`) by `fill`.
fn to_temp(
    store_dir: &Path,
    fill: impl Fn(&Path, &Path) -> std::io::Result<()>,
) -> Result<tempfile::TempDir, CheckpointError> {
    let mut last = None;
    let prefix = own_prefix();
    for parent in temp_parents() {
        let attempt = tempfile::Builder::new()
            .prefix(&prefix)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&parent)
            .and_then(|dir| {
                let copy = dir.path().join("store");
                std::fs::create_dir(&copy)?;
                fill(store_dir, &copy)?;
                Ok(dir)
            });
        match attempt {
            Ok(dir) => return Ok(dir),
            Err(e) => last = Some((parent, e)),
        }
    }
    let (parent, e) = last.unwrap_or_else(|| {
        (
            std::env::temp_dir(),
            std::io::Error::other("no temporary directory"),
        )
    });
    Err(CheckpointError::Storage(format!(
        "cannot copy the store at {} to read it (into {}): {e}",
        store_dir.display(),
        parent.display()
    )))
}

fn temp_parents() -> Vec<PathBuf> {
    let mut parents = vec![std::env::temp_dir()];
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() && !parents.contains(&shm) {
        parents.push(shm);
    }
    parents
}

/// `stategraph-read-<pid>-<start>-`: this process's copies.
fn own_prefix() -> String {
    let pid = std::process::id();
    format!("{PREFIX}{pid}-{}-", start_time(pid).unwrap_or(0))
}

/// When the process `pid` started (clock ticks since boot, from `/proc/PID/stat`); `None` where
/// that cannot be read (no such process, or no `/proc`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `PID (COMMAND) STATE ...`: the command may hold spaces and parentheses, so fields are
    // counted after its last `)`; the start time is field 22, the 20th after it.
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that made a copy named `<pid>-<start>-...` still runs: a process with the
/// pid exists and, where its start time can be read, started when the copy's maker did.
fn maker_is_alive(pid: u32, start: u64) -> bool {
    if !process_is_alive(pid) {
        return false;
    }
    match start_time(pid) {
        Some(now) if start != 0 => now == start,
        _ => true,
    }
}

/// Removes, once per process, the read copies left in the temporary directories by processes
/// that are gone (killed while they read). Best effort: only this user's copies, and one that
/// cannot be removed now is tried again by the next process.
pub(super) fn sweep_stale_copies() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        for parent in temp_parents() {
            sweep_in(&parent);
        }
    });
}

fn sweep_in(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        // Not followed: a link named like a copy is not one.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || !is_stale(rest, &meta) {
            continue;
        }
        if let Err(e) = std::fs::remove_dir_all(entry.path()) {
            tracing::debug!(path = %entry.path().display(), error = %e, "cannot remove a stale read copy yet");
        }
    }
}

/// Whether the copy named `stategraph-read-<rest>` was left by a process that is gone.
fn is_stale(rest: &str, meta: &std::fs::Metadata) -> bool {
    let mut parts = rest.splitn(3, '-');
    let named = (parts.next(), parts.next(), parts.next());
    match named {
        (Some(pid), Some(start), Some(_)) => match (pid.parse::<u32>(), start.parse::<u64>()) {
            (Ok(pid), Ok(start)) => !maker_is_alive(pid, start),
            _ => unnamed_is_stale(meta),
        },
        _ => unnamed_is_stale(meta),
    }
}

/// A copy of an earlier version, whose name says nothing of its process: stale when old.
fn unnamed_is_stale(meta: &std::fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age > UNNAMED_STALE_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_private_and_named_for_its_process() {
        let store = tempfile::tempdir().unwrap();
        std::fs::write(store.path().join("db"), b"records").unwrap();
        let copy = copy_to_temp(store.path()).unwrap();
        let mode = std::fs::metadata(copy.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let name = copy
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(&own_prefix()), "{name}");
        let rest = name.strip_prefix(PREFIX).unwrap();
        let meta = std::fs::metadata(copy.path()).unwrap();
        assert!(
            !is_stale(rest, &meta),
            "this process's own copy is not stale"
        );
    }

    #[test]
    fn a_copy_whose_process_is_gone_or_was_another_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        // pid 0x7fff_fff0 is never a live process on Linux (pid_max is at most 2^22).
        assert!(is_stale("2147483632-5-abcdef", &meta));
        // A live pid (ours) that started at another time is a reused pid.
        let pid = std::process::id();
        let start = start_time(pid).unwrap();
        assert!(is_stale(&format!("{pid}-{}-abcdef", start + 1), &meta));
        assert!(!is_stale(&format!("{pid}-{start}-abcdef"), &meta));
        // An earlier version's name: only an old one is stale.
        assert!(!is_stale("Ab3dEf", &meta));
    }
}
