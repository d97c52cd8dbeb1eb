//! Confinement: every path a model names is resolved inside the workspace or refused.

use std::path::{Component, Path, PathBuf};

use super::super::ToolFailure;

/// Resolves `rel` (relative to `root`, which is canonical) to a path inside `root`.
///
/// Refused: an absolute path, a path whose `..` climbs above the root, and a path that leads
/// out through a symlink (the deepest existing ancestor is resolved and must stay inside).
pub(crate) fn confine(root: &Path, rel: &str) -> Result<PathBuf, ToolFailure> {
    let rel = rel.trim();
    let given = Path::new(if rel.is_empty() { "." } else { rel });
    if given.is_absolute() || given.has_root() {
        return Err(ToolFailure(format!(
            "`{rel}` is an absolute path; give a path relative to the workspace root \
             (e.g. `src/main.py`)"
        )));
    }
    let mut inside = PathBuf::new();
    for part in given.components() {
        match part {
            Component::Normal(name) => inside.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !inside.pop() {
                    return Err(outside(rel));
                }
            }
            Component::Prefix(_) | Component::RootDir => return Err(outside(rel)),
        }
    }
    let full = root.join(&inside);
    // The deepest part that exists decides where the path really leads (symlinks resolved).
    let mut existing = full.as_path();
    loop {
        if existing.symlink_metadata().is_ok() {
            break;
        }
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return Err(outside(rel)),
        }
    }
    let real = existing
        .canonicalize()
        .map_err(|e| ToolFailure(format!("cannot resolve `{rel}`: {e}")))?;
    if !real.starts_with(root) {
        return Err(ToolFailure(format!(
            "`{rel}` leads outside the workspace through a symbolic link; only files inside \
             the workspace can be used"
        )));
    }
    Ok(full)
}

fn outside(rel: &str) -> ToolFailure {
    ToolFailure(format!(
        "`{rel}` is outside the workspace; give a path inside it, relative to its root"
    ))
}

/// How a path inside `root` is shown to the model: relative, with `/`.
pub(crate) fn shown(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let text = rel.to_string_lossy().replace('\\', "/");
    if text.is_empty() {
        ".".to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused_and_inside_paths_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        assert_eq!(confine(&root, "src/a.py").unwrap(), root.join("src/a.py"));
        assert_eq!(confine(&root, "src/../b.txt").unwrap(), root.join("b.txt"));
        assert_eq!(confine(&root, "").unwrap(), root);
        assert_eq!(
            confine(&root, "new/deep/c.txt").unwrap(),
            root.join("new/deep/c.txt")
        );
        for bad in ["../x", "src/../../x", "/etc/passwd"] {
            let err = confine(&root, bad).unwrap_err().0;
            assert!(
                err.contains("outside") || err.contains("absolute"),
                "{bad}: {err}"
            );
        }
        let away = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(away.path(), root.join("link")).unwrap();
        let err = confine(&root, "link/secret.txt").unwrap_err().0;
        assert!(err.contains("symbolic link"), "{err}");
        std::os::unix::fs::symlink(root.join("src"), root.join("ok")).unwrap();
        assert!(
            confine(&root, "ok/a.py").is_ok(),
            "a link that stays inside is fine"
        );
    }
}
