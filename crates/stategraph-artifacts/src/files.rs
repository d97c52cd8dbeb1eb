//! Files on disk: atomic writes (temporary file, fsync, rename, fsync of the folder), content
//! hashes, and the temporary files a killed writer leaves behind.

use super::error::ArtifactError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a temporary file: `.{name}.partial-{pid}-{n}`. It is never an artifact (artifact
/// paths may not start with a dot), and a reader never takes it for one.
const PARTIAL: &str = ".partial-";

/// The content hash recorded for a file (BLAKE3, hex).
pub(crate) fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Writes `bytes` to `root/rel` so that a reader, or a crash at any moment, sees either the
/// old file or the whole new one: never a part.
pub(crate) fn write_atomic(root: &Path, rel: &str, bytes: &[u8]) -> Result<(), ArtifactError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let path = root.join(rel);
    let dir = path.parent().unwrap_or(root).to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| ArtifactError::io("cannot create", &dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}{PARTIAL}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(ArtifactError::io("cannot write", &path, e));
    }
    if let Err(e) = std::fs::rename(&temp, &path) {
        let _ = std::fs::remove_file(&temp);
        return Err(ArtifactError::io("cannot write", &path, e));
    }
    sync_dir(&dir).map_err(|e| ArtifactError::io("cannot write", &dir, e))
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Removes `root/rel` (an artifact the state no longer has); a file already gone is fine.
pub(crate) fn remove(root: &Path, rel: &str) -> Result<(), ArtifactError> {
    let path = root.join(rel);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                let _ = sync_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ArtifactError::io("cannot remove", &path, e)),
    }
}

/// What is at an artifact's path.
pub(crate) enum OnDisk {
    Missing,
    Bytes(Vec<u8>),
}

pub(crate) fn read(root: &Path, rel: &str) -> Result<OnDisk, ArtifactError> {
    let path = root.join(rel);
    match std::fs::read(&path) {
        Ok(b) => Ok(OnDisk::Bytes(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(OnDisk::Missing),
        Err(e) => Err(ArtifactError::io("cannot read", &path, e)),
    }
}

/// Temporary files under `root` left by a writer that died (its process is gone), relative
/// to `root`.
pub(crate) fn stale_partials(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((_, tail)) = name.split_once(PARTIAL) else {
                continue;
            };
            let pid = tail.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_none_or(|pid| !alive(pid)) {
                out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Whether a process with this id is running (this one is).
fn alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The files under `root/dir` (not recursing), by name; none when the folder does not exist.
pub(crate) fn list_dir(root: &Path, dir: &str) -> Result<Vec<String>, ArtifactError> {
    let path = root.join(dir);
    let entries = match std::fs::read_dir(&path) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArtifactError::io("cannot list", &path, e)),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    Ok(names)
}

/// The sub-folders of `dir`, by name; none when it does not exist.
pub(crate) fn list_dirs(dir: &Path) -> Result<Vec<String>, ArtifactError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ArtifactError::io("cannot list", dir, e)),
    };
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_leaves_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write_atomic(dir.path(), "a/b.json", b"{}\n").unwrap();
        write_atomic(dir.path(), "a/b.json", b"[1]\n").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("a/b.json")).unwrap(),
            b"[1]\n"
        );
        assert_eq!(list_dir(dir.path(), "a").unwrap(), vec!["b.json"]);
        assert!(std::fs::read_dir(dir.path().join("a")).unwrap().count() == 1);
    }

    #[test]
    fn partial_files_of_dead_writers_are_found() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0x7fff_fff0 is never a live process on Linux (pid_max is at most 2^22).
        std::fs::write(dir.path().join(".x.md.partial-2147483632-0"), b"half").unwrap();
        let mine = format!(".y.md.partial-{}-0", std::process::id());
        std::fs::write(dir.path().join(&mine), b"in flight").unwrap();
        assert_eq!(
            stale_partials(dir.path()),
            vec![PathBuf::from(".x.md.partial-2147483632-0")]
        );
    }
}
