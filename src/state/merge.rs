use super::Write;
use std::sync::Arc;

/// An update tagged with the node that wrote it, so a merge error can name the writers.
#[derive(Clone, Debug)]
pub struct TaggedUpdate<U> {
    /// The node (task) that produced the update.
    pub node: Arc<str>,
    /// The update itself.
    pub update: U,
}

impl<U> TaggedUpdate<U> {
    /// Tags `update` as written by `node`.
    pub fn new(node: impl Into<Arc<str>>, update: U) -> Self {
        TaggedUpdate {
            node: node.into(),
            update,
        }
    }
}

/// Writes of one superstep that cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// Several nodes wrote an overwrite field in the same superstep.
    #[error(
        "field `{field}` was written by {} nodes in one superstep ({}); it keeps only one value \
         per step: give it a reducer (append, add, merge_by_id or a custom one) or let only one \
         of these nodes write it",
        nodes.len(), nodes.join(", ")
    )]
    ConcurrentWrites {
        /// The field written twice.
        field: &'static str,
        /// The writers, in task order.
        nodes: Vec<String>,
    },
    /// Several nodes sent an explicit overwrite for the same field in the same superstep.
    #[error(
        "field `{field}` got an explicit overwrite from {} nodes in one superstep ({}); at most \
         one node may bypass the field's reducer per step",
        nodes.len(), nodes.join(", ")
    )]
    ConflictingOverwrites {
        /// The field overwritten twice.
        field: &'static str,
        /// The writers, in task order.
        nodes: Vec<String>,
    },
}

/// Merges one field's writes through the reducer `R`: the convenient form for hand-written
/// [`State::apply`](super::State::apply) impls.
///
/// ```
/// # use stategraph::state::{merge, Append, TaggedUpdate, Write};
/// let mut log = vec![1];
/// let mut batch = [TaggedUpdate::new("a", Some(Write::Reduce(vec![2])))];
/// merge::<Append, _, _>("log", &mut log, &mut batch, |u| u).unwrap();
/// assert_eq!(log, vec![1, 2]);
/// ```
pub fn merge<R: super::Reducer<T>, U, T>(
    field: &'static str,
    current: &mut T,
    writes: &mut [TaggedUpdate<U>],
    slot: impl Fn(&mut U) -> &mut Option<Write<T>>,
) -> Result<(), MergeError> {
    merge_field(field, current, writes, slot, R::EXCLUSIVE, R::reduce)
}

/// Merges one field's writes from a superstep, in task order.
///
/// `slot` picks the field out of an update; `exclusive` and `reduce` come from the field's
/// [`Reducer`](super::Reducer). An explicit [`Write::Overwrite`] sets the value and the step's
/// other writes to that field are dropped (LangGraph's rule: the overwrite is the step's final word).
///
/// Allocates nothing unless there is an error: this runs for every field of every step.
pub fn merge_field<U, T>(
    field: &'static str,
    current: &mut T,
    writes: &mut [TaggedUpdate<U>],
    slot: impl Fn(&mut U) -> &mut Option<Write<T>>,
    exclusive: bool,
    reduce: impl Fn(&mut T, T),
) -> Result<(), MergeError> {
    let mut count = 0usize;
    let mut overwrites = 0usize;
    for w in writes.iter_mut() {
        if let Some(write) = slot(&mut w.update).as_ref() {
            count += 1;
            overwrites += usize::from(write.is_overwrite());
        }
    }
    if count == 0 {
        return Ok(());
    }
    let writers = |writes: &mut [TaggedUpdate<U>], only_overwrites: bool| -> Vec<String> {
        writes
            .iter_mut()
            .filter_map(|w| {
                let hit = match slot(&mut w.update).as_ref() {
                    Some(write) => !only_overwrites || write.is_overwrite(),
                    None => false,
                };
                hit.then(|| w.node.to_string())
            })
            .collect()
    };
    if overwrites > 1 {
        return Err(MergeError::ConflictingOverwrites {
            field,
            nodes: writers(writes, true),
        });
    }
    if exclusive && count > 1 && overwrites == 0 {
        return Err(MergeError::ConcurrentWrites {
            field,
            nodes: writers(writes, false),
        });
    }
    for w in writes.iter_mut() {
        match slot(&mut w.update).take() {
            Some(Write::Overwrite(v)) => {
                *current = v;
                return Ok(());
            }
            Some(Write::Reduce(v)) if overwrites == 0 => reduce(current, v),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Append, Overwrite};

    type U = Option<Write<Vec<u8>>>;

    fn batch(writes: Vec<(&str, U)>) -> Vec<TaggedUpdate<U>> {
        writes
            .into_iter()
            .map(|(n, u)| TaggedUpdate::new(n, u))
            .collect()
    }

    #[test]
    fn appends_fold_in_task_order() {
        let mut v = vec![0];
        let mut b = batch(vec![
            ("a", Some(Write::Reduce(vec![1]))),
            ("b", None),
            ("c", Some(Write::Reduce(vec![2, 3]))),
        ]);
        merge::<Append, _, _>("v", &mut v, &mut b, |u| u).unwrap();
        assert_eq!(v, vec![0, 1, 2, 3]);
    }

    #[test]
    fn two_overwrite_writes_name_the_field_and_nodes() {
        let mut v = vec![];
        let mut b = batch(vec![
            ("left", Some(Write::Reduce(vec![1]))),
            ("right", Some(Write::Reduce(vec![2]))),
        ]);
        let err = merge::<Overwrite, _, _>("v", &mut v, &mut b, |u| u).unwrap_err();
        assert_eq!(
            err,
            MergeError::ConcurrentWrites {
                field: "v",
                nodes: vec!["left".into(), "right".into()]
            }
        );
        assert!(err.to_string().contains("left, right"));
    }

    #[test]
    fn an_explicit_overwrite_bypasses_the_reducer_and_wins_the_step() {
        let mut v = vec![9, 9];
        let mut b = batch(vec![
            ("a", Some(Write::Reduce(vec![1]))),
            ("b", Some(Write::Overwrite(vec![7]))),
        ]);
        merge::<Append, _, _>("v", &mut v, &mut b, |u| u).unwrap();
        assert_eq!(v, vec![7]);
    }

    #[test]
    fn two_explicit_overwrites_are_an_error() {
        let mut v = vec![];
        let mut b = batch(vec![
            ("a", Some(Write::Overwrite(vec![1]))),
            ("b", Some(Write::Overwrite(vec![2]))),
        ]);
        let err = merge::<Append, _, _>("v", &mut v, &mut b, |u| u).unwrap_err();
        assert!(matches!(err, MergeError::ConflictingOverwrites { .. }));
    }
}
