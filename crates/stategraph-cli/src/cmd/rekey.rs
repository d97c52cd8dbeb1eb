//! `graph rekey [THREAD | --all]`: a thread's records (its subgraphs' too) sealed again under
//! the newest encryption key, so older keys can leave `GRAPH_ENCRYPTION_KEY`; records written
//! before encryption was on are sealed as well: checkpoints, pending writes and journal entries
//! (so a thread paused mid-step needs no old key either). Each thread is held while it is
//! rewritten (on Postgres, under its lease: every rewrite fenced), so no run writes it
//! meanwhile; a busy one is skipped and said. With `--all`, the long-term
//! store's items are sealed again too (`stategraph_crypt::rekey_items`; the folder store's
//! item directory admits one process, so no run writes items meanwhile).

use crate::error::{bad_input, EXIT_DONE, EXIT_FAILURE};
use crate::store::Claim;
use crate::{check_thread_id, out, Ctx};
use clap::Args;
use serde_json::json;
use stategraph::checkpoint::store::{StoreError, TtlConfig};
use stategraph::checkpoint::{root_thread, CheckpointError};
use stategraph_crypt::{EncryptedCheckpointer, EncryptedStore, RekeyReport};

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
    let rewriter = EncryptedCheckpointer::new(ctx.store.unsealed(), keys.clone())
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
        match rekey_one(ctx, &rewriter, &root).await {
            Ok(r) => {
                if !args.json {
                    say!(
                        "{root}: {} checkpoint(s), {} pending write(s) and {} journal record(s) \
                         rewritten under key `{current}` ({} already under it)",
                        r.checkpoints,
                        r.writes,
                        r.journal,
                        r.current
                    );
                }
                lines.push(json!({"thread_id": root, "checkpoints": r.checkpoints,
                                  "writes": r.writes, "journal": r.journal,
                                  "already_current": r.current}));
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
    let mut items = serde_json::Value::Null;
    if args.all {
        items = match rekey_store_items(ctx, &keys).await {
            Ok(r) => {
                if !args.json {
                    say!(
                        "store items: {} rewritten under key `{current}` ({} already under it)",
                        r.resealed,
                        r.current
                    );
                }
                json!({"rewritten": r.resealed, "already_current": r.current})
            }
            Err(e) => {
                failed += 1;
                if !args.json {
                    say!("store items: not rewritten: {e}");
                }
                json!({"error": e.to_string()})
            }
        };
    }
    if args.json {
        out(&format!(
            "{:#}",
            json!({"key": current, "threads": lines, "items": items})
        ));
    }
    Ok(if failed == 0 { EXIT_DONE } else { EXIT_FAILURE })
}

/// Seals the long-term store's items again under the current key (a folder without items
/// has none, and none is made).
async fn rekey_store_items(
    ctx: &Ctx,
    keys: &stategraph_crypt::Keyring,
) -> Result<stategraph_crypt::ItemsRekeyReport, StoreError> {
    let (threads, ttl) = (ctx.store.clone(), TtlConfig::default());
    let backend =
        tokio::task::spawn_blocking(move || crate::long_term::open_backend(&threads, true, ttl))
            .await
            .map_err(|e| StoreError::Backend(format!("opening the store failed: {e}")))??;
    stategraph_crypt::rekey_items(&EncryptedStore::new(backend, keys.clone())).await
}

/// Rewrites one root thread and its subgraphs' records, holding it meanwhile: a directory's
/// thread is held by this process; a Postgres thread under its lease, taken here and renewed
/// while the rewrite runs, so each rewrite (a checkpoint in place, a journal entry) is fenced.
async fn rekey_one(
    ctx: &Ctx,
    rewriter: &EncryptedCheckpointer,
    root: &str,
) -> anyhow::Result<RekeyReport> {
    ctx.store.hold(root).await?;
    if let Some(pg) = ctx.store.postgres() {
        let claim = Claim::take(pg, root).await?;
        return Ok(claim.hold_while(rewriter.rekey(root)).await?);
    }
    // The rewriter reaches the thread's subgraph namespaces itself.
    let result = rewriter.rekey(root).await;
    let released = ctx.store.release(root);
    let total = result?;
    released?;
    Ok(total)
}
