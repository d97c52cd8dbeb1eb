//! `graph rekey [THREAD | --all]`: a thread's records (its subgraphs' too) sealed again under
//! the newest encryption key, so older keys can leave `GRAPH_ENCRYPTION_KEY`; records written
//! before encryption was on are sealed as well. Each thread is held while it is rewritten, so
//! no run writes it meanwhile; a busy one is skipped and said.

use crate::error::{bad_input, EXIT_DONE, EXIT_FAILURE};
use crate::{check_thread_id, out, Ctx};
use clap::Args;
use serde_json::json;
use stategraph::checkpoint::{root_thread, CheckpointError, NAMESPACE_SEPARATOR};
use stategraph_crypt::{EncryptedCheckpointer, RekeyReport};

/// `graph rekey`.
#[derive(Args, Debug)]
pub(crate) struct RekeyArgs {
    /// The thread to rewrite (with its subgraphs' records).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub thread: Option<String>,
    /// Rewrite every thread of the store.
    #[arg(long)]
    pub all: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph rekey`.
pub(crate) async fn rekey(ctx: &Ctx, args: RekeyArgs) -> anyhow::Result<u8> {
    let keys = ctx.store.sealed().keyring().clone();
    let Some(current) = keys.current().map(|k| k.id().to_string()) else {
        return Err(bad_input(
            "no encryption key is configured: set GRAPH_ENCRYPTION_KEY (ID:BASE64, the new key \
             first, then the old ones) or GRAPH_ENCRYPTION_KEY_FILE, then run rekey again",
        ));
    };
    // Reads what older keys sealed, and what was stored before encryption was on.
    let rewriter = EncryptedCheckpointer::new(ctx.store.unsealed(), keys)
        .with_clear_journal_keys(&[crate::origin::ORIGIN_KEY, "graph/verdict"])
        .reading_plaintext(true);
    let all = ctx.store.list_threads().await?;
    let roots: Vec<String> = match &args.thread {
        Some(t) => {
            check_thread_id(t)?;
            // Asked of the listing, not by reading: a sealed thread that does not open is
            // still rewritten (or fails below, saying why).
            if !all.iter().any(|x| x == t) {
                return Err(CheckpointError::ThreadNotFound { thread: t.clone() }.into());
            }
            vec![t.clone()]
        }
        None => {
            let mut roots: Vec<String> = all.iter().map(|t| root_thread(t).to_string()).collect();
            roots.dedup();
            roots
        }
    };
    let mut lines = Vec::new();
    let mut failed = 0;
    for root in roots {
        let prefix = format!("{root}{NAMESPACE_SEPARATOR}");
        let members: Vec<&String> = (all.iter())
            .filter(|t| **t == root || t.starts_with(&prefix))
            .collect();
        match rekey_one(ctx, &rewriter, &root, &members).await {
            Ok(r) => {
                if !args.json {
                    say!(
                        "{root}: {} checkpoint(s) and {} pending write(s) rewritten under key \
                         `{current}` ({} already under it)",
                        r.checkpoints,
                        r.writes,
                        r.current
                    );
                }
                lines.push(json!({"thread_id": root, "checkpoints": r.checkpoints,
                                  "writes": r.writes, "already_current": r.current}));
            }
            Err(e) => {
                failed += 1;
                let why = format!("{e:#}");
                if !args.json {
                    say!("{root}: not rewritten: {why}");
                }
                lines.push(json!({"thread_id": root, "error": why}));
            }
        }
    }
    if args.json {
        out(&format!("{:#}", json!({"key": current, "threads": lines})));
    }
    Ok(if failed == 0 { EXIT_DONE } else { EXIT_FAILURE })
}

/// Rewrites one root thread and its subgraphs' records, holding it meanwhile.
async fn rekey_one(
    ctx: &Ctx,
    rewriter: &EncryptedCheckpointer,
    root: &str,
    members: &[&String],
) -> anyhow::Result<RekeyReport> {
    ctx.store.hold(root).await?;
    let mut total = RekeyReport::default();
    let mut result = Ok(());
    for thread in members {
        match rewriter.rekey(thread).await {
            Ok(r) => {
                total.checkpoints += r.checkpoints;
                total.writes += r.writes;
                total.current += r.current;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let released = ctx.store.release(root);
    result?;
    released?;
    Ok(total)
}
