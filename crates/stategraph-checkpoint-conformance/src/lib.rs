//! The checkpointer conformance kit: every promise of stategraph's durable-checkpoint contract,
//! written once, for any backend to run — the built-in memory, sled and folder stores run it, a
//! Postgres backend will, and so can a third party's.
//!
//! The checks run real graphs over the backend through the engine's public API: checkpoints
//! (ids, parents, the frontier saved only after it advances), pending writes (saved before the
//! checkpoint that supersedes them), durability modes and their flushes, the journal (a
//! recorded call is never repeated), leases and fencing (one writer per thread, a dead or
//! lapsed lease taken over), subgraph namespaces, prune and delete, damage detected and never
//! read as empty or older, schema migrations, time travel and interrupts.
//!
//! # Layout
//! - [`Backend`] (`backends.rs`): what a backend under test provides; [`Memory`] is the memory
//!   store's.
//! - [`run_all`], [`run_subgraph_checks`]: every check, each on a fresh backend, in one call.
//! - [`conformance_suite!`] and [`subgraph_suite!`]: the same checks as one `#[tokio::test]`
//!   each, so a failure names its check and the checks run in parallel.
//! - `checks/`: the checks, one file per promise; `common.rs`: the small graphs they run;
//!   [`faulty_store`]: a store that logs and fails writes on demand; [`records`]: checkpoint
//!   records made by hand, for tests that write a store directly.
//! - [`store_checks`]: the long-term store's checks ([`store_suite!`]), for every
//!   [`Store`](stategraph::checkpoint::store::Store) backend.
//!
//! ```no_run
//! # async fn demo() {
//! // In a backend's tests/conformance.rs:
//! stategraph_checkpoint_conformance::run_all(&|| {
//!     Box::new(stategraph_checkpoint_conformance::Memory::new())
//!         as Box<dyn stategraph_checkpoint_conformance::Backend>
//! })
//! .await;
//! # }
//! ```

// Library code never prints: it returns what it has to say (see the engine's lib.rs).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod backends;
#[doc(hidden)]
pub mod checks;
mod common;
pub mod faulty_store;
pub mod records;
pub mod store_checks;

pub use backends::{Backend, Memory};

use stategraph::checkpoint::Checkpointer;
use std::sync::Arc;

/// Runs every check of the contract, each on a fresh backend from `make`, one after another.
/// A check that fails panics with what it expected and found.
pub async fn run_all(make: &dyn Fn() -> Box<dyn Backend>) {
    macro_rules! each {
        (; $($module:ident :: $check:ident),* $(,)?) => {
            $(
                let backend = make();
                checks::$module::$check(backend.as_ref()).await;
            )*
        };
    }
    __with_full_checks!(each {});
}

/// Runs the subgraph checks, which need only a store, each on a fresh one from `make` (a store
/// with no damage hooks, such as the folder-per-thread one, runs these).
pub async fn run_subgraph_checks(make: &dyn Fn() -> Arc<dyn Checkpointer>) {
    macro_rules! each {
        (; $($module:ident :: $check:ident),* $(,)?) => {
            $(
                checks::$module::$check(make()).await;
            )*
        };
    }
    __with_subgraph_checks!(each {});
}

/// Instantiates every check for one backend as a module of `#[tokio::test]`s:
/// `conformance_suite!(sled: MySled::new());` makes `sled::a_new_thread_gets_a_uuid_v7` and
/// the rest. Needs `tokio` (with `macros` and `rt-multi-thread`) among the caller's
/// dev-dependencies.
#[macro_export]
macro_rules! conformance_suite {
    ($backend:ident: $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_full_checks!($crate::__conformance_tests { $make });
        }
    };
}

/// As [`conformance_suite!`], without the two checks whose byte bounds are for plaintext
/// records (`storage::snapshots_stay_linear_on_long_threads` and
/// `storage::pruning_and_deleting_free_the_pieces_of_large_snapshots`): for a store that seals
/// each record, adding a nonce, a tag, a key id and base64 to it. Every other check, including
/// those added to the kit later, runs on it as on any backend.
#[macro_export]
macro_rules! sealed_conformance_suite {
    ($backend:ident: $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_checks_but_plaintext_bounds!($crate::__conformance_tests { $make });
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($make:expr; $($module:ident :: $check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let backend = $make;
                $crate::checks::$module::$check(&backend).await;
            }
        )*
    };
}

/// Instantiates the subgraph checks for one store as `#[tokio::test]`s; `$make` gives a pair
/// of the store (`Arc<dyn Checkpointer>`) and whatever must live as long as it (a temporary
/// directory, or `()`).
#[macro_export]
macro_rules! subgraph_suite {
    ($backend:ident: $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_subgraph_checks!($crate::__subgraph_tests { $make });
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __subgraph_tests {
    ($make:expr; $($module:ident :: $check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let (saver, _keep) = $make;
                $crate::checks::$module::$check(saver).await;
            }
        )*
    };
}

/// The contract's checks, listed once: hands them to `$callback` after its own arguments.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_full_checks {
    ($callback:path { $($args:tt)* }) => {
        $crate::__with_checks_but_plaintext_bounds!(
            $crate::__and_plaintext_bounds { $callback { $($args)* } }
        );
    };
}

/// The checks whose byte bounds hold for plaintext records only, added to the others' list.
#[doc(hidden)]
#[macro_export]
macro_rules! __and_plaintext_bounds {
    ($callback:path { $($args:tt)* }; $($checks:tt)*) => {
        $callback!($($args)*; $($checks)*
                storage::snapshots_stay_linear_on_long_threads,
                storage::pruning_and_deleting_free_the_pieces_of_large_snapshots,
        );
    };
}

/// Every check but those of [`__and_plaintext_bounds`], handed to `$callback` as above.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_checks_but_plaintext_bounds {
    ($callback:path { $($args:tt)* }) => {
        $callback!($($args)*;
                threads::a_new_thread_gets_a_uuid_v7,
                threads::a_given_thread_id_is_kept,
                threads::an_invalid_thread_id_is_refused,
                checkpoints::checkpoints_record_ids_parents_steps_and_metadata,
                checkpoints::the_frontier_is_saved_only_after_it_advances,
                checkpoints::each_run_stamps_its_own_run_id,
                pending::a_failed_parallel_task_keeps_its_siblings_results,
                pending::task_results_are_saved_before_the_checkpoint_that_supersedes_them,
                durability::sync_flushes_every_step,
                durability::async_flushes_at_the_end_on_interrupt_and_on_error,
                durability::exit_writes_once_when_the_run_stops,
                durability::a_childs_input_rides_on_the_next_flush,
                durability::async_flushes_once_with_a_child,
                storage::storage_grows_with_what_changed,
                storage::replay_stays_bounded_within_and_across_runs,
                storage::a_large_value_written_again_is_stored_once,
                integrity::a_truncated_checkpoint_is_reported_with_its_thread_and_id,
                integrity::a_flipped_bit_is_caught_and_older_checkpoints_stay_usable,
                integrity::a_thread_stored_in_the_json_format_reads_and_resumes,
                integrity::a_damaged_piece_of_a_large_snapshot_is_reported_not_read,
                schema::an_old_thread_is_read_through_the_migration,
                schema::an_old_thread_without_a_migration_is_a_schema_error,
                schema::old_updates_go_through_migrate_update_or_fail_clearly,
                leases::a_second_run_of_a_busy_thread_fails_at_once,
                leases::a_dead_or_lapsed_lease_is_taken_over,
                leases::a_long_run_keeps_renewing_its_lease,
                hitl::breakpoints_on_the_compiled_graph,
                hitl::breakpoints_for_one_run,
                hitl::a_dynamic_interrupt_reruns_the_node_with_the_answer,
                hitl::several_interrupts_are_answered_by_id,
                hitl::a_consumed_answer_is_never_delivered_again,
                time_travel::get_state_reads_any_checkpoint,
                time_travel::history_is_newest_first_filtered_and_paged,
                time_travel::update_state_with_and_without_as_node,
                time_travel::replay_from_a_checkpoint_starts_a_branch,
                time_travel::fork_leaves_the_source_thread_untouched,
                time_travel::rerun_from_redoes_one_stage,
                time_travel::delete_thread_removes_everything,
                time_travel::prune_keeps_the_newest_and_they_read_back_exactly,
                journal::a_recorded_call_is_not_repeated_when_the_node_reruns,
                journal::journal_keys_are_listed_per_thread_and_namespace,
        );
    };
}

/// The subgraph checks, listed once, handed to `$callback` as above.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_subgraph_checks {
    ($callback:path { $($args:tt)* }) => {
        $callback!($($args)*;
                subgraphs::a_compiled_graph_is_a_node_and_checkpoints_under_a_namespace,
                subgraphs::a_mapped_subgraph_runs_once_per_send_item,
                subgraphs::an_interrupt_in_a_child_pauses_the_run_and_resumes_inside_it,
                subgraphs::parallel_children_pause_together_and_are_answered_by_id,
                subgraphs::a_grandchild_that_asks_twice_is_answered_through_two_levels,
                subgraphs::a_breakpoint_in_a_child_pauses_the_run,
                subgraphs::a_failing_child_names_its_path_and_a_resume_reruns_only_what_failed,
                subgraphs::a_childs_first_step_keeps_a_finished_sibling_beside_a_failed_one,
                subgraphs::a_node_runs_subgraphs_itself,
                subgraphs::a_child_runs_as_part_of_its_parents_run,
                subgraph_state::a_paused_run_shows_each_childs_state_under_its_task,
                subgraph_state::a_grandchilds_state_is_nested_under_its_child,
                subgraph_state::an_undeclared_child_is_listed_without_its_values,
                subgraph_state::a_paused_childs_state_is_edited_and_the_resume_uses_it,
                subgraph_state::a_fork_of_a_run_paused_inside_a_child_resumes_inside_it,
                subgraph_state::a_fork_from_a_checkpoint_inside_a_child_reruns_only_what_follows_it,
        );
    };
}
