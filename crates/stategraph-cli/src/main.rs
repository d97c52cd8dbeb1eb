//! The `graph` command: the CLI app with the built-in graphs. All of it lives in the library
//! (`stategraph_cli`), so a user's own binary can be the same app with its own graphs; this is
//! the one place the built-in agents are registered.

fn main() -> std::process::ExitCode {
    // How the allocator behaves (process.rs): a process-wide setting, so the program's choice,
    // made here before any thread starts and not by the library on its own.
    stategraph_cli::tune_process();
    stategraph_cli::App::new()
        .with_graphs(stategraph_agents::builtin_factories())
        .run()
}
