//! The `graph` command as a library, so a user's own binary gets the whole CLI for its graphs.
//!
//! ```no_run
//! use stategraph_cli::App;
//! fn main() -> std::process::ExitCode {
//!     App::new()
//!         .with_graphs(stategraph_agents::builtin_factories())
//!         .run()
//! }
//! ```
//!
//! That is the `graph` binary (`main.rs`): only it registers the built-in agents. A binary with
//! its own graphs registers their factories instead (or as well):
//! `App::new().register(MyGraph).run()` (see `examples/custom_cli.rs`).
//!
//! # Layout
//! `args.rs` is the command line; `cmd/` holds one file per group of commands;
//! `long_term.rs` opens the long-term store beside the threads (`<db>/items/`, or Postgres's
//! table) for `graph store` (`cmd/store.rs`) and, lazily, for runs' nodes; `invocation.rs` is
//! how the command was started (its name, `--db`), which every follow-up command line it
//! prints repeats; `origin.rs` is how a thread was started (kept in its store); `process.rs` is
//! how the allocator behaves, set first thing by `main` ([`tune_process`]); `progress.rs` draws
//! a run's events; `output.rs` is every write to stdout and stderr (never a panic on a closed
//! pipe); `error.rs` maps the library's typed errors to exit codes, and `hints.rs` names the
//! command line that mends one; `store/` is where threads are kept: a directory
//! (`stategraph_sled::FolderCheckpointer`, which owns the on-disk layout) or a Postgres
//! database (`--db postgres://...`, `stategraph_postgres`), and what only a directory can do
//! is asked for there explicitly.
//!
//! Exit codes: [`EXIT_DONE`] 0, [`EXIT_FAILURE`] 1 (also: the thread is busy with another run),
//! [`EXIT_USAGE`] 2 (bad command line or input; nothing changed), [`EXIT_PAUSED`] 3 (waiting for a
//! person), [`EXIT_INTERRUPTED`] 130 (stopped by Ctrl+C), [`EXIT_TERMINATED`] 143 (drained by
//! SIGTERM: its step in flight finished and saved), [`EXIT_HANGUP`] 129 (stopped by SIGHUP: its
//! terminal closed), [`EXIT_TIMED_OUT`] 124 (past its `--timeout`, its last step saved); a
//! stopped run keeps its last checkpoint. With `--json`, stdout holds exactly one JSON document, also when the command
//! fails.
//!
//! Invariant: the CLI reaches graphs only through the [`registry`](stategraph_registry); agents never
//! depend on it.

// println!/eprintln! panic when the write fails (a pipe whose reader closed): the CLI writes
// through `out` and `say!` (output.rs) instead, and this keeps it so.
#![deny(clippy::print_stdout, clippy::print_stderr)]

// First: its macros (`say!`) are used by the modules after it.
#[macro_use]
mod output;

mod args;
mod cmd;
mod error;
mod hints;
mod invocation;
mod long_term;
mod origin;
mod pause;
mod process;
mod progress;
mod store;
mod traces;

pub use process::tune_process;

pub use error::{
    EXIT_DONE, EXIT_FAILURE, EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_PAUSED, EXIT_TERMINATED,
    EXIT_TIMED_OUT, EXIT_USAGE,
};

use anyhow::Context as _;
use args::Cli;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use error::bad_input;
use invocation::Invocation;
use origin::Origin;
pub(crate) use output::out;
use stategraph::checkpoint::{validate_thread_id, Checkpointer, ThreadStatus};
use stategraph::runtime::ThreadPath;
use stategraph::runtime::{RunError, StateSnapshot};
use stategraph_registry::{AnyFactory, GraphFactory, Override, Registry, Resolved};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use store::{DbArg, Store};

/// The `graph` command line, with the graphs registered into it.
///
/// ```no_run
/// # use stategraph_cli::App;
/// let code = App::new()
///     .with_graphs(stategraph_agents::builtin_factories())
///     .run_from(["graph", "graphs"]);
/// # let _ = code;
/// ```
#[derive(Clone, Default)]
pub struct App {
    registry: Registry,
}

impl App {
    /// An app with no graphs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds graphs: the built-in agents (`stategraph_agents::builtin_factories()`), say, or
    /// a program's own list.
    pub fn with_graphs(mut self, factories: impl IntoIterator<Item = Arc<dyn AnyFactory>>) -> Self {
        self.registry.extend(factories);
        self
    }

    /// Adds a graph; one registered later under the same name replaces it.
    pub fn register(mut self, factory: impl GraphFactory) -> Self {
        self.registry.register(factory);
        self
    }

    /// The registered graphs.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs the command given on this process's command line.
    ///
    /// Memory: a run holds its state, snapshots of it and their JSON, each as large as the state.
    /// glibc's malloc keeps freed blocks under its mmap threshold (which grows up to 32 MiB as
    /// large blocks are freed) for reuse, so after a run over a 100 MB state the process held
    /// ~100 MB it no longer used. The `graph` binary sets the threshold to 1 MiB first thing in
    /// its `main` (`libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20)`, peak RSS 288 MB instead of
    /// 392 MB, BENCHMARKS.md); the library leaves that process-wide choice to the program, and a
    /// binary of your own that runs large states may make it as well, before it starts threads.
    pub fn run(self) -> ExitCode {
        self.run_from(std::env::args_os())
    }

    /// Runs the command in `args` (the first item is the program's name).
    pub fn run_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        ExitCode::from(self.run_code(args.into_iter().map(Into::into).collect()))
    }

    /// Runs the command in `args` and returns its exit status as a number (for a program that
    /// runs the app and then does more, or a test harness running it in a child process).
    pub fn status_from<I, T>(self, args: I) -> u8
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        self.run_code(args.into_iter().map(Into::into).collect())
    }

    fn run_code(self, args: Vec<OsString>) -> u8 {
        let bin = bin_name(&args);
        let (cli, explicit_db) = match parse_args(bin.clone(), args) {
            Ok(parsed) => parsed,
            Err(code) => return code,
        };
        // A run hears Ctrl+C, SIGTERM and SIGHUP from its command's start (cmd/run/stop.rs): a
        // signal never ends it half-way through setting up.
        let stops = Arc::new(cmd::Stops::default());
        if matches!(
            cli.command,
            args::Command::Run(_)
                | args::Command::Resume(_)
                | args::Command::Rerun(_)
                | args::Command::Decompose(_)
                | args::Command::Solve(_)
        ) {
            stops.hear();
        }
        // A worker's operator sees its warnings and its runs' ends without `-v`.
        let worker = matches!(cli.command, args::Command::Worker(_));
        init_tracing(cli.quiet, cli.verbose, worker);
        let json = cli.command.json();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            // A few blocking threads are enough for the disk, and each new one can cost a
            // malloc arena (BENCHMARKS.md, the server).
            .max_blocking_threads(4)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                say!("error: cannot start the async runtime: {e}");
                return error::EXIT_FAILURE;
            }
        };
        let mut hint = None;
        let result = runtime.block_on(async {
            let invocation = Invocation::new(bin, cli.db.as_ref(), explicit_db)?;
            if let Some(result) = cmd::without_store(&self.registry, &invocation, &cli.command) {
                if let Err(e) = &result {
                    hint = hints::hint(&invocation, None, e);
                }
                return result;
            }
            let ctx = Ctx::new(self.registry, invocation, &cli, stops.clone()).await?;
            let result = cmd::dispatch(&ctx, cli.command).await;
            // Threads this command held are flushed, closed and indexed before it exits.
            ctx.store.close();
            if let Err(e) = &result {
                hint = hints::hint(&ctx.invocation, Some(&ctx.store), e);
            }
            result
        });
        // A task still waiting (the Ctrl+C watcher) must not keep the process alive.
        runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        let code = match result {
            Ok(code) => code,
            Err(err) => report_failure(&err, hint, json),
        };
        // A signal during all of the above was heard (cmd/run/stop.rs); it sets the code.
        let code = stops.finish(output::exit_code(code));
        // The run's spans are sent before the process ends (nothing to do without traces).
        traces::finish();
        code
    }
}

/// The name the program was started as (its first argument's file name, else `graph`), which
/// usage messages and the follow-up command lines it prints use.
fn bin_name(args: &[OsString]) -> String {
    args.first()
        .and_then(|a| {
            PathBuf::from(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "graph".to_string())
}

/// The command line parsed, and whether `--db` was given on it; or, when it is wrong (or asks
/// for help or the version), clap's message printed and the exit code to end with.
fn parse_args(bin: String, args: Vec<OsString>) -> Result<(Cli, bool), u8> {
    // clap keeps the command's name as a &'static str; one small string per process.
    let name: &'static str = Box::leak(bin.clone().into_boxed_str());
    let command = Cli::command().name(name).bin_name(bin);
    let matches = match command.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => {
            // clap's usage line names every argument it saw, `--db`/`--out` taken from
            // GRAPH_DB/GRAPH_OUT too; the same mistake found without the environment shows
            // only what was typed.
            let typed = without_env(command).try_get_matches_from(&args).err();
            let e = typed.filter(|t| t.kind() == e.kind()).unwrap_or(e);
            let _ = e.print();
            return Err(e.exit_code().clamp(0, 255) as u8);
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return Err(error::EXIT_USAGE);
        }
    };
    let explicit_db = matches.value_source("db") == Some(ValueSource::CommandLine);
    Ok((cli, explicit_db))
}

/// The command with no argument read from the environment, here or in a subcommand.
fn without_env(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.env(None::<&str>))
        .mut_subcommands(without_env)
}

/// Says why the command failed, once, with a hint of what to do when there is one (and, for
/// `--json`, as a JSON document on stdout too); returns the exit code it calls for.
fn report_failure(err: &anyhow::Error, hint: Option<String>, json: bool) -> u8 {
    let code = error::exit_code(err);
    say!("error: {err:#}");
    if let Some(hint) = hint {
        say!("{hint}");
    }
    if json {
        let doc = serde_json::json!({"error": {"message": format!("{err:#}"), "exit_code": code}});
        out(&format!("{doc:#}"));
    }
    code
}

fn init_tracing(quiet: bool, verbose: u8, worker: bool) {
    use tracing_subscriber::EnvFilter;
    let worker_default = format!("{},sled=off", stategraph_worker::LOG_DEFAULT);
    let default = match (quiet, verbose) {
        // A long-running worker has no one to return its errors to: what it met is its log.
        (false, 0) if worker => worker_default.as_str(),
        // sled logs what it then returns as an error, which is reported as ours.
        (true, _) | (false, 0) => "error,sled=off",
        (false, 1) => "warn,stategraph=info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Without OTEL_EXPORTER_OTLP_ENDPOINT, the log lines alone, as a global filter (no cost).
    if !stategraph_otel::enabled() {
        // Fails only if a subscriber is already set (a host binary set its own): keep that one.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            // Log lines go above the live progress lines while a run is shown.
            .with_writer(progress::LogWriter)
            .with_target(false)
            .try_init();
    } else {
        // Spans exported beside the log lines: each layer with its own filter (traces.rs).
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        use tracing_subscriber::Layer as _;
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(progress::LogWriter)
            .with_target(false)
            .with_filter(filter);
        let _ = tracing_subscriber::registry()
            .with(traces::layer("graph"))
            .with(logs)
            .try_init();
    }
    quiet_sled_panics();
}

/// sled 0.34 panics inside its recovery on some damaged stores; the store layer catches it and
/// reports the damage (`stategraph_sled`), so its panic message is a debug log line here, not a
/// crash report above the error that says what happened. Every other panic is reported as before.
fn quiet_sled_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_sled = info
            .location()
            .is_some_and(|l| l.file().contains("/sled-0.34"));
        match in_sled {
            true => tracing::debug!(panic = %info, "sled panicked (caught: reported as damage)"),
            false => report(info),
        }
    }));
}

/// What every command that reads or writes threads needs: the graphs, the store, how to phrase
/// follow-up commands.
pub(crate) struct Ctx {
    pub registry: Registry,
    /// Where the threads are: a directory or a Postgres database (see `store/`).
    pub store: Store,
    pub invocation: Invocation,
    pub quiet: bool,
    pub verbose: u8,
    /// What stops the command's run (signals, a closed stdout), heard until the command ends.
    pub stops: Arc<cmd::Stops>,
}

impl Ctx {
    async fn new(
        registry: Registry,
        invocation: Invocation,
        cli: &Cli,
        stops: Arc<cmd::Stops>,
    ) -> anyhow::Result<Ctx> {
        Ok(Ctx {
            registry,
            store: Store::open(&invocation.db).await?,
            invocation,
            quiet: cli.quiet,
            verbose: cli.verbose,
            stops,
        })
    }

    pub(crate) fn checkpointer(&self) -> Arc<dyn Checkpointer> {
        self.store.checkpointer()
    }

    /// The Postgres URL the command was given (`--db` or `GRAPH_DB`), when the store is a
    /// Postgres database (connected already: a wrong one failed before the command ran);
    /// `None` for a store directory. The commands of the run queue need it.
    pub(crate) fn postgres_url(&self) -> Option<&str> {
        match &self.invocation.db {
            DbArg::Postgres(url) => Some(url),
            DbArg::Folder(_) => None,
        }
    }

    /// The connected Postgres database, when the store is one (its `run_queue()` is the queue).
    pub(crate) fn postgres(&self) -> Option<&Arc<stategraph_postgres::PostgresCheckpointer>> {
        self.store.postgres()
    }

    /// A follow-up command, ready to paste: `graph <words> [--db PATH]`.
    pub(crate) fn command_line(&self, words: &[&str]) -> String {
        self.invocation.command_line(words)
    }

    /// Like [`Ctx::command_line`], with `tail` after the words.
    pub(crate) fn command_line_with(&self, words: &[&str], tail: &str) -> String {
        self.invocation.command_line_with(words, tail)
    }

    /// The graph a thread was run with, its `--set` overrides plus `extra` applied, and how it
    /// was started (`None` for a thread written by another program, whose checkpoints name
    /// the graph). A record of how it started that cannot be read is an error.
    pub(crate) async fn graph_for_thread(
        &self,
        thread: &str,
        extra: &[String],
    ) -> anyhow::Result<(Resolved, Option<Origin>)> {
        let origin = self.store.read_origin(thread).await?;
        let resolved = self.resolve_thread(thread, origin.as_ref(), extra).await?;
        Ok((resolved, origin))
    }

    /// The graph a thread was run with, for a command that only reads it: a record of how the
    /// thread started that cannot be read is said in a warning (what and what to do), and the
    /// thread is read with the graph its checkpoints name, since what is intact stays readable.
    pub(crate) async fn graph_for_reading(&self, thread: &str) -> anyhow::Result<Resolved> {
        let origin = match self.store.read_origin(thread).await {
            Ok(origin) => origin,
            Err(e) => {
                let damaged = e.downcast::<origin::OriginDamaged>()?;
                say!(
                    "warning: {damaged}\n  (read with the graph its checkpoints name, without its \
                     --set overrides)"
                );
                None
            }
        };
        self.resolve_thread(thread, origin.as_ref(), &[]).await
    }

    async fn resolve_thread(
        &self,
        thread: &str,
        origin: Option<&Origin>,
        extra: &[String],
    ) -> anyhow::Result<Resolved> {
        let (graph_ref, mut sets) = match origin {
            Some(o) => (o.graph_file.clone(), o.overrides.clone()),
            None => {
                let record = self
                    .store
                    .get_checkpoint(thread, None)
                    .await?
                    .ok_or_else(|| RunError::ThreadNotFound {
                        thread_id: thread.to_string(),
                    })?;
                let graph = record.metadata.graph.ok_or_else(|| {
                    anyhow::anyhow!("thread `{thread}` has no graph name in its checkpoints; cannot tell which graph runs it")
                })?;
                (graph, Vec::new())
            }
        };
        sets.extend(extra.iter().cloned());
        let overrides = parse_overrides(&sets)?;
        let resolved = self
            .registry
            .resolve(&graph_ref, &overrides)
            .with_context(|| format!("thread `{thread}` was run with graph `{graph_ref}`"))?;
        Ok(resolved)
    }
}

/// Parses `--set` items.
pub(crate) fn parse_overrides(sets: &[String]) -> anyhow::Result<Vec<Override>> {
    sets.iter()
        .map(|s| s.parse::<Override>().map_err(anyhow::Error::from))
        .collect()
}

/// Refuses thread ids that would not name a directory of their own.
pub(crate) fn check_thread_id(thread: &str) -> anyhow::Result<()> {
    validate_thread_id(thread)?;
    if thread.starts_with('.') {
        return Err(bad_input(format!(
            "invalid thread id `{thread}`: it starts with a dot (reserved for the store's own files)"
        )));
    }
    Ok(())
}

/// Checks a thread argument that may name a subgraph's namespace (`{thread}/{node}:{task}`, as
/// `graph state` lists them) and returns its root thread, which holds the store and the graph.
pub(crate) fn root_of_thread_arg(thread: &str) -> anyhow::Result<String> {
    if ThreadPath::is_root_id(thread) {
        check_thread_id(thread)?;
        return Ok(thread.to_string());
    }
    let path: stategraph::runtime::ThreadPath = thread.parse().map_err(|e| {
        bad_input(format!(
            "{e}; `graph state THREAD` lists a thread's subgraph namespaces"
        ))
    })?;
    check_thread_id(path.root())?;
    Ok(path.root().to_string())
}

/// Where a thread stands at a checkpoint, from what the checkpoint says comes next.
pub(crate) fn status_of<S>(snapshot: &StateSnapshot<S>) -> ThreadStatus {
    if !snapshot.errors.is_empty() {
        ThreadStatus::Failed
    } else if !snapshot.interrupts.is_empty() {
        ThreadStatus::Paused
    } else if snapshot.next.is_empty() {
        ThreadStatus::Done
    } else {
        ThreadStatus::Stopped
    }
}

/// Quotes a word for a POSIX shell when it needs it.
pub(crate) fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '@' | '+')
        });
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Reads JSON given on the command line, reporting a syntax error with its line and column.
pub(crate) fn parse_json(text: &str, what: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| {
        bad_input(format!(
            "{what} is not valid JSON: {} at line {} column {}",
            strip_position(&e.to_string()),
            e.line(),
            e.column()
        ))
    })
}

fn strip_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

/// A time in milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn format_time(ms: u64) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| format!("{ms} ms after 1970"))
}

/// How long ago a time was, briefly.
pub(crate) fn format_ago(ms: u64) -> String {
    let secs = stategraph::checkpoint::now_ms().saturating_sub(ms) / 1000;
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86_399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        // 2026-11-22 12:34:56 UTC
        assert_eq!(format_time(1_795_350_896_000), "2026-11-22 12:34:56");
    }

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("0193-ab"), "0193-ab");
        assert_eq!(shell_quote("my thread"), "'my thread'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn malformed_json_reports_line_and_column() {
        let err = parse_json("{\n  \"a\": 1,,\n}", "--input-json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2 column"), "{err}");
    }
}
