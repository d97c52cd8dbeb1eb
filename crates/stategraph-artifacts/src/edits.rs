//! Reading the folder back: which files were changed since they were written, whether each
//! change reads as a valid edit, and turning valid edits into state updates attributed to the
//! node that produces the artifact.

use super::error::{ArtifactError, EditError};
use super::files::{self, OnDisk};
use super::record::{self, Manifest, RunFolder};
use super::spec::Entry;
use super::sync::Rendered;
use super::Artifacts;
use serde::Serialize;
use stategraph::checkpoint::CheckpointId;
use stategraph::runtime::HistoryQuery;
use stategraph::state::{State, TaggedUpdate};
use std::collections::{BTreeMap, BTreeSet};

/// Where one artifact file stands against what was written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FileState {
    /// As written for the thread's newest checkpoint.
    Unchanged,
    /// As written for an older checkpoint; the next write brings it up to date.
    Behind,
    /// Changed since it was written, and it reads back as a valid edit.
    Edited,
    /// Changed, and it does not parse or validate: a bad edit, or a damaged file.
    Invalid {
        /// Where and why.
        error: EditError,
    },
    /// Shorter than what was written, and a beginning of it: cut off by a writer that died.
    Truncated {
        /// Bytes on disk.
        len: u64,
        /// Bytes written.
        expected: u64,
    },
    /// Changed, but it reads back as what the checkpoint already holds (reformatted, say):
    /// not an edit, and nothing runs again because of it.
    Same,
    /// Changed, but the artifact has no parser: it cannot be read back.
    Changed,
    /// Deleted. It is not read as empty; the next write puts it back.
    Missing,
    /// Not written yet.
    NotWritten,
    /// A file a person added to a folder artifact's folder (it matches the pattern).
    Added,
}

impl FileState {
    /// True when the file differs from what was written (or is gone).
    pub fn is_changed(&self) -> bool {
        !matches!(
            self,
            FileState::Unchanged | FileState::Behind | FileState::NotWritten | FileState::Same
        )
    }
}

/// One artifact file of a thread's current version folder.
#[derive(Clone, Debug, Serialize)]
pub struct FileStatus {
    /// Its path, relative to the run folder.
    pub path: String,
    /// The artifact.
    pub artifact: String,
    /// The node that last changed it: the writer(s) of `step` (`, `-joined when a step ran
    /// several). `None` when not known: not written yet, added by a person, or written before
    /// this was recorded.
    pub node: Option<String>,
    /// The step whose state first had the written content (`None`: not written yet).
    pub step: Option<u64>,
    /// The node an edit of the file is applied as: its artifact's producing node, so a resume
    /// runs what follows it.
    pub edit_as: String,
    /// Where it stands.
    pub state: FileState,
}

/// A thread's artifacts as they stand on disk.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The version folder looked at (`None`: nothing written yet).
    pub folder: Option<RunFolder>,
    /// All the thread's version folders, oldest first.
    pub versions: Vec<RunFolder>,
    /// The thread's newest checkpoint.
    pub checkpoint: CheckpointId,
    /// Its step.
    pub step: u64,
    /// Every file, by path.
    pub files: Vec<FileStatus>,
    /// Temporary files of a writer that died (killed mid-write), removed by this look.
    pub partials: Vec<String>,
}

/// One edited file picked up as a state update.
#[derive(Clone, Debug, Serialize)]
pub struct PickedFile {
    /// Its path, relative to the run folder.
    pub path: String,
    /// The artifact.
    pub artifact: String,
    /// The node the edit is attributed to.
    pub node: String,
}

/// What [`ThreadArtifacts::pick_up_edits`](super::ThreadArtifacts::pick_up_edits) found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PickedUp {
    /// The edited files, in the order their updates were applied.
    pub files: Vec<PickedFile>,
    /// Deleted files: reported, not read; written again from the checkpoint.
    pub deleted: Vec<String>,
    /// Changed files that read back as what the checkpoint holds: not edits, not applied.
    pub same: Vec<String>,
    /// The checkpoint the last edit made (`None` when nothing was applied).
    pub checkpoint: Option<CheckpointId>,
    /// The nodes that run next because of the edits.
    pub next: Vec<String>,
    /// Things worth saying (an edit that a rerun of an upstream node may replace...).
    pub notes: Vec<String>,
}

impl PickedUp {
    /// True when nothing was edited or deleted.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.deleted.is_empty()
    }
}

/// A valid edit of one artifact, not applied yet.
pub(crate) struct Edit<S: State> {
    pub artifact: usize,
    pub files: Vec<String>,
    pub step: u64,
    pub update: S::Update,
}

/// The survey of a folder: every file's state, and the valid edits.
pub(crate) struct Survey<S: State> {
    pub status: Status,
    pub edits: Vec<Edit<S>>,
}

impl<S: State> Artifacts<S> {
    /// Looks at the thread's current version folder against its newest checkpoint.
    pub(crate) async fn survey(&self, thread: &str) -> Result<Survey<S>, ArtifactError> {
        let store = self.store()?;
        let snapshot = self.graph.get_state(thread, None).await?;
        let versions = record::versions(store.as_ref(), thread).await?;
        let mut status = Status {
            folder: versions.current().cloned(),
            versions: versions.folders.clone(),
            checkpoint: snapshot.checkpoint_id,
            step: snapshot.step,
            files: Vec::new(),
            partials: Vec::new(),
        };
        let Some(folder) = status.folder.clone() else {
            return Ok(Survey {
                status,
                edits: Vec::new(),
            });
        };
        let rendered = self.render_all(&snapshot.values)?;
        let last = record::last_manifest(store.as_ref(), thread, &folder.label).await?;
        let ours = record::writing(store.as_ref(), thread, &folder.label)
            .await?
            .unconfirmed(last.as_ref());
        // Nobody will finish them: removed here, not left for the next write, which may never
        // come (a thread that is done).
        status.partials = files::stale_partials(&folder.dir)
            .into_iter()
            .filter(|p| std::fs::remove_file(folder.dir.join(p)).is_ok())
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let mut disk: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let paths: BTreeSet<String> = rendered
            .keys()
            .chain(last.iter().flat_map(|m| m.files.keys()))
            .cloned()
            .collect();
        for path in &paths {
            let (artifact, edit_as, state) =
                self.file_state(&folder, path, &rendered, last.as_ref(), &ours, &mut disk)?;
            let recorded = last.as_ref().and_then(|m| m.files.get(path));
            status.files.push(FileStatus {
                path: path.clone(),
                artifact,
                node: recorded.and_then(|r| r.changed_by.clone()),
                step: recorded.map(|r| r.step),
                edit_as,
                state,
            });
        }
        if let Some(last) = &last {
            self.settle_lagging(thread, last, &mut status, &mut disk)
                .await?;
            refuse_stale(last, &rendered, &ours, &mut status, &mut disk);
        }
        self.find_added(&folder, &paths, &ours, &mut status, &mut disk)?;
        let edits = self.read_edits(&snapshot.values, &mut status, &disk, snapshot.step);
        status.files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Survey { status, edits })
    }

    fn file_state(
        &self,
        folder: &RunFolder,
        path: &str,
        rendered: &Rendered,
        last: Option<&Manifest>,
        ours: &BTreeMap<String, Vec<String>>,
        disk: &mut BTreeMap<String, Vec<u8>>,
    ) -> Result<(String, String, FileState), ArtifactError> {
        let recorded = last.and_then(|m| m.files.get(path));
        let now = rendered.get(path);
        let (artifact, node) = match (now, recorded) {
            (Some((i, _)), _) => {
                let a = &self.set.artifacts[*i];
                (a.name.clone(), a.node.clone())
            }
            (None, Some(r)) => (r.artifact.clone(), r.node.clone()),
            // Every path comes from the rendering or the manifest.
            (None, None) => (String::new(), String::new()),
        };
        let bytes = match files::read(&folder.dir, path)? {
            OnDisk::Missing if recorded.is_some() => {
                return Ok((artifact, node, FileState::Missing))
            }
            OnDisk::Missing => return Ok((artifact, node, FileState::NotWritten)),
            OnDisk::Bytes(b) => b,
        };
        let hash = files::hash(&bytes);
        let now_hash = now.map(|(_, b)| files::hash(b));
        let state = if now_hash.as_deref() == Some(hash.as_str()) {
            FileState::Unchanged
        } else if recorded.is_some_and(|r| r.hash == hash) || is_ours(ours, path, &hash) {
            FileState::Behind
        } else {
            match now {
                Some((_, expected))
                    if bytes.len() < expected.len() && expected.starts_with(&bytes) =>
                {
                    FileState::Truncated {
                        len: bytes.len() as u64,
                        expected: expected.len() as u64,
                    }
                }
                _ => {
                    disk.insert(path.to_string(), bytes);
                    // Settled by read_edits: Edited, Invalid or Changed.
                    FileState::Changed
                }
            }
        };
        Ok((artifact, node, state))
    }

    /// A run writes a checkpoint's files after the checkpoint is saved, and its hashes after the
    /// files: a process killed in between leaves files of a checkpoint newer than the folder's
    /// manifest, which are no edit. A changed file that is exactly what one of those checkpoints
    /// renders is marked [`FileState::Behind`].
    async fn settle_lagging(
        &self,
        thread: &str,
        last: &Manifest,
        status: &mut Status,
        disk: &mut BTreeMap<String, Vec<u8>>,
    ) -> Result<(), ArtifactError> {
        let mut open: BTreeMap<String, String> = disk
            .iter()
            .map(|(path, bytes)| (path.clone(), files::hash(bytes)))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let query = HistoryQuery {
            limit: 500,
            ..HistoryQuery::default()
        };
        for entry in self.graph.history(thread, query).await? {
            if entry.checkpoint_id <= last.checkpoint || open.is_empty() {
                break;
            }
            let Ok(snapshot) = self
                .graph
                .get_state(thread, Some(entry.checkpoint_id))
                .await
            else {
                continue;
            };
            let Ok(rendered) = self.render_all(&snapshot.values) else {
                continue;
            };
            open.retain(|path, hash| {
                let written = rendered
                    .get(path)
                    .is_some_and(|(_, b)| &files::hash(b) == hash);
                if written {
                    disk.remove(path);
                    if let Some(f) = status.files.iter_mut().find(|f| &f.path == path) {
                        f.state = FileState::Behind;
                    }
                }
                !written
            });
        }
        Ok(())
    }

    /// Files a person added to a folder artifact's folder.
    fn find_added(
        &self,
        folder: &RunFolder,
        known: &BTreeSet<String>,
        ours: &BTreeMap<String, Vec<String>>,
        status: &mut Status,
        disk: &mut BTreeMap<String, Vec<u8>>,
    ) -> Result<(), ArtifactError> {
        for a in self.set.artifacts.iter().filter(|a| a.is_folder()) {
            let dir = a.pattern.dir();
            for name in files::list_dir(&folder.dir, dir)? {
                let path = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                if known.contains(&path) || a.pattern.matches(&name).is_none() {
                    continue;
                }
                if let OnDisk::Bytes(b) = files::read(&folder.dir, &path)? {
                    // Left by a write whose checkpoint was lost: the next write removes it.
                    let state = match is_ours(ours, &path, &files::hash(&b)) {
                        true => FileState::Behind,
                        false => {
                            disk.insert(path.clone(), b);
                            FileState::Added
                        }
                    };
                    status.files.push(FileStatus {
                        path,
                        artifact: a.name.clone(),
                        node: None,
                        step: None,
                        edit_as: a.node.clone(),
                        state,
                    });
                }
            }
        }
        Ok(())
    }

    /// Parses every artifact with a changed file; marks its files Edited or Invalid.
    fn read_edits(
        &self,
        state: &S,
        status: &mut Status,
        disk: &BTreeMap<String, Vec<u8>>,
        newest_step: u64,
    ) -> Vec<Edit<S>> {
        let mut edits = Vec::new();
        for (i, a) in self.set.artifacts.iter().enumerate() {
            let mine = |f: &FileStatus| f.artifact == a.name;
            let changed: Vec<String> = status
                .files
                .iter()
                .filter(|f| mine(f) && matches!(f.state, FileState::Changed | FileState::Added))
                .map(|f| f.path.clone())
                .collect();
            if changed.is_empty() || a.parse.is_none() {
                continue;
            }
            let missing: Vec<String> = status
                .files
                .iter()
                .filter(|f| mine(f) && f.state == FileState::Missing)
                .map(|f| f.path.clone())
                .collect();
            // Read whole, the artifact would take an out-of-date file's content as an edit.
            let old = (status.files.iter()).find(|f| mine(f) && f.state == FileState::Behind);
            let result = if let Some(gone) = missing.first() {
                Err(EditError::new(format!(
                    "not read: `{gone}` of the same artifact was deleted, and an artifact is read whole; put it back (or restore the files from the checkpoint)"
                ))
                .mended_by_restore())
            } else if let Some(old) = old {
                Err(EditError::new(format!(
                    "not read: `{}` of the same artifact is as written for an older checkpoint, \
                     and the thread's state has changed it since; an artifact is read whole, so \
                     reading it would undo that change. Keep a copy of your edits, restore the \
                     current files from the checkpoint, and make them again on them",
                    old.path
                ))
                .mended_by_restore())
            } else {
                self.parse_artifact(i, state, status, disk, &changed)
            };
            let step = status
                .files
                .iter()
                .filter(|f| mine(f))
                .filter_map(|f| f.step)
                .min()
                .unwrap_or(newest_step);
            let same = matches!(&result, Ok(update) if self.changes_nothing(i, state, update));
            for f in status
                .files
                .iter_mut()
                .filter(|f| changed.contains(&f.path))
            {
                f.state = match &result {
                    Ok(_) if same => FileState::Same,
                    Ok(_) => FileState::Edited,
                    Err(e) => FileState::Invalid { error: e.clone() },
                };
            }
            if same {
                continue;
            }
            if let Ok(update) = result {
                edits.push(Edit {
                    artifact: i,
                    files: changed,
                    step,
                    update,
                });
            }
        }
        edits
    }

    /// True when `update`, applied to `state`, renders artifact `i` exactly as `state` does:
    /// the file was rewritten (reformatted, touched by an editor) but says nothing new, so it
    /// is no edit and nothing downstream runs again.
    fn changes_nothing(&self, i: usize, state: &S, update: &S::Update) -> bool {
        let a = &self.set.artifacts[i];
        let mut next = state.clone();
        let mut batch = [TaggedUpdate::new(a.node.as_str(), update.clone())];
        if next.apply(&mut batch).is_err() {
            // Left for update_state to refuse with its own error.
            return false;
        }
        matches!((a.render(state), a.render(&next)), (Ok(before), Ok(after)) if before == after)
    }

    fn parse_artifact(
        &self,
        i: usize,
        state: &S,
        status: &Status,
        disk: &BTreeMap<String, Vec<u8>>,
        changed: &[String],
    ) -> Result<S::Update, EditError> {
        let a = &self.set.artifacts[i];
        let Some(parse) = &a.parse else {
            return Err(EditError::new("not editable"));
        };
        let folder = status
            .folder
            .as_ref()
            .map(|f| f.dir.clone())
            .unwrap_or_default();
        let mut entries = Vec::new();
        for f in status.files.iter().filter(|f| f.artifact == a.name) {
            let bytes = match disk.get(&f.path) {
                Some(b) => b.clone(),
                None => match files::read(&folder, &f.path) {
                    Ok(OnDisk::Bytes(b)) => b,
                    _ => continue,
                },
            };
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let (index, slug) = a.pattern.matches(name).unwrap_or((0, String::new()));
            entries.push(Entry {
                index,
                slug,
                path: f.path.clone(),
                bytes,
            });
        }
        entries.sort_by(|x, y| (x.index, &x.path).cmp(&(y.index, &y.path)));
        let first = changed.first().cloned().unwrap_or_default();
        parse(state, entries).map_err(|mut e| {
            if e.file.is_none() {
                e.file = Some(if a.is_folder() {
                    if changed.len() == 1 {
                        first
                    } else {
                        a.pattern.dir().to_string()
                    }
                } else {
                    a.pattern.as_str().to_string()
                });
            }
            e
        })
    }

    /// Refusals for every changed file that cannot be taken as an edit.
    pub(crate) fn refusals(&self, status: &Status) -> Vec<EditError> {
        let mut out = Vec::new();
        for f in &status.files {
            match &f.state {
                FileState::Invalid { error } => {
                    let mut e = error.clone();
                    if e.file.is_none() {
                        e.file = Some(f.path.clone());
                    }
                    if !out.contains(&e) {
                        out.push(e);
                    }
                }
                FileState::Truncated { len: 0, expected } => out.push(
                    EditError::new(format!(
                        "empty ({expected} bytes were written): an artifact is not emptied by an edit \
                         (for less, edit it down to what it must keep); restoring the files from \
                         the checkpoint writes it again"
                    ))
                    .in_file(f.path.clone())
                    .mended_by_restore(),
                ),
                FileState::Truncated { len, expected } => out.push(
                    EditError::new(format!(
                        "truncated: {len} of the {expected} bytes written (a writer was cut off); restoring the files from the checkpoint writes it again"
                    ))
                    .in_file(f.path.clone())
                    .mended_by_restore(),
                ),
                FileState::Changed => out.push(
                    EditError::new(format!(
                        "changed, but artifact `{}` cannot be read back (it has no parser); restoring the files from the checkpoint writes it again",
                        f.artifact
                    ))
                    .in_file(f.path.clone())
                    .mended_by_restore(),
                ),
                _ => {}
            }
        }
        out
    }
}

/// Marks invalid each changed file whose written content is no longer what the state holds
/// (`rendered`; a write into the folder failed or was cut short, or the state was updated
/// since): the person edited an out-of-date copy, and reading it would undo what the state
/// changed since. A file the engine may have written with the current content (a write whose
/// record was lost, `ours`) counts as current.
fn refuse_stale(
    last: &Manifest,
    rendered: &Rendered,
    ours: &BTreeMap<String, Vec<String>>,
    status: &mut Status,
    disk: &mut BTreeMap<String, Vec<u8>>,
) {
    for f in status.files.iter_mut() {
        let Some(written) = last.files.get(&f.path) else {
            continue;
        };
        let now = rendered.get(&f.path).map(|(_, b)| files::hash(b));
        let current = now.is_some_and(|now| written.hash == now || is_ours(ours, &f.path, &now));
        if f.state != FileState::Changed || current {
            continue;
        }
        disk.remove(&f.path);
        f.state = FileState::Invalid {
            error: EditError::new(format!(
                "changed, but this file is as written for step {} and the thread's state has \
                 changed it since (a write into the folder failed or was cut short, or the state \
                 was updated): taking your version would undo that change, so it is not read. Keep \
                 a copy of it, restore the current files from the checkpoint, and make your edit \
                 again on them",
                written.step
            ))
            .mended_by_restore(),
        };
    }
}

/// True when `hash` is a content the engine was writing to `path` (see `record::Writing`).
fn is_ours(ours: &BTreeMap<String, Vec<String>>, path: &str, hash: &str) -> bool {
    ours.get(path).is_some_and(|h| h.iter().any(|x| x == hash))
}
