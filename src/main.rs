//! The `graph` command: the CLI app with the built-in graphs. All of it lives in the library
//! (`stategraph::cli`), so a user's own binary can be the same app with its own graphs.

fn main() -> std::process::ExitCode {
    stategraph::cli::App::new().with_builtin_graphs().run()
}
