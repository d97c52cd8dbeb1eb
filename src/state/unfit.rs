//! Why a value does not fit, in the words of JSON ("a list of texts", "the integer 5") rather
//! than of Rust types ("a sequence", `u32`): what errors about JSON a person wrote say (an input
//! or an edit of a state, an answer to a question, an edited plan or artifact file), since that
//! person knows JSON, not the program's types. Also the "did you mean" of every key check.

use serde::de::DeserializeOwned;
use std::cell::Cell;

thread_local! {
    /// Set while [`with_paths`] runs on this thread.
    static TRACE_PATHS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode` so that a write that does not fit says where inside its field
/// (`at [0].id, the integer 1 is not a text`), not only what the field takes. Tracking that
/// path costs on every value decoded, so it is for input a person typed (`--input-json`,
/// `--set-json`), not for the updates a checkpoint stores.
///
/// ```
/// use stategraph::state::{with_paths, Write};
/// let value = serde_json::json!([["a"], [1]]);
/// let e = with_paths(|| serde_json::from_value::<Write<Vec<Vec<String>>>>(value)).unwrap_err();
/// assert!(e.to_string().contains("at [1][0], the integer 1 is not a text"), "{e}");
/// ```
pub fn with_paths<R>(decode: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            TRACE_PATHS.set(self.0);
        }
    }
    let _restore = Restore(TRACE_PATHS.replace(true));
    decode()
}

/// Decodes `value` into `T`, or says in JSON's words what does not fit and where ("expects a
/// list of objects: at `[0].id`, the integer 1 is not a text"): for values a person wrote, such
/// as an answer to a question or an edited plan. Slower than `serde_json::from_value`.
///
/// ```
/// let e = stategraph::state::from_json::<Vec<u32>>(serde_json::json!([1, "two"])).unwrap_err();
/// assert_eq!(e, "expects a list of whole numbers: at [1], the text \"two\" is not a whole number");
/// ```
pub fn from_json<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    with_paths(|| serde_path_to_error::deserialize(value)).map_err(|e| {
        let at = e.path().to_string();
        let at = (at != ".").then_some(at);
        unfit_at::<T>(&e.inner().to_string(), at.as_deref())
    })
}

/// Decodes a state's update (`--input-json`, `--set-json`), or says in the words of JSON what
/// does not fit: a field the state does not have (with the nearest one it has, and all of them),
/// a field whose value does not fit (what it takes, and where inside it the value goes wrong), or
/// a value that is not an object of fields at all.
///
/// ```
/// use stategraph::State;
/// #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
/// struct Doc { topic: String, outline: Vec<String> }
/// let e = stategraph::state::update_from_json::<DocUpdate>(serde_json::json!({"topics": "x"})).unwrap_err();
/// assert_eq!(e, "the state has no field `topics`; did you mean `topic`? (its fields: topic, outline)");
/// let e = stategraph::state::update_from_json::<DocUpdate>(serde_json::json!({"outline": "x"})).unwrap_err();
/// assert_eq!(e, "field `outline` expects a list of texts, not the text \"x\"");
/// ```
pub fn update_from_json<U: DeserializeOwned>(value: serde_json::Value) -> Result<U, String> {
    if !value.is_object() {
        return Err(format!(
            "give a JSON object of the state's fields ({}), not {}",
            fields_of::<U>().join(", "),
            described(&value)
        ));
    }
    with_paths(|| serde_path_to_error::deserialize(value)).map_err(|e| {
        let path = e.path().to_string();
        let reason = e.inner().to_string();
        if let Some(rest) = reason.strip_prefix("unknown field `") {
            let field = rest.split('`').next().unwrap_or(rest);
            return no_such_field(field, &fields_of::<U>());
        }
        match path.as_str() {
            "." | "" => reason,
            // A field's write says what it takes (see `decode`).
            _ => format!("field `{path}` {reason}"),
        }
    })
}

/// The fields a state's update takes, as serde names them in its error for a field it lacks.
fn fields_of<T: DeserializeOwned>() -> Vec<String> {
    let probe = serde_json::json!({ "\u{1}": null });
    let Err(e) = serde_json::from_value::<T>(probe) else {
        return Vec::new();
    };
    let message = e.to_string();
    let Some(list) = message.split_once(", expected ").map(|(_, list)| list) else {
        return Vec::new();
    };
    let list = list.strip_prefix("one of ").unwrap_or(list);
    list.replace(" or ", ", ")
        .split(", ")
        .map(|f| f.trim_matches('`').to_string())
        .filter(|f| !f.is_empty())
        .collect()
}

/// A field the state does not have, with the one it most likely meant and all it has.
fn no_such_field(field: &str, fields: &[String]) -> String {
    let mut message = format!("the state has no field `{field}`");
    if let Some(near) = nearest(field, fields) {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    if !fields.is_empty() {
        message.push_str(&format!(" (its fields: {})", fields.join(", ")));
    }
    message
}

/// A JSON value, in words: `the text "abc"`, `the integer 5`, `a list`.
fn described(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_u64() || n.is_i64() => format!("the integer {n}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text {}", crate::quote::quoted(s)),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// The known name closest to `wanted`, for a "did you mean": a few edits away, or with the same
/// last dotted part (`max_todos` for `limits.max_todos`).
///
/// ```
/// let known = ["step_ms".to_string(), "limits.max_todos".to_string()];
/// assert_eq!(stategraph::state::nearest("step_mss", &known), Some("step_ms"));
/// assert_eq!(stategraph::state::nearest("max_todos", &known), Some("limits.max_todos"));
/// assert_eq!(stategraph::state::nearest("zzzzzz", &known), None);
/// ```
pub fn nearest<'a>(wanted: &str, known: &'a [String]) -> Option<&'a str> {
    let last = |k: &str| k.rsplit('.').next().unwrap_or(k).to_string();
    let (best, distance) = known
        .iter()
        .map(|k| {
            (
                k,
                edit_distance(wanted, k).min(edit_distance(&last(wanted), &last(k))),
            )
        })
        .min_by_key(|(_, d)| *d)?;
    (distance <= (wanted.len() / 3).max(2)).then_some(best.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Decodes one write's value, saying in words why it does not fit.
pub(super) fn decode<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    if !TRACE_PATHS.get() {
        return T::deserialize(value).map_err(|e| unfit::<T>(&e.to_string()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let at = e.path().to_string();
        let at = (at != ".").then_some(at);
        unfit_at::<T>(&e.inner().to_string(), at.as_deref())
    })
}

/// Why a JSON value does not fit `T`, in the words of JSON rather than of Rust types: what `T`
/// takes ("a list of texts", not "a sequence" or `Vec<String>`) and what was given instead.
/// `serde_message` is serde's error for the value.
///
/// What `T` takes is found by trying a sample value of each JSON kind: serde describes only
/// the one value it was reading when it failed, and a state's types carry no schema.
///
/// ```
/// use stategraph::state::unfit;
/// let e = serde_json::from_value::<Vec<String>>(serde_json::json!(1)).unwrap_err();
/// assert_eq!(unfit::<Vec<String>>(&e.to_string()), "expects a list of texts, not the integer 1");
/// let e = serde_json::from_value::<Vec<String>>(serde_json::json!(["a", 2])).unwrap_err();
/// assert_eq!(unfit::<Vec<String>>(&e.to_string()), "expects a list of texts: the integer 2 is not a text");
/// ```
pub fn unfit<T: DeserializeOwned>(serde_message: &str) -> String {
    unfit_at::<T>(serde_message, None)
}

/// [`unfit`], saying where inside the value the part that does not fit is, when known.
fn unfit_at<T: DeserializeOwned>(serde_message: &str, at: Option<&str>) -> String {
    let wanted = json_kind(
        &|v| T::deserialize(v).map(drop).map_err(|e| e.to_string()),
        0,
    );
    let message = serde_message
        .split(" at line ")
        .next()
        .unwrap_or(serde_message);
    let at = at.map(|p| format!("at {p}, ")).unwrap_or_default();
    match detail(message) {
        // The value itself is of the wrong kind, rather than something inside it.
        Some(Detail::Kind { found, expected })
            if at.is_empty()
                && (wanted == expected || wanted.starts_with(&format!("{expected} "))) =>
        {
            format!("expects {wanted}, not {found}")
        }
        Some(Detail::Kind { found, expected }) => {
            format!("expects {wanted}: {at}{found} is not {expected}")
        }
        Some(Detail::Said(said)) => format!("expects {wanted}: {at}{said}"),
        // An untagged enum's "data did not match any variant": what it takes says it all.
        None if message.starts_with("data did not match any variant") => {
            format!("expects {wanted}")
        }
        None => format!("expects {wanted}: {at}{message}"),
    }
}

/// serde's message for a value that does not fit, in the words of JSON, without what the whole
/// value takes (for when the place is named otherwise, such as a file's line and a field's path):
/// "the integer 5 is not a text", "an object lacks its field `title`".
///
/// ```
/// let e = serde_json::from_value::<Vec<String>>(serde_json::json!([5])).unwrap_err();
/// assert_eq!(stategraph::state::in_words(&e.to_string()), "the integer 5 is not a text");
/// ```
pub fn in_words(serde_message: &str) -> String {
    let message = serde_message
        .split(" at line ")
        .next()
        .unwrap_or(serde_message);
    match detail(message) {
        Some(Detail::Kind { found, expected }) => format!("{found} is not {expected}"),
        Some(Detail::Said(said)) => said,
        None => message.to_string(),
    }
}

/// What serde's message says, in words.
enum Detail {
    /// A value of one kind where another was expected.
    Kind { found: String, expected: String },
    /// Anything else, said whole.
    Said(String),
}

/// serde's "invalid type: integer `1`, expected a string" as the integer 1 and a text.
fn detail(message: &str) -> Option<Detail> {
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (name, rest) = rest.split_once('`')?;
        let allowed = rest.strip_prefix(", expected ")?;
        return Some(Detail::Kind {
            found: format!("the text \"{name}\""),
            expected: one_of(allowed),
        });
    }
    if let Some(field) = message.strip_prefix("missing field `") {
        let field = field.split('`').next()?;
        return Some(Detail::Said(format!("an object lacks its field `{field}`")));
    }
    if let Some(field) = message.strip_prefix("unknown field `") {
        let (field, rest) = field.split_once('`')?;
        let known = rest
            .strip_prefix(", expected one of ")
            .or_else(|| rest.strip_prefix(", expected "))
            .map(|k| {
                format!(
                    " (its fields: {})",
                    k.replace('`', "").replace(" or ", ", ")
                )
            })
            .unwrap_or_default();
        return Some(Detail::Said(format!(
            "an object has a field `{field}` it does not take{known}"
        )));
    }
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (found, expected) = rest.rsplit_once(", expected ")?;
    Some(Detail::Kind {
        found: found_words(found),
        expected: expected_words(expected),
    })
}

/// serde's list of an enum's names (`` `a` or `b` ``, `` one of `a`, `b`, `c` ``) as
/// `one of "a", "b"`.
fn one_of(names: &str) -> String {
    let names = names.strip_prefix("one of ").unwrap_or(names);
    format!("one of {}", names.replace(" or ", ", ").replace('`', "\""))
}

/// serde's `Unexpected` ("integer `1`", "string \"x\"", "sequence") in words.
fn found_words(found: &str) -> String {
    let quoted = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .map(|v| v.trim_matches('`').to_string())
    };
    if let Some(n) = quoted("integer ") {
        return format!("the integer {n}");
    }
    if let Some(n) = quoted("floating point ") {
        return format!("the number {n}");
    }
    if let Some(b) = quoted("boolean ") {
        return b;
    }
    if let Some(s) = found.strip_prefix("string ") {
        // serde quotes the text whole: a long one is quoted again, cut.
        return match crate::quote::cut(s) {
            std::borrow::Cow::Borrowed(_) => format!("the text {s}"),
            std::borrow::Cow::Owned(_) => {
                format!("the text {}", crate::quote::quoted(s.trim_matches('"')))
            }
        };
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "null" | "unit value" => "null".into(),
        other => other.to_string(),
    }
}

/// What a serde visitor says it expects ("a string", "u64", "struct Todo") in words.
fn expected_words(expected: &str) -> String {
    let words = match expected {
        "a string" | "a borrowed string" => "a text",
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "a list",
        "a map" => "an object",
        "unit" => "null",
        "a character" | "a char" => "a single character",
        other if other.starts_with("struct ") => "an object",
        other if other.starts_with("a tuple") || other.starts_with("tuple") => "a list",
        other => return other.replace('`', "\""),
    };
    words.to_string()
}

/// Whether a value fits: the error text when it does not.
type Fits<'a> = &'a dyn Fn(serde_json::Value) -> Result<(), String>;

/// What a type takes, in words, from which sample values of each JSON kind it accepts:
/// "a text", "a whole number", "a list of texts", "one of \"auto\", \"web\"", "an object".
fn json_kind(fits: Fits<'_>, depth: usize) -> String {
    use serde_json::{json, Value};
    let mut kinds: Vec<String> = Vec::new();
    match fits(json!("")) {
        Ok(()) => kinds.push("a text".into()),
        Err(e) => {
            if let Some(allowed) = e
                .strip_prefix("unknown variant ``, expected ")
                .map(|a| a.split(" at line ").next().unwrap_or(a))
            {
                kinds.push(one_of(allowed));
            }
        }
    }
    if fits(json!(0.5)).is_ok() {
        kinds.push("a number".into());
    } else if fits(json!(-1)).is_ok() {
        kinds.push("an integer".into());
    } else if fits(json!(0)).is_ok() {
        kinds.push("a whole number".into());
    }
    if fits(json!(true)).is_ok() {
        kinds.push("true or false".into());
    }
    match fits(json!([])) {
        Ok(()) if depth < 3 => {
            let item = json_kind(&|v| fits(Value::Array(vec![v])), depth + 1);
            kinds.push(match item.as_str() {
                "any value" => "a list".into(),
                one => format!("a list of {}", plural(one)),
            });
        }
        Ok(()) => kinds.push("a list".into()),
        Err(e) if e.starts_with("invalid length") => kinds.push("a list".into()),
        Err(_) => {}
    }
    match fits(json!({})) {
        Ok(()) => kinds.push("an object".into()),
        // A struct, some of whose fields must be given.
        Err(e) if e.starts_with("missing field") => kinds.push("an object".into()),
        Err(_) => {}
    }
    let object = kinds.iter().any(|k| k == "an object");
    // A value that takes every kind (a JSON value, say) takes anything.
    if kinds.len() >= 5 && object {
        return "any value".into();
    }
    // A struct whose fields all have defaults reads an empty list too (as its fields' values).
    if object {
        kinds.retain(|k| !k.starts_with("a list"));
    }
    match kinds.is_empty() {
        true => "any value".into(),
        false => kinds.join(" or "),
    }
}

fn plural(one: &str) -> String {
    match one {
        "a text" => "texts".into(),
        "a number" => "numbers".into(),
        "an integer" => "integers".into(),
        "a whole number" => "whole numbers".into(),
        "true or false" => "true or false values".into(),
        "an object" => "objects".into(),
        other if other.starts_with("a list") => format!("lists{}", &other["a list".len()..]),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Write;

    fn error_of<T: DeserializeOwned>(value: serde_json::Value) -> String {
        serde_json::from_value::<Write<T>>(value)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Todo {
        id: String,
        done: bool,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Kind {
        Research,
        Tool,
    }

    #[test]
    fn a_write_that_does_not_fit_says_what_the_field_takes_in_json_words() {
        use serde_json::json;
        let cases = [
            (
                error_of::<String>(json!(1)),
                "expects a text, not the integer 1",
            ),
            (
                error_of::<u32>(json!("x")),
                "expects a whole number, not the text \"x\"",
            ),
            (
                error_of::<u32>(json!(-2)),
                "expects a whole number, not the integer -2",
            ),
            (error_of::<i64>(json!(true)), "expects an integer, not true"),
            (error_of::<f64>(json!([])), "expects a number, not a list"),
            (error_of::<bool>(json!("yes")), "expects true or false"),
            (
                error_of::<Vec<String>>(json!({"a": 1})),
                "expects a list of texts, not an object",
            ),
            (
                error_of::<Vec<String>>(json!({"$overwrite": [1]})),
                "expects a list of texts: the integer 1 is not a text",
            ),
            (
                error_of::<Vec<Vec<u8>>>(json!([1])),
                "expects a list of lists of whole numbers",
            ),
            (
                error_of::<Option<String>>(json!(2)),
                "expects a text, not the integer 2",
            ),
            (
                error_of::<Todo>(json!("t1")),
                "expects an object, not the text \"t1\"",
            ),
            (
                error_of::<Vec<Todo>>(json!([{"id": "t1"}])),
                "expects a list of objects: an object lacks its field `done`",
            ),
            (
                error_of::<Kind>(json!("web")),
                "expects one of \"research\", \"tool\", not the text \"web\"",
            ),
        ];
        for (got, want) in cases {
            assert!(got.contains(want), "{got:?} lacks {want:?}");
            assert!(!got.contains("invalid type"), "{got}");
        }
    }
}
