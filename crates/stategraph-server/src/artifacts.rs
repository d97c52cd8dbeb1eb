//! A thread's artifacts: the files its graph renders from its state into versioned run folders
//! (see stategraph-artifacts), written after each run of this server and after a fork, listed
//! and read for the page. Where a thread's folders are is kept in its own journal
//! (`artifacts/versions`), so a thread `graph run --out DIR` started is found where it is;
//! where a thread without folders gets its first is the owner's to say
//! ([`ServerConfig::artifacts_dir`]). Writing them never fails a run: the checkpoints are the
//! truth, and the files can always be written again (`graph artifacts THREAD --restore`).
//!
//! Reading goes through [`file_in`], which keeps every path inside the version folder: no
//! absolute path, no `..`, and no symlink that leads out of it.

use crate::app::App;
use crate::config::ServerConfig;
use crate::error::ApiError;
use axum::http::StatusCode;
use stategraph_artifacts::{run_folders, RunFolder, ThreadArtifacts};
use std::path::{Component, Path, PathBuf};

/// The most files a listing shows, and the deepest folder it looks into: a run folder holds a
/// graph's few declared artifacts, not a tree to crawl.
const MOST_FILES: usize = 1000;
const DEEPEST: usize = 8;

/// The largest file served: an artifact is a document a person reads.
pub(crate) const LARGEST_FILE: u64 = 16 << 20;

/// Takes `config`'s folder for new threads' artifacts.
pub(crate) fn configure(app: &App, config: &ServerConfig) {
    let mut dir = app.artifacts_dir.write().unwrap_or_else(|p| p.into_inner());
    dir.clone_from(&config.artifacts_dir);
}

fn configured(app: &App) -> Option<PathBuf> {
    app.artifacts_dir
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The artifacts `assistant`'s graph declares, bound to the server's store; `None` for a graph
/// that declares none (or one that cannot be built now, which is logged).
async fn declared(app: &App, assistant: &str) -> Option<Box<dyn ThreadArtifacts>> {
    let assistant = app.assistants.get(assistant).ok()?;
    match assistant.resolved.artifacts(app.store.clone()) {
        Ok(arts) => arts,
        Err(e) => {
            tracing::warn!(graph = %assistant.id, error = %e, "cannot bind the graph's artifacts");
            None
        }
    }
}

/// Writes the files of `thread`'s newest checkpoint after a run of `assistant`: into its
/// current version folder, or, for a thread that has none, a first one under the configured
/// folder (none configured: nothing is written). Called while the server still holds the
/// thread, before it lets it go.
pub(crate) async fn write_after_run(app: &App, assistant: &str, thread: &str) {
    let Some(arts) = declared(app, assistant).await else {
        return;
    };
    let folders = match run_folders(app.store.as_ref(), thread).await {
        Ok((folders, _)) => folders,
        Err(e) => {
            tracing::warn!(thread, error = %e, "cannot read where the thread's artifacts are");
            return;
        }
    };
    if folders.is_empty() {
        let Some(base) = configured(app) else { return };
        if let Err(e) = arts.start_version(thread, Some(&base), "run").await {
            tracing::warn!(thread, error = %e, "cannot open the thread's first artifact folder");
            return;
        }
    }
    if let Err(e) = arts.sync(thread, None).await {
        tracing::warn!(thread, error = %e, "cannot write the thread's artifacts");
    }
}

/// Gives a fork its own version folder, beside its source's (else under the configured
/// folder), and writes the files of the checkpoint it starts from, as `graph fork` does.
pub(crate) async fn start_fork(app: &App, assistant: &str, source: &str, fork: &str) {
    let Some(arts) = declared(app, assistant).await else {
        return;
    };
    // A fork of a subgraph's namespace starts from its root thread's folders.
    let root = source.split('/').next().unwrap_or(source);
    let beside = match run_folders(app.store.as_ref(), root).await {
        Ok((folders, current)) => pick(&folders, current.as_deref(), None)
            .ok()
            .and_then(|f| f.dir.parent().map(Path::to_path_buf)),
        Err(_) => None,
    };
    let Some(base) = beside.or_else(|| configured(app)) else {
        return;
    };
    let reason = format!("fork of {source}");
    let written = async {
        arts.start_version(fork, Some(&base), &reason).await?;
        arts.sync(fork, None).await
    };
    if let Err(e) = written.await {
        tracing::warn!(thread = fork, error = %e, "cannot write the fork's artifacts");
    }
}

/// The version folder `label` (a label, `v2`, or its number), else the current one, else the
/// newest; 404 naming the versions there are.
fn pick<'f>(
    folders: &'f [RunFolder],
    current: Option<&str>,
    label: Option<&str>,
) -> Result<&'f RunFolder, ApiError> {
    let found = match label {
        Some(l) => folders
            .iter()
            .find(|f| f.label == l || l.parse::<u32>().is_ok_and(|n| n == f.number)),
        None => current
            .and_then(|c| folders.iter().find(|f| f.label == c))
            .or_else(|| folders.last()),
    };
    found.ok_or_else(|| {
        let labels: Vec<&str> = folders.iter().map(|f| f.label.as_str()).collect();
        ApiError::not_found(match (label, labels.is_empty()) {
            (_, true) => "the thread has no artifact folder yet: its graph writes its files \
                          when a run of it ends"
                .to_string(),
            (Some(l), false) => format!(
                "no artifact version `{l}`; the thread's versions are {}",
                labels.join(", ")
            ),
            (None, false) => "no artifact version is current".to_string(),
        })
    })
}

/// One file of a version folder, as a listing shows it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Listed {
    /// Relative to the version folder, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// A thread's version folders, and the files of one (`label`, default the current).
pub(crate) struct Folder {
    pub folders: Vec<RunFolder>,
    pub current: Option<String>,
    pub shown: Option<RunFolder>,
    pub files: Vec<Listed>,
    /// The folder the record names is not on disk (moved, deleted).
    pub missing: bool,
}

/// Lists `thread`'s artifacts: a read of its journal and its folder, which changes neither.
pub(crate) async fn list(app: &App, thread: &str, label: Option<&str>) -> Result<Folder, ApiError> {
    let (folders, current) = run_folders(app.store.as_ref(), thread)
        .await
        .map_err(ApiError::internal)?;
    if folders.is_empty() && label.is_none() {
        return Ok(Folder {
            folders,
            current,
            shown: None,
            files: Vec::new(),
            missing: false,
        });
    }
    let shown = pick(&folders, current.as_deref(), label)?.clone();
    let dir = shown.dir.clone();
    let listed = tokio::task::spawn_blocking(move || walk(&dir))
        .await
        .map_err(ApiError::internal)?;
    let (files, missing) = match listed {
        Ok(files) => (files, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), true),
        Err(e) => {
            return Err(ApiError::internal(format!(
                "cannot list {}: {e}",
                shown.dir.display()
            )))
        }
    };
    Ok(Folder {
        folders,
        current,
        shown: Some(shown),
        files,
        missing,
    })
}

/// The regular files under `root`, sorted: not hidden ones (a writer's `.NAME.partial-PID-N`
/// files), not symlinks (an artifact is never one), at most [`MOST_FILES`].
fn walk(root: &Path) -> std::io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    let mut folders = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = folders.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() && depth + 1 < DEEPEST {
                folders.push((path, depth + 1));
            } else if kind.is_file() && out.len() < MOST_FILES {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(Listed {
                    path: parts.join("/"),
                    size: entry.metadata()?.len(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The file `relative` inside `dir`, resolved (symlinks followed) and checked to stay inside
/// it: 403 for an absolute path, a `..`, or a link that leads out; 404 for no such file.
pub(crate) fn file_in(dir: &Path, relative: &str) -> Result<PathBuf, ApiError> {
    let outside = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "path: `{relative}` is outside the thread's artifact folder; give a path the \
                 listing (GET /threads/{{id}}/artifacts) names"
            ),
        )
    };
    let path = Path::new(relative);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    if relative.is_empty() || !plain || relative.contains('\\') {
        return Err(outside());
    }
    let missing = || {
        ApiError::not_found(format!(
            "no file `{relative}` in the thread's artifact folder (GET /threads/{{id}}/artifacts \
             lists them)"
        ))
    };
    let root = dir.canonicalize().map_err(|_| {
        ApiError::not_found(format!(
            "the thread's artifact folder {} is not there (moved or deleted); `graph artifacts \
             THREAD --restore` writes it again",
            dir.display()
        ))
    })?;
    let full = root.join(path).canonicalize().map_err(|_| missing())?;
    if !full.starts_with(&root) {
        return Err(outside());
    }
    if !full.is_file() {
        return Err(missing());
    }
    Ok(full)
}

/// The content type a file is served with, from its name and whether it is UTF-8. Nothing is
/// served as HTML or script: a file a graph wrote must not run in the page's origin.
pub(crate) fn content_type(path: &str, utf8: bool) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match (extension.as_deref(), utf8) {
        (_, false) => "application/octet-stream",
        (Some("md" | "markdown"), _) => "text/markdown; charset=utf-8",
        (Some("json"), _) => "application/json",
        (Some("csv"), _) => "text/csv; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.md"), "# a").unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("link"))
            .unwrap();
        assert!(file_in(dir.path(), "sub/a.md").is_ok());
        for bad in [
            "../secret.txt",
            "/etc/passwd",
            "sub/../../x",
            "link",
            "",
            "./sub/a.md",
        ] {
            let e = file_in(dir.path(), bad).unwrap_err();
            assert_eq!(e.status, StatusCode::FORBIDDEN, "{bad}: {}", e.message);
        }
        assert_eq!(
            file_in(dir.path(), "sub/none.md").unwrap_err().status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            file_in(dir.path(), "sub").unwrap_err().status,
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn nothing_is_served_as_html() {
        assert_eq!(content_type("x.html", true), "text/plain; charset=utf-8");
        assert_eq!(
            content_type("plan.md", true),
            "text/markdown; charset=utf-8"
        );
        assert_eq!(content_type("plan.md", false), "application/octet-stream");
    }
}
