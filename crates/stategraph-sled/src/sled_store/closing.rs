//! The stores this process closed a moment ago, whose lock sled may still hold.
//!
//! sled's last writes of a closing store (a segment truncated, a buffer written) run on its own
//! thread pool and keep the store's file, and with it the store's lock, until they finish. A
//! store dropped and opened again at once by the same process would be refused as locked by
//! "another process". Opening waits out that moment for the stores named here, and only for
//! them: a lock held by another process is reported at once as before.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longer than sled's closing writes take on a loaded machine; a lock still held after it is
/// another opener's.
const SLED_LETS_GO_WITHIN: Duration = Duration::from_secs(2);

static CLOSED: Mutex<Vec<(PathBuf, Instant)>> = Mutex::new(Vec::new());

/// Notes that this process dropped its handles on the store at `path`.
pub(super) fn closed(path: &Path) {
    let now = Instant::now();
    let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
    closed.retain(|(at, when)| at != path && now.duration_since(*when) < SLED_LETS_GO_WITHIN);
    closed.push((path.to_path_buf(), now));
}

/// Until when a lock on `path` may still be this process's own closing store.
pub(super) fn own_lock_may_last_until(path: &Path) -> Option<Instant> {
    let closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
    closed
        .iter()
        .find(|(at, _)| at == path)
        .map(|(_, when)| *when + SLED_LETS_GO_WITHIN)
        .filter(|until| Instant::now() < *until)
}

/// Retries `open` while the store is locked and the lock may be this process's closing store.
pub(super) fn open_past_own_close<T>(
    path: &Path,
    mut open: impl FnMut() -> Result<T, sled::Error>,
    is_locked: impl Fn(&sled::Error) -> bool,
) -> Result<T, sled::Error> {
    loop {
        match open() {
            Err(e) if is_locked(&e) => match own_lock_may_last_until(path) {
                Some(_) => std::thread::sleep(Duration::from_millis(1)),
                None => return Err(e),
            },
            opened => return opened,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_store_closed_here_a_moment_ago_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        assert!(own_lock_may_last_until(dir.path()).is_none());
        closed(dir.path());
        assert!(own_lock_may_last_until(dir.path()).is_some());
        assert!(own_lock_may_last_until(&other).is_none());
        let mut tries = 0;
        let opened = open_past_own_close(
            dir.path(),
            || {
                tries += 1;
                if tries < 3 {
                    Err(sled::Error::Io(std::io::ErrorKind::WouldBlock.into()))
                } else {
                    Ok(tries)
                }
            },
            |e| matches!(e, sled::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock),
        );
        assert_eq!(opened.unwrap(), 3);
        let refused = open_past_own_close(
            &other,
            || Err::<(), _>(sled::Error::Io(std::io::ErrorKind::WouldBlock.into())),
            |_| true,
        );
        assert!(
            refused.is_err(),
            "another process's lock is reported at once"
        );
    }
}
