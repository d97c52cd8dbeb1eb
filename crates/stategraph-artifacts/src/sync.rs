//! Writing a checkpoint's artifacts into the thread's current version folder, and choosing
//! that folder (a new version, or one picked by label).

use super::error::ArtifactError;
use super::files;
use super::record::{self, FileRecord, Manifest, Pending, RunFolder, Versions, Writing};
use super::Artifacts;
use stategraph::checkpoint::{now_ms, CheckpointId};
use stategraph::runtime::StateSnapshot;
use stategraph::state::State;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one write of a checkpoint's artifacts did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SyncReport {
    /// The version folder written.
    pub folder: RunFolder,
    /// True when this write opened the folder (a new version).
    pub opened: bool,
    /// The checkpoint whose state was written.
    pub checkpoint: CheckpointId,
    /// Files written because their content changed (or the folder is new), relative to it.
    pub written: Vec<String>,
    /// Files written again because they had been deleted.
    pub restored: Vec<String>,
    /// Files removed because the state no longer has them.
    pub removed: Vec<String>,
    /// Temporary files of a writer that died, removed.
    pub cleaned: Vec<String>,
}

/// The rendering of a state: path → (artifact index, bytes).
pub(crate) type Rendered = BTreeMap<String, (usize, Vec<u8>)>;

/// What one write does to a folder (see [`Artifacts::plan_write`]).
#[derive(Default)]
struct WritePlan<'r> {
    /// Path, bytes, and whether the file puts back what should already be there.
    writes: Vec<(&'r String, &'r Vec<u8>, bool)>,
    removals: Vec<String>,
    /// Files whose content differs from the folder's last write: credited to this checkpoint
    /// until [`Artifacts::credit_changes`] finds an older one that had it first.
    fresh: Vec<String>,
}

/// How many checkpoints before the one written [`Artifacts::credit_changes`] looks at, at most,
/// for the step that first had a file's content.
const CREDIT_LOOKBACK: usize = 64;

/// Who made a checkpoint: its writers, `, `-joined (`None` when it names none).
fn writers_of(metadata: &stategraph::checkpoint::CheckpointMetadata) -> Option<String> {
    (!metadata.writers.is_empty()).then(|| metadata.writers.join(", "))
}

impl<S: State> Artifacts<S> {
    /// Renders every artifact of `state`; two files on one path are an error.
    pub(crate) fn render_all(&self, state: &S) -> Result<Rendered, ArtifactError> {
        let mut out = Rendered::new();
        for (i, a) in self.set.artifacts.iter().enumerate() {
            let files = a.render(state).map_err(|message| ArtifactError::Render {
                artifact: a.name.clone(),
                message,
            })?;
            for (path, bytes) in files {
                if let Some((other, _)) = out.insert(path.clone(), (i, bytes)) {
                    return Err(ArtifactError::Render {
                        artifact: a.name.clone(),
                        message: format!(
                            "two files on path `{path}` (also from artifact `{}`): give entries distinct slugs or use `{{index}}`",
                            self.set.artifacts[other].name
                        ),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The folder version folders go in when nothing says otherwise: `output/` here.
    fn default_base() -> Result<PathBuf, ArtifactError> {
        let cwd = std::env::current_dir()
            .map_err(|e| ArtifactError::io("cannot read the current folder", ".", e))?;
        Ok(cwd.join("output"))
    }

    /// Marks the thread so that its next write opens a new version folder under `base`
    /// (default: `output/` in the current folder, or where its current version is).
    pub(crate) async fn mark_new_version(
        &self,
        thread: &str,
        base: Option<&Path>,
        reason: &str,
    ) -> Result<(), ArtifactError> {
        let store = self.store()?;
        let mut v = record::versions(store.as_ref(), thread).await?;
        let base = match base {
            Some(b) => absolute(b)?,
            None => match v.current() {
                Some(f) => f
                    .dir
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or(Self::default_base()?),
                None => Self::default_base()?,
            },
        };
        v.pending = Some(Pending {
            base,
            reason: reason.to_string(),
        });
        record::put_versions(store.as_ref(), thread, &v).await
    }

    /// Makes the version `label` (`v2`, or `2`) the one the thread writes to and reads edits from.
    pub(crate) async fn choose_version(
        &self,
        thread: &str,
        label: &str,
    ) -> Result<RunFolder, ArtifactError> {
        let store = self.store()?;
        let mut v = record::versions(store.as_ref(), thread).await?;
        let number = self.set.folder.number_of(label);
        let found = v
            .folders
            .iter()
            .find(|f| f.label == label || Some(f.number) == number)
            .cloned()
            .ok_or_else(|| ArtifactError::UnknownVersion {
                thread: thread.to_string(),
                label: label.to_string(),
                known: v.labels(),
            })?;
        if v.current.as_deref() != Some(found.label.as_str()) || v.pending.is_some() {
            v.current = Some(found.label.clone());
            v.pending = None;
            record::put_versions(store.as_ref(), thread, &v).await?;
        }
        Ok(found)
    }

    /// Opens the next version folder under `base` for `state`: one more than any folder of the
    /// same name there, claimed by creating it (so two runs never share one).
    fn open_folder(
        &self,
        base: &Path,
        state_json: &serde_json::Value,
        taken: &Versions,
        reason: &str,
    ) -> Result<RunFolder, ArtifactError> {
        let pattern = &self.set.folder;
        let base_name = pattern.base_name(&self.graph_name, state_json)?;
        std::fs::create_dir_all(base).map_err(|e| ArtifactError::io("cannot create", base, e))?;
        let existing = files::list_dirs(base)?
            .iter()
            .filter_map(|d| pattern.number_in(&base_name, d))
            .chain(taken.folders.iter().map(|f| f.number))
            .max()
            .unwrap_or(0);
        let mut n = existing + 1;
        loop {
            let name = format!("{base_name}-{}", pattern.label(n));
            let dir = base.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(RunFolder {
                        label: pattern.label(n),
                        number: n,
                        dir,
                        reason: reason.to_string(),
                        created_at_ms: now_ms(),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(ArtifactError::io("cannot create", &dir, e)),
            }
        }
    }

    /// The folder to write `state` into: the current version, or a new one when the thread has
    /// none yet or asked for one.
    async fn folder_for(
        &self,
        thread: &str,
        state: &S,
    ) -> Result<(RunFolder, bool), ArtifactError> {
        let store = self.store()?;
        let mut v = record::versions(store.as_ref(), thread).await?;
        if v.pending.is_none() {
            if let Some(current) = v.current() {
                let current = current.clone();
                std::fs::create_dir_all(&current.dir)
                    .map_err(|e| ArtifactError::io("cannot create", &current.dir, e))?;
                return Ok((current, false));
            }
        }
        let (base, reason) = match v.pending.take() {
            Some(p) => (p.base, p.reason),
            None => (Self::default_base()?, "run".to_string()),
        };
        let json = serde_json::to_value(state).map_err(|e| ArtifactError::Render {
            artifact: "(run folder)".into(),
            message: e.to_string(),
        })?;
        let folder = self.open_folder(&base, &json, &v, &reason)?;
        v.current = Some(folder.label.clone());
        v.folders.push(folder.clone());
        record::put_versions(store.as_ref(), thread, &v).await?;
        Ok((folder, true))
    }

    /// What writing `snapshot` into `folder` takes: the manifest it leaves, the files to write
    /// (path, bytes, whether it puts back a file that should already be there) and the files to
    /// remove (those the state no longer has, as the engine wrote them).
    fn plan_write<'r>(
        &self,
        folder: &RunFolder,
        snapshot: &StateSnapshot<S>,
        rendered: &'r Rendered,
        last: Option<&Manifest>,
        unconfirmed: &BTreeMap<String, Vec<String>>,
        everything: bool,
    ) -> Result<(Manifest, WritePlan<'r>), ArtifactError> {
        let on_disk = |path: &str| -> Result<Option<String>, ArtifactError> {
            Ok(match files::read(&folder.dir, path)? {
                files::OnDisk::Bytes(b) => Some(files::hash(&b)),
                files::OnDisk::Missing => None,
            })
        };
        let mut manifest = Manifest {
            version: folder.label.clone(),
            checkpoint: snapshot.checkpoint_id,
            step: snapshot.step,
            files: BTreeMap::new(),
        };
        let mut plan = WritePlan::default();
        for (path, (index, bytes)) in rendered {
            let artifact = &self.set.artifacts[*index];
            let hash = files::hash(bytes);
            let before = last.and_then(|m| m.files.get(path));
            let same = before.is_some_and(|r| r.hash == hash);
            let missing = same && !folder.dir.join(path).exists();
            // A write cut short (or whose checkpoint was lost) may have left another content.
            let stray = same
                && !missing
                && unconfirmed.contains_key(path)
                && on_disk(path)?.as_deref() != Some(hash.as_str());
            if everything || !same || missing || stray {
                plan.writes.push((path, bytes, same));
            }
            let (step, changed_by) = match before {
                Some(r) if same => (r.step, r.changed_by.clone()),
                _ => {
                    plan.fresh.push(path.clone());
                    (snapshot.step, writers_of(&snapshot.metadata))
                }
            };
            manifest.files.insert(
                path.clone(),
                FileRecord {
                    artifact: artifact.name.clone(),
                    node: artifact.node.clone(),
                    hash,
                    len: bytes.len() as u64,
                    step,
                    changed_by,
                },
            );
        }
        let recorded = last.iter().flat_map(|m| {
            m.files
                .iter()
                .map(|(path, r)| (path, std::slice::from_ref(&r.hash)))
        });
        let left = unconfirmed.iter().map(|(p, h)| (p, h.as_slice()));
        for (path, hashes) in recorded.chain(left) {
            if rendered.contains_key(path) || plan.removals.contains(path) {
                continue;
            }
            // Only a file as the engine wrote it goes; one a person changed stays for them.
            if on_disk(path)?.is_some_and(|h| hashes.contains(&h)) {
                plan.removals.push(path.clone());
            }
        }
        Ok((manifest, plan))
    }

    /// Writes the artifacts of the thread's state at `checkpoint` (default: its newest) whose
    /// content changed since the folder's last write, and records their hashes with the
    /// checkpoint. A file deleted from the folder is written again.
    pub(crate) async fn sync_at(
        &self,
        thread: &str,
        checkpoint: Option<CheckpointId>,
        everything: bool,
    ) -> Result<SyncReport, ArtifactError> {
        let store = self.store()?;
        let snapshot = self.graph.get_state(thread, checkpoint).await?;
        let rendered = self.render_all(&snapshot.values)?;
        let (folder, opened) = self.folder_for(thread, &snapshot.values).await?;
        let last = match opened {
            true => None,
            false => record::last_manifest(store.as_ref(), thread, &folder.label).await?,
        };
        let mut report = SyncReport {
            folder: folder.clone(),
            opened,
            checkpoint: snapshot.checkpoint_id,
            written: Vec::new(),
            restored: Vec::new(),
            removed: Vec::new(),
            cleaned: Vec::new(),
        };
        for stale in files::stale_partials(&folder.dir) {
            if std::fs::remove_file(folder.dir.join(&stale)).is_ok() {
                report.cleaned.push(stale.to_string_lossy().into_owned());
            }
        }
        let unconfirmed = match opened {
            true => BTreeMap::new(),
            false => record::writing(store.as_ref(), thread, &folder.label)
                .await?
                .unconfirmed(last.as_ref()),
        };
        let (mut manifest, plan) = self.plan_write(
            &folder,
            &snapshot,
            &rendered,
            last.as_ref(),
            &unconfirmed,
            everything,
        )?;
        if !plan.writes.is_empty() || !plan.removals.is_empty() {
            // Recorded before the first file changes: whatever this write leaves on disk, if
            // its checkpoint or manifest is then lost, is known as the engine's own.
            let mut writing = Writing { files: unconfirmed };
            for (path, _, _) in &plan.writes {
                let (_, bytes) = &rendered[*path];
                let hashes = writing.files.entry((*path).clone()).or_default();
                hashes.push(files::hash(bytes));
                hashes.dedup();
            }
            record::put_writing(store.as_ref(), thread, &folder.label, &writing).await?;
        }
        for (path, bytes, restored) in plan.writes {
            files::write_atomic(&folder.dir, path, bytes)?;
            match restored {
                true => report.restored.push(path.clone()),
                false => report.written.push(path.clone()),
            }
        }
        for path in plan.removals {
            files::remove(&folder.dir, &path)?;
            report.removed.push(path);
        }
        let written_for = last.as_ref().map(|m| m.checkpoint);
        self.credit_changes(thread, &snapshot, written_for, plan.fresh, &mut manifest)
            .await;
        record::put_manifest(store.as_ref(), thread, &manifest).await?;
        Ok(report)
    }

    /// Credits each of the `fresh` files (changed since the folder was last written, for
    /// checkpoint `written_for`) to the step that first had its content, and to that step's
    /// writers. Written after every checkpoint, that is the checkpoint written; when checkpoints
    /// went by unwritten (a write that failed, a `--stream` run without checkpoint events, a
    /// `graph update`, a new version folder), the checkpoints before it are looked at, back to
    /// `written_for` or [`CREDIT_LOOKBACK`] of them. Best effort: what cannot be read stays
    /// credited to the checkpoint written.
    async fn credit_changes(
        &self,
        thread: &str,
        snapshot: &StateSnapshot<S>,
        written_for: Option<CheckpointId>,
        fresh: Vec<String>,
        manifest: &mut Manifest,
    ) {
        let mut open: BTreeMap<String, String> = fresh
            .into_iter()
            .filter_map(|p| manifest.files.get(&p).map(|r| (p, r.hash.clone())))
            .collect();
        let mut parent = snapshot.parent_id;
        for _ in 0..CREDIT_LOOKBACK {
            let Some(id) = parent.filter(|id| Some(*id) != written_for && !open.is_empty()) else {
                break;
            };
            let Ok(older) = self.graph.get_state(thread, Some(id)).await else {
                break;
            };
            let Ok(rendered) = self.render_all(&older.values) else {
                break;
            };
            open.retain(|path, hash| {
                let had_it = rendered
                    .get(path)
                    .is_some_and(|(_, b)| &files::hash(b) == hash);
                if let (true, Some(r)) = (had_it, manifest.files.get_mut(path)) {
                    r.step = older.step;
                    r.changed_by = writers_of(&older.metadata);
                }
                had_it
            });
            parent = older.parent_id;
        }
    }
}

fn absolute(p: &Path) -> Result<PathBuf, ArtifactError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| ArtifactError::io("cannot read the current folder", ".", e))?;
    Ok(cwd.join(p))
}
