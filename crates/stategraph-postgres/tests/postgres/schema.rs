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
