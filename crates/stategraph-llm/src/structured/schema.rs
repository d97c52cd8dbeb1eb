//! The schema a reply must match: derived from a Rust type, made acceptable to strict modes.

use schemars::gen::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// The JSON schema of `T` as schemars derives it (draft 2019-09, definitions under `$defs`),
/// ready to be edited before it is passed to
/// [`StructuredOptions::with_schema`](super::StructuredOptions::with_schema).
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Plan { steps: Vec<String> }
/// let schema = stategraph_llm::schema_for::<Plan>();
/// assert_eq!(schema["type"], "object");
/// assert_eq!(schema["properties"]["steps"]["type"], "array");
/// ```
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2019_09().into_generator();
    let root = generator.into_root_schema_for::<T>();
    let mut value = serde_json::to_value(root).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        // Providers do not need the meta-schema URL, and some strict validators reject it.
        map.remove("$schema");
        // schemars 0.8 files definitions under `definitions` even for draft 2019-09; `$defs`
        // is the keyword OpenAI documents for strict mode.
        if let Some(defs) = map.remove("definitions") {
            map.insert("$defs".to_string(), defs);
            rewrite_refs(&mut value);
        }
    }
    value
}

fn rewrite_refs(node: &mut Value) {
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "$ref" {
                    if let Some(name) = child
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/definitions/"))
                    {
                        *child = Value::String(format!("#/$defs/{name}"));
                    }
                } else {
                    rewrite_refs(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// Makes a schema acceptable to OpenAI's strict mode: every object gets
/// `additionalProperties: false` and lists all its properties as required (optional fields
/// stay nullable, as schemars already makes `Option` fields), `$ref`s with sibling keywords
/// are inlined, single-entry `allOf`s are unwrapped, and `format`s strict mode does not know
/// are dropped. Other providers accept the result too.
///
/// ```
/// use serde_json::json;
/// let strict = stategraph_llm::strict_schema(json!({
///     "type": "object",
///     "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"], "format": "int32"}},
///     "required": ["a"]
/// }));
/// assert_eq!(strict["additionalProperties"], false);
/// assert_eq!(strict["required"], json!(["a", "b"]));
/// assert!(strict["properties"]["b"].get("format").is_none());
/// ```
pub fn strict_schema(schema: Value) -> Value {
    let root = schema.clone();
    let mut out = schema;
    make_strict(&mut out, &root, 0);
    out
}

/// Formats OpenAI's strict mode accepts; schemars also emits `int32`, `uint`, `double`, ...
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

fn make_strict(node: &mut Value, root: &Value, depth: usize) {
    // Recursive types would otherwise inline forever.
    if depth > 64 {
        return;
    }
    let Some(map) = node.as_object_mut() else {
        return;
    };
    inline_ref(map, root);
    unwrap_single_all_of(map);
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STRICT_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    close_object(map);
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            for child in children.values_mut() {
                make_strict(child, root, depth + 1);
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            for child in children {
                make_strict(child, root, depth + 1);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child @ Value::Object(_)) = map.get_mut(key) {
            make_strict(child, root, depth + 1);
        }
    }
}

/// A `$ref` with keywords beside it is replaced by what it points to; the keywords written
/// beside it win over the target's.
fn inline_ref(map: &mut Map<String, Value>, root: &Value) {
    if !(map.contains_key("$ref") && map.len() > 1) {
        return;
    }
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        map.remove("$ref");
        if let Some(target) = target.as_object() {
            for (k, v) in target {
                map.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

/// An `allOf` of one schema is merged into the schema holding it; the keywords already there
/// win.
fn unwrap_single_all_of(map: &mut Map<String, Value>) {
    if let Some(Value::Array(all)) = map.get("allOf") {
        if all.len() == 1 {
            if let Some(Value::Object(inner)) = all.first().cloned() {
                map.remove("allOf");
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// An object schema lists all its properties as required and, unless it gives a schema for
/// them, allows no others.
fn close_object(map: &mut Map<String, Value>) {
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    };
    if is_object {
        if let Some(Value::Object(props)) = map.get("properties") {
            let all: Vec<Value> = props.keys().cloned().map(Value::String).collect();
            map.insert("required".to_string(), Value::Array(all));
        }
        if !matches!(map.get("additionalProperties"), Some(Value::Object(_))) {
            map.insert("additionalProperties".to_string(), Value::Bool(false));
        }
    }
}

pub(super) fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// OpenAI requires schema names of `[a-zA-Z0-9_-]{1,64}`; generic Rust types have names
/// like `Wrapper_for_Plan` already, but be safe.
pub(crate) fn sanitize_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "response".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Step {
        title: String,
        minutes: Option<u32>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Plan {
        goal: String,
        steps: Vec<Step>,
        /// The first step.
        first: Step,
        note: Option<Step>,
    }

    fn every_object_is_strict(node: &Value) {
        if let Some(map) = node.as_object() {
            if map.get("type") == Some(&json!("object")) {
                assert_eq!(map["additionalProperties"], json!(false), "{node}");
                let props: Vec<&String> = map["properties"].as_object().unwrap().keys().collect();
                let required: Vec<&str> = map["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                assert_eq!(props.len(), required.len(), "{node}");
            }
            assert!(
                !(map.contains_key("$ref") && map.len() > 1),
                "$ref with siblings: {node}"
            );
            for v in map.values() {
                every_object_is_strict(v);
            }
        } else if let Some(items) = node.as_array() {
            items.iter().for_each(every_object_is_strict);
        }
    }

    #[test]
    fn strict_schema_of_a_nested_type_conforms() {
        let strict = strict_schema(schema_for::<Plan>());
        every_object_is_strict(&strict);
        let mut required: Vec<&str> = strict["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["first", "goal", "note", "steps"]);
        // `u32` comes with `format: uint32`, which strict mode rejects.
        assert!(!strict.to_string().contains("uint32"));
        assert!(strict.get("$schema").is_none());
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_name("Wrapper<Plan>"), "Wrapper_Plan_");
        assert_eq!(sanitize_name(""), "response");
    }
}
