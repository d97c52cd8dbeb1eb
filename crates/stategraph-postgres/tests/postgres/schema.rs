//! The schema is the program's: created on first connect, migrated in versions, and never
//! touched by a build older than the database.

use super::psql;
use super::support::pg_cluster::cluster;
use stategraph_postgres::{ConnectError, PostgresCheckpointer, SCHEMA_VERSION};

#[tokio::test]
async fn a_database_migrated_by_a_newer_build_is_refused_untouched() {
    let db = cluster().database();
    drop(PostgresCheckpointer::connect(db.url()).await.unwrap());
    let client = psql(&db).await;
    client
        .execute(
            "INSERT INTO stategraph_migrations (version, what) VALUES (99, 'from the future')",
            &[],
        )
        .await
        .unwrap();

    let err = PostgresCheckpointer::connect(db.url()).await.err().unwrap();
    match &err {
        ConnectError::SchemaTooNew {
            database,
            found,
            supported,
        } => {
            assert_eq!(
                (database.as_str(), *found, *supported),
                (db.name(), 99, SCHEMA_VERSION)
            );
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert!(err.to_string().contains("upgrade stategraph"), "{err}");
    let versions: i64 = client
        .query_one("SELECT count(*) FROM stategraph_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        versions,
        i64::from(SCHEMA_VERSION) + 1,
        "nothing was changed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_starting_together_migrate_a_new_database_once() {
    let db = cluster().database();
    let url = db.url().to_string();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresCheckpointer::connect(&url).await })
        })
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    let client = psql(&db).await;
    let rows = client
        .query(
            "SELECT version FROM stategraph_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i32).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_database_at_version_1_is_migrated_to_the_run_queue_with_its_threads_kept() {
    use stategraph_checkpoint::Checkpointer;
    let db = cluster().database();
    let saver = PostgresCheckpointer::connect(db.url()).await.unwrap();
    let record = super::checkpoint("kept", None, serde_json::json!({"n": 1}));
    saver.put_checkpoint(&record, true).await.unwrap();
    drop(saver);
    // As a build of version 1 left it.
    let client = psql(&db).await;
    client
        .batch_execute(
            "DROP TABLE stategraph_store_items; DROP TABLE stategraph_node_cache; \
             DROP TABLE stategraph_runs; DELETE FROM stategraph_migrations WHERE version >= 2",
        )
        .await
        .unwrap();

    let saver = PostgresCheckpointer::connect(db.url()).await.unwrap();
    assert!(saver.get_checkpoint("kept", None).await.unwrap().is_some());
    let queue = saver.run_queue();
    let run = queue
        .submit(stategraph_postgres::queue::Submission::input(
            "g",
            serde_json::json!({}),
        ))
        .await
        .unwrap();
    assert!(queue.get(run).await.unwrap().is_some());
    let versions: i64 = client
        .query_one("SELECT max(version) FROM stategraph_migrations", &[])
        .await
        .unwrap()
        .get::<_, i32>(0)
        .into();
    assert_eq!(versions, i64::from(SCHEMA_VERSION));
}
