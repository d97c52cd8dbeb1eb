//! A thread read through one store while another writes it (another process: `graph resume` in
//! a terminal beside a long-lived server; here a second `FolderCheckpointer` over the same
//! folder, which locks and serves exactly as a process does): every read sees what was saved
//! last, whether the writer holds the thread now or has let it go, and the private copies the
//! reads made are gone once replaced.

use stategraph_checkpoint::{CheckpointId, Checkpointer};
use stategraph_checkpoint_conformance::records::chained;
use stategraph_sled::FolderCheckpointer;
use std::path::Path;

async fn newest(store: &FolderCheckpointer) -> CheckpointId {
    store.get_checkpoint("t", None).await.unwrap().unwrap().id
}

/// The private copies reads have made and not removed.
fn read_copies(tmp: &Path) -> usize {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("stategraph-read-")
        })
        .count()
}

// One test in this binary: it points the temporary directory, where reads copy stores, at a
// folder of its own before any thread starts, to count the copies left there.
#[test]
fn a_reader_sees_what_another_writer_saved_since_it_last_read() {
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("TMPDIR", tmp.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = tempfile::tempdir_in(tmp.path()).unwrap();
        let writer = FolderCheckpointer::open(db.path()).unwrap();
        writer.put_checkpoint(&chained("t", 1), true).await.unwrap();
        writer.release("t").unwrap();

        let reader = FolderCheckpointer::open(db.path()).unwrap();
        assert_eq!(newest(&reader).await, CheckpointId::from_u128(1));
        assert_eq!(read_copies(tmp.path()), 1);

        // Written again and let go, unseen: the next read copies the store afresh.
        writer.put_checkpoint(&chained("t", 2), true).await.unwrap();
        writer.release("t").unwrap();
        assert_eq!(newest(&reader).await, CheckpointId::from_u128(2));
        assert_eq!(read_copies(tmp.path()), 1, "the stale copy is removed");

        // Read while the writer holds it (through the writer), then after it let go.
        writer.put_checkpoint(&chained("t", 3), true).await.unwrap();
        writer
            .put_journal("t", "call", &serde_json::json!(1))
            .await
            .unwrap();
        let mut child = chained("t", 1);
        child.thread_id = "t/sub:1".into();
        writer.put_checkpoint(&child, true).await.unwrap();
        assert_eq!(newest(&reader).await, CheckpointId::from_u128(3));
        // The journal's keys and the namespaces, asked of the holder.
        assert_eq!(reader.list_journal("t").await.unwrap(), vec!["call"]);
        assert_eq!(reader.list_namespaces("t").await.unwrap(), vec!["t/sub:1"]);
        writer.put_checkpoint(&chained("t", 4), true).await.unwrap();
        writer.release("t").unwrap();
        assert_eq!(newest(&reader).await, CheckpointId::from_u128(4));
        assert_eq!(
            reader.list_checkpoints("t", None, 10).await.unwrap().len(),
            4
        );
        // The same, read from a copy.
        assert_eq!(reader.list_journal("t").await.unwrap(), vec!["call"]);
        assert_eq!(reader.list_namespaces("t").await.unwrap(), vec!["t/sub:1"]);

        // Reading again, with nothing written, reads the same copy.
        assert_eq!(newest(&reader).await, CheckpointId::from_u128(4));
        assert_eq!(read_copies(tmp.path()), 1);
        drop(reader);
        assert_eq!(read_copies(tmp.path()), 0, "a read leaves nothing behind");
    });
}
