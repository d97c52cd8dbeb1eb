//! `update`, `fork`, `delete` and `prune`: commands that change stored threads.

use super::inspect::parse_checkpoint;
use crate::args::{DeleteArgs, ForkArgs, PruneArgs, RepairArgs, UpdateArgs};
use crate::error::{bad_input, EXIT_DONE};
use crate::origin::{Origin, OriginDamaged};
use crate::store::{NeverSaved, Store};
use crate::{check_thread_id, out, parse_json, root_of_thread_arg, Ctx};
use serde_json::{json, Value};
use stategraph::checkpoint::{CheckpointError, CheckpointId};
use stategraph::runtime::RunError;
use stategraph::runtime::ThreadPath;
use stategraph_registry::Resolved;
use stategraph_sled::RepairReport;
use stategraph_spend::{carry_into_fork, pricing_of};

/// `graph update`.
pub(crate) async fn update(ctx: &Ctx, args: UpdateArgs) -> anyhow::Result<u8> {
    // A subgraph namespace (`THREAD/NODE:TASK`) is edited in its root thread's store.
    let root = root_of_thread_arg(&args.thread)?;
    let edit = parse_json(&args.set_json, "--set-json")?;
    let (resolved, _) = ctx.graph_for_thread(&root, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    // A subgraph's edit is of the child's state, which its parent checks when it applies it.
    if ThreadPath::is_root_id(&args.thread) {
        graph.check_update(&edit, "--set-json")?;
    }
    ctx.store.hold(&root).await?;
    let id = graph
        .update_state(&args.thread, edit, args.as_node.as_deref())
        .await?;
    ctx.store.release(&root)?;
    if args.json {
        out(&format!(
            "{:#}",
            json!({"thread_id": args.thread, "checkpoint_id": id})
        ));
    } else {
        say!(
            "updated thread {}; continue with: {}",
            args.thread,
            ctx.command_line(&["resume", &root])
        );
        out(&id.to_string());
    }
    Ok(EXIT_DONE)
}

/// `graph fork`.
pub(crate) async fn fork(ctx: &Ctx, args: ForkArgs) -> anyhow::Result<u8> {
    // From a subgraph namespace (`THREAD/NODE:TASK`), the fork is a new root thread with the
    // child at the checkpoint (see CompiledGraph::fork).
    let root = root_of_thread_arg(&args.thread)?;
    let checkpoint = parse_checkpoint(&args.checkpoint)?;
    if let Some(new) = &args.new_thread {
        check_thread_id(new)?;
    }
    let (resolved, origin) = ctx.graph_for_thread(&root, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let new = args
        .new_thread
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let mut origin =
        origin.unwrap_or_else(|| Origin::new(&resolved.file.graph, &resolved.origin, Vec::new()));
    origin.created_at_ms = stategraph::checkpoint::now_ms();
    create_fork_thread(ctx, &new, &origin).await?;
    let forked = graph
        .fork(&args.thread, checkpoint, Some(new.clone()))
        .await;
    if let Err(e) = forked {
        // Nothing was copied: the new thread does not stay behind empty.
        let _ = ctx.store.delete(&new).await;
        return Err(e.into());
    }
    carry_spend_into_fork(ctx, &resolved, &args.thread, checkpoint, &new).await;
    start_fork_version(ctx, &resolved, &root, &args.thread, &new).await?;
    let interrupts = match graph.get_state(&new, None).await {
        Ok(snapshot) => snapshot.interrupts,
        Err(_) => Vec::new(),
    };
    ctx.store.release(&new)?;
    if args.json {
        out(&format!(
            "{:#}",
            json!({"thread_id": new, "forked_from": args.thread, "checkpoint_id": checkpoint})
        ));
    } else {
        say!(
            "forked {} at {checkpoint}; continue with: {}",
            args.thread,
            crate::pause::continue_command(ctx, &new, &interrupts)
        );
        out(&new);
    }
    Ok(EXIT_DONE)
}

/// Creates the fork's thread with its record of how it started; it must be new.
async fn create_fork_thread(ctx: &Ctx, new: &str, origin: &Origin) -> anyhow::Result<()> {
    let Err(e) = ctx.store.create(new, origin).await else {
        return Ok(());
    };
    let taken = matches!(
        e.downcast_ref::<CheckpointError>(),
        Some(CheckpointError::ThreadExists { .. })
    ) || e.is::<NeverSaved>();
    if taken {
        return Err(RunError::InvalidInput(format!(
            "thread `{new}` already exists: fork into a new thread id"
        ))
        .into());
    }
    Err(e)
}

/// Keeps with the fork what `source`'s history up to `checkpoint` paid for that no ledger
/// holds (failed attempts), so the fork's usage readout shows it. A failure to keep it only
/// warns: the fork itself is made.
async fn carry_spend_into_fork(
    ctx: &Ctx,
    resolved: &Resolved,
    source: &str,
    checkpoint: CheckpointId,
    new: &str,
) {
    let pricing = pricing_of(&resolved.file.settings);
    let carried = carry_into_fork(&*ctx.store, source, checkpoint, new, pricing.as_ref());
    if let Err(e) = carried.await {
        say!(
            "warning: what {source}'s failed attempts paid for could not be kept with the fork, \
             whose usage readout leaves it out: {e}"
        );
    }
}

/// For a graph with artifacts, starts the fork's version folder beside `root`'s, so the fork
/// writes its files into a folder of its own.
async fn start_fork_version(
    ctx: &Ctx,
    resolved: &Resolved,
    root: &str,
    source: &str,
    new: &str,
) -> anyhow::Result<()> {
    if let Some(arts) = super::artifacts::of(ctx, resolved)? {
        let status = arts.status(root).await.ok();
        let base = status
            .and_then(|s| s.folder)
            .and_then(|f| f.dir.parent().map(std::path::Path::to_path_buf));
        let reason = format!("fork of {source}");
        arts.start_version(new, base.as_deref(), &reason).await?;
    }
    Ok(())
}

/// `graph delete`: needs no graph, so threads of a graph no longer registered (or whose store
/// is damaged) can go too.
pub(crate) async fn delete(ctx: &Ctx, args: DeleteArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    match ctx.store.delete(&args.thread).await {
        Ok(()) => {}
        Err(CheckpointError::ThreadNotFound { .. }) => {
            return Err(RunError::ThreadNotFound {
                thread_id: args.thread.clone(),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    }
    if args.json {
        out(&format!("{:#}", json!({"deleted": args.thread})));
    } else {
        say!("deleted thread {}", args.thread);
    }
    Ok(EXIT_DONE)
}

/// `graph repair`: an explicit repair, which keeps a backup of the thread first.
pub(crate) async fn repair(ctx: &Ctx, args: RepairArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let folder = match &ctx.store {
        Store::Folder(folder) => folder,
        Store::Postgres(_) => return repair_in_database(ctx, &args).await,
    };
    let report = match folder.repair(&args.thread).await {
        Err(CheckpointError::ThreadNotFound { .. }) => {
            return Err(RunError::ThreadNotFound {
                thread_id: args.thread.clone(),
            }
            .into())
        }
        other => other?,
    };
    if report.healthy {
        if args.json {
            out(&format!("{:#}", serde_json::to_value(&report)?));
            return Ok(EXIT_DONE);
        }
        let step = report.now.as_ref().map(|n| n.step).unwrap_or_default();
        say!(
            "thread {} is healthy (its newest checkpoint, step {step}, and everything it builds \
             on read back): nothing was changed, no backup was made",
            report.thread_id
        );
        return Ok(EXIT_DONE);
    }
    let backup = report
        .backup
        .as_ref()
        .map(|b| b.display().to_string())
        .unwrap_or_default();
    if report.gone {
        if args.json {
            out(&format!("{:#}", serde_json::to_value(&report)?));
            return Ok(EXIT_DONE);
        }
        say!(
            "no checkpoint of thread {} could be read: nothing of it could be kept, so it is \
             gone (its folder as it was is kept in {backup})",
            report.thread_id
        );
        return Ok(EXIT_DONE);
    }
    let origin = rewrite_damaged_origin(ctx, &report).await?;
    if args.json {
        let mut json = serde_json::to_value(&report)?;
        json["origin_rewritten"] = json!(origin.is_some());
        out(&format!("{json:#}"));
        return Ok(EXIT_DONE);
    }
    say!(
        "repaired thread {}; its folder as it was is kept in {backup}",
        report.thread_id
    );
    for file in &report.set_aside {
        match file.as_str() {
            "conf" => say!(
                "  rebuilt sled's configuration file conf as sled wrote it for this store (the \
                 damaged one is kept as damaged-conf)"
            ),
            _ => say!("  set aside the unreadable file {file} (as damaged-{file})"),
        }
    }
    if let Some(note) = &origin {
        say!("  {note}");
    }
    if let Some(blob) = &report.damaged_blob {
        say!(
            "  dropped the damaged file {blob} and what was written after it (the backup keeps \
             them)"
        );
    }
    if !report.removed.is_empty() {
        say!(
            "  removed {} checkpoint(s) that could not be read",
            report.removed.len()
        );
    }
    // A repair that keeps no checkpoint removes the thread (`gone`, said above).
    if let (Some(now), Some(step)) = (&report.now, report.lost_from_step) {
        let lost = match now.step {
            n if n + 1 == step => format!("step {step}"),
            n if n < step => format!("steps {} to {step}", n + 1),
            _ => format!(
                "the checkpoints written after step {} up to step {step}",
                now.step
            ),
        };
        say!(
            "  dropped what its store lost: {lost} (the thread had reached step {step}; the \
             backup keeps the damaged store); it continues from step {}",
            now.step
        );
    }
    say!(
        "continue with: {}",
        ctx.command_line(&["resume", &report.thread_id])
    );
    Ok(EXIT_DONE)
}

/// `graph repair` on Postgres. The database keeps its own data whole (its write-ahead log), so
/// there are no files to mend; what can still be wrong is the thread's record of how it
/// started, which is written again from the graph its newest checkpoint names, as in a store
/// directory. A newest checkpoint that does not read is damage in the database itself: said,
/// nothing changed.
async fn repair_in_database(ctx: &Ctx, args: &RepairArgs) -> anyhow::Result<u8> {
    let thread = &args.thread;
    let newest = match ctx.store.get_checkpoint(thread, None).await {
        Ok(Some(newest)) => newest,
        Ok(None) => {
            return Err(RunError::ThreadNotFound {
                thread_id: thread.clone(),
            }
            .into())
        }
        Err(e @ (CheckpointError::Corrupt { .. } | CheckpointError::Damaged { .. })) => {
            return Err(anyhow::Error::from(e).context(format!(
                "the newest checkpoint of thread `{thread}` does not read back from {}: that is \
                 damage in the database itself, which `graph repair` (it mends a store \
                 directory's files) cannot mend; restore the database from a backup. Nothing \
                 was changed",
                ctx.store.place()
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let reason = match ctx.store.read_origin(thread).await {
        Ok(_) => None,
        Err(e) => Some(e.downcast::<OriginDamaged>()?.reason),
    };
    let rewritten = match (&reason, &newest.metadata.graph) {
        (None, _) => None,
        (Some(reason), None) => {
            return Err(anyhow::anyhow!(
                "the record of how thread `{thread}` was started cannot be read ({reason}), and \
                 its newest checkpoint names no graph, so it cannot be written again; delete the \
                 thread with: {}",
                ctx.command_line(&["delete", thread])
            ))
        }
        (Some(_), Some(graph)) => {
            ctx.store.hold(thread).await?;
            ctx.store
                .write_origin(&Origin::new(graph, graph, Vec::new()), thread)
                .await?;
            Some(graph.clone())
        }
    };
    if args.json {
        let doc = json!({"thread_id": thread, "healthy": reason.is_none(),
                         "origin_rewritten": rewritten.is_some()});
        out(&format!("{doc:#}"));
        return Ok(EXIT_DONE);
    }
    match (reason, rewritten) {
        (Some(reason), Some(graph)) => say!(
            "repaired thread {thread}: the record of how it was started could not be read \
             ({reason}); it now names graph `{graph}` without --set overrides (give them again \
             with `resume --set`). Continue with: {}",
            ctx.command_line(&["resume", thread])
        ),
        _ => say!(
            "thread {thread} is healthy (its newest checkpoint, step {}, and its record of how \
             it was started read back from {}): nothing was changed",
            newest.step,
            ctx.store.place()
        ),
    }
    Ok(EXIT_DONE)
}

/// Writes the thread's record of how it started again when it cannot be read (see
/// `origin.rs`), from the graph its newest checkpoint names and without `--set` overrides, after
/// the repair backed the thread up. Says what was lost, or `None` when the record was sound.
async fn rewrite_damaged_origin(
    ctx: &Ctx,
    report: &RepairReport,
) -> anyhow::Result<Option<String>> {
    let thread = &report.thread_id;
    let reason = match ctx.store.read_origin(thread).await {
        Ok(_) => return Ok(None),
        Err(e) => e.downcast::<OriginDamaged>()?.reason,
    };
    let Some(graph) = report.now.as_ref().and_then(|s| s.graph.clone()) else {
        return Err(anyhow::anyhow!(
            "the record of how thread `{thread}` was started cannot be read ({reason}), and no \
             checkpoint of it names its graph, so it cannot be written again; its folder as it \
             was is kept in {}; delete the thread with: {}",
            report
                .backup
                .as_ref()
                .map(|b| b.display().to_string())
                .unwrap_or_default(),
            ctx.command_line(&["delete", thread])
        ));
    };
    ctx.store
        .write_origin(&Origin::new(&graph, &graph, Vec::new()), thread)
        .await?;
    ctx.store.release(thread)?;
    Ok(Some(format!(
        "the record of how it was started could not be read ({reason}); it now names graph \
         `{graph}` without --set overrides (give them again with `resume --set`; the old record \
         is in the backup)"
    )))
}

/// `graph prune`.
pub(crate) async fn prune(ctx: &Ctx, args: PruneArgs) -> anyhow::Result<u8> {
    if args.policy {
        return super::retention::prune_by_policy(ctx, &args).await;
    }
    if args.keep == 0 {
        return Err(bad_input(
            "--keep 0 would leave a thread no checkpoint to resume or read: keep at least 1 \
             (the newest); to remove a whole thread, use `graph delete THREAD`",
        ));
    }
    let keep = args.keep;
    let threads = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            if ctx.store.get_checkpoint(t, None).await?.is_none() {
                return Err(RunError::ThreadNotFound {
                    thread_id: t.clone(),
                }
                .into());
            }
            vec![t.clone()]
        }
        None => ctx.store.list_threads().await?,
    };
    // Only when pruning every thread: `--thread` names the one thread to touch. Only a store
    // directory has folders of runs that died before their first checkpoint.
    let never_written = match (&args.thread, &ctx.store) {
        (None, Store::Folder(folder)) => folder.remove_never_written().await?,
        _ => 0,
    };
    let mut report: Vec<Value> = Vec::new();
    let mut total = 0usize;
    for thread in threads {
        let outcome = prune_one(ctx, &thread, keep).await;
        match outcome {
            Ok(removed) => {
                total += removed;
                if !args.json && removed > 0 {
                    say!("{thread}: removed {removed} checkpoint(s)");
                }
                report.push(json!({"thread_id": thread, "removed": removed}));
            }
            // It failed after removing some: said as it is, not as skipped.
            Err(Failed { removed, error }) if removed > 0 => {
                total += removed;
                let why = format!("{error:#}");
                if !args.json {
                    say!("{thread}: removed {removed} checkpoint(s), then failed: {why}");
                }
                report.push(json!({"thread_id": thread, "removed": removed, "error": why}));
            }
            Err(Failed { error: e, .. }) => {
                let busy = e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<CheckpointError>(),
                        Some(
                            CheckpointError::ThreadBusy { .. }
                                | CheckpointError::HolderStopped { .. }
                        )
                    )
                }) || e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<RunError>(),
                        Some(RunError::Checkpoint(
                            CheckpointError::ThreadBusy { .. }
                                | CheckpointError::HolderStopped { .. }
                        ))
                    )
                });
                let why = if busy {
                    "running".to_string()
                } else {
                    format!("{e:#}")
                };
                if !args.json {
                    say!("{thread}: skipped ({why})");
                }
                report.push(json!({"thread_id": thread, "skipped": why}));
            }
        }
    }
    if args.json {
        out(&format!(
            "{:#}",
            json!({"keep": keep, "removed": total, "threads": report,
                   "never_written_folders_removed": never_written})
        ));
    } else {
        say!("removed {total} checkpoint(s), keeping the newest {keep} of each thread");
        if never_written > 0 {
            say!(
                "removed {never_written} folder(s) of threads never written (their run died \
                 before its first checkpoint reached the disk)"
            );
        }
    }
    Ok(EXIT_DONE)
}

/// A prune that failed, and how many checkpoints it had removed by then.
struct Failed {
    removed: usize,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failed {
    fn from(error: E) -> Self {
        Failed {
            removed: 0,
            error: error.into(),
        }
    }
}

async fn prune_one(ctx: &Ctx, thread: &str, keep: usize) -> Result<usize, Failed> {
    ctx.store.hold(thread).await?;
    // Counted from the store's keys (no state is read): what a failure had removed is said.
    let before = ctx.store.checkpoint_ids(thread).await?.len();
    let pruned = async {
        let (resolved, _) = ctx.graph_for_thread(thread, &[]).await?;
        let graph = resolved.build(Some(ctx.checkpointer()))?;
        anyhow::Ok(graph.prune(thread, keep).await?)
    }
    .await;
    let pruned = pruned.map_err(|error| Failed { removed: 0, error });
    let pruned = match pruned {
        Err(mut failed) => {
            if let Ok(after) = ctx.store.checkpoint_ids(thread).await {
                failed.removed = before.saturating_sub(after.len());
            }
            Err(failed)
        }
        ok => ok,
    };
    // Done with it: let other processes have it while the next thread is pruned.
    ctx.store.release(thread)?;
    pruned
}
