use std::ops::AddAssign;

/// How writes to one field fold together.
///
/// Implement it on a unit type to use it as `#[state(reducer = MyReducer)]`; for a one-off, a
/// plain function `fn(&mut T, T)` works too with `#[state(with = my_fn)]`.
pub trait Reducer<T> {
    /// True when the field accepts only one write per superstep (plain overwrite semantics).
    const EXCLUSIVE: bool = false;

    /// True when a write replaces the value whatever it was (`reduce` leaves `current` equal to
    /// `incoming`). It lets a same-type child's changes skip proving a write by applying it.
    const REPLACES: bool = false;

    /// Folds `incoming` into `current`.
    fn reduce(current: &mut T, incoming: T);

    /// The one write that turns `before` into `after`, given that `after` is `before` with
    /// only writes through this reducer folded in (no overwrite): `Ok(None)` when nothing
    /// changed, `Err(after)` when the reducer cannot tell without comparing the values (the
    /// default; they are then compared as JSON). It lets a graph used as a node of its own
    /// state type hand its parent what it appended without comparing whole lists.
    fn net_write(before: &T, after: T) -> Result<Option<T>, T> {
        let _ = before;
        Err(after)
    }
}

/// The default: the write replaces the value. Two writes in one superstep are an error.
pub struct Overwrite;

impl<T> Reducer<T> for Overwrite {
    const EXCLUSIVE: bool = true;
    const REPLACES: bool = true;
    fn reduce(current: &mut T, incoming: T) {
        *current = incoming;
    }
}

/// Appends the written items to a list.
pub struct Append;

impl<T> Reducer<Vec<T>> for Append {
    fn reduce(current: &mut Vec<T>, incoming: Vec<T>) {
        current.extend(incoming);
    }

    /// Appends alone leave `before` as a prefix of `after`: the write is the rest.
    fn net_write(before: &Vec<T>, mut after: Vec<T>) -> Result<Option<Vec<T>>, Vec<T>> {
        if after.len() < before.len() {
            return Err(after);
        }
        // The prefix is removed in place: `split_off` would copy the gain into a new list.
        after.drain(..before.len());
        Ok((!after.is_empty()).then_some(after))
    }
}

impl Reducer<String> for Append {
    fn reduce(current: &mut String, incoming: String) {
        current.push_str(&incoming);
    }

    fn net_write(before: &String, mut after: String) -> Result<Option<String>, String> {
        if after.len() < before.len() || !after.is_char_boundary(before.len()) {
            return Err(after);
        }
        after.drain(..before.len());
        Ok((!after.is_empty()).then_some(after))
    }
}

/// Adds the written number to the value.
pub struct Add;

impl<T: AddAssign> Reducer<T> for Add {
    fn reduce(current: &mut T, incoming: T) {
        *current += incoming;
    }
}

/// A record that [`MergeById`] can find again in a list.
pub trait Keyed {
    /// The record's identity.
    type Key: PartialEq;
    /// Returns the record's identity.
    fn key(&self) -> &Self::Key;
}

/// Merges a list of records by id: a written record replaces the stored one with the same id, or
/// is appended when the id is new. A node can change one record without rewriting the list.
pub struct MergeById;

impl<T: Keyed> Reducer<Vec<T>> for MergeById {
    fn reduce(current: &mut Vec<T>, incoming: Vec<T>) {
        for record in incoming {
            match current.iter_mut().find(|r| r.key() == record.key()) {
                Some(slot) => *slot = record,
                None => current.push(record),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Rec(u8, &'static str);
    impl Keyed for Rec {
        type Key = u8;
        fn key(&self) -> &u8 {
            &self.0
        }
    }

    #[test]
    fn merge_by_id_replaces_in_place_and_appends_new_ids() {
        let mut list = vec![Rec(1, "a"), Rec(2, "b")];
        MergeById::reduce(&mut list, vec![Rec(2, "B"), Rec(3, "c")]);
        assert_eq!(list, vec![Rec(1, "a"), Rec(2, "B"), Rec(3, "c")]);
    }
}
