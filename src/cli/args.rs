//! The command line, as clap parses it.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Run, inspect and edit durable state graphs.
///
/// Exit codes: 0 done; 1 failure (including a thread busy with another run); 2 usage or bad
/// input; 3 paused, waiting for a person; 130 stopped by Ctrl+C.
#[derive(Parser, Debug)]
#[command(version, propagate_version = true, max_term_width = 100)]
pub(crate) struct Cli {
    /// Where threads are stored [default: the user's data directory]/stategraph.
    #[arg(long, env = "GRAPH_DB", global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// More output: node updates, engine logs (-vv for debug logs). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors and the lines needed to continue a thread; no progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Start a thread and run it until it ends or pauses.
    Run(RunArgs),
    /// Continue a paused, failed or stopped thread from its last checkpoint.
    Resume(ResumeArgs),
    /// List threads: id, graph, status, steps, last update.
    Threads(JsonArg),
    /// Show a thread's state (at its newest checkpoint, or another one).
    State(StateArgs),
    /// List a thread's checkpoints, newest first.
    History(HistoryArgs),
    /// Edit a thread's state, as a new checkpoint.
    Update(UpdateArgs),
    /// Copy a checkpoint of a thread into a new thread.
    Fork(ForkArgs),
    /// Run a thread again from the newest checkpoint where a node was about to run.
    Rerun(RerunArgs),
    /// Delete a thread and everything stored for it.
    Delete(DeleteArgs),
    /// Delete old checkpoints, keeping the newest of each thread.
    Prune(PruneArgs),
    /// List the graphs that can be run.
    Graphs(JsonArg),
    /// Draw a graph as Mermaid or Graphviz DOT.
    Draw(DrawArgs),
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
    /// `recursion_limit=50`); values are read as TOML or JSON, else as text. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Skip the review pauses the graph makes by default (sets the setting `yes = true`).
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
    /// The thread to run on (a new id when absent; an existing thread continues with the input).
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    #[command(flatten)]
    pub settings: RunSettings,
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
    #[command(flatten)]
    pub settings: RunSettings,
}

#[derive(Args, Debug)]
pub(crate) struct StateArgs {
    /// The thread.
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
    /// The thread.
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
    /// The thread.
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

#[derive(Args, Debug)]
pub(crate) struct ForkArgs {
    /// The thread to copy from.
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
pub(crate) struct PruneArgs {
    /// Checkpoints to keep per thread (at least 1).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub keep: usize,
    /// Prune only this thread.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct DrawArgs {
    /// A registered graph's name or the path of a graph file.
    pub graph: String,
    /// The drawing's language.
    #[arg(long, value_enum, default_value = "mermaid")]
    pub format: FormatArg,
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
            Command::Fork(a) => a.json,
            Command::Delete(a) => a.json,
            Command::Prune(a) => a.json,
            Command::Draw(_) => false,
        }
    }
}
