//! `update`, `fork`, `delete` and `prune`: commands that change stored threads.

use super::inspect::parse_checkpoint;
use crate::checkpoint::{now_ms, CheckpointError};
use crate::cli::args::{DeleteArgs, ForkArgs, PruneArgs, UpdateArgs};
use crate::cli::error::EXIT_DONE;
use crate::cli::store::{Status, ThreadMeta};
use crate::cli::{check_thread_id, out, parse_json, status_of, Ctx};
use crate::registry::ErasedGraph;
use crate::runtime::RunError;
use serde_json::{json, Value};

/// Rewrites a thread's index entry from its newest checkpoint.
pub(crate) async fn refresh_meta(ctx: &Ctx, graph: &dyn ErasedGraph, mut meta: ThreadMeta) {
    if let Ok(s) = graph.get_state(&meta.thread_id, None).await {
        meta.status = status_of(&s);
        meta.step = s.step;
        meta.checkpoint_id = Some(s.checkpoint_id.to_string());
    }
    meta.updated_at_ms = now_ms();
    if let Err(e) = ctx.db.write_meta(&meta) {
        eprintln!(
            "warning: could not update the index of thread {}: {e}",
            meta.thread_id
        );
    }
}

/// `graph update`.
pub(crate) async fn update(ctx: &Ctx, args: UpdateArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let edit = parse_json(&args.set_json, "--set-json")?;
    let (resolved, meta) = ctx.graph_for_thread(&args.thread, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let id = graph
        .update_state(&args.thread, edit, args.as_node.as_deref())
        .await?;
    if let Some(meta) = meta {
        refresh_meta(ctx, graph.as_ref(), meta).await;
    }
    ctx.stores.flush_all().await?;
    if args.json {
        out(&format!(
            "{:#}",
            json!({"thread_id": args.thread, "checkpoint_id": id})
        ));
    } else {
        eprintln!(
            "updated thread {}; continue with: {}",
            args.thread,
            ctx.command_line(&["resume", &args.thread])
        );
        out(&id.to_string());
    }
    Ok(EXIT_DONE)
}

/// `graph fork`.
pub(crate) async fn fork(ctx: &Ctx, args: ForkArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let checkpoint = parse_checkpoint(&args.checkpoint)?;
    if let Some(new) = &args.new_thread {
        check_thread_id(new)?;
        if ctx.db.exists(new) {
            return Err(RunError::InvalidInput(format!(
                "thread `{new}` already exists: fork into a new thread id"
            ))
            .into());
        }
    }
    let (resolved, meta) = ctx.graph_for_thread(&args.thread, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let new = graph
        .fork(&args.thread, checkpoint, args.new_thread.clone())
        .await?;
    let now = now_ms();
    let new_meta = ThreadMeta {
        thread_id: new.clone(),
        graph: resolved.file.graph.clone(),
        graph_file: meta
            .as_ref()
            .map(|m| m.graph_file.clone())
            .unwrap_or_else(|| resolved.origin.clone()),
        overrides: meta.map(|m| m.overrides).unwrap_or_default(),
        status: Status::Stopped,
        step: 0,
        checkpoint_id: None,
        created_at_ms: now,
        updated_at_ms: now,
        pid: None,
    };
    refresh_meta(ctx, graph.as_ref(), new_meta).await;
    ctx.stores.flush_all().await?;
    if args.json {
        out(&format!(
            "{:#}",
            json!({"thread_id": new, "forked_from": args.thread, "checkpoint_id": checkpoint})
        ));
    } else {
        eprintln!(
            "forked {} at {checkpoint}; continue with: {}",
            args.thread,
            ctx.command_line(&["resume", &new])
        );
        out(&new);
    }
    Ok(EXIT_DONE)
}

/// `graph delete`: needs no graph, so threads of a graph no longer registered can go too.
pub(crate) async fn delete(ctx: &Ctx, args: DeleteArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    if !ctx.db.exists(&args.thread) {
        return Err(RunError::ThreadNotFound {
            thread_id: args.thread.clone(),
        }
        .into());
    }
    // Holding the store proves no run has it; a running thread fails here as busy.
    ctx.stores.open_for_write(&args.thread).await?;
    let dir = ctx.db.thread_dir(&args.thread);
    let trash =
        ctx.db
            .threads_dir()
            .join(format!(".deleted-{}-{}", args.thread, std::process::id()));
    // Renamed first so the thread vanishes at once, whole, even if the removal is cut short.
    std::fs::rename(&dir, &trash)
        .map_err(|e| anyhow::anyhow!("cannot delete {}: {e}", dir.display()))?;
    ctx.stores.close(&args.thread);
    if let Err(e) = std::fs::remove_dir_all(&trash) {
        eprintln!(
            "warning: thread deleted, but {} could not be removed: {e}",
            trash.display()
        );
    }
    if args.json {
        out(&format!("{:#}", json!({"deleted": args.thread})));
    } else {
        eprintln!("deleted thread {}", args.thread);
    }
    Ok(EXIT_DONE)
}

/// `graph prune`.
pub(crate) async fn prune(ctx: &Ctx, args: PruneArgs) -> anyhow::Result<u8> {
    let keep = args.keep.max(1);
    let threads = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            if !ctx.db.exists(t) {
                return Err(RunError::ThreadNotFound {
                    thread_id: t.clone(),
                }
                .into());
            }
            vec![t.clone()]
        }
        None => {
            let mut ids = ctx.db.thread_ids()?;
            ids.sort();
            ids
        }
    };
    let mut report: Vec<Value> = Vec::new();
    let mut total = 0usize;
    for thread in threads {
        let outcome = prune_one(ctx, &thread, keep).await;
        match outcome {
            Ok(removed) => {
                total += removed;
                if !args.json && removed > 0 {
                    eprintln!("{thread}: removed {removed} checkpoint(s)");
                }
                report.push(json!({"thread_id": thread, "removed": removed}));
            }
            Err(e) => {
                let busy = e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<CheckpointError>(),
                        Some(CheckpointError::ThreadBusy { .. })
                    )
                }) || e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<RunError>(),
                        Some(RunError::Checkpoint(CheckpointError::ThreadBusy { .. }))
                    )
                });
                let why = if busy {
                    "running".to_string()
                } else {
                    format!("{e:#}")
                };
                if !args.json {
                    eprintln!("{thread}: skipped ({why})");
                }
                report.push(json!({"thread_id": thread, "skipped": why}));
            }
        }
    }
    if args.json {
        out(&format!(
            "{:#}",
            json!({"keep": keep, "removed": total, "threads": report})
        ));
    } else {
        eprintln!("removed {total} checkpoint(s), keeping the newest {keep} of each thread");
    }
    Ok(EXIT_DONE)
}

async fn prune_one(ctx: &Ctx, thread: &str, keep: usize) -> anyhow::Result<usize> {
    ctx.stores.open_for_write(thread).await?;
    let (resolved, _) = ctx.graph_for_thread(thread, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let removed = graph.prune(thread, keep).await?;
    ctx.stores.flush_all().await?;
    // Done with it: let other processes have it while the next thread is pruned.
    ctx.stores.close(thread);
    Ok(removed)
}
