//! [`tune_process`]: how the program's memory allocator behaves, set first thing in `main` by
//! the `graph` binary and by every binary built on [`App`](crate::App) that wants `graph`'s
//! memory (the server benchmark's `examples/serve_bench.rs` does), so the two cannot drift.
//!
//! Process-wide settings, so they are the program's choice: the library never makes them itself.
//! Only glibc (Linux, gnu) is tuned; elsewhere this does nothing.

/// Blocks of this size or more get their own mapping from glibc's malloc, given back when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1 << 20;

/// Free memory at the top of an arena beyond which `free` gives it back, and the extra an arena
/// asks the system for when it grows (glibc's defaults: 128 KiB each, in each of its arenas).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 64 << 10;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TOP_PAD: libc::c_int = 0;

/// How often the free memory glibc's malloc keeps is given back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Sets how this process allocates memory; call it first thing in `main`, before any thread is
/// started (the async runtime starts inside [`App::run`](crate::App::run)).
///
/// - glibc's malloc serves every block of 1 MiB or more with its own mapping, given back to the
///   system when freed. By default the threshold rises with each large block freed (up to
///   32 MiB), and blocks under it stay in the allocator's arenas after they are freed: a run over
///   a large state, or a server whose per-thread stores allocate such blocks while open, would
///   keep memory it no longer uses (figures: BENCHMARKS.md).
/// - At most one malloc arena per core (glibc's default: eight per core). Every thread that
///   allocates while the others hold theirs gets an arena of its own, and each keeps the memory
///   its threads freed, so a server's many short-lived blocking threads would leave arenas
///   holding memory they do not use. And the top of
///   an arena is given back once 64 KiB of it is free, with no padding added when it grows.
/// - A thread of its own gives the free pages of every arena back to the system once a second
///   (`malloc_trim`). glibc only ever shrinks an arena from its top, so the pages freed inside it
///   by runs that ended (a thread's store, a request's buffers) would stay resident until
///   reused. A trim with nothing to give back is cheap.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     stategraph_cli::tune_process();
///     stategraph_cli::App::new().run()
/// }
/// ```
pub fn tune_process() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `mallopt` takes no pointers; its one hazard is another thread's malloc reading
        // the allocator's parameters while they change, and the caller runs this before starting
        // any thread.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_ARENA_MAX, arenas);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
        }
        // Without the thread the settings above still hold: nothing to report.
        let _ = std::thread::Builder::new()
            .name("malloc-trim".into())
            .stack_size(64 * 1024)
            .spawn(|| loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: `malloc_trim` takes no pointers and locks each arena it trims.
                unsafe {
                    libc::malloc_trim(0);
                }
            });
    }
}
