//! What the tests share: a real Postgres cluster per test binary (`pg_cluster.rs`).

// Each test binary uses a part of the harness.
#![allow(dead_code)]

pub mod pg_cluster;
