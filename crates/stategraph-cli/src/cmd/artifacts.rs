//! `artifacts`, and what `run`, `resume`, `rerun` and `fork` do with a graph's artifacts: open a
//! version folder, pick up edited files before running, write the files after each checkpoint.

use crate::args::ArtifactsArgs;
use crate::error::bad_input;
use crate::progress::Notices;
use crate::{check_thread_id, out, Ctx};
use stategraph::checkpoint::CheckpointId;
use stategraph::runtime::HistoryQuery;
use stategraph_artifacts::{
    ArtifactError, FileState, FileStatus, PickedUp, RunFolder, Status, ThreadArtifacts,
};
use stategraph_registry::{ErasedGraph, Resolved};
use std::collections::BTreeSet;
use std::path::Path;

/// The thread's graph's artifacts, when it declares any.
pub(super) fn of(
    ctx: &Ctx,
    resolved: &Resolved,
) -> anyhow::Result<Option<Box<dyn ThreadArtifacts>>> {
    Ok(resolved.artifacts(ctx.checkpointer())?)
}

/// An edit that cannot be taken is the user's input to fix: exit code 2, nothing changed. When
/// restoring the files mends it, says the command that does.
fn refused(ctx: &Ctx, thread: &str, e: ArtifactError) -> anyhow::Error {
    let restore = || ctx.command_line_with(&["artifacts", thread], "--restore");
    match e {
        ArtifactError::InvalidEdits(ref errors) => {
            let restorable = match errors.iter().any(|e| e.restore_mends) {
                true => format!(
                    "\nwrite the current files again from the checkpoint with:\n  {}",
                    restore()
                ),
                false => String::new(),
            };
            bad_input(format!(
                "{e}\nfix the file(s), or run with --ignore-edits (the changed files then stay as \
                 they are, and the run writes into a new version folder){restorable}"
            ))
        }
        ArtifactError::UnknownVersion { .. } => bad_input(format!(
            "{e}\nfix the file(s), or run with --ignore-edits (the changed files then stay as \
             they are, and the run writes into a new version folder)"
        )),
        ArtifactError::Io { .. } => bad_input(format!(
            "{:#}\nthe thread's version folder cannot be read as its files: put it back as the \
             run wrote it (`{}` writes it again), or run with --ignore-edits (the folder then \
             stays as it is, and the run writes into a new version folder)",
            anyhow::Error::new(e),
            restore()
        )),
        other => other.into(),
    }
}

fn shown(path: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let p = path.strip_prefix(&cwd).unwrap_or(path);
    format!("{}/", p.display())
}

/// Tells what picking up edits found and will cause.
fn report_picked(ctx: &Ctx, folder: Option<&RunFolder>, picked: &PickedUp) {
    if ctx.quiet || (picked.is_empty() && picked.same.is_empty()) {
        return;
    }
    let place = folder.map(|f| shown(&f.dir)).unwrap_or_default();
    for f in &picked.files {
        say!("picked up edited {place}{} (as node `{}`)", f.path, f.node);
    }
    for path in &picked.deleted {
        say!("{place}{path} was deleted: not read as empty; written again from the checkpoint");
    }
    for path in &picked.same {
        say!("{place}{path} was rewritten but says what the checkpoint holds: not an edit, nothing runs again for it");
    }
    for note in &picked.notes {
        say!("note: {note}");
    }
    if !picked.files.is_empty() {
        let mut next = picked.next.clone();
        next.dedup();
        match next.is_empty() {
            true => say!("nothing runs again after the edit"),
            false => say!("runs again from: {} (and what follows)", next.join(", ")),
        }
    }
}

/// Before a resume: choose the version, then pick up its edits (unless told not to).
/// `answering` is true when the resume answers a question (`--resume`): an edit, stored as its
/// producer's output, settles the pause, so the two together are refused before anything
/// changes.
pub(super) async fn before_resume(
    ctx: &Ctx,
    arts: &dyn ThreadArtifacts,
    thread: &str,
    version: Option<&str>,
    ignore_edits: bool,
    answering: bool,
) -> anyhow::Result<()> {
    let refuse = |e| refused(ctx, thread, e);
    if let Some(label) = version {
        arts.use_version(thread, label).await.map_err(refuse)?;
    }
    if ignore_edits {
        return keep_ignored_edits(ctx, arts, thread).await;
    }
    let folder = arts.status(thread).await.map_err(refuse)?.folder;
    if folder.is_none() {
        return Ok(());
    }
    if answering {
        let preview = arts.check_edits(thread).await.map_err(refuse)?;
        if let Some(f) = preview.files.first() {
            let place = folder.as_ref().map(|f| shown(&f.dir)).unwrap_or_default();
            return Err(bad_input(format!(
                "{place}{} was edited: picking it up stores it as the output of `{}` and the run goes on from there, \
                 so the question the thread is paused on is no longer asked and --resume has nothing to answer. \
                 Nothing changed. Run `{}` to continue with the edit, or add --ignore-edits to answer without it",
                f.path,
                f.node,
                ctx.command_line(&["resume", thread])
            )));
        }
    }
    let picked = arts.pick_up_edits(thread).await.map_err(refuse)?;
    report_picked(ctx, folder.as_ref(), &picked);
    Ok(())
}

/// `resume --ignore-edits`: the run would write over the files a person changed, so when
/// there are any (or the folder cannot be read), it writes into a new version folder and
/// leaves theirs as it is.
async fn keep_ignored_edits(
    ctx: &Ctx,
    arts: &dyn ThreadArtifacts,
    thread: &str,
) -> anyhow::Result<()> {
    let kept = match arts.status(thread).await {
        Ok(status) => {
            let Some(folder) = status.folder else {
                return Ok(());
            };
            let changed: Vec<&str> = (status.files.iter())
                .filter(|f| f.state.is_changed() && f.state != FileState::Missing)
                .map(|f| f.path.as_str())
                .collect();
            if changed.is_empty() {
                return Ok(());
            }
            format!(
                "{} keeps the files changed there as they are ({})",
                shown(&folder.dir),
                changed.join(", ")
            )
        }
        Err(e @ ArtifactError::Io { .. }) => format!(
            "the thread's version folder cannot be read ({:#}) and stays as it is",
            anyhow::Error::new(e)
        ),
        Err(e) => return Err(e.into()),
    };
    arts.start_version(thread, None, "resume --ignore-edits")
        .await?;
    if !ctx.quiet {
        say!("--ignore-edits: {kept}; this run writes into a new version folder beside it");
    }
    Ok(())
}

/// `resume --out DIR`: when the thread's current version folder is not in `out`, writes the
/// thread's files (as of its newest checkpoint, edits already picked up) into a new version
/// folder there, which the run then writes to; the old folder stays as it is. A thread whose
/// folder is already in `out` (or that has none yet: its first write goes there) is left alone,
/// so `GRAPH_OUT` set for every command changes nothing for threads it already holds.
pub(super) async fn resume_into(
    ctx: &Ctx,
    arts: &dyn ThreadArtifacts,
    thread: &str,
    out_dir: &Path,
) -> anyhow::Result<()> {
    let current = match arts.status(thread).await {
        Ok(status) => status.folder,
        // Only with --ignore-edits (else the resume was refused): the run's first write opens
        // a new version folder in `out`, and the unreadable one stays as it is.
        Err(ArtifactError::Io { .. }) => {
            let reason = format!("resume into {}", out_dir.display());
            arts.start_version(thread, Some(out_dir), &reason).await?;
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let Some(current) = current else {
        arts.start_version(thread, Some(out_dir), "run").await?;
        return Ok(());
    };
    let base = same_place(out_dir);
    if current.dir.parent().map(same_place) == Some(base) {
        return Ok(());
    }
    let reason = format!("resume into {}", out_dir.display());
    arts.start_version(thread, Some(out_dir), &reason).await?;
    let report = arts.sync(thread, None).await?;
    if !ctx.quiet {
        say!(
            "artifacts: {} (version {}: the files of {} (version {}) as of the newest checkpoint; that folder is kept)",
            shown(&report.folder.dir),
            report.folder.label,
            shown(&current.dir),
            current.label
        );
    }
    Ok(())
}

/// A folder's path for comparison: resolved when it exists, else made absolute.
fn same_place(p: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|cwd| cwd.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Before a rerun: picks up edits when the rerun starts after them, then opens a new version.
pub(super) async fn before_rerun(
    ctx: &Ctx,
    arts: &dyn ThreadArtifacts,
    graph: &dyn ErasedGraph,
    thread: &str,
    from: &str,
    out_dir: Option<&Path>,
    ignore_edits: bool,
) -> anyhow::Result<()> {
    let refuse = |e| refused(ctx, thread, e);
    let folder = match ignore_edits {
        // The rerun writes into a new version folder: the current one is not read.
        true => None,
        false => arts.status(thread).await.map_err(refuse)?.folder,
    };
    if folder.is_some() {
        let preview = arts.check_edits(thread).await.map_err(refuse)?;
        let producers: BTreeSet<&str> = preview.files.iter().map(|f| f.node.as_str()).collect();
        for node in producers {
            // What followed the producer when it last ran: a rerun from `from` keeps the edit
            // only if it starts right after it.
            let query = HistoryQuery {
                limit: 1,
                writer: Some(node.to_string()),
                ..HistoryQuery::default()
            };
            let next = graph
                .history(thread, query)
                .await?
                .first()
                .map(|h| h.next.clone())
                .unwrap_or_default();
            if !next.iter().any(|n| n == from) {
                let file = preview
                    .files
                    .iter()
                    .find(|f| f.node == node)
                    .map(|f| f.path.as_str())
                    .unwrap_or_default();
                return Err(bad_input(format!(
                    "{file} was edited, and it is produced by `{node}`, which is followed by {}, not `{from}`: a rerun from `{from}` would start before the edit. \
                     Continue with `{}` to run what follows `{node}` with the edit, or rerun with --ignore-edits",
                    if next.is_empty() { "nothing".to_string() } else { format!("`{}`", next.join("`, `")) },
                    ctx.command_line(&["resume", thread])
                )));
            }
        }
        let picked = arts.pick_up_edits(thread).await.map_err(refuse)?;
        report_picked(ctx, folder.as_ref(), &picked);
    }
    arts.start_version(thread, out_dir, &format!("rerun --from {from}"))
        .await?;
    Ok(())
}

/// Writes a running thread's artifacts after each checkpoint; a failure is a warning (the
/// checkpoint is the truth; `graph artifacts ID --restore` writes the files again). It prints
/// through the run's [`Notices`]: the live progress lines are on the screen meanwhile.
pub(super) struct Writer<'a> {
    arts: &'a dyn ThreadArtifacts,
    thread: &'a str,
    quiet: bool,
    notices: Notices,
    warned: BTreeSet<String>,
    /// The commands that write the files again.
    restore: String,
    resume: String,
}

impl<'a> Writer<'a> {
    pub(super) fn new(
        arts: &'a dyn ThreadArtifacts,
        thread: &'a str,
        ctx: &Ctx,
        notices: Notices,
    ) -> Self {
        Writer {
            arts,
            thread,
            quiet: ctx.quiet,
            notices,
            warned: BTreeSet::new(),
            restore: ctx.command_line_with(&["artifacts", thread], "--restore"),
            resume: ctx.command_line(&["resume", thread]),
        }
    }

    /// Writes the artifacts of the root thread's `checkpoint`. Only the root graph's
    /// checkpoints are the thread's state, which the files show: a subgraph's checkpoints (an
    /// event with a namespace) are the child's state, kept under its own namespace.
    pub(super) async fn write(&mut self, checkpoint: CheckpointId) {
        match self.arts.sync(self.thread, Some(checkpoint)).await {
            Ok(report) => {
                if report.opened && !self.quiet {
                    self.notices.line(&format!(
                        "artifacts: {} (version {})",
                        shown(&report.folder.dir),
                        report.folder.label
                    ));
                }
            }
            Err(e) => {
                let message = format!("{:#}", anyhow::Error::new(e));
                if self.warned.insert(message.clone()) {
                    self.notices.line(&format!(
                        "warning: artifacts not written: {message}\n  the run goes on (its \
                         checkpoints hold everything); once the folder can be written, the \
                         next `{}` writes the files again, and so does `{}`",
                        self.resume, self.restore
                    ));
                }
            }
        }
    }
}

fn describe(state: &FileState) -> String {
    match state {
        FileState::Unchanged => "ok".into(),
        FileState::Behind => "behind (the next write updates it)".into(),
        FileState::Edited => "edited".into(),
        FileState::Invalid { error } => match error.line {
            Some(line) => format!("invalid: line {line}: {}", error.message),
            None => format!("invalid: {}", error.message),
        },
        FileState::Truncated { len: 0, expected } => {
            format!("empty ({expected} bytes were written)")
        }
        FileState::Truncated { len, expected } => {
            format!("truncated ({len} of {expected} bytes)")
        }
        FileState::Same => "same content (rewritten, not an edit)".into(),
        FileState::Changed => "changed (not editable)".into(),
        FileState::Missing => "deleted".into(),
        FileState::NotWritten => "not written yet".into(),
        FileState::Added => "added".into(),
    }
}

/// `running`: a run is writing the folder, so files behind the state are on their way.
fn print_status(ctx: &Ctx, thread: &str, status: &Status, running: bool) {
    let Some(folder) = &status.folder else {
        out(&format!("thread {thread} has no artifacts written yet"));
        return;
    };
    let versions: Vec<&str> = status.versions.iter().map(|v| v.label.as_str()).collect();
    out(&format!(
        "{} (version {} of {}; newest checkpoint: step {})",
        shown(&folder.dir),
        folder.label,
        versions.join(", "),
        status.step
    ));
    // Who last changed each file and at which step; an edit of it is applied as its
    // artifact's producing node, said where that is another node.
    let changed_by = |f: &FileStatus| f.node.clone().unwrap_or_else(|| "-".into());
    let width = status.files.iter().map(|f| f.path.len()).max().unwrap_or(4);
    let node_width = (status.files.iter().map(|f| changed_by(f).len()))
        .max()
        .unwrap_or(0)
        .max("changed by".len());
    out(&format!(
        "  {:width$}  {:node_width$}  step  status",
        "path", "changed by"
    ));
    for f in &status.files {
        let step = f.step.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let same = f.node.as_deref() == Some(f.edit_as.as_str());
        let edit_as = match same || f.state == FileState::NotWritten {
            true => String::new(),
            false => format!(" (an edit is applied as {})", f.edit_as),
        };
        out(&format!(
            "  {:width$}  {:node_width$}  {step:>4}  {}{edit_as}",
            f.path,
            changed_by(f),
            describe(&f.state)
        ));
    }
    for p in &status.partials {
        out(&format!(
            "  {p}: an unfinished write of a process that died: removed"
        ));
    }
    let edited = status
        .files
        .iter()
        .any(|f| matches!(f.state, FileState::Edited | FileState::Added));
    let damaged = status.files.iter().any(|f| {
        matches!(
            f.state,
            FileState::Invalid { .. }
                | FileState::Truncated { .. }
                | FileState::Changed
                | FileState::Missing
        )
    });
    if edited {
        say!(
            "edits are picked up by:\n  {}",
            ctx.command_line(&["resume", thread])
        );
    }
    let behind = status.files.iter().any(|f| f.state == FileState::Behind);
    if damaged {
        say!(
            "write the files again from the checkpoint with:\n  {}",
            ctx.command_line_with(&["artifacts", thread], "--restore")
        );
    } else if behind && !edited && !running {
        // A write failed or the state was updated since: the folder shows an older state.
        say!(
            "some files are older than the thread's state; bring them up to date with:\n  {}",
            ctx.command_line_with(&["artifacts", thread], "--restore")
        );
    }
}

/// `graph artifacts`.
pub(crate) async fn artifacts(ctx: &Ctx, args: ArtifactsArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let (resolved, _) = ctx.graph_for_thread(&args.thread, &[]).await?;
    let Some(arts) = of(ctx, &resolved)? else {
        return Err(bad_input(format!(
            "graph `{}` declares no artifacts",
            resolved.file.graph
        )));
    };
    if args.restore {
        ctx.store.hold(&args.thread).await?;
        let report = arts.restore(&args.thread).await;
        ctx.store.release(&args.thread)?;
        let report = report?;
        if !ctx.quiet {
            say!(
                "wrote {} file(s) again into {} from checkpoint {}",
                report.written.len() + report.restored.len(),
                shown(&report.folder.dir),
                report.checkpoint
            );
        }
    }
    let status = arts.status(&args.thread).await?;
    if args.json {
        out(&format!("{:#}", serde_json::to_value(&status)?));
    } else {
        let running = ctx.store.is_running(&args.thread).await;
        print_status(ctx, &args.thread, &status, running);
    }
    Ok(0)
}
