//! The command line, as clap parses it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Run, inspect and edit durable state graphs.
///
/// Exit codes: 0 done; 1 failure (including a thread busy with another run); 2 usage or bad
/// input; 3 paused, waiting for a person; 130, 143, 129 stopped by Ctrl+C, SIGTERM (a drain:
/// the step in flight finishes and is saved), SIGHUP (also when it came before the run started,
/// or after it ended); 141 stdout closed (a `--stream` run stops); 124 the run passed its
/// `--timeout` (its last step saved).
#[derive(Parser, Debug)]
#[command(version, propagate_version = true, max_term_width = 100)]
pub(crate) struct Cli {
    // The global options are listed under their own heading, after each command's own (clap
    // would otherwise interleave them with the command's first options).
    /// Where threads are stored: a directory [default: the user's data directory]/stategraph,
    /// or a Postgres database (postgres://USER@HOST[:PORT]/DATABASE; keep a password in
    /// GRAPH_DB, not on the command line).
    #[arg(
        long,
        env = "GRAPH_DB",
        global = true,
        value_name = "PATH|URL",
        help_heading = GLOBAL
    )]
    pub db: Option<PathBuf>,
    /// More output: node updates, engine logs (-vv for debug logs). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = GLOBAL)]
    pub verbose: u8,
    /// Only errors and the lines needed to continue a thread; no progress.
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        help_heading = GLOBAL
    )]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Start a thread and run it until it ends or pauses.
    Run(RunArgs),
    /// Continue a paused, failed or stopped thread from its last checkpoint (edited artifacts
    /// are picked up first).
    #[command(disable_version_flag = true)]
    Resume(ResumeArgs),
    /// List threads: id, graph, status, steps, last update.
    Threads(JsonArg),
    /// Show a thread's state (at its newest checkpoint, or another one).
    State(StateArgs),
    /// List a thread's checkpoints, newest first.
    History(HistoryArgs),
    /// Edit a thread's state, as a new checkpoint.
    Update(UpdateArgs),
    /// Show or edit the plan of a thread whose graph keeps one (research, agent).
    Plan(PlanArgs),
    /// Copy a checkpoint of a thread into a new thread.
    ///
    /// The fork's usage readout (`graph state`: the ledger in `values.usage` and, beside it,
    /// `failed_usage`) starts as its source's at that checkpoint: what the shared history paid
    /// for, failed model requests included, counted once. What the fork runs adds its own.
    Fork(ForkArgs),
    /// Run a thread again from the newest checkpoint where a node was about to run (into a new
    /// artifact version folder).
    Rerun(RerunArgs),
    /// List a thread's artifact files (path, the node and step that last changed each, changed
    /// or not), or write them again.
    Artifacts(ArtifactsArgs),
    /// Delete a thread and everything the store holds for it (its artifact version folders are
    /// kept).
    Delete(DeleteArgs),
    /// Delete old checkpoints, keeping the newest of each thread (and, without --thread, the
    /// folders runs left that died before their first checkpoint reached the disk).
    Prune(PruneArgs),
    /// Make a damaged thread usable again from its newest intact checkpoint (keeps a backup).
    Repair(RepairArgs),
    /// List the graphs that can be run.
    Graphs(JsonArg),
    /// Draw a graph as Mermaid or Graphviz DOT.
    Draw(DrawArgs),
    /// Decompose a task file into a tree of task files with a model, then pause for review.
    Decompose(DecomposeArgs),
    /// Show a task tree: each task's type, summary and status, and what is wrong in the files.
    Tree(TreeArgs),
    /// Solve a task tree leaves first (run again, it continues; what was edited is solved again).
    Solve(SolveArgs),
    /// Serve the graphs and their threads over HTTP, in the shape of LangGraph's Agent Server
    /// API (its Python and JS clients work against it), until Ctrl+C.
    Serve(ServeArgs),
    /// Serve the graphs and their threads as Model Context Protocol tools: over stdio for the
    /// MCP client that starts it (stdout is the protocol), or over streamable HTTP with
    /// `--addr`, until the client closes stdin, Ctrl+C or SIGTERM.
    Mcp(McpArgs),
    /// Queue a run (or a paused thread's resume) for `graph worker` processes, on the Postgres
    /// run queue (`--db postgres://…`); prints its run id and thread.
    Submit(SubmitArgs),
    /// Claim and run queued runs until Ctrl+C or SIGTERM, which drain: each run's current step
    /// is finished and saved, and the runs go back to the queue for another worker (exit 130,
    /// 143).
    Worker(WorkerArgs),
    /// List the run queue's runs, newest first: queued, running (on which worker, since when),
    /// paused, done, failed, cancelled.
    Runs(RunsArgs),
    /// Cancel a queued or running run (or a thread's): a queued one never runs, a running one
    /// stops at its next step boundary with that step saved. A run that had already ended is
    /// left as it was (exit 1).
    Cancel(CancelArgs),
    /// The long-term store: items agents keep across threads (ls, get, put, rm, search).
    Store(crate::cmd::store::StoreArgs),
    /// The node cache: results of nodes with a cache policy, shared by every thread of the
    /// store (`graph cache clear [GRAPH] [--node NODE]`).
    Cache(CacheArgs),
    /// Rewrite a thread's records (or every thread's) under the newest encryption key (the
    /// first of GRAPH_ENCRYPTION_KEY), after which older keys can be removed; also encrypts a
    /// store written before encryption was turned on.
    Rekey(crate::cmd::rekey::RekeyArgs),
}

#[derive(Args, Debug)]
pub(crate) struct JsonArg {
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Settings shared by the commands that run a graph.
#[derive(Args, Debug, Default)]
pub(crate) struct RunSettings {
    /// Override a setting of the graph file (`model=x`, `search.corpus=DIR`,
    /// `recursion_limit=50`); values are read as TOML or JSON, else as text. Kept with the
    /// thread: its later resumes use it too. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Skip the review pauses the graph makes by default (sets the setting `yes = true`, kept
    /// with the thread).
    #[arg(long)]
    pub yes: bool,
    /// Also pause before these nodes, for this run.
    #[arg(long, value_delimiter = ',', value_name = "NODE,..")]
    pub interrupt_before: Vec<String>,
    /// Also pause after these nodes, for this run.
    #[arg(long, value_delimiter = ',', value_name = "NODE,..")]
    pub interrupt_after: Vec<String>,
    /// When checkpoints reach the disk, for this thread (default: the graph file's, or sync).
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
    /// Print one JSON document on stdout (the outcome) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Stream these events on stdout, one JSON object per line, then the outcome as a line
    /// `{"event":"outcome",...}`: values, updates, messages (model tokens), custom, debug. When
    /// stdout closes (`| head -1`) the run stops, keeping its last checkpoint: exit 141.
    #[arg(long, value_delimiter = ',', value_name = "MODE,..", value_parser = parse_stream_mode)]
    pub stream: Vec<stategraph::runtime::StreamMode>,
    /// Stop the run at the first step boundary past this long (`90s`, `10m`, `1h30m`): the
    /// step in flight finishes and is saved, no new one starts, and `graph resume` continues
    /// the thread (exit 124).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// Run every node, serving no result from the node cache and storing none.
    #[arg(long)]
    pub no_cache: bool,
}

/// `graph cache`.
#[derive(Args, Debug)]
pub(crate) struct CacheArgs {
    #[command(subcommand)]
    pub action: CacheAction,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CacheAction {
    /// Remove cached node results: every graph's, one graph's, or one node's; the next run of
    /// those nodes runs them again.
    Clear {
        /// The graph (its name, as `graphs` lists it) [default: every graph].
        graph: Option<String>,
        /// Only this node's results.
        #[arg(long, value_name = "NODE")]
        node: Option<String>,
        /// Print one JSON document on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn parse_stream_mode(s: &str) -> Result<stategraph::runtime::StreamMode, String> {
    s.parse()
}

/// `--timeout`: a number with a unit (`ms`, `s`, `m`, `h`), or several (`1h30m`); a bare
/// number is seconds.
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    let bad =
        || format!("`{s}` is not a duration: write a number and a unit, like 90s, 10m or 1h30m");
    let text = s.trim();
    let (mut total, mut rest) = match text.parse::<f64>() {
        Ok(secs) => (secs, ""),
        Err(_) => (0f64, text),
    };
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit..];
    }
    match total > 0.0 {
        true => std::time::Duration::try_from_secs_f64(total).map_err(|_| bad()),
        false => Err(format!(
            "`{s}` is no time at all: give the run a timeout above zero"
        )),
    }
}

/// `--out` (or `GRAPH_OUT`): a folder, made when missing. A file there is refused before
/// anything runs: a run's artifacts could never be written into it.
fn parse_out_dir(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    match std::fs::metadata(&path) {
        Ok(m) if !m.is_dir() => Err(format!(
            "{s} is a file, not a folder: give the folder the artifact version folders go in"
        )),
        _ => Ok(path),
    }
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub(crate) enum DurabilityArg {
    Sync,
    Async,
    Exit,
}

impl DurabilityArg {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DurabilityArg::Sync => "sync",
            DurabilityArg::Async => "async",
            DurabilityArg::Exit => "exit",
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A registered graph's name (see `graphs`) or the path of a graph file (.toml).
    pub graph: String,
    /// The input as text, into the graph's text field (e.g. the pipeline's topic).
    #[arg(long, group = "input_source", value_name = "TEXT")]
    pub input: Option<String>,
    /// The input as JSON: an update of the graph's state.
    #[arg(long, group = "input_source", value_name = "JSON")]
    pub input_json: Option<String>,
    /// The input as a JSON file.
    #[arg(long, group = "input_source", value_name = "PATH")]
    pub input_file: Option<PathBuf>,
    /// The new thread's id [default: a new one]. A thread of that id is refused: continue it
    /// with `resume`.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Where the graph's artifact version folders go [default: output/ here].
    #[arg(long, env = "GRAPH_OUT", value_name = "DIR", value_parser = parse_out_dir)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub settings: RunSettings,
}

impl RunArgs {
    /// The flag the input came from, as errors about it name it.
    pub(crate) fn input_source(&self) -> String {
        match (&self.input_json, &self.input_file) {
            (Some(_), _) => "--input-json".to_string(),
            (None, Some(path)) => format!("--input-file {}", path.display()),
            (None, None) if self.input.is_some() => "--input".to_string(),
            (None, None) => "the input".to_string(),
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct ResumeArgs {
    /// The thread.
    pub thread: String,
    /// Answer the pending question with this text.
    #[arg(long, group = "answer", value_name = "TEXT")]
    pub resume: Option<String>,
    /// Answer with this JSON; with several questions pending, an object of answers by id.
    #[arg(long, group = "answer", value_name = "JSON")]
    pub resume_json: Option<String>,
    /// Read edits from, and write artifacts to, this existing version folder (`v2`) [default:
    /// the thread's latest].
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
    /// Where the artifact version folders go. When the thread's current version folder is
    /// elsewhere, its edits are picked up there, then the files are written into a new version
    /// folder here (the old one is kept) [default: beside the thread's current one].
    #[arg(long, env = "GRAPH_OUT", value_name = "DIR", value_parser = parse_out_dir)]
    pub out: Option<PathBuf>,
    /// Do not pick up edited artifact files.
    #[arg(long)]
    pub ignore_edits: bool,
    #[command(flatten)]
    pub settings: RunSettings,
}

#[derive(Args, Debug)]
pub(crate) struct RerunArgs {
    /// The thread.
    pub thread: String,
    /// The node to run again (with everything after it).
    #[arg(long, value_name = "NODE")]
    pub from: String,
    /// Where the new artifact version folder goes [default: beside the thread's current one].
    #[arg(long, env = "GRAPH_OUT", value_name = "DIR", value_parser = parse_out_dir)]
    pub out: Option<PathBuf>,
    /// Do not pick up edited artifact files.
    #[arg(long)]
    pub ignore_edits: bool,
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `graph artifacts THREAD [--restore]`.
#[derive(Args, Debug)]
#[command(
    after_help = "Each file's status: ok (as written for the newest checkpoint), behind (the \
    next write updates it),\nedited (read back as a valid edit by the next resume or rerun), \
    invalid (does not parse or validate:\nthe line is named), truncated, changed (not editable), \
    deleted, not written yet, added.\n`changed by` and `step`: the node and step that last \
    changed the file; where an edit of it is applied as\nanother node (its artifact's producer, \
    whose followers run again), the row says so."
)]
pub(crate) struct ArtifactsArgs {
    /// The thread.
    pub thread: String,
    /// Write every artifact file again from the thread's newest checkpoint (edits are lost).
    #[arg(long)]
    pub restore: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct StateArgs {
    /// The thread, or a subgraph namespace of it (THREAD/NODE:TASK, as `state` lists them).
    pub thread: String,
    /// A checkpoint id (see `history`) instead of the newest.
    #[arg(long, value_name = "ID")]
    pub checkpoint: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct HistoryArgs {
    /// The thread, or a subgraph namespace of it (THREAD/NODE:TASK, as `state` lists them).
    pub thread: String,
    /// Show at most this many checkpoints.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: usize,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct UpdateArgs {
    /// The thread, or a subgraph namespace of it (THREAD/NODE:TASK, as `state` lists them).
    pub thread: String,
    /// The edit: an update of the graph's state as JSON (`{"field": value}`; `{"field":
    /// {"$overwrite": value}}` bypasses the field's reducer).
    #[arg(long, value_name = "JSON")]
    pub set_json: String,
    /// Count the edit as this node's output, so its edges choose what runs next.
    #[arg(long, value_name = "NODE")]
    pub as_node: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph plan THREAD [--edit | add|rm|move|status|deps ...]`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
      graph plan ID                          the plan as a Markdown checklist\n  \
      graph plan ID --edit                   edit it in $EDITOR (or $VISUAL, else vi)\n  \
      graph plan ID add \"Read the docs\" --kind research --deps t1 --after t1\n  \
      graph plan ID rm t3\n  \
      graph plan ID move t4 --before t2      (or --after ID, or --to N)\n  \
      graph plan ID status t2 blocked --reason \"out of scope\"\n  \
      graph plan ID deps t2 --add t1         (or --remove IDS, or IDS to replace them)\n\
    An edit that would make the plan invalid (unknown dependency, cycle, duplicate id, a line\n\
    that cannot be read) is refused with the line named; the stored plan does not change.\n\
    An editor that leaves the file empty aborts the edit (exit 1, the plan unchanged).\n\
    A running thread cannot be edited: edit it while it is paused.")]
pub(crate) struct PlanArgs {
    /// The thread.
    pub thread: String,
    /// Open the plan in $EDITOR (or $VISUAL, else vi) and store the edited plan.
    #[arg(long)]
    pub edit: bool,
    /// Print one JSON document on stdout (the plan, after any change) instead of Markdown.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub change: Option<PlanChange>,
}

/// One change to a plan.
#[derive(Subcommand, Debug)]
pub(crate) enum PlanChange {
    /// Add a pending todo (at the end, unless --before/--after/--to says where).
    Add {
        /// What to find out or do, in one line.
        task: String,
        /// Its id [default: the next free tN].
        #[arg(long)]
        id: Option<String>,
        /// research (search and read) or tool (with a workspace, work with the tools there;
        /// without, fetch the URL in the task).
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// Ids of the todos it waits for.
        #[arg(long, value_delimiter = ',', value_name = "ID,..")]
        deps: Vec<String>,
        #[command(flatten)]
        at: Position,
    },
    /// Remove a todo (refused while another todo depends on it).
    #[command(alias = "remove")]
    Rm {
        /// The todo.
        id: String,
    },
    /// Move a todo (plan order decides which ready todo runs first).
    Move {
        /// The todo.
        id: String,
        #[command(flatten)]
        to: Position,
    },
    /// Set a todo's status: pending (tried afresh), done, blocked, failed, in_progress.
    Status {
        /// The todo.
        id: String,
        /// The new status.
        status: String,
        /// Why (kept as the todo's reason).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Change a todo's dependencies: replace them with IDS, or --add / --remove some.
    Deps {
        /// The todo.
        id: String,
        /// The new dependencies (none clears them, unless --add or --remove is given).
        #[arg(value_delimiter = ',', conflicts_with_all = ["add", "remove"])]
        ids: Vec<String>,
        /// Dependencies to add.
        #[arg(long, value_delimiter = ',', value_name = "ID,..")]
        add: Vec<String>,
        /// Dependencies to remove.
        #[arg(long, value_delimiter = ',', value_name = "ID,..")]
        remove: Vec<String>,
    },
}

/// Where a todo goes: at most one of `--before`, `--after`, `--to`.
#[derive(Args, Debug, Default)]
#[group(multiple = false)]
pub(crate) struct Position {
    /// Just before this todo.
    #[arg(long, value_name = "ID")]
    pub before: Option<String>,
    /// Just after this todo.
    #[arg(long, value_name = "ID")]
    pub after: Option<String>,
    /// At this 1-based position.
    #[arg(long, value_name = "N")]
    pub to: Option<usize>,
}

#[derive(Args, Debug)]
pub(crate) struct ForkArgs {
    /// The thread to copy from, or a subgraph namespace of it (THREAD/NODE:TASK): the fork is then
    /// the whole thread, with that child back at the checkpoint.
    pub thread: String,
    /// The checkpoint to copy (see `history`).
    #[arg(long, value_name = "ID")]
    pub checkpoint: String,
    /// The new thread's id (a new id when absent).
    #[arg(long = "to", value_name = "ID")]
    pub new_thread: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct DeleteArgs {
    /// The thread.
    pub thread: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct RepairArgs {
    /// The thread.
    pub thread: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct PruneArgs {
    /// Checkpoints to keep per thread (at least 1: 0 is refused; `delete` removes a thread).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub keep: usize,
    /// Prune only this thread.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Apply each graph file's `[retention]` table instead of --keep: delete threads past
    /// their days, keep a finished thread's newest checkpoints (paused ones only when told).
    #[arg(long, conflicts_with_all = ["keep", "thread"])]
    pub policy: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph mcp`.
#[derive(Args, Debug)]
pub(crate) struct McpArgs {
    /// Serve over streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only:
    /// the endpoint has no authentication).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<std::net::SocketAddr>,
}

/// `graph serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Where to listen. Beyond loopback (127.0.0.1, ::1) a token is required.
    #[arg(long, default_value = "127.0.0.1:8123", value_name = "HOST:PORT")]
    pub addr: std::net::SocketAddr,
    /// The bearer token every request must carry (`Authorization: Bearer TOKEN`).
    #[arg(
        long,
        env = "GRAPH_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Let browser pages from this origin call the API (CORS). Repeatable; off without it.
    #[arg(long, value_name = "ORIGIN")]
    pub cors: Vec<String>,
    /// Where the artifact version folders of threads the server starts go [default: output/
    /// here, as for `graph run`]. A thread that has folders keeps writing into its own.
    #[arg(long, env = "GRAPH_OUT", value_name = "DIR", value_parser = parse_out_dir)]
    pub out: Option<PathBuf>,
    /// Seconds between background retention sweeps: each graph's `[retention]` policy applied
    /// to the store's threads (as `graph prune --policy` does) and expired store items removed.
    /// Only when some graph has a policy; 0 turns it off.
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    pub retention_every: u64,
}

#[derive(Args, Debug)]
pub(crate) struct DrawArgs {
    /// A registered graph's name or the path of a graph file.
    pub graph: String,
    /// The drawing's language.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: FormatArg,
    /// Draw subgraphs inside the nodes that run them (Mermaid `subgraph` blocks): every level,
    /// or only the first LEVELS.
    #[arg(long, value_name = "LEVELS", num_args = 0..=1)]
    pub xray: Option<Option<usize>>,
}

/// `graph decompose TASK.md`.
#[derive(Args, Debug)]
#[command(
    after_help = "The model splits the task into child tasks, written beside it:\n  \
      TASK_plan.md               the analysis and links to the children\n  \
      TASK_children/CHILD.md     one file per child: # Title, ## Type (simple or complex),\n  \
\x20                          ## Summary, ### Dependents (links to tasks it needs first)\n\
    then decomposes complex children the same way, at most --max-nodes times in all. No file is\n\
    moved or overwritten. It pauses (exit code 3) so you can edit the files; then `solve`.\n\
    Run it again after a kill, it continues; run it again later, it decomposes the complex\n\
    tasks that have no children yet."
)]
pub(crate) struct DecomposeArgs {
    /// The task file (Markdown; `# Title` first).
    pub task: PathBuf,
    /// Most decomposition calls (model calls) in all [default: the setting `max_nodes`, 5].
    #[arg(long, value_name = "N")]
    pub max_nodes: Option<u32>,
    /// Override a setting of graphs/tree.toml (`model=x`, `max_children=4`). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph tree TASK.md`.
#[derive(Args, Debug)]
pub(crate) struct TreeArgs {
    /// The root task file.
    pub task: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph solve TASK.md`.
#[derive(Args, Debug)]
#[command(
    after_help = "Reads the task files again and refuses them (exit code 2, nothing run) when one \
    cannot be\nread as a task, a link is broken or dependencies make a cycle. Then solves each \
    task after the\ntasks its ### Dependents name and after its children, the root last, writing \
    ## Progress and\n## Result into each TASK_plan.md (never into the task files). Run it again \
    after a kill or\nCtrl+C and it continues; a task whose file was edited since it was solved is \
    solved again,\nwith everything that builds on it."
)]
pub(crate) struct SolveArgs {
    /// The root task file.
    pub task: PathBuf,
    /// Override a setting of graphs/tree.toml (`model=x`). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `graph submit`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
      graph submit pipeline --input \"durable agents\" --yes --db postgres://app@db/agents\n  \
      graph submit --thread ID --resume yes      answer a paused thread's question\n\
    A thread runs one run at a time, in the order submitted; --multitask says what a submit does\n\
    when the thread already has one queued or running.")]
pub(crate) struct SubmitArgs {
    /// A registered graph's name (see `graphs`) or the path of a graph file (.toml); with
    /// --resume, the thread's own graph when left out.
    #[arg(required_unless_present_any = ["resume", "resume_json"])]
    pub graph: Option<String>,
    /// The input as text, into the graph's text field (e.g. the pipeline's topic).
    #[arg(long, group = "input_source", value_name = "TEXT")]
    pub input: Option<String>,
    /// The input as JSON: an update of the graph's state.
    #[arg(long, group = "input_source", value_name = "JSON")]
    pub input_json: Option<String>,
    /// The input as a JSON file.
    #[arg(long, group = "input_source", value_name = "PATH")]
    pub input_file: Option<PathBuf>,
    /// The run's thread [default: a new one]. An existing thread continues from its newest
    /// checkpoint with the input.
    #[arg(long, value_name = "ID", required_unless_present = "graph")]
    pub thread: Option<String>,
    /// Queue the resume of the paused --thread, answering its question with this text.
    #[arg(
        long,
        group = "answer",
        value_name = "TEXT",
        requires = "thread",
        conflicts_with = "input_source"
    )]
    pub resume: Option<String>,
    /// Queue the resume of the paused --thread, answering with this JSON.
    #[arg(
        long,
        group = "answer",
        value_name = "JSON",
        requires = "thread",
        conflicts_with = "input_source"
    )]
    pub resume_json: Option<String>,
    /// What to do when the thread already has a run queued or running: reject this one,
    /// enqueue it after them, interrupt the running one at its next step (its progress kept),
    /// or roll it back (its checkpoints dropped) and run this one instead.
    #[arg(long, value_enum, default_value = "enqueue", value_name = "STRATEGY")]
    pub multitask: MultitaskArg,
    /// Override a setting of the graph file (as `run --set`); kept with a new thread.
    /// Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Skip the review pauses the graph makes by default (the setting `yes = true`).
    #[arg(long)]
    pub yes: bool,
    /// Print one JSON document on stdout (run id, thread) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What a submit does on a busy thread.
#[derive(Copy, Clone, Debug, ValueEnum)]
pub(crate) enum MultitaskArg {
    Reject,
    Enqueue,
    Interrupt,
    Rollback,
}

/// `graph worker`.
#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    /// Runs at once.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Seconds a claimed run stays this worker's without a heartbeat: after a crash, another
    /// worker takes its runs over this long after the last one.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub lease: f64,
    /// How many claims a run may have (takeovers included) and still go back to the queue
    /// when the database fails under it (a restart of Postgres costs a run one); past them
    /// it is recorded failed with the database's error.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub retries: u32,
    /// The worker's name in `graph runs` [default: HOST:PID:RANDOM].
    #[arg(long, value_name = "NAME")]
    pub id: Option<String>,
    /// Seconds between background retention sweeps: each graph's `[retention]` policy applied
    /// to the store's threads (as `graph prune --policy` does) and expired store items removed.
    /// Only when some graph has a policy; 0 turns it off.
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    pub retention_every: u64,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.1 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds of at least 0.1")),
    }
}

/// `graph runs`.
#[derive(Args, Debug)]
pub(crate) struct RunsArgs {
    /// Follow the runs: the list is drawn again every second until Ctrl+C, or until every
    /// listed run has ended.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// Only runs in this state.
    #[arg(long, value_enum, value_name = "STATUS")]
    pub status: Option<RunStatusArg>,
    /// Only this thread's runs.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Show at most this many runs, newest first.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: usize,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A run's state in the queue, as `--status` names it.
#[derive(Copy, Clone, Debug, ValueEnum)]
pub(crate) enum RunStatusArg {
    Queued,
    Running,
    Paused,
    Done,
    Failed,
    Cancelled,
}

/// `graph cancel`.
#[derive(Args, Debug)]
pub(crate) struct CancelArgs {
    /// The run (its id, as `submit` and `runs` print it).
    #[arg(required_unless_present = "thread", conflicts_with = "thread")]
    pub run: Option<String>,
    /// Cancel this thread's queued and running runs instead.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub(crate) enum FormatArg {
    Mermaid,
    Dot,
}

impl Command {
    /// Whether the command was asked for JSON output.
    pub(crate) fn json(&self) -> bool {
        match self {
            Command::Run(a) => a.settings.json,
            Command::Resume(a) => a.settings.json,
            Command::Rerun(a) => a.settings.json,
            Command::Threads(a) | Command::Graphs(a) => a.json,
            Command::State(a) => a.json,
            Command::History(a) => a.json,
            Command::Update(a) => a.json,
            Command::Plan(a) => a.json,
            Command::Fork(a) => a.json,
            Command::Delete(a) => a.json,
            Command::Prune(a) => a.json,
            Command::Repair(a) => a.json,
            Command::Artifacts(a) => a.json,
            Command::Draw(_) | Command::Serve(_) | Command::Worker(_) => false,
            Command::Mcp(_) => false,
            Command::Submit(a) => a.json,
            Command::Runs(a) => a.json,
            Command::Cancel(a) => a.json,
            Command::Store(a) => a.json,
            Command::Rekey(a) => a.json,
            Command::Cache(a) => match &a.action {
                CacheAction::Clear { json, .. } => *json,
            },
            Command::Decompose(a) => a.json,
            Command::Tree(a) => a.json,
            Command::Solve(a) => a.json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn timeouts_parse_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(parse_timeout("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_timeout("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_timeout("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_timeout("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_timeout("10 minutes").is_err());
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("m").is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn plan_changes_parse_as_written() {
        let cli =
            Cli::try_parse_from(["graph", "plan", "T", "deps", "t2", "--add", "t1", "--json"])
                .unwrap();
        let Command::Plan(args) = cli.command else {
            panic!("not plan")
        };
        assert!(args.json);
        assert!(matches!(args.change, Some(PlanChange::Deps { ref add, .. }) if add == &["t1"]));
        let cli =
            Cli::try_parse_from(["graph", "plan", "T", "move", "t4", "--before", "t2"]).unwrap();
        let Command::Plan(args) = cli.command else {
            panic!("not plan")
        };
        assert!(
            matches!(args.change, Some(PlanChange::Move { ref to, .. }) if to.before.as_deref() == Some("t2"))
        );
        assert!(Cli::try_parse_from([
            "graph", "plan", "T", "move", "t4", "--before", "t2", "--to", "1"
        ])
        .is_err());
    }
}
