//! Where a thread's files are, and the file locks that say who may touch them.
//!
//! ```text
//! <root>/threads/<thread-id>/store/       the thread's sled store
//! <root>/threads/<thread-id>/lock         held (flock, exclusive) by the process writing it
//! <root>/threads/<thread-id>/index.json   the thread's line in `threads()`: a cache
//! <root>/threads/<thread-id>/new          made before a new thread's store; gone once a record is flushed
//! <root>/threads/<thread-id>/flushed.json the newest checkpoint a finished flush made durable
//! <root>/threads/.deleted-<id>-<pid>-<n>/ a deletion in progress (swept once its process died)
//! ```
//!
//! Who locks what: a writer holds `lock` exclusively from the moment it takes the thread until it
//! lets it go, and sled holds `store/db` while the store is open. A reader that copies the store
//! holds a shared lock on `store/db` while it copies, so no writer opens the store mid-copy.

use stategraph_checkpoint::{root_thread, CheckpointError};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The paths of one database directory.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    root: PathBuf,
    /// The directory is one sled store of many threads (as `SledCheckpointer::open` writes),
    /// not a folder per thread.
    single: bool,
}

/// The file name of [`Layout::new_marker`].
const NEW_MARKER: &str = "new";
/// The file name of [`flushed_beside`].
const FLUSHED: &str = "flushed.json";

/// The flush witness of the thread whose store is `store_dir` (`sled_store/witness.rs`): the
/// newest checkpoint its writer's last finished flush made durable, so a store read back
/// shorter is found without the index. `None` for a single store of many threads.
pub(super) fn flushed_beside(store_dir: &Path) -> Option<PathBuf> {
    (store_dir.file_name()? == "store").then(|| store_dir.with_file_name(FLUSHED))
}

/// The [`Layout::new_marker`] of the thread whose store is `store_dir`; `None` for a single
/// store of many threads, which is no thread folder's `store`.
pub(super) fn new_marker_beside(store_dir: &Path) -> Option<PathBuf> {
    (store_dir.file_name()? == "store").then(|| store_dir.with_file_name(NEW_MARKER))
}

impl Layout {
    pub(super) fn new(root: PathBuf) -> Self {
        let single = root.join("db").is_file() && root.join("conf").is_file();
        Layout { root, single }
    }

    /// True when the directory is one sled store of many threads.
    pub(super) fn is_single_store(&self) -> bool {
        self.single
    }

    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn threads_dir(&self) -> PathBuf {
        self.root.join("threads")
    }

    pub(super) fn thread_dir(&self, thread: &str) -> PathBuf {
        self.threads_dir().join(root_thread(thread))
    }

    pub(super) fn store_dir(&self, thread: &str) -> PathBuf {
        if self.single {
            return self.root.clone();
        }
        self.thread_dir(thread).join("store")
    }

    pub(super) fn lock_path(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("lock")
    }

    /// The mark of a thread folder whose store has not held a record on disk yet (its writer
    /// removes it after the first flush that makes one durable, `sled_store/mark.rs`): a store
    /// there that holds nothing was never written, rather than emptied by damage (its process
    /// died before its first record reached the disk: a `kill -9` or a second Ctrl+C just after
    /// `graph run` made the thread). Such a folder is no thread: not listed, taken over by the
    /// next run of its id, and removed by `graph prune` once no process holds its lock
    /// (`unwritten.rs`).
    pub(super) fn new_marker(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join(NEW_MARKER)
    }

    pub(super) fn index_path(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("index.json")
    }

    /// The index file earlier versions of this layout kept (`graph`, `graph_file`, `overrides`
    /// and a status that could be stale).
    pub(super) fn legacy_meta_path(&self, thread: &str) -> PathBuf {
        self.thread_dir(thread).join("meta.json")
    }

    /// The names of the thread folders (not yet known to hold a checkpoint), sorted.
    pub(super) fn thread_names(&self) -> std::io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(self.threads_dir()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // Dot-names are the layout's own (deletions in progress).
            if !name.starts_with('.') && entry.file_type()?.is_dir() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// A fresh name for a thread folder about to be removed.
    pub(super) fn trash_path(&self, thread: &str) -> PathBuf {
        let n: u32 = rand::random();
        self.threads_dir().join(format!(
            ".deleted-{}-{}-{n:08x}",
            root_thread(thread),
            std::process::id()
        ))
    }

    /// Removes what deletions cut short left behind: `.deleted-*` folders whose process is gone.
    /// Best effort: a folder that cannot be removed now is tried again next time.
    pub(super) fn sweep_deleted(&self) {
        let Ok(entries) = std::fs::read_dir(self.threads_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(".deleted-") else {
                continue;
            };
            // `<id>-<pid>-<n>`: the id may hold dashes, the last two parts do not.
            let pid = rest.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(process_is_alive) {
                continue;
            }
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::debug!(path = %entry.path().display(), error = %e, "cannot remove a deleted thread's folder yet");
            }
        }
    }
}

/// True when a process with this id exists on this host.
pub(super) fn process_is_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    // kill(pid, 0) sends nothing; it only asks whether the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The process holding the `flock` on `path`, as Linux lists it (`/proc/locks`): who holds a
/// thread that says nothing of itself (no lease: a command other than a run, or a process that
/// does not serve the thread). `None` when none does, or where there is no such list.
pub(super) fn lock_holder(path: &Path) -> Option<u32> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let file = std::fs::metadata(path).ok()?;
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(file.dev()),
        libc::minor(file.dev()),
        file.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 21846 fe:00:6373414 0 EOF`; a process waiting for a lock
    // is listed as `1: -> FLOCK ...` and holds nothing.
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [_, "FLOCK", _, _, pid, lock, ..] if lock == id => pid.parse().ok(),
            _ => None,
        }
    })
}

/// A held `flock` on a file: released when dropped (the file is closed).
#[derive(Debug)]
pub(super) struct FileLock {
    file: File,
}

impl FileLock {
    /// Takes the lock without waiting; `None` when another process holds a conflicting one.
    pub(super) fn try_take(file: File, exclusive: bool) -> std::io::Result<Option<FileLock>> {
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        // SAFETY: flock on a descriptor we own; it has no memory-safety preconditions.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(FileLock { file }));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(e)
        }
    }

    /// True when `path` still names the locked file: a folder renamed away (deleted) after the
    /// file was opened no longer does.
    pub(super) fn still_at(&self, path: &Path) -> bool {
        match (self.file.metadata(), std::fs::metadata(path)) {
            (Ok(held), Ok(now)) => held.ino() == now.ino() && held.dev() == now.dev(),
            _ => false,
        }
    }
}

/// What the files of a store look like: names, sizes and modification times. A store whose
/// fingerprint is the one recorded when it was last closed has not been written since.
pub(super) fn fingerprint(store: &Path) -> Option<String> {
    let mut files = Vec::new();
    collect_files(store, Path::new(""), &mut files).ok()?;
    if files.is_empty() {
        return None;
    }
    files.sort();
    let mut hasher = blake3::Hasher::new();
    for (name, len, mtime) in files {
        hasher.update(name.as_bytes());
        hasher.update(&len.to_le_bytes());
        hasher.update(&mtime.to_le_bytes());
    }
    Some(hasher.finalize().to_hex()[..32].to_string())
}

/// A file's size and modification time, `None` when it is not there: enough to tell it was
/// written since, like [`fingerprint`] for a store.
pub(super) fn file_stamp(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    Some(format!(
        "{} {}.{}",
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

fn collect_files(
    dir: &Path,
    prefix: &Path,
    out: &mut Vec<(String, u64, i128)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let name = prefix.join(entry.file_name());
        if meta.is_dir() {
            collect_files(&entry.path(), &name, out)?;
        } else {
            let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            out.push((name.to_string_lossy().into_owned(), meta.len(), mtime));
        }
    }
    Ok(())
}

/// The names of a store's blob files (sled keeps a large value in a file of its own under
/// `blobs/`), sorted.
pub(super) fn blob_names(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join("blobs"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Copies a directory tree (a store) into `to`, which must exist.
pub(super) fn copy_tree(from: &Path, to: &Path) -> std::io::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir(&target)?;
            bytes += copy_tree(&entry.path(), &target)?;
        } else {
            bytes += std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(bytes)
}

/// Copies a store as [`copy_tree`] does, but hard-links the files of its `blobs` folder where it
/// can (copying those it cannot: another file system, a link limit). sled writes a blob file
/// once (`create_new`) and only ever removes it, so sled opening the copy, which may remove
/// some, cannot change the originals through a link; and a writer that removes an original
/// later leaves the copy's link whole. A long thread's store is mostly blob files.
pub(super) fn copy_linking_blobs(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if !entry.file_type()?.is_dir() {
            std::fs::copy(entry.path(), &target)?;
            continue;
        }
        std::fs::create_dir(&target)?;
        if entry.file_name() != "blobs" {
            copy_tree(&entry.path(), &target)?;
            continue;
        }
        for blob in std::fs::read_dir(entry.path())? {
            let blob = blob?;
            let linked = blob.path();
            let target = target.join(blob.file_name());
            if blob.file_type()?.is_dir() {
                std::fs::create_dir(&target)?;
                copy_tree(&linked, &target)?;
            } else if std::fs::hard_link(&linked, &target).is_err() {
                std::fs::copy(&linked, &target)?;
            }
        }
    }
    Ok(())
}

/// An I/O error on `path`, as a storage error that names it; a full disk is told apart.
pub(super) fn io_error(what: &str, path: &Path, e: std::io::Error) -> CheckpointError {
    if crate::io_failure::is_disk_full(&e) {
        return CheckpointError::DiskFull {
            path: path.display().to_string(),
        };
    }
    CheckpointError::Storage(format!("{what} {}: {e}", path.display()))
}
