//! `threads`, `state` and `history`: reading threads, including running ones.

use crate::checkpoint::{CheckpointId, InterruptWhen};
use crate::cli::args::{HistoryArgs, StateArgs};
use crate::cli::error::{bad_input, EXIT_DONE};
use crate::cli::store::{Status, ThreadMeta};
use crate::cli::{check_thread_id, format_ago, format_time, out, status_of, Ctx};
use crate::runtime::HistoryQuery;
use serde_json::{json, Value};

/// Parses a checkpoint id given on the command line.
pub(crate) fn parse_checkpoint(text: &str) -> anyhow::Result<CheckpointId> {
    text.parse::<CheckpointId>().map_err(|e| {
        bad_input(format!(
            "`{text}` is not a checkpoint id ({e}); `history` lists them"
        ))
    })
}

/// `graph threads`: reads only the index files, plus a probe of each running thread's socket.
pub(crate) async fn threads(ctx: &Ctx, json: bool) -> anyhow::Result<u8> {
    let ids = ctx.db.thread_ids().map_err(|e| {
        anyhow::anyhow!(
            "cannot list threads in {}: {e}",
            ctx.db.threads_dir().display()
        )
    })?;
    let mut rows: Vec<ThreadMeta> = Vec::new();
    let mut unindexed = Vec::new();
    for id in ids {
        match ctx.db.read_meta(&id) {
            Ok(Some(mut meta)) => {
                // A run that died (kill -9, power loss) never wrote its last status.
                if meta.status == Status::Running && !ctx.db.is_running(&id).await {
                    meta.status = Status::Stopped;
                }
                rows.push(meta);
            }
            Ok(None) => unindexed.push(id),
            Err(message) => {
                eprintln!("warning: {message}");
                unindexed.push(id);
            }
        }
    }
    rows.sort_by(|a, b| {
        b.updated_at_ms
            .cmp(&a.updated_at_ms)
            .then_with(|| a.thread_id.cmp(&b.thread_id))
    });
    if json {
        let mut list: Vec<Value> = rows
            .iter()
            .map(|m| {
                json!({
                    "thread_id": m.thread_id,
                    "graph": m.graph,
                    "status": m.status,
                    "step": m.step,
                    "checkpoint_id": m.checkpoint_id,
                    "created_at_ms": m.created_at_ms,
                    "updated_at_ms": m.updated_at_ms,
                })
            })
            .collect();
        list.extend(
            unindexed
                .iter()
                .map(|id| json!({"thread_id": id, "status": "unknown"})),
        );
        out(&format!("{:#}", Value::Array(list)));
        return Ok(EXIT_DONE);
    }
    if rows.is_empty() && unindexed.is_empty() {
        eprintln!(
            "no threads in {}; start one with: {}",
            ctx.db.root().display(),
            ctx.command_line_with(&["run"], "<GRAPH>")
        );
        return Ok(EXIT_DONE);
    }
    let width = rows
        .iter()
        .map(|m| m.thread_id.len())
        .chain(unindexed.iter().map(String::len))
        .max()
        .unwrap_or(6)
        .max(6);
    let gwidth = rows.iter().map(|m| m.graph.len()).max().unwrap_or(5).max(5);
    out(&format!(
        "{:<width$}  {:<gwidth$}  {:<8}  {:>5}  UPDATED (UTC)",
        "THREAD", "GRAPH", "STATUS", "STEPS"
    ));
    for m in &rows {
        out(&format!(
            "{:<width$}  {:<gwidth$}  {:<8}  {:>5}  {} ({})",
            m.thread_id,
            m.graph,
            m.status.to_string(),
            m.step,
            format_time(m.updated_at_ms),
            format_ago(m.updated_at_ms)
        ));
    }
    for id in &unindexed {
        out(&format!("{id:<width$}  {:<gwidth$}  {:<8}", "?", "unknown"));
    }
    Ok(EXIT_DONE)
}

/// `graph state`.
pub(crate) async fn state(ctx: &Ctx, args: StateArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let checkpoint = args
        .checkpoint
        .as_deref()
        .map(parse_checkpoint)
        .transpose()?;
    let (resolved, _) = ctx.graph_for_thread(&args.thread, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let snapshot = graph.get_state(&args.thread, checkpoint).await?;
    let status = if ctx.stores.is_remote(&args.thread) && checkpoint.is_none() {
        Status::Running
    } else {
        status_of(&snapshot)
    };
    if args.json {
        let mut doc = serde_json::to_value(&snapshot)?;
        if let Value::Object(map) = &mut doc {
            map.insert("thread_id".into(), json!(args.thread));
            map.insert("graph".into(), json!(resolved.file.graph));
            map.insert("status".into(), json!(status));
        }
        out(&format!("{doc:#}"));
        return Ok(EXIT_DONE);
    }
    let m = &snapshot.metadata;
    let mut lines = vec![
        format!("thread      {}", args.thread),
        format!("graph       {}", resolved.file.graph),
        format!("status      {status}"),
        format!("step        {}", snapshot.step),
        format!(
            "checkpoint  {} ({} by {}, {})",
            snapshot.checkpoint_id,
            m.source,
            writers(&m.writers),
            format_time(m.created_at_ms)
        ),
        format!(
            "next        {}",
            if snapshot.next.is_empty() {
                "nothing (done)".to_string()
            } else {
                snapshot.next.join(", ")
            }
        ),
    ];
    if !snapshot.completed.is_empty() {
        lines.push(format!(
            "saved       {} (will not run again)",
            snapshot.completed.join(", ")
        ));
    }
    for e in &snapshot.errors {
        lines.push(format!(
            "failed      {} (task {}): {}",
            e.node, e.task, e.message
        ));
    }
    for i in &snapshot.interrupts {
        let what = match i.when {
            InterruptWhen::Before => format!("breakpoint before `{}`", i.node),
            InterruptWhen::After => format!("breakpoint after `{}`", i.node),
            InterruptWhen::Dynamic => {
                format!("`{}` asks (interrupt {}): {}", i.node, i.id, i.payload)
            }
        };
        lines.push(format!("waiting     {what}"));
    }
    if status != Status::Done && status != Status::Running && checkpoint.is_none() {
        lines.push(format!(
            "continue    {}",
            ctx.command_line(&["resume", &args.thread])
        ));
    }
    lines.push("values".to_string());
    lines.push(format!("{:#}", snapshot.values));
    out(&lines.join("\n"));
    Ok(EXIT_DONE)
}

fn writers(w: &[String]) -> String {
    if w.is_empty() {
        "-".to_string()
    } else {
        w.join(",")
    }
}

/// `graph history`.
pub(crate) async fn history(ctx: &Ctx, args: HistoryArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    let (resolved, _) = ctx.graph_for_thread(&args.thread, &[]).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let query = HistoryQuery {
        limit: args.limit.max(1),
        ..HistoryQuery::default()
    };
    let entries = graph.history(&args.thread, query).await?;
    if args.json {
        out(&format!("{:#}", serde_json::to_value(&entries)?));
        return Ok(EXIT_DONE);
    }
    out(&format!(
        "{:<36}  {:>4}  {:<6}  {:<24}  {:<24}  TIME (UTC)",
        "CHECKPOINT", "STEP", "SOURCE", "WRITERS", "NEXT"
    ));
    for e in &entries {
        let next = if e.next.is_empty() {
            "-".to_string()
        } else {
            e.next.join(",")
        };
        out(&format!(
            "{:<36}  {:>4}  {:<6}  {:<24}  {:<24}  {}",
            e.checkpoint_id,
            e.step,
            e.metadata.source.to_string(),
            writers(&e.metadata.writers),
            next,
            format_time(e.metadata.created_at_ms)
        ));
    }
    Ok(EXIT_DONE)
}
