//! `threads`, `state` and `history`: reading threads, including running ones.

use crate::args::{HistoryArgs, StateArgs};
use crate::error::{bad_input, EXIT_DONE};
use crate::pause;
use crate::progress::tasks_text;
use crate::{format_ago, format_time, out, root_of_thread_arg, status_of, Ctx};
use serde_json::{json, Value};
use stategraph::checkpoint::{CheckpointId, ThreadStatus};
use stategraph::runtime::{HistoryQuery, StateSnapshot, SubgraphState};
use stategraph_llm::UsageLedger;
use stategraph_registry::{ErasedGraph, Resolved};
use stategraph_sled::ThreadListing;
use stategraph_spend::{as_usage, off_ledger, pricing_of};

/// Parses a checkpoint id given on the command line.
pub(crate) fn parse_checkpoint(text: &str) -> anyhow::Result<CheckpointId> {
    text.parse::<CheckpointId>().map_err(|e| {
        bad_input(format!(
            "`{text}` is not a checkpoint id ({e}); `history` lists them"
        ))
    })
}

/// `graph threads`: every thread's line, from the index where the store has not changed since,
/// else from the store (a private copy, or the process that runs it). Damaged stores are listed
/// with what is wrong and where.
pub(crate) async fn threads(ctx: &Ctx, json: bool) -> anyhow::Result<u8> {
    let mut rows = ctx.store.threads().await?;
    // Newest first (threads without a summary last); the thread id breaks ties, so the
    // listing comes out the same every time.
    rows.sort_by(|a, b| {
        let updated = |l: &ThreadListing| l.summary.as_ref().map(|s| s.updated_at_ms);
        updated(b)
            .cmp(&updated(a))
            .then_with(|| a.thread_id.cmp(&b.thread_id))
    });
    let mut failures = Vec::with_capacity(rows.len());
    for l in &rows {
        failures.push(listed_failure(ctx, l).await);
    }
    if json {
        out(&format!("{:#}", threads_json(&rows, &failures)));
        return Ok(EXIT_DONE);
    }
    if rows.is_empty() {
        say!(
            "no threads in {}; start one with: {}",
            ctx.store.place(),
            ctx.command_line_with(&["run"], "<GRAPH>")
        );
        return Ok(EXIT_DONE);
    }
    print_threads_table(&rows, &failures);
    if rows.iter().any(|l| l.damage.is_some()) {
        advise_on_damage(ctx);
    }
    Ok(EXIT_DONE)
}

/// `graph threads --json`: one object per thread, `failed` holding its graph's verdict.
fn threads_json(rows: &[ThreadListing], failures: &[Option<String>]) -> Value {
    let list: Vec<Value> = rows
        .iter()
        .zip(failures)
        .map(|(l, failed)| {
            let s = l.summary.as_ref();
            json!({
                "thread_id": l.thread_id,
                "graph": s.and_then(|s| s.graph.clone()),
                "status": if l.damage.is_some() { json!("damaged") } else { json!(s.map(|s| s.status)) },
                "failed": failed,
                "step": s.map(|s| s.step),
                "checkpoint_id": s.map(|s| s.checkpoint_id.to_string()),
                "created_at_ms": l.created_at_ms,
                "updated_at_ms": s.map(|s| s.updated_at_ms),
                "damage": l.damage,
            })
        })
        .collect();
    Value::Array(list)
}

/// The listing as a table on stdout: a header, a line per thread, and under it why it failed
/// or what is damaged. Each column is as wide as its widest text (at least its title's).
fn print_threads_table(rows: &[ThreadListing], failures: &[Option<String>]) {
    let graph_of = |l: &ThreadListing| {
        l.summary
            .as_ref()
            .and_then(|s| s.graph.clone())
            .unwrap_or_else(|| "?".to_string())
    };
    let statuses = status_texts(rows, failures);
    let width = column_width(rows.iter().map(|l| l.thread_id.len()), 6);
    let gwidth = column_width(rows.iter().map(|l| graph_of(l).len()), 5);
    let swidth = column_width(statuses.iter().map(String::len), 8);
    out(&format!(
        "{:<width$}  {:<gwidth$}  {:<swidth$}  {:>5}  UPDATED (UTC)",
        "THREAD", "GRAPH", "STATUS", "STEPS"
    ));
    for ((l, status), failed) in rows.iter().zip(&statuses).zip(failures) {
        let (step, updated) = match &l.summary {
            Some(s) => (
                s.step.to_string(),
                format!(
                    "{} ({})",
                    format_time(s.updated_at_ms),
                    format_ago(s.updated_at_ms)
                ),
            ),
            None => ("?".to_string(), "-".to_string()),
        };
        out(&format!(
            "{:<width$}  {:<gwidth$}  {:<swidth$}  {:>5}  {updated}",
            l.thread_id,
            graph_of(l),
            status,
            step,
        ));
        if let Some(why) = failed {
            out(&format!("{:<width$}  finished but failed: {why}", ""));
        }
        if let Some(d) = &l.damage {
            out(&format!(
                "{:<width$}  damaged: {} ({})",
                "", d.reason, d.file
            ));
        }
    }
}

/// Each thread's STATUS column: `damaged` over anything else, then the status with
/// ` (failed)` when its graph judged a finished thread a failure.
fn status_texts(rows: &[ThreadListing], failures: &[Option<String>]) -> Vec<String> {
    rows.iter()
        .zip(failures)
        .map(|(l, failed)| match (&l.damage, &l.summary, failed) {
            (Some(_), _, _) => "damaged".to_string(),
            (None, Some(s), Some(_)) => format!("{} (failed)", s.status),
            (None, Some(s), None) => s.status.to_string(),
            (None, None, _) => "unknown".to_string(),
        })
        .collect()
}

/// The width of a column: its widest text, and never narrower than `least` (its title).
fn column_width(widths: impl Iterator<Item = usize>, least: usize) -> usize {
    widths.max().unwrap_or(least).max(least)
}

/// Below a listing with damaged threads (on stderr): they can still be read, and how to make
/// them writable again (a single store says its own way).
fn advise_on_damage(ctx: &Ctx) {
    if let Some(how) = ctx.store.single_store_recovery() {
        say!("damaged threads can still be read where their checkpoints are intact. {how}");
        return;
    }
    if ctx.store.postgres().is_some() {
        say!(
            "damaged threads: `{}` writes a record of how a thread started that does not read \
             again; a checkpoint that does not read is damage in the database itself (restore \
             it from a backup, or remove the thread with `{}`)",
            ctx.command_line_with(&["repair"], "<THREAD>"),
            ctx.command_line_with(&["delete"], "<THREAD>")
        );
        return;
    }
    say!(
        "damaged threads can still be read where their checkpoints are intact; `{}` keeps a backup and makes the thread writable again",
        ctx.command_line_with(&["repair"], "<THREAD>")
    );
}

/// Why a finished thread failed at its job, as its graph judged its final state
/// ([`GraphFactory::failure`](stategraph_registry::GraphFactory::failure)). The run that finished it
/// recorded the verdict on its final checkpoint, and the listing carries it: a few bytes, where
/// judging means building the graph and decoding the whole state. A thread with no verdict on
/// its newest checkpoint (finished before verdicts were recorded, edited since, or written by a
/// program that records none) is judged from its state here; nothing is written back, since a
/// read never writes. `None` for any thread not done, and when its graph can no longer be built
/// (the listing still shows the thread).
async fn listed_failure(ctx: &Ctx, l: &ThreadListing) -> Option<String> {
    let summary = l
        .summary
        .as_ref()
        .filter(|s| l.damage.is_none() && s.status == ThreadStatus::Done)?;
    if let Some(verdict) = &summary.verdict {
        return verdict.failure.clone();
    }
    let (resolved, _) = ctx.graph_for_thread(&l.thread_id, &[]).await.ok()?;
    let graph = resolved.build(Some(ctx.checkpointer())).ok()?;
    let snapshot = graph.get_state(&l.thread_id, None).await.ok()?;
    resolved.factory.failure(&snapshot.values)
}

/// `graph state`: a thread's state, or a subgraph namespace's (`THREAD/NODE:TASK`), with the
/// children its next step's tasks started nested under them.
pub(crate) async fn state(ctx: &Ctx, args: StateArgs) -> anyhow::Result<u8> {
    let root = root_of_thread_arg(&args.thread)?;
    let checkpoint = args
        .checkpoint
        .as_deref()
        .map(parse_checkpoint)
        .transpose()?;
    let resolved = ctx.graph_for_reading(&root).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let snapshot = state_with_children(graph.as_ref(), &args.thread, checkpoint).await?;
    warn_if_damaged(ctx, &root).await?;
    let status = if checkpoint.is_none() && ctx.store.is_running(&root).await {
        ThreadStatus::Running
    } else {
        status_of(&snapshot)
    };
    // The factory judges its graph's own state, not a subgraph namespace's.
    let own = root == args.thread;
    let failed = match status {
        ThreadStatus::Done if own => resolved.factory.failure(&snapshot.values),
        _ => None,
    };
    let off_ledger = match own {
        true => off_ledger_spend(ctx, &resolved, &root, &snapshot).await,
        false => None,
    };
    let shown = ShownState {
        thread: &args.thread,
        resolved: &resolved,
        snapshot: &snapshot,
        status,
        failed,
        off_ledger,
    };
    if args.json {
        out(&format!("{:#}", shown.json()?));
        return Ok(EXIT_DONE);
    }
    let mut lines = shown.head_lines();
    lines.extend(shown.outcome_lines());
    lines.extend(shown.waiting_lines(ctx, &root, checkpoint.is_none()));
    for child in &snapshot.subgraphs {
        describe_child(child, 0, &mut lines);
    }
    lines.push("values".to_string());
    lines.push(format!("{:#}", snapshot.values));
    out(&lines.join("\n"));
    Ok(EXIT_DONE)
}

/// The thread's state with its children nested. The children are extra: when only they cannot
/// be read (a damaged store), the thread's own checkpoint is still shown, with the reason its
/// children are missing.
async fn state_with_children(
    graph: &dyn ErasedGraph,
    thread: &str,
    checkpoint: Option<CheckpointId>,
) -> anyhow::Result<StateSnapshot<Value>> {
    match graph.get_state_with_subgraphs(thread, checkpoint).await {
        Ok(snapshot) => Ok(snapshot),
        Err(nested) => {
            let snapshot = graph.get_state(thread, checkpoint).await?;
            say!("warning: the subgraphs started by thread {thread}'s tasks could not be read: {nested}");
            Ok(snapshot)
        }
    }
}

/// What this branch paid for that no step's ledger holds (failed attempts, results an edit or
/// a rerun set aside): only a thread's own tasks keep it, so only its caller asks, for the
/// root thread. A readout: a store that cannot say leaves it out. Only for a graph whose state
/// keeps a ledger (`usage`), as it walks the thread's checkpoints.
async fn off_ledger_spend(
    ctx: &Ctx,
    resolved: &Resolved,
    root: &str,
    snapshot: &StateSnapshot<Value>,
) -> Option<UsageLedger> {
    snapshot.values.get("usage")?;
    let pricing = pricing_of(&resolved.file.settings);
    off_ledger(
        ctx.store.as_ref(),
        root,
        Some(snapshot.checkpoint_id),
        pricing.as_ref(),
    )
    .await
    .ok()
    .filter(|l| !l.is_empty())
}

/// What `graph state` shows of one thread or namespace, gathered once so the JSON and the text
/// say the same.
struct ShownState<'a> {
    thread: &'a str,
    resolved: &'a Resolved,
    snapshot: &'a StateSnapshot<Value>,
    status: ThreadStatus,
    /// Why the graph judged its finished state a failure.
    failed: Option<String>,
    off_ledger: Option<UsageLedger>,
}

impl ShownState<'_> {
    /// `--json`: the snapshot as the library serializes it, plus what the CLI adds to it.
    fn json(&self) -> anyhow::Result<Value> {
        let mut doc = serde_json::to_value(self.snapshot)?;
        let failed_usage = self.off_ledger.as_ref().map(as_usage);
        if let Value::Object(map) = &mut doc {
            map.insert("thread_id".into(), json!(self.thread));
            map.insert("graph".into(), json!(self.resolved.file.graph));
            map.insert("status".into(), json!(self.status));
            map.insert("failed".into(), json!(self.failed));
            if let Some(usage) = failed_usage {
                map.insert("failed_usage".into(), json!(usage));
            }
        }
        Ok(doc)
    }

    /// Which thread, graph and checkpoint, its status and what runs next.
    fn head_lines(&self) -> Vec<String> {
        let (snapshot, status) = (self.snapshot, self.status);
        let m = &snapshot.metadata;
        vec![
            format!("thread      {}", self.thread),
            format!("graph       {}", self.resolved.file.graph),
            match &self.failed {
                Some(why) => format!("status      {status} (failed: {why})"),
                None => format!("status      {status}"),
            },
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
                    tasks_text(&snapshot.next)
                }
            ),
        ]
    }

    /// How the step stands: results saved, tasks that failed, spend outside the ledger.
    fn outcome_lines(&self) -> Vec<String> {
        let snapshot = self.snapshot;
        let mut lines = Vec::new();
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
        if let Some(ledger) = &self.off_ledger {
            let u = as_usage(ledger);
            lines.push(format!(
                "off-ledger  {} model request{}, {} tokens in and {} out, paid for but in no \
                 step's ledger (values.usage): failed attempts, results an edit or a rerun set \
                 aside, a subgraph's steps whose parent task has not finished, and for a fork \
                 what its source's history had paid so",
                u.requests,
                if u.requests == 1 { "" } else { "s" },
                u.input_tokens,
                u.output_tokens
            ));
        }
        lines
    }

    /// What the thread waits for and the command that continues it (`newest`: the thread's
    /// newest checkpoint is shown; an older one is not where a run continues from).
    fn waiting_lines(&self, ctx: &Ctx, root: &str, newest: bool) -> Vec<String> {
        let (snapshot, status) = (self.snapshot, self.status);
        let mut lines = Vec::new();
        if !snapshot.interrupts.is_empty() {
            lines.push("waiting".to_string());
            lines.extend(pause::describe(
                self.resolved,
                &snapshot.interrupts,
                &snapshot.values,
            ));
        }
        if status != ThreadStatus::Done && status != ThreadStatus::Running && newest {
            lines.push(format!(
                "continue    {}",
                pause::continue_command(ctx, root, &snapshot.interrupts)
            ));
        }
        lines
    }
}

/// A child run by a task, and its own children, indented by level: where it is, what runs
/// next in it, what it waits for, its values on one line.
fn describe_child(child: &SubgraphState, level: usize, lines: &mut Vec<String>) {
    let pad = "  ".repeat(level);
    let s = &child.state;
    lines.push(format!(
        "{pad}subgraph    {} (node {}, task {}, step {})",
        child.thread, child.node, child.task, s.step
    ));
    let next = if s.next.is_empty() {
        "nothing (done)".to_string()
    } else {
        tasks_text(&s.next)
    };
    lines.push(format!("{pad}  next      {next}"));
    for i in &s.interrupts {
        lines.push(format!(
            "{pad}  waiting   {} ({}): {}",
            i.node, i.id, i.payload
        ));
    }
    for e in &s.errors {
        lines.push(format!("{pad}  failed    {}: {}", e.node, e.message));
    }
    if child.declared {
        lines.push(format!("{pad}  values    {}", s.values));
    } else {
        lines.push(format!(
            "{pad}  values    unknown: node `{}` does not declare the graph it runs",
            child.node
        ));
    }
    for grandchild in &s.subgraphs {
        describe_child(grandchild, level + 1, lines);
    }
}

/// Says so when what was read comes from a damaged store (it is what could still be read), or
/// from a copy of what a holder that does not answer last saved (it may be behind).
pub(crate) async fn warn_if_damaged(ctx: &Ctx, thread: &str) -> anyhow::Result<()> {
    if let Some(pid) = ctx.store.possibly_behind(thread).await? {
        let who = match pid {
            0 => "another process".to_string(),
            pid => format!("process {pid}"),
        };
        say!(
            "warning: thread {thread} is held by {who}, which does not answer (stopped with \
             Ctrl+Z?): this is what it last saved, possibly behind what it has done since"
        );
    }
    let Some(d) = ctx.store.damage(thread).await? else {
        return Ok(());
    };
    let how = ctx.store.single_store_recovery().unwrap_or_else(|| {
        format!(
            "`{}` keeps a backup and makes it usable again",
            ctx.command_line(&["repair", thread])
        )
    });
    say!(
        "warning: the store of thread {thread} is damaged: {} (file {}); this is what could \
         still be read. {how}",
        d.reason,
        d.file
    );
    Ok(())
}

fn writers(w: &[String]) -> String {
    if w.is_empty() {
        "-".to_string()
    } else {
        tasks_text(w)
    }
}

/// `graph history`.
pub(crate) async fn history(ctx: &Ctx, args: HistoryArgs) -> anyhow::Result<u8> {
    // Refused as `prune --keep 0` is: a listing of nothing is a mistake, not a wish.
    if args.limit == 0 {
        return Err(bad_input(
            "--limit 0 would show no checkpoint: give --limit N with N ≥ 1 (the newest N)",
        ));
    }
    let root = root_of_thread_arg(&args.thread)?;
    let resolved = ctx.graph_for_reading(&root).await?;
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let query = HistoryQuery {
        limit: args.limit,
        ..HistoryQuery::default()
    };
    let entries = graph.history(&args.thread, query).await?;
    warn_if_damaged(ctx, &root).await?;
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
            tasks_text(&e.next)
        };
        out(&format!(
            "{:<36}  {:>4}  {:<6}  {:<24}  {:<24}  {}",
            e.checkpoint_id,
            e.step,
            e.metadata.source.to_string(),
            writers(&crate::cmd::cache::marked(&e.metadata.writers, &e.cached)),
            next,
            format_time(e.metadata.created_at_ms)
        ));
    }
    Ok(EXIT_DONE)
}
