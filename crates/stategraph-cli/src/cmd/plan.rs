//! `plan`: show or edit the plan of a thread whose graph keeps one.
//!
//! The command knows no agent: the thread's graph factory hands out a
//! [`PlanEditor`](stategraph_registry::PlanEditor) that renders the plan from the state's JSON and
//! turns an edit into a state update; this file reads the thread, runs `$EDITOR`, and stores
//! the update as a new checkpoint (like `graph update`, so the run continues where it paused).

use crate::args::{PlanArgs, PlanChange, Position};
use crate::error::{bad_input, EXIT_DONE};
use crate::{check_thread_id, out, Ctx};
use anyhow::Context as _;
use serde_json::{json, Value};
use stategraph_registry::{DependencyChange, PlanEditor, PlanError, PlanOp, PlanPosition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `graph plan`.
pub(crate) async fn plan(ctx: &Ctx, args: PlanArgs) -> anyhow::Result<u8> {
    check_thread_id(&args.thread)?;
    if args.edit && args.change.is_some() {
        return Err(bad_input(
            "--edit opens the whole plan in an editor: give it without add, rm, move, status or deps",
        ));
    }
    let thread = args.thread.as_str();
    let (resolved, _) = ctx.graph_for_thread(thread, &[]).await?;
    let editor: Arc<dyn PlanEditor> = resolved.factory.plan_editor().ok_or_else(|| {
        bad_input(format!(
            "graph `{}` keeps no plan: `plan` works on threads of graphs that do (e.g. research); \
             edit this thread's state with `update`",
            resolved.file.graph
        ))
    })?;
    let changing = args.edit || args.change.is_some();
    if changing {
        // Holding the store proves no run has it: a running thread is refused as busy, before
        // anything is read or an editor opened.
        ctx.store.hold(thread).await?;
    }
    let graph = resolved.build(Some(ctx.checkpointer()))?;
    let snapshot = graph.get_state(thread, None).await?;
    let state = snapshot.values;

    let update = if args.edit {
        let markdown = editor.render(&state)?;
        match edit_in_editor(thread, &markdown, |edited| {
            editor.apply_markdown(&state, edited)
        })
        .await?
        {
            Some(update) => Some(update),
            None => {
                say!("the plan was not changed");
                None
            }
        }
    } else if let Some(change) = args.change {
        let op = to_op(change);
        Some(editor.apply(&state, op).map_err(refused)?)
    } else {
        None
    };

    let state = match update {
        Some(update) => {
            graph.update_state(thread, update, None).await?;
            let state = graph.get_state(thread, None).await?.values;
            ctx.store.release(thread)?;
            if !args.json {
                say!(
                    "plan of thread {thread} updated; continue with: {}",
                    ctx.command_line(&["resume", thread])
                );
            }
            state
        }
        None => state,
    };
    if args.json {
        let doc = json!({
            "thread_id": thread,
            "graph": resolved.file.graph,
            "plan": editor.plan(&state)?,
        });
        out(&format!("{doc:#}"));
    } else if !changing || !ctx.quiet {
        out(editor.render(&state)?.trim_end());
    }
    Ok(EXIT_DONE)
}

/// A refused edit: bad input, exit code 2, nothing changed.
fn refused(e: PlanError) -> anyhow::Error {
    bad_input(format!(
        "the plan edit was refused (the plan is unchanged): {e}"
    ))
}

fn position(p: Position) -> Option<PlanPosition> {
    match (p.before, p.after, p.to) {
        (Some(id), _, _) => Some(PlanPosition::Before(id)),
        (_, Some(id), _) => Some(PlanPosition::After(id)),
        (_, _, Some(n)) => Some(PlanPosition::At(n)),
        _ => None,
    }
}

fn to_op(change: PlanChange) -> PlanOp {
    match change {
        PlanChange::Add {
            task,
            id,
            kind,
            deps,
            at,
        } => PlanOp::Add {
            id,
            task,
            kind,
            dependencies: deps,
            at: position(at),
        },
        PlanChange::Rm { id } => PlanOp::Remove { id },
        PlanChange::Move { id, to } => PlanOp::Move {
            id,
            // Without a place, to the end.
            to: position(to).unwrap_or(PlanPosition::At(usize::MAX)),
        },
        PlanChange::Status { id, status, reason } => PlanOp::Status { id, status, reason },
        PlanChange::Deps {
            id,
            ids,
            add,
            remove,
        } => {
            let change = if !add.is_empty() {
                DependencyChange::Add(add)
            } else if !remove.is_empty() {
                DependencyChange::Remove(remove)
            } else {
                DependencyChange::Set(ids)
            };
            PlanOp::Dependencies { id, change }
        }
    }
}

/// The editor command: `$EDITOR`, else `$VISUAL`, else `vi`.
fn editor_command() -> String {
    ["EDITOR", "VISUAL"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string())
}

/// Removes the temporary file when the edit is over, whatever happened.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `markdown` to a temporary file, opens the editor on it, and applies the result with
/// `apply`. `None` when the file came back unchanged. A refused edit keeps a copy of the
/// person's text (named in the error) so the work is not lost. A file emptied in the editor
/// aborts the edit, as an empty message aborts `git commit`: exit 1, the plan unchanged. A
/// byte-order mark some editors put first is not part of the plan.
async fn edit_in_editor(
    thread: &str,
    markdown: &str,
    apply: impl Fn(&str) -> Result<Value, PlanError>,
) -> anyhow::Result<Option<Value>> {
    let dir = std::env::temp_dir();
    let name = format!("graph-plan-{thread}-{}.md", std::process::id());
    let file = TempFile(dir.join(name));
    std::fs::write(&file.0, markdown)
        .with_context(|| format!("cannot write the plan to {}", file.0.display()))?;
    run_editor(&file.0).await?;
    let read = std::fs::read_to_string(&file.0)
        .with_context(|| format!("cannot read the edited plan back from {}", file.0.display()))?;
    let edited = read.strip_prefix('\u{feff}').unwrap_or(&read);
    if edited.trim().is_empty() {
        return Err(anyhow::anyhow!(
            "the edit was aborted: the editor left the plan empty; the plan is unchanged \
             (to remove todos, delete their lines and keep the rest)"
        ));
    }
    if edited == markdown {
        return Ok(None);
    }
    match apply(edited) {
        Ok(update) => Ok(Some(update)),
        Err(e) => {
            let kept = dir.join(format!("graph-plan-{thread}.rejected.md"));
            let note = match std::fs::write(&kept, edited) {
                Ok(()) => format!("\nyour edit is kept in {}", kept.display()),
                Err(_) => String::new(),
            };
            Err(bad_input(format!(
                "the edited plan was refused (the plan is unchanged): {e}{note}"
            )))
        }
    }
}

/// Runs the editor through the shell, so `EDITOR="code --wait"` works, and waits for it.
async fn run_editor(path: &Path) -> anyhow::Result<()> {
    let editor = editor_command();
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(path)
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .status()
        .await
        .with_context(|| format!("cannot start the editor `{editor}` (set EDITOR)"))?;
    if !status.success() {
        return Err(anyhow::anyhow!(
            "the editor `{editor}` exited with {status}; the plan is unchanged"
        ));
    }
    Ok(())
}
