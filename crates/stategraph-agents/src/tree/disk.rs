//! Writing the tree's files: whole or not at all, and never over a person's edit.

use std::io::Write;
use std::path::Path;

/// Writes `text` to `path` through a temporary file in the same folder, an fsync and a rename,
/// so a reader (or a crash) never sees half a file. Creates the folder when missing. An error
/// names the path it could not write (a read-only folder, a full disk).
pub(crate) fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    write_in_place(path, text)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

fn write_in_place(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // The rename itself is durable only once the folder is.
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// What [`write_new`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// The file did not exist and now holds the text.
    Created,
    /// The file already held exactly this text (a step run again after a crash).
    Unchanged,
    /// The file exists with other text, which is kept.
    Kept,
}

/// Writes a file that must not replace one a person wrote: an existing file is left alone.
pub(crate) fn write_new(path: &Path, text: &str) -> std::io::Result<Written> {
    match std::fs::read(path) {
        Ok(existing) if existing == text.as_bytes() => Ok(Written::Unchanged),
        Ok(_) => Ok(Written::Kept),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_atomic(path, text)?;
            Ok(Written::Created)
        }
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_never_replaces_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.md");
        assert_eq!(write_new(&path, "one").unwrap(), Written::Created);
        assert_eq!(write_new(&path, "one").unwrap(), Written::Unchanged);
        assert_eq!(write_new(&path, "two").unwrap(), Written::Kept);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        write_atomic(&path, "three").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"], "no temporary file is left behind");
    }
}
