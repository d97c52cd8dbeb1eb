//! Which text of an item a query searches.

use serde_json::Value;

/// The fields of an item's value that text and semantic queries search: dotted paths into the
/// value (`"text"`, `"profile.bio"`); everything of a field's value that is text is searched
/// (the strings inside an object or an array too). [`IndexFields::all`], the default, searches
/// every string in the value.
///
/// ```
/// # use stategraph_store::IndexFields;
/// let value = serde_json::json!({"text": "likes tea", "tags": ["drinks"], "id": "x1"});
/// // Object fields in the order of their names.
/// assert_eq!(IndexFields::all().text_of(&value), "x1\ndrinks\nlikes tea");
/// assert_eq!(IndexFields::only(&["text", "tags"]).text_of(&value), "likes tea\ndrinks");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexFields(Vec<String>);

impl IndexFields {
    /// Every string in the value.
    pub fn all() -> Self {
        IndexFields(Vec::new())
    }

    /// Only these fields (dotted paths).
    pub fn only(fields: &[&str]) -> Self {
        IndexFields(fields.iter().map(|f| f.to_string()).collect())
    }

    /// The text searched for `value`, one line per string found.
    pub fn text_of(&self, value: &Value) -> String {
        let mut lines = Vec::new();
        if self.0.is_empty() {
            strings(value, &mut lines);
        }
        for field in &self.0 {
            let mut at = Some(value);
            for part in field.split('.') {
                at = at.and_then(|v| v.get(part));
            }
            if let Some(found) = at {
                strings(found, &mut lines);
            }
        }
        lines.join("\n")
    }
}

/// Every string inside `value`: an object's fields in the order of their names, an array's in order.
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}
