//! The settings a graph declares, and `--set` overrides checked against them before anything
//! runs: an unknown key (with the nearest known one) or a value of the wrong type is refused
//! with the key and the type it expects.
//!
//! A setting that names a file or folder is marked in the schema ([`path_setting`]), so
//! whoever starts a run can make its relative paths absolute against the folder the run starts
//! in, once for every graph, rather than each graph key by key.

use schemars::gen::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};
use stategraph::state::nearest;

/// The `format` a schema node carries when its setting is a path.
const PATH_FORMAT: &str = "path";

/// The schema of a setting that names a file or folder: a text, marked as a path. Put it on a
/// `PathBuf` (or `Option<PathBuf>`) field of a graph's settings type with
/// `#[schemars(schema_with = "stategraph_registry::path_setting")]`; then
/// [`SettingsSchema::path_keys`] names it, and `graph run` stores a relative value made absolute
/// against the folder the run starts in, so a resume from another folder reads the same files.
///
/// ```
/// use stategraph_registry::SettingsSchema;
/// #[derive(schemars::JsonSchema)]
/// struct Search { #[schemars(schema_with = "stategraph_registry::path_setting")] corpus: Option<std::path::PathBuf> }
/// #[derive(schemars::JsonSchema)]
/// struct Settings { step_ms: u64, search: Search }
/// assert_eq!(SettingsSchema::of::<Settings>().path_keys(), ["search.corpus"]);
/// ```
pub fn path_setting(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
    schemars::schema::SchemaObject {
        instance_type: Some(schemars::schema::InstanceType::String.into()),
        format: Some(PATH_FORMAT.to_string()),
        ..Default::default()
    }
    .into()
}

/// The shape of a graph's `[settings]`: which keys exist and what type each takes, as a JSON
/// schema derived from the Rust type the graph reads its settings into.
///
/// ```
/// use stategraph_registry::SettingsSchema;
/// #[derive(schemars::JsonSchema)]
/// struct Settings { step_ms: u64, sections: Vec<String> }
/// let schema = SettingsSchema::of::<Settings>();
/// let key = |k: &str| k.split('.').map(String::from).collect::<Vec<_>>();
/// assert!(schema.check(&key("step_ms"), &serde_json::json!(10)).is_ok());
/// let wrong = schema.check(&key("step_ms"), &serde_json::json!("abc")).unwrap_err();
/// assert_eq!(wrong, "setting `step_ms` expects a whole number of 0 or more, not the text \"abc\"");
/// let typo = schema.check(&key("step_mss"), &serde_json::json!(10)).unwrap_err();
/// assert!(typo.contains("did you mean `step_ms`?"), "{typo}");
/// ```
#[derive(Clone, Debug)]
pub struct SettingsSchema {
    root: Value,
    /// Whether a key the schema does not name is refused.
    closed: bool,
}

impl SettingsSchema {
    /// The schema of `T`, every key it names and nothing else.
    pub fn of<T: JsonSchema>() -> SettingsSchema {
        let root = SchemaSettings::draft07()
            .with(|s| s.inline_subschemas = true)
            .into_generator()
            .into_root_schema_for::<T>();
        SettingsSchema {
            root: serde_json::to_value(root).unwrap_or(Value::Null),
            closed: true,
        }
    }

    /// What a graph file's own `[settings]` table says of a graph that declares no schema: the
    /// types of the keys it lists. Other keys are let through, since the file need not list
    /// every setting the graph reads.
    pub fn from_example(settings: &Map<String, Value>) -> SettingsSchema {
        SettingsSchema {
            root: example_schema(&Value::Object(settings.clone())),
            closed: false,
        }
    }

    /// A schema given as JSON; `closed` refuses keys it does not name.
    pub(super) fn from_json(root: Value, closed: bool) -> SettingsSchema {
        SettingsSchema { root, closed }
    }

    /// Checks one override: `key` (dotted, split; under `[settings]`) set to `value`. The error
    /// is a sentence naming the key and what it expects.
    pub fn check(&self, key: &[String], value: &Value) -> Result<(), String> {
        let mut node = &self.root;
        for (depth, part) in key.iter().enumerate() {
            let walked = key[..depth].join(".");
            let Some(properties) = properties_of(node) else {
                if depth > 0 && node.get("type").is_some() && !accepts_kind(node, "object") {
                    return Err(format!(
                        "setting `{walked}` expects {}, not a table",
                        expected(node)
                    ));
                }
                // A free-form table (a map or any JSON value): nothing more to check.
                return Ok(());
            };
            match properties.get(part) {
                Some(child) => node = child,
                None if self.closed => return Err(self.unknown(key)),
                None => return Ok(()),
            }
        }
        match key.is_empty() {
            // `--set settings=...`: the whole table.
            true => check_value(node, value, "settings"),
            false => check_value(node, value, &key.join(".")),
        }
    }

    /// Checks a graph file's own `[settings]` as [`check`](Self::check) checks an override:
    /// every key it names, through its tables down to each value.
    pub(super) fn check_table(&self, settings: &Map<String, Value>) -> Result<(), String> {
        self.check_under(&mut Vec::new(), settings)
    }

    fn check_under(
        &self,
        path: &mut Vec<String>,
        table: &Map<String, Value>,
    ) -> Result<(), String> {
        for (key, value) in table {
            path.push(key.clone());
            let checked = match value {
                Value::Object(inner) if self.is_table(path) => self.check_under(path, inner),
                _ => self.check(path, value),
            };
            path.pop();
            checked?;
        }
        Ok(())
    }

    /// Checks the settings a run's caller gave beside the graph file (an HTTP request's
    /// `configurable`, say) as [`check`](Self::check) checks an override, through their tables
    /// down to each value, for the keys the graph declares; a top-level key it does not declare
    /// is let through, since such callers also pass keys of their own (a user id, a tag).
    ///
    /// ```
    /// use stategraph_registry::SettingsSchema;
    /// #[derive(schemars::JsonSchema)]
    /// struct Settings { step_ms: u64 }
    /// let schema = SettingsSchema::of::<Settings>();
    /// let given = |v: serde_json::Value| v.as_object().unwrap().clone();
    /// assert!(schema.check_declared(&given(serde_json::json!({"step_ms": 5, "user_id": "ada"}))).is_ok());
    /// let wrong = schema.check_declared(&given(serde_json::json!({"step_ms": "abc"}))).unwrap_err();
    /// assert!(wrong.contains("setting `step_ms` expects a whole number"), "{wrong}");
    /// ```
    pub fn check_declared(&self, given: &Map<String, Value>) -> Result<(), String> {
        let declared = properties_of(&self.root);
        let known: Map<String, Value> = given
            .iter()
            .filter(|(key, _)| declared.is_some_and(|p| p.contains_key(*key)))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        self.check_table(&known)
    }

    /// True when `key` names a table of known keys (not a free-form one, not a value).
    fn is_table(&self, key: &[String]) -> bool {
        let mut node = &self.root;
        for part in key {
            match properties_of(node).and_then(|p| p.get(part)) {
                Some(child) => node = child,
                None => return false,
            }
        }
        properties_of(node).is_some()
    }

    /// Every dotted key of the settings and every table on the way to one (`limits`,
    /// `limits.max_todos`).
    pub(super) fn key_paths(&self) -> Vec<String> {
        let mut leaves = Vec::new();
        leaf_paths(&self.root, String::new(), &mut leaves);
        let mut out: Vec<String> = Vec::new();
        for leaf in leaves {
            let mut at = 0;
            while let Some(dot) = leaf[at..].find('.') {
                out.push(leaf[..at + dot].to_string());
                at += dot + 1;
            }
            out.push(leaf);
        }
        out.sort();
        out.dedup();
        out
    }

    /// The dotted keys of the settings that are paths (marked with [`path_setting`]).
    pub fn path_keys(&self) -> Vec<String> {
        let mut out = Vec::new();
        path_leaves(&self.root, String::new(), &mut out);
        out
    }

    fn unknown(&self, key: &[String]) -> String {
        let mut known = Vec::new();
        leaf_paths(&self.root, String::new(), &mut known);
        let wanted = key.join(".");
        let mut message = format!("there is no setting `{wanted}`");
        if let Some(near) = nearest(&wanted, &known) {
            message.push_str(&format!("; did you mean `{near}`?"));
        }
        if !known.is_empty() {
            message.push_str(&format!(" (settings: {})", known.join(", ")));
        }
        message
    }
}

/// The `properties` of an object schema (also when it may be null: `Option<Table>`).
fn properties_of(node: &Value) -> Option<&Map<String, Value>> {
    if let Some(p) = node.get("properties").and_then(Value::as_object) {
        return Some(p);
    }
    node.get("anyOf")
        .or_else(|| node.get("allOf"))
        .and_then(Value::as_array)
        .and_then(|variants| variants.iter().find_map(properties_of))
}

/// Every key path the schema names down to its leaves, in its own order.
fn leaf_paths(node: &Value, prefix: String, out: &mut Vec<String>) {
    let Some(properties) = properties_of(node) else {
        if !prefix.is_empty() {
            out.push(prefix);
        }
        return;
    };
    for (name, child) in properties {
        let path = match prefix.is_empty() {
            true => name.clone(),
            false => format!("{prefix}.{name}"),
        };
        leaf_paths(child, path, out);
    }
}

/// Every key path under `node` whose schema is a path.
fn path_leaves(node: &Value, prefix: String, out: &mut Vec<String>) {
    if node.get("format").and_then(Value::as_str) == Some(PATH_FORMAT) {
        out.push(prefix);
        return;
    }
    for (name, child) in properties_of(node).into_iter().flatten() {
        let path = match prefix.is_empty() {
            true => name.clone(),
            false => format!("{prefix}.{name}"),
        };
        path_leaves(child, path, out);
    }
}

/// Decodes run settings into an agent's settings type `T`, a mistake named by its key and table
/// ([`settings_decode_error`]).
///
/// ```
/// #[derive(serde::Deserialize, Debug)]
/// struct Settings { max: u32 }
/// let map = serde_json::json!({"max": "many"}).as_object().unwrap().clone();
/// let e = stategraph_registry::decode_settings::<Settings>(&map).unwrap_err();
/// assert!(e.contains("`max`") && e.contains("whole number"), "{e}");
/// ```
pub fn decode_settings<T: serde::de::DeserializeOwned>(
    map: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, String> {
    serde_path_to_error::deserialize(serde_json::Value::Object(map.clone()))
        .map_err(|e| settings_decode_error(&e))
}

/// A graph's `[settings]` that did not decode into its settings type, in the words of the file:
/// the dotted setting and what is wrong with it, not serde's ("missing field", "invalid type").
///
/// ```
/// #[derive(serde::Deserialize, Debug)]
/// struct Pricing { input_per_million: f64, output_per_million: f64 }
/// #[derive(serde::Deserialize, Debug)]
/// struct Settings { pricing: Option<Pricing> }
/// let partial = serde_json::json!({"pricing": {"input_per_million": 1.0}});
/// let e = serde_path_to_error::deserialize::<_, Settings>(partial).unwrap_err();
/// assert_eq!(
///     stategraph_registry::settings_decode_error(&e),
///     "`pricing` needs `output_per_million` too: give every key of [settings.pricing]"
/// );
/// ```
pub fn settings_decode_error(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = e.path().to_string();
    let inner = e.inner().to_string();
    let quoted = |prefix: &str| {
        inner
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string)
    };
    let table = |path: &str| match path {
        "." | "" => "[settings]".to_string(),
        p => format!("[settings.{p}]"),
    };
    if let Some(field) = quoted("missing field `") {
        let owner = match path.as_str() {
            "." | "" => "[settings]".to_string(),
            p => format!("`{p}`"),
        };
        return format!(
            "{owner} needs `{field}` too: give every key of {}",
            table(&path)
        );
    }
    if let Some(field) = quoted("unknown field `") {
        return format!("{} has no key `{field}`", table(&path));
    }
    let what = inner
        .replace("invalid type: ", "")
        .replace(", expected", ", where it expects")
        .replace("f64", "a number")
        .replace("f32", "a number")
        .replace("u64", "a whole number")
        .replace("usize", "a whole number")
        .replace("u32", "a whole number");
    format!("setting `{path}`: {what}")
}

/// Checks `value` against `node`; `key` names it in the message.
fn check_value(node: &Value, value: &Value, key: &str) -> Result<(), String> {
    if accepts(node, value) {
        return Ok(());
    }
    Err(format!(
        "setting `{key}` expects {}, not {}",
        expected(node),
        described(value)
    ))
}

fn accepts(node: &Value, value: &Value) -> bool {
    if let Some(variants) = node.get("anyOf").or_else(|| node.get("oneOf")) {
        return variants
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| accepts(v, value)));
    }
    if let Some(all) = node.get("allOf").and_then(Value::as_array) {
        return all.iter().all(|v| accepts(v, value));
    }
    if let Some(allowed) = node.get("enum").and_then(Value::as_array) {
        return allowed.contains(value);
    }
    if node.get("type").is_none() {
        return true;
    }
    let fits = match value {
        Value::Null => accepts_kind(node, "null"),
        Value::Bool(_) => accepts_kind(node, "boolean"),
        Value::Number(n) if n.is_u64() || n.is_i64() => {
            accepts_kind(node, "integer") || accepts_kind(node, "number")
        }
        Value::Number(_) => accepts_kind(node, "number"),
        Value::String(_) => accepts_kind(node, "string"),
        Value::Array(items) => {
            accepts_kind(node, "array")
                && node
                    .get("items")
                    .is_none_or(|item| items.iter().all(|v| accepts(item, v)))
        }
        Value::Object(map) => {
            accepts_kind(node, "object")
                && properties_of(node).is_none_or(|props| {
                    map.iter()
                        .all(|(k, v)| props.get(k).is_some_and(|p| accepts(p, v)))
                })
        }
    };
    let minimum = node.get("minimum").and_then(Value::as_f64);
    fits && !minimum.is_some_and(|m| value.as_f64().is_some_and(|v| v < m))
}

/// A schema node's `minimum` when it is a whole number of 0 or more (schemars writes `0.0`).
fn whole_minimum(node: &Value) -> Option<u64> {
    let m = node.get("minimum").and_then(Value::as_f64)?;
    (m >= 0.0 && m.fract() == 0.0).then_some(m as u64)
}

fn accepts_kind(node: &Value, kind: &str) -> bool {
    match node.get("type") {
        Some(Value::String(t)) => t == kind,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == kind),
        _ => false,
    }
}

/// What a schema node expects, in words: "an integer", "a list of texts", "one of auto, web".
fn expected(node: &Value) -> String {
    if let Some(allowed) = node.get("enum").and_then(Value::as_array) {
        let words: Vec<String> = allowed.iter().map(|v| v.to_string()).collect();
        return format!("one of {}", words.join(", "));
    }
    if let Some(variants) = node
        .get("anyOf")
        .or_else(|| node.get("oneOf"))
        .and_then(Value::as_array)
    {
        let variants: Vec<&Value> = variants
            .iter()
            .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        // An enum whose variants carry docs is one schema per variant.
        let names: Vec<String> = variants
            .iter()
            .filter_map(|v| v.get("enum").and_then(Value::as_array))
            .flatten()
            .map(Value::to_string)
            .collect();
        if !names.is_empty() && names.len() >= variants.len() {
            return format!("one of {}", names.join(", "));
        }
        let words: Vec<String> = variants.iter().map(|v| expected(v)).collect();
        return words.join(" or ");
    }
    let kinds: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let words: Vec<String> = kinds
        .iter()
        .filter(|k| **k != "null")
        .map(|k| match *k {
            "integer" if whole_minimum(node).is_some() => {
                let minimum = whole_minimum(node).unwrap_or(0);
                format!("a whole number of {minimum} or more")
            }
            "integer" => "an integer".to_string(),
            "number" => "a number".to_string(),
            "boolean" => "true or false".to_string(),
            "string" => "a text".to_string(),
            "object" => "a table".to_string(),
            "array" => match node.get("items") {
                Some(item) if item.get("type").is_some() => {
                    format!("a list of {}", plural(&expected(item)))
                }
                _ => "a list".to_string(),
            },
            other => other.to_string(),
        })
        .collect();
    match words.is_empty() {
        true => "any value".to_string(),
        false => words.join(" or "),
    }
}

fn plural(one: &str) -> String {
    match one {
        "a text" => "texts".into(),
        "an integer" => "integers".into(),
        "a number" => "numbers".into(),
        "a table" => "tables".into(),
        "true or false" => "true or false values".into(),
        other => other.to_string(),
    }
}

/// A value, in words: `the text "abc"`, `the integer 5`.
fn described(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) if n.is_u64() || n.is_i64() => format!("the integer {n}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text {}", stategraph::quote::quoted(s)),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a table".into(),
    }
}

/// A schema describing the types of an example value (a graph file's settings).
fn example_schema(value: &Value) -> Value {
    match value {
        Value::Null => Value::Object(Map::new()),
        Value::Bool(_) => serde_json::json!({"type": "boolean"}),
        Value::Number(n) if n.is_u64() || n.is_i64() => serde_json::json!({"type": "integer"}),
        Value::Number(_) => serde_json::json!({"type": "number"}),
        Value::String(_) => serde_json::json!({"type": "string"}),
        Value::Array(items) => {
            let mut schema = serde_json::json!({"type": "array"});
            if let Some(first) = items.first() {
                let item = example_schema(first);
                if items.iter().all(|v| example_schema(v) == item) {
                    schema["items"] = item;
                }
            }
            schema
        }
        Value::Object(map) => {
            let properties: Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), example_schema(v)))
                .collect();
            serde_json::json!({"type": "object", "properties": properties})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Limits {
        max_todos: usize,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    #[serde(rename_all = "lowercase")]
    enum Provider {
        /// Either.
        Auto,
        /// The web.
        Web,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Price {
        input_per_million: f64,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Settings {
        model: Option<String>,
        temperature: Option<f32>,
        limits: Limits,
        provider: Provider,
        pricing: Option<Price>,
        sections: Vec<String>,
        extra: serde_json::Map<String, Value>,
    }

    fn key(k: &str) -> Vec<String> {
        k.split('.').map(String::from).collect()
    }

    #[test]
    fn keys_and_types_are_checked_through_nested_tables_options_and_enums() {
        let s = SettingsSchema::of::<Settings>();
        let ok = [
            ("model", json!("gpt")),
            ("temperature", json!(0.5)),
            ("temperature", json!(1)),
            ("limits.max_todos", json!(3)),
            ("provider", json!("web")),
            ("pricing.input_per_million", json!(2.5)),
            ("pricing", json!({"input_per_million": 1.0})),
            ("sections", json!(["a", "b"])),
            ("extra.anything", json!([1])),
        ];
        for (k, v) in ok {
            assert_eq!(s.check(&key(k), &v), Ok(()), "{k}={v}");
        }
        let bad = [
            (
                "limits.max_todos",
                json!("many"),
                "expects a whole number of 0 or more, not the text \"many\"",
            ),
            ("limits.max_todos", json!(-1), "not the integer -1"),
            (
                "provider",
                json!("bing"),
                "expects one of \"auto\", \"web\"",
            ),
            (
                "sections",
                json!(5),
                "expects a list of texts, not the integer 5",
            ),
            ("temperature", json!("hot"), "expects a number"),
            (
                "model.name",
                json!("x"),
                "setting `model` expects a text, not a table",
            ),
            (
                "limits.max_todo",
                json!(3),
                "did you mean `limits.max_todos`?",
            ),
            ("max_todos", json!(3), "did you mean `limits.max_todos`?"),
        ];
        for (k, v, needle) in bad {
            let err = s.check(&key(k), &v).unwrap_err();
            assert!(err.contains(needle), "{k}={v}: {err}");
        }
        let far = s.check(&key("zzzzzz"), &json!(1)).unwrap_err();
        assert!(!far.contains("did you mean"), "{far}");
    }

    #[test]
    fn a_graph_file_example_checks_the_types_it_shows_and_lets_other_keys_through() {
        let file = json!({"step_ms": 10, "sections": ["a"], "search": {"corpus": "docs"}});
        let s = SettingsSchema::from_example(file.as_object().unwrap());
        assert!(s.check(&key("step_ms"), &json!(1)).is_ok());
        assert!(s.check(&key("unlisted"), &json!("x")).is_ok());
        assert!(s
            .check(&key("step_ms"), &json!("abc"))
            .unwrap_err()
            .contains("expects an integer, not the text \"abc\""));
        assert!(s
            .check(&key("sections"), &json!(5))
            .unwrap_err()
            .contains("expects a list of texts"));
    }
}
