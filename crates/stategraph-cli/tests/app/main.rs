//! The CLI run as a user's own binary: these tests' children are this test binary again,
//! registering their own graphs on `stategraph_cli::App` (or holding a thread, or gating a step)
//! in an ignored test that a test starts by its path (`module::child`). One binary for all of
//! them, each file a module: each links the whole CLI.

#[path = "../../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../../tests/support/own_binary.rs"]
mod own_binary;
// Only a cluster's address is used here.
#[allow(dead_code)]
#[path = "../../../stategraph-postgres/tests/support/pg_cluster.rs"]
mod pg_cluster;
#[path = "../../../../tests/support/research_cli.rs"]
mod research;
#[path = "../../../../tests/support/research_agent.rs"]
mod research_support;
#[path = "../../../../tests/support/task_plans.rs"]
mod task_plans;

mod cli_cache;
mod cli_hints;
mod cli_progress_tty;
mod cli_stop_while_waiting;
mod cli_subgraph_artifacts;
mod cli_subgraphs;
mod cli_usage_subgraphs;
mod faults_kill;
mod folders_new_mark;
