//! The checkpointer conformance kit over encrypted stores: `EncryptedCheckpointer` over the
//! memory store, sled and Postgres (a real throwaway cluster, `pg_cluster.rs`): every check but
//! two byte bounds, see `sealed_checks!`. The damage checks reach the backend's stored bytes
//! (sealed), so damage below the seal is still reported by the backend as damage.

#[path = "../../stategraph-postgres/tests/support/pg_cluster.rs"]
#[allow(dead_code)]
mod pg_cluster;

use stategraph_checkpoint::{CheckpointId, Checkpointer, MemoryCheckpointer};
use stategraph_checkpoint_conformance::Backend;
use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
use stategraph_postgres::PostgresCheckpointer;
use stategraph_sled::SledCheckpointer;
use std::sync::Arc;

fn keys() -> Keyring {
    Keyring::new(vec![
        Key::new("current", [3; 32]).unwrap(),
        Key::new("older", [4; 32]).unwrap(),
    ])
    .unwrap()
}

/// The memory store, sealed.
struct SealedMemory {
    inner: Arc<MemoryCheckpointer>,
    saver: Arc<EncryptedCheckpointer>,
}

impl SealedMemory {
    fn new() -> Self {
        let inner = Arc::new(MemoryCheckpointer::new());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedMemory { inner, saver }
    }
}

impl Backend for SealedMemory {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper(thread, checkpoint, damage);
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper_pieces(thread, damage);
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.inner.stored_bytes(thread)
    }
}

/// sled in a temporary directory, sealed.
struct SealedSled {
    saver: Arc<EncryptedCheckpointer>,
    inner: Arc<SledCheckpointer>,
    _dir: tempfile::TempDir,
}

impl SealedSled {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(SledCheckpointer::open(dir.path().join("store")).unwrap());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedSled {
            saver,
            inner,
            _dir: dir,
        }
    }
}

impl Backend for SealedSled {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper(thread, checkpoint, damage).unwrap();
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.inner.tamper_pieces(thread, damage).unwrap();
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.inner.stored_bytes(thread).unwrap()
    }
}

/// Postgres on a database of its own, sealed.
struct SealedPostgres {
    // Declared before the database, so the pool closes before the database is dropped.
    saver: Arc<EncryptedCheckpointer>,
    inner: Arc<PostgresCheckpointer>,
    _db: pg_cluster::TestDatabase,
}

impl SealedPostgres {
    async fn new() -> Self {
        let db = pg_cluster::cluster().database();
        let inner = Arc::new(PostgresCheckpointer::connect(db.url()).await.unwrap());
        let saver = Arc::new(EncryptedCheckpointer::new(inner.clone(), keys()));
        SealedPostgres {
            saver,
            inner,
            _db: db,
        }
    }

    /// Runs one of the store's async test hooks from the kit's synchronous ones (the kit's
    /// tests run on a multi-threaded runtime).
    fn wait<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(work))
    }
}

impl Backend for SealedPostgres {
    fn saver(&self) -> Arc<dyn Checkpointer> {
        self.saver.clone()
    }
    fn tamper(&self, thread: &str, checkpoint: CheckpointId, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.inner.tamper(thread, checkpoint, damage))
            .unwrap();
    }
    fn tamper_pieces(&self, thread: &str, damage: &mut dyn FnMut(&mut Vec<u8>)) {
        self.wait(self.inner.tamper_pieces(thread, damage)).unwrap();
    }
    fn stored_bytes(&self, thread: &str) -> u64 {
        self.wait(self.inner.stored_bytes(thread)).unwrap()
    }
}

/// Every check of the kit but two whose byte bounds are for plaintext records: sealed, a record
/// carries a nonce, a tag, a key id and base64 (about 4/3 of its size plus ~90 bytes), which
/// puts a thread of 100-byte steps at ~6.8 times its state where `snapshots_stay_linear` allows
/// 6, and one large snapshot at 1.35 times where `pruning_and_deleting_free_the_pieces` allows
/// 1.02. `tests/storage.rs` runs the same scenarios with the bounds encryption can keep
/// (storage still grows with what changed; pruning and deleting still free pieces).
macro_rules! sealed_checks {
    ($backend:ident: $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            stategraph_checkpoint_conformance::__conformance_tests!($make;
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
        }
    };
}

sealed_checks!(sealed_memory: super::SealedMemory::new());
sealed_checks!(sealed_sled: super::SealedSled::new());
sealed_checks!(sealed_postgres: super::SealedPostgres::new().await);

mod subgraphs {
    use super::*;
    fn sealed() -> (Arc<dyn Checkpointer>, ()) {
        let inner = Arc::new(MemoryCheckpointer::new());
        (Arc::new(EncryptedCheckpointer::new(inner, keys())), ())
    }
    stategraph_checkpoint_conformance::subgraph_suite!(sealed_memory: super::sealed());

    async fn sealed_postgres() -> (Arc<dyn Checkpointer>, pg_cluster::TestDatabase) {
        let db = pg_cluster::cluster().database();
        let inner = Arc::new(PostgresCheckpointer::connect(db.url()).await.unwrap());
        (Arc::new(EncryptedCheckpointer::new(inner, keys())), db)
    }
    stategraph_checkpoint_conformance::subgraph_suite!(sealed_postgres: super::sealed_postgres().await);
}
