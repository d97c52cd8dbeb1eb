//! The run queue's commands, on a Postgres database (`--db postgres://…`): `submit` queues a
//! run or a paused thread's resume (`submit.rs`), `worker` claims and runs them until a signal
//! drains it (`worker.rs`), `runs` lists and follows them and `cancel` stops them (`runs.rs`);
//! `resume` of a thread the queue serves queues its continuation (`resume.rs`).
//!
//! The queue's storage is `stategraph_postgres::queue`, running a run is
//! `stategraph_worker`'s; these files parse, print and pick exit codes.

mod resume;
mod runs;
mod submit;
mod worker;

pub(crate) use resume::queued_resume;
pub(crate) use runs::{cancel, runs};
pub(crate) use submit::submit;
pub(crate) use worker::worker;

use crate::error::{bad_input, Fail, EXIT_FAILURE, EXIT_USAGE};
use crate::Ctx;
use stategraph_postgres::queue::QueueError;
use stategraph_postgres::PostgresCheckpointer;
use std::sync::Arc;

/// The queue's database: the store when it is Postgres (`--db postgres://…` or `GRAPH_DB`,
/// connected already); an embedded store (a directory) is refused, since workers on other
/// machines could not reach it.
fn postgres(ctx: &Ctx) -> anyhow::Result<&Arc<PostgresCheckpointer>> {
    ctx.postgres().ok_or_else(|| {
        bad_input(format!(
            "the run queue needs Postgres: pass --db postgres://USER@HOST/DATABASE (or set \
             GRAPH_DB); the store here is {}, an embedded one that only this machine's commands \
             reach",
            ctx.store.place()
        ))
    })
}

/// A queue error with the exit code it calls for: a command line naming what is not there
/// (a run, a thread) or what cannot be stored is a usage error (2); a busy thread, a failed
/// database, 1.
fn queue_error(e: QueueError) -> anyhow::Error {
    let code = match &e {
        QueueError::NotFound(_) | QueueError::Invalid(_) => EXIT_USAGE,
        _ => EXIT_FAILURE,
    };
    Fail {
        code,
        message: e.to_string(),
    }
    .into()
}
