//! Typed state and how node updates merge into it.
//!
//! A graph's state is the user's own serde struct. Nodes never return a whole state: they return
//! an *update* (the [`State::Update`] type, one `Option<Write<T>>` per field), and each field
//! declares how writes merge through a [`Reducer`]: overwrite (the default), append, add,
//! merge-by-id, or a custom function. `#[derive(State)]` writes all of this from field attributes:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use stategraph::State;
//!
//! #[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
//! struct Chat {
//!     #[state(append)]
//!     messages: Vec<String>,
//!     #[state(add)]
//!     turns: u32,
//!     topic: String, // overwrite: one writer per superstep
//! }
//!
//! let update = ChatUpdate::default().messages(vec!["hi".into()]).turns(1);
//! assert_eq!(update.written_fields(), vec!["messages", "turns"]);
//! ```
//!
//! Invariant: this module knows nothing of graphs, runs or storage. It only defines what an
//! update is and how a batch of updates from one superstep folds into a state.

mod changes;
mod merge;
mod reducer;
mod unfit;
mod write;

pub use changes::{changes_from_json, field_change, whole_update_from_json, FieldMark, WriteMarks};
pub use merge::{merge, merge_field, MergeError, TaggedUpdate};
pub use reducer::{Add, Append, Keyed, MergeById, Overwrite, Reducer};
pub use unfit::{from_json, in_words, nearest, unfit, update_from_json, with_paths};
pub use write::{Write, OVERWRITE_KEY};

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// The state a graph runs over.
///
/// Usually derived with `#[derive(State)]`; a hand-written impl only needs an update type and an
/// `apply` that calls [`merge_field`] once per field:
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph::state::{merge, Add, MergeError, State, TaggedUpdate, Update, Write};
///
/// #[derive(Clone, Default, Serialize, Deserialize)]
/// struct Counter { total: i64 }
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct CounterUpdate { #[serde(default)] total: Option<Write<i64>> }
///
/// impl Update for CounterUpdate {
///     fn written_fields(&self) -> Vec<&'static str> {
///         self.total.iter().map(|_| "total").collect()
///     }
/// }
///
/// impl State for Counter {
///     type Update = CounterUpdate;
///     fn apply(&mut self, writes: &mut [TaggedUpdate<CounterUpdate>]) -> Result<(), MergeError> {
///         merge::<Add, _, _>("total", &mut self.total, writes, |u| &mut u.total)
///     }
/// }
///
/// let mut s = Counter::default();
/// let mut batch = [
///     TaggedUpdate::new("a", CounterUpdate { total: Some(Write::Reduce(2)) }),
///     TaggedUpdate::new("b", CounterUpdate { total: Some(Write::Reduce(3)) }),
/// ];
/// s.apply(&mut batch).unwrap();
/// assert_eq!(s.total, 5);
/// ```
pub trait State: Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// A partial write to this state: which fields a node sets, and how.
    type Update: Update;

    /// The schema version stored with every checkpoint. Bump it when a stored state of the old
    /// shape would no longer deserialize, and supply [`State::migrate`].
    const VERSION: u32 = 1;

    /// Folds one superstep's updates into the state, in the order given (task order).
    ///
    /// On error the state may be partly updated; callers discard it.
    fn apply(&mut self, writes: &mut [TaggedUpdate<Self::Update>]) -> Result<(), MergeError>;

    /// Turns a stored state of an older schema `version` (as JSON) into the current shape.
    ///
    /// The default refuses, so a checkpoint of another version fails loudly instead of being
    /// read as something it is not.
    ///
    /// Checkpoints between two snapshots store updates, so a thread written before a schema
    /// change also holds old updates: see [`State::migrate_update`].
    fn migrate(version: u32, value: serde_json::Value) -> Result<serde_json::Value, String> {
        let _ = value;
        Err(format!(
            "no migration from schema version {version} to {}: implement State::migrate \
             (or #[state(version = .., migrate = path)]) for this state type",
            Self::VERSION
        ))
    }

    /// Turns an update stored under an older schema `version` (as JSON) into the current shape
    /// of [`State::Update`]: old threads keep the updates written after their last snapshot.
    ///
    /// The default passes the update through unchanged, which is right when the new version
    /// only added fields (updates are partial). Override it (or use
    /// `#[state(migrate_update = path)]`) when a field was renamed or changed meaning; an update
    /// that still does not fit fails with a clear error rather than being misread.
    fn migrate_update(version: u32, value: serde_json::Value) -> Result<serde_json::Value, String> {
        let _ = version;
        Ok(value)
    }

    /// An update that sets every field to this state's value (each an explicit overwrite):
    /// the input of a graph of this state type used as a node, which starts from its parent's
    /// state. The default goes through JSON; `#[derive(State)]` clones the fields instead.
    fn whole_update(&self) -> Result<Self::Update, String> {
        changes::whole_update_from_json(self)
    }

    /// What this state changed from `before`, as an update through the reducers: an unchanged
    /// field is not written, a changed one is written through its reducer when one write of it
    /// turns the old value into the new one (what a list gained, what a number grew by), else
    /// overwritten. It is what a graph of this state type used as a node hands its parent.
    ///
    /// `marks`, when given, say which fields the steps from `before` to `self` wrote and how;
    /// an implementation may use them to skip fields, and must give the same update as without
    /// them. The default compares the two states as JSON ([`changes_from_json`]);
    /// `#[derive(State)]` compares only the fields the marks leave open.
    fn changes_since(
        self,
        before: &Self,
        marks: Option<&WriteMarks>,
    ) -> Result<Self::Update, String> {
        let _ = marks;
        changes::changes_from_json(before, &self)
    }
}

/// A partial write to a [`State`]: every field optional.
pub trait Update:
    Clone + Debug + Default + Send + Sync + Serialize + DeserializeOwned + 'static
{
    /// The names of the fields this update writes, in declaration order.
    fn written_fields(&self) -> Vec<&'static str>;

    /// True when the update writes nothing.
    fn is_empty(&self) -> bool {
        self.written_fields().is_empty()
    }

    /// Records in `marks` which fields this update writes (by position in the state struct)
    /// and whether as explicit overwrites. The default leaves the marks untracked, so whoever
    /// reads them compares values instead; `#[derive(State)]` records them.
    fn mark_writes(&self, marks: &mut WriteMarks) {
        marks.untrack();
    }
}
