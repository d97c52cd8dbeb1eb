//! `graph serve`: the registered graphs and the store's threads over HTTP, in the shape of
//! LangGraph's Agent Server API (see stategraph-server), until Ctrl+C or SIGTERM.
//!
//! The server writes a thread only while it runs it (or saves an edit, or keeps a thread it just
//! made a second for its first run): then it lets the thread go, so `graph resume` in another
//! terminal can take it (waiting for that second if need be), and while it runs, `graph state`
//! reads it through this process.
//!
//! With `--retention-every SECS` (an hour by default; 0: off) and a graph with a `[retention]`
//! policy, it also sweeps the store in the background (`cmd/background_sweep.rs`) and serves
//! the newest sweep at `GET /retention`.

use crate::args::ServeArgs;
use crate::error::{bad_input, EXIT_DONE};
use crate::store::Store;
use crate::Ctx;
use stategraph_server::{Server, ServerConfig, ServerError};

/// `graph serve`.
pub(crate) async fn serve(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<u8> {
    let config = ServerConfig {
        addr: args.addr,
        token: args.token.filter(|t| !t.is_empty()),
        cors: args.cors,
        // Relative to this folder, as `graph run --out` is; absolute, as run folders are kept.
        artifacts_dir: Some(std::path::absolute(
            args.out.unwrap_or_else(|| "output".into()),
        )?),
        ..ServerConfig::default()
    };
    let store = ctx.store.clone();
    // Runs' nodes reach the long-term store beside the threads, as `graph run`'s do (opened
    // when one first uses it); the background sweep removes its expired items.
    let long_term = crate::long_term::for_runs(&ctx.store);
    let mut server = Server::new(ctx.registry.clone(), ctx.checkpointer())
        .with_long_term_store(long_term.clone())
        // Detached at once, closed on a blocking thread: the server calls this while it admits
        // no run (Postgres: nothing to let go).
        .on_thread_idle(move |thread| {
            if let Store::Folder(folder) = &store {
                folder.release_in_background(thread);
            }
        });
    // A thread is taken before a run reads it, so the run opens its store once.
    if let Store::Folder(folder) = &ctx.store {
        let folder = (**folder).clone();
        server = server.on_thread_busy(move |thread| {
            let folder = folder.clone();
            async move { folder.hold_stored(&thread).await }
        });
    }
    // Stopped when this command ends (dropped), after its round in progress.
    let sweeper = super::background_sweep::start(ctx, args.retention_every, &long_term);
    if let Some(sweeper) = &sweeper {
        server = server.with_retention(sweeper.status());
    }
    let bound = server.bind(config).await.map_err(|e| match e {
        ServerError::TokenRequired { .. } | ServerError::BadOrigin { .. } => {
            bad_input(e.to_string())
        }
        other => other.into(),
    })?;
    let graphs: Vec<String> = ctx.registry.iter().map(|f| f.name().to_string()).collect();
    say!(
        "serving {} graphs ({}) on http://{}",
        graphs.len(),
        graphs.join(", "),
        bound.local_addr()
    );
    say!("the web page: http://{}/", bound.local_addr());
    say!("threads in {}; stop with Ctrl+C", ctx.store.place());
    bound.serve(stopped()).await?;
    if let Some(sweeper) = sweeper {
        sweeper.stop().await;
    }
    say!("stopped");
    Ok(EXIT_DONE)
}

/// Completes on Ctrl+C or SIGTERM (`graph mcp` stops on them too).
pub(super) async fn stopped() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
