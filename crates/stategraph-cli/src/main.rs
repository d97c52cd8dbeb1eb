//! The `graph` command: the CLI app with the built-in graphs. All of it lives in the library
//! (`stategraph_cli`), so a user's own binary can be the same app with its own graphs; this is
//! the one place the built-in agents are registered.

fn main() -> std::process::ExitCode {
    return_large_blocks_to_the_system();
    stategraph_cli::App::new()
        .with_graphs(stategraph_agents::builtin_factories())
        .run()
}

/// Makes glibc's malloc serve every block of 1 MiB or more with its own mapping, given back to
/// the system when freed. By default the threshold rises with each large block freed (up to
/// 32 MiB), and blocks under it stay in the allocator's arenas after they are freed: a run over
/// a large state (a 100 MB state's snapshots, results and their JSON, 1-40 MB each) kept
/// ~100 MB it no longer used (peak RSS 392 MB against 288 MB with this, BENCHMARKS.md).
///
/// A process-wide setting, so it is the program's choice, made here and not by the library.
fn return_large_blocks_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` takes no pointers; its one hazard is another thread's malloc reading the
    // allocator's parameters while they change. This runs first thing in `main`, before the
    // program has started any thread (the async runtime starts inside `App::run`).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
