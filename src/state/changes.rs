//! What one state changed from another, as an update through the state's reducers.
//!
//! A graph used as a node of its own state type starts from its parent's state and hands back
//! what it changed: an update that the parent merges like any node's, so items a child appended
//! are appended once and parallel children writing one list combine. The rule, per field: an
//! unchanged field is not written; a changed field is written through its reducer when one write
//! of the reducer turns the old value into the new one (what a list gained, what a number grew
//! by), else it is overwritten.
//!
//! The rule is defined on the states' JSON, because that is all a child resumed from a
//! checkpoint has: the state it started from and the state it ended with. A child that ran in
//! one go also knows which fields its steps wrote and how ([`WriteMarks`]): fields it never
//! wrote are unchanged, and a list it only appended to gained exactly its tail, so
//! `#[derive(State)]` compares only the rest, field by field. Both ways give the same update.

use super::{State, Update, Write, OVERWRITE_KEY};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// How a run's steps wrote one field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldMark {
    /// Not written.
    #[default]
    Untouched,
    /// Written through the field's reducer only.
    Reduced,
    /// Explicitly overwritten at least once.
    Overwritten,
}

/// Which fields a run's steps wrote (by position in the state struct), and whether any of those
/// writes bypassed the reducer. Filled by [`Update::mark_writes`]; an update type that does not
/// implement it leaves the marks untracked, and the changes are then found by comparing JSON.
#[derive(Clone, Debug, Default)]
pub struct WriteMarks {
    /// Bit `i`: the field at position `i` was written. Bits rather than a list, because every
    /// step of a child records each field it writes, and a list cost an allocation per child
    /// run and a bounds check per write.
    written: u64,
    /// Bit `i`: that field was explicitly overwritten at least once.
    overwritten: u64,
    /// The fields past the 64th, for the rare state that has more.
    beyond: Vec<FieldMark>,
    untracked: bool,
}

/// How many fields the bits of [`WriteMarks`] cover.
const MARK_BITS: usize = u64::BITS as usize;

impl WriteMarks {
    /// No field written yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write to the field at `index` (its position in the state struct).
    // Inlined into each state type's `mark_writes`, in the crate that derives it: every step of
    // a child records every field it writes.
    #[inline]
    pub fn record(&mut self, index: usize, overwrite: bool) {
        if index < MARK_BITS {
            let bit = 1u64 << index;
            self.written |= bit;
            if overwrite {
                self.overwritten |= bit;
            }
            return;
        }
        let index = index - MARK_BITS;
        if self.beyond.len() <= index {
            self.beyond.resize(index + 1, FieldMark::Untouched);
        }
        let mark = &mut self.beyond[index];
        if overwrite {
            *mark = FieldMark::Overwritten;
        } else if *mark == FieldMark::Untouched {
            *mark = FieldMark::Reduced;
        }
    }

    /// Gives up tracking: some update could not say what it wrote.
    pub fn untrack(&mut self) {
        self.untracked = true;
    }

    /// True when every update recorded what it wrote.
    pub fn is_tracked(&self) -> bool {
        !self.untracked
    }

    /// How the field at `index` was written.
    pub fn of(&self, index: usize) -> FieldMark {
        if index >= MARK_BITS {
            return self
                .beyond
                .get(index - MARK_BITS)
                .copied()
                .unwrap_or_default();
        }
        let bit = 1u64 << index;
        if self.overwritten & bit != 0 {
            FieldMark::Overwritten
        } else if self.written & bit != 0 {
            FieldMark::Reduced
        } else {
            FieldMark::Untouched
        }
    }

    /// Records what every update of a batch wrote.
    pub fn record_all<'a, U: Update>(&mut self, updates: impl IntoIterator<Item = &'a U>) {
        for update in updates {
            update.mark_writes(self);
        }
    }
}

/// An update that sets every field of `state` (each an explicit overwrite), built from JSON:
/// what [`State::whole_update`] does for a state type without a typed way.
pub fn whole_update_from_json<S: State>(state: &S) -> Result<S::Update, String> {
    let fields = json_fields(state)?;
    let wrapped: Map<String, Value> = fields.into_iter().map(|(k, v)| (k, overwrite(v))).collect();
    serde_json::from_value(Value::Object(wrapped))
        .map_err(|e| format!("the state cannot be written as one update: {e}"))
}

/// What `after` changed from `before`, by comparing the two states as JSON (the rule in this
/// module's docs): what [`State::changes_since`] does without a typed way.
pub fn changes_from_json<S: State>(before: &S, after: &S) -> Result<S::Update, String> {
    let old = json_fields(before)?;
    let new = json_fields(after)?;
    let mut reduce = Map::new();
    let mut forced = Map::new();
    for (field, value) in &new {
        let was = old.get(field);
        if was == Some(value) {
            continue;
        }
        match was.and_then(|w| growth(w, value)) {
            Some(delta) => reduce.insert(field.clone(), delta),
            None => forced.insert(field.clone(), overwrite(value.clone())),
        };
    }
    // Check the reducer writes all at once; fall back field by field only when one is off
    // (a custom reducer that does not simply append or add).
    let mut all = reduce.clone();
    all.extend(forced.clone());
    let update = decode_update::<S>(all)?;
    if matches!(applied(before, update.clone())?, Value::Object(m) if m == new) {
        return Ok(update);
    }
    let mut checked = forced;
    for (field, delta) in reduce {
        let single: Map<String, Value> = [(field.clone(), delta.clone())].into_iter().collect();
        let reached = applied(before, decode_update::<S>(single)?)?;
        let write = if reached.get(&field) == new.get(&field) {
            delta
        } else {
            overwrite(new[&field].clone())
        };
        checked.insert(field, write);
    }
    decode_update::<S>(checked)
}

/// One field's part of [`State::changes_since`]: the write that takes `before` to `after`
/// under the module's rule. `mark` says how the run wrote the field; `net` is the reducer's
/// [`Reducer::net_write`](super::Reducer::net_write) (asked only for a field written through
/// the reducer alone) and `reduce` its fold, to check a candidate write; `replaces` is the
/// reducer's [`Reducer::REPLACES`](super::Reducer::REPLACES): the check is then only whether
/// the candidate is the new value.
pub fn field_change<T: Serialize + DeserializeOwned>(
    field: &str,
    before: &T,
    after: T,
    mark: FieldMark,
    net: impl FnOnce(&T, T) -> Result<Option<T>, T>,
    reduce: impl FnOnce(&mut T, T),
    replaces: bool,
) -> Result<Option<Write<T>>, String> {
    let after = match mark {
        FieldMark::Untouched => return Ok(None),
        FieldMark::Reduced => match net(before, after) {
            Ok(write) => return Ok(write.map(Write::Reduce)),
            Err(after) => after,
        },
        FieldMark::Overwritten => after,
    };
    let json = |value: &T| {
        serde_json::to_value(value).map_err(|e| format!("field `{field}` is not JSON: {e}"))
    };
    let decode = |value: &Value| {
        T::deserialize(value).map_err(|e| format!("field `{field}` does not read back: {e}"))
    };
    let old = json(before)?;
    let new = json(&after)?;
    if old == new {
        return Ok(None);
    }
    if let Some(delta) = growth(&old, &new) {
        if replaces {
            // The write of `delta` leaves `delta`: it takes `before` to `after` only when the
            // growth is the whole new value (from 0, "" or []).
            let reaches = delta == new;
            return Ok(Some(if reaches {
                Write::Reduce(after)
            } else {
                Write::Overwrite(after)
            }));
        }
        let mut probe = decode(&old)?;
        reduce(&mut probe, decode(&delta)?);
        if json(&probe)? == new {
            return Ok(Some(Write::Reduce(decode(&delta)?)));
        }
    }
    Ok(Some(Write::Overwrite(after)))
}

/// The write that appends or adds `old` up to `new`, when `new` extends `old`.
fn growth(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Array(a), Value::Array(b)) if b.len() > a.len() && b.starts_with(a) => {
            Some(Value::Array(b[a.len()..].to_vec()))
        }
        (Value::String(a), Value::String(b)) if b.len() > a.len() && b.starts_with(a.as_str()) => {
            Some(Value::String(b[a.len()..].to_string()))
        }
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                return y.checked_sub(x).map(Value::from);
            }
            let d = b.as_f64()? - a.as_f64()?;
            serde_json::Number::from_f64(d).map(Value::Number)
        }
        _ => None,
    }
}

fn json_fields<S: Serialize>(state: &S) -> Result<Map<String, Value>, String> {
    match serde_json::to_value(state) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err("the state is not a JSON object (a struct with named fields)".to_string()),
        Err(e) => Err(format!("the state is not JSON: {e}")),
    }
}

/// `before` with `update` merged, as JSON.
fn applied<S: State>(before: &S, update: S::Update) -> Result<Value, String> {
    let mut state = before.clone();
    let mut batch = [super::TaggedUpdate::new("subgraph", update)];
    state
        .apply(&mut batch)
        .map_err(|e| format!("the changes do not merge: {e}"))?;
    serde_json::to_value(&state).map_err(|e| format!("the state is not JSON: {e}"))
}

fn decode_update<S: State>(fields: Map<String, Value>) -> Result<S::Update, String> {
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| format!("the changes are not an update: {e}"))
}

fn overwrite(value: Value) -> Value {
    Value::Object([(OVERWRITE_KEY.to_string(), value)].into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::TaggedUpdate;
    use crate::State;
    use proptest::prelude::*;
    use serde::Deserialize;

    fn join_lines(current: &mut String, incoming: String) {
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&incoming);
    }

    #[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct S {
        topic: String,
        #[state(append)]
        log: Vec<u32>,
        #[state(add)]
        total: i64,
        #[state(with = join_lines)]
        notes: String,
        #[state(append)]
        text: String,
        flag: bool,
    }

    fn merged(before: &S, update: SUpdate) -> S {
        let mut state = before.clone();
        state
            .apply(&mut [TaggedUpdate::new("child", update)])
            .unwrap();
        state
    }

    #[test]
    fn a_childs_changes_are_reducer_writes_where_the_reducer_makes_them_else_overwrites() {
        let before = S {
            topic: "x".into(),
            log: vec![1, 2],
            total: 5,
            notes: "a".into(),
            ..S::default()
        };
        let after = S {
            topic: "xy".into(),
            log: vec![1, 2, 3],
            total: 7,
            notes: "a\nb".into(),
            ..S::default()
        };
        let update = changes_from_json(&before, &after).unwrap();
        assert_eq!(merged(&before, update.clone()), after);
        let json = serde_json::to_value(&update).unwrap();
        // What a list gained and what a number grew by go through the parent's reducers
        // (so parallel children combine); a field whose reducer does not simply extend
        // (plain overwrite, a custom join) is overwritten.
        assert_eq!(json["log"], serde_json::json!([3]));
        assert_eq!(json["total"], serde_json::json!(2));
        assert_eq!(json["topic"], serde_json::json!({ OVERWRITE_KEY: "xy" }));
        assert_eq!(json["notes"], serde_json::json!({ OVERWRITE_KEY: "a\nb" }));
    }

    #[test]
    fn a_child_that_changed_nothing_writes_nothing_and_its_input_is_the_whole_state() {
        let state = S {
            topic: "x".into(),
            log: vec![1],
            total: 1,
            ..S::default()
        };
        for input in [
            state.whole_update().unwrap(),
            whole_update_from_json(&state).unwrap(),
        ] {
            assert_eq!(merged(&S::default(), input), state);
        }
        let update = changes_from_json(&state, &state).unwrap();
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            serde_json::json!({})
        );
        let typed = state
            .clone()
            .changes_since(&state, Some(&WriteMarks::new()));
        assert_eq!(
            serde_json::to_value(typed.unwrap()).unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    fn an_update_that_cannot_say_what_it_wrote_leaves_the_marks_untracked() {
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        struct Bare;
        impl Update for Bare {
            fn written_fields(&self) -> Vec<&'static str> {
                Vec::new()
            }
        }
        let mut marks = WriteMarks::new();
        marks.record_all([&SUpdate::default().log(vec![1])]);
        assert!(marks.is_tracked());
        assert_eq!(marks.of(1), FieldMark::Reduced);
        assert_eq!(marks.of(0), FieldMark::Untouched);
        marks.record_all([&Bare]);
        assert!(!marks.is_tracked());
    }

    #[test]
    fn marks_keep_an_overwrite_over_later_reducer_writes_below_and_past_the_64th_field() {
        let mut marks = WriteMarks::new();
        for index in [0, 63, 64, 130] {
            assert_eq!(marks.of(index), FieldMark::Untouched);
            marks.record(index, false);
            assert_eq!(marks.of(index), FieldMark::Reduced, "field {index}");
            marks.record(index, true);
            marks.record(index, false);
            assert_eq!(marks.of(index), FieldMark::Overwritten, "field {index}");
        }
        for untouched in [1, 62, 65, 129, 131, 500] {
            assert_eq!(
                marks.of(untouched),
                FieldMark::Untouched,
                "field {untouched}"
            );
        }
    }

    /// One node's write in a generated step.
    fn write() -> impl Strategy<Value = SUpdate> {
        let text = "[ab]{0,2}";
        (
            (any::<bool>(), proptest::option::weighted(0.3, text)),
            (
                any::<bool>(),
                proptest::option::weighted(0.5, proptest::collection::vec(0u32..4, 0..3)),
            ),
            (any::<bool>(), proptest::option::weighted(0.4, -2i64..3)),
            (any::<bool>(), proptest::option::weighted(0.3, text)),
            (any::<bool>(), proptest::option::weighted(0.4, text)),
            (
                any::<bool>(),
                proptest::option::weighted(0.2, any::<bool>()),
            ),
        )
            .prop_map(|(topic, log, total, notes, text, flag)| {
                fn put<T>(w: (bool, Option<T>)) -> Option<Write<T>> {
                    let (over, value) = w;
                    value.map(|v| {
                        if over {
                            Write::Overwrite(v)
                        } else {
                            Write::Reduce(v)
                        }
                    })
                }
                SUpdate {
                    topic: put(topic),
                    log: put(log),
                    total: put(total),
                    notes: put(notes),
                    text: put(text),
                    flag: put(flag),
                }
            })
    }

    fn state() -> impl Strategy<Value = S> {
        (
            "[ab]{0,2}",
            proptest::collection::vec(0u32..4, 0..3),
            -3i64..3,
            "[ab]{0,2}",
            "[ab]{0,2}",
            any::<bool>(),
        )
            .prop_map(|(topic, log, total, notes, text, flag)| S {
                topic,
                log,
                total,
                notes,
                text,
                flag,
            })
    }

    proptest! {
        /// The typed way (fields the steps did not write are skipped, a list only appended to
        /// gained its tail) gives the very update the JSON comparison gives, which is what a
        /// child resumed from a checkpoint is handed: same graph, same result, crash or not.
        #[test]
        fn marked_changes_equal_the_json_comparison(
            before in state(),
            steps in proptest::collection::vec(write(), 0..6),
        ) {
            let mut after = before.clone();
            let mut marks = WriteMarks::new();
            for update in steps {
                marks.record_all([&update]);
                after.apply(&mut [TaggedUpdate::new("n", update)]).unwrap();
            }
            let json = changes_from_json(&before, &after).unwrap();
            let typed = after.clone().changes_since(&before, Some(&marks)).unwrap();
            prop_assert_eq!(
                serde_json::to_value(&typed).unwrap(),
                serde_json::to_value(&json).unwrap()
            );
            prop_assert_eq!(merged(&before, typed), after);
        }
    }
}
