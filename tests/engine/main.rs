//! Integration tests of the engine (issue 2): state merging, edges, supersteps, limits and
//! failures, validation, drawing, streaming, determinism. One test binary, several modules.

mod determinism;
mod drawing;
mod edges;
mod failures;
mod reads_while_changed;
mod same_type_child;
mod stream_modes;
mod streaming;
mod sync_writes;
mod validation;

use serde::{Deserialize, Serialize};
use stategraph::{Keyed, State};

/// The state most tests use: one field of each reducer kind.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// Visit order: each node appends its name.
    #[state(append)]
    pub visits: Vec<String>,
    /// Summed counter.
    #[state(add)]
    pub total: i64,
    /// Overwrite field.
    pub last: String,
    /// Records merged by id.
    #[state(merge_by_id)]
    pub items: Vec<Item>,
}

#[derive(Keyed, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Item {
    #[key]
    pub id: u32,
    pub label: String,
}

/// An update that records a visit by `name`.
pub fn visit(name: &str) -> LogUpdate {
    LogUpdate::default().visits(vec![name.to_string()])
}
