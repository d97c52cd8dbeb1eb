//! A failed connection says what failed, at once or within its timeout: nothing listening, a
//! server that does not answer, a refused password, a missing database; TLS when asked for.

use super::support::pg_cluster::{cluster, PASSWORD, PASSWORD_USER};
use super::{checkpoint, worker};
use serde_json::json;
use stategraph_checkpoint::Checkpointer;
use stategraph_postgres::{ConnectError, PostgresCheckpointer, PostgresOptions};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn nothing_listening_on_the_port_is_reported_at_once() {
    let port = free_port();
    let started = Instant::now();
    let url = format!("postgres://postgres@127.0.0.1:{port}/agents?sslmode=disable");
    let err = PostgresCheckpointer::connect(&url).await.err().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    match &err {
        ConnectError::Unreachable { target, reason } => {
            assert_eq!(target, &format!("127.0.0.1:{port}"));
            assert!(reason.contains("connection refused"), "{reason}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("cannot reach Postgres at 127.0.0.1:"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_that_accepts_and_says_nothing_is_reported_within_the_timeout() {
    // Another service on the port: it takes the connection and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("postgres://postgres@127.0.0.1:{port}/agents?sslmode=disable");
    let options = PostgresOptions::new(url)
        .connect_timeout(Duration::from_millis(200))
        .handshake_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = PostgresCheckpointer::connect_with(options)
        .await
        .err()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    match err {
        ConnectError::Unreachable { reason, .. } => {
            assert!(reason.contains("did not finish the handshake"), "{reason}")
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    silent.abort();
}

#[tokio::test]
async fn a_wrong_password_is_reported_as_authentication_naming_the_user() {
    let port = cluster().port();
    let url = format!(
        "postgres://{PASSWORD_USER}:not-{PASSWORD}@127.0.0.1:{port}/postgres?sslmode=disable"
    );
    let err = PostgresCheckpointer::connect(&url).await.err().unwrap();
    match &err {
        ConnectError::Auth { user, reason, .. } => {
            assert_eq!(user, PASSWORD_USER);
            assert!(
                reason.contains("password authentication failed"),
                "{reason}"
            );
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    assert!(
        !err.to_string().contains(PASSWORD),
        "the password stays out: {err}"
    );
}

#[tokio::test]
async fn a_missing_database_is_reported_by_name() {
    let url = cluster().url("no_such_database");
    match PostgresCheckpointer::connect(&url).await.err().unwrap() {
        ConnectError::NoDatabase { database, .. } => assert_eq!(database, "no_such_database"),
        other => panic!("expected NoDatabase, got {other:?}"),
    }
}

#[tokio::test]
async fn a_connection_string_that_does_not_parse_is_refused_without_echoing_it() {
    let err = PostgresCheckpointer::connect("postgres://app:hunter2@db:notaport/agents")
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ConnectError::InvalidUrl { .. }), "{err:?}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn sslmode_require_encrypts_every_connection() {
    assert!(
        cluster().tls(),
        "the test cluster has no certificate: `openssl` is missing (the Debian postgresql \
         package brings it)"
    );
    let db = cluster().database();
    let url = db.url().replace("sslmode=disable", "sslmode=require");
    let store = PostgresCheckpointer::connect(&url).await.unwrap();
    store
        .put_checkpoint(&checkpoint("t", None, json!({})), true)
        .await
        .unwrap();

    // Seen from the server: the handle's connections use TLS.
    let plain = worker(&db).await;
    drop(plain);
    let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s
             JOIN pg_stat_activity a USING (pid)
             WHERE a.datname = $1 AND a.application_name = 'stategraph'",
            &[&db.name()],
        )
        .await
        .unwrap();
    let (encrypted, all): (i64, i64) = (row.get(0), row.get(1));
    assert!(all > 0);
    assert_eq!(encrypted, all);
}
