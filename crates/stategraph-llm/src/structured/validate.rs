//! Checking a value against a schema, for providers that do not enforce one.

use serde_json::{Map, Value};

use super::schema::resolve_ref;

/// Checks `value` against the keywords schemars emits plus `enum`/`const` (type, enum,
/// const, properties, required, additionalProperties, items, anyOf/oneOf/allOf, local
/// `$ref`s). Providers that do not enforce schemas (Anthropic tool input, most local
/// servers) can return values that deserialise fine but break a run-time constraint such as
/// an enum of allowed ids; this catches those. Unknown keywords are ignored, never failed.
pub fn validate_value(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, schema, "$", 0)
}

fn check(
    schema: &Value,
    value: &Value,
    root: &Value,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > 64 {
        return Ok(());
    }
    let Some(map) = schema.as_object() else {
        // `true` accepts anything; `false` accepts nothing.
        return match schema {
            Value::Bool(false) => Err(format!("{path} is not allowed")),
            _ => Ok(()),
        };
    };
    // The first keyword that fails is the one reported, in this order.
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        check(target, value, root, path, depth + 1)?;
    }
    check_value(map, value, path)?;
    if let Some(object) = value.as_object() {
        check_object(map, object, root, path, depth)?;
    }
    if let (Some(items), Some(array)) = (map.get("items"), value.as_array()) {
        if items.is_object() {
            for (i, item) in array.iter().enumerate() {
                check(items, item, root, &format!("{path}[{i}]"), depth + 1)?;
            }
        }
    }
    check_combined(map, value, root, path, depth)
}

/// The keywords about the value itself: `type`, `enum` and `const`.
fn check_value(schema: &Map<String, Value>, value: &Value, path: &str) -> Result<(), String> {
    if let Some(types) = schema.get("type") {
        let ok = match types {
            Value::String(t) => type_matches(t, value),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| type_matches(t, value)),
            _ => true,
        };
        if !ok {
            return Err(format!(
                "{path} should be of type {types}, got {}",
                short(value)
            ));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            return Err(format!(
                "{path} is {}, but must be one of {}",
                short(value),
                Value::Array(allowed.clone())
            ));
        }
    }
    if let Some(expected) = schema.get("const") {
        if expected != value {
            return Err(format!("{path} must be {expected}"));
        }
    }
    Ok(())
}

/// The keywords that combine schemas: `allOf` (each must hold), then `anyOf` and `oneOf` (one
/// must hold; when none does, each one's reason is given).
fn check_combined(
    schema: &Map<String, Value>,
    value: &Value,
    root: &Value,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for sub in all {
            check(sub, value, root, path, depth + 1)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(key) {
            let errors: Vec<String> = options
                .iter()
                .filter_map(|sub| check(sub, value, root, path, depth + 1).err())
                .collect();
            if errors.len() == options.len() && !options.is_empty() {
                return Err(errors.join("; or "));
            }
        }
    }
    Ok(())
}

fn check_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    root: &Value,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(key) {
                return Err(format!("{path} is missing the field `{key}`"));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (key, field) in object {
        let field_path = format!("{path}.{key}");
        match props.and_then(|p| p.get(key)) {
            Some(sub) => check(sub, field, root, &field_path, depth + 1)?,
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    return Err(format!("{path} has an unknown field `{key}`"))
                }
                Some(sub @ Value::Object(_)) => check(sub, field, root, &field_path, depth + 1)?,
                _ => {}
            },
        }
    }
    Ok(())
}

fn type_matches(t: &str, value: &Value) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(80).collect();
        format!("{cut}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{schema_for, strict_schema};
    use super::*;
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Step {
        title: String,
        minutes: Option<u32>,
    }

    #[test]
    fn validation_catches_enums_types_and_unknown_fields() {
        let mut schema = schema_for::<Step>();
        schema["properties"]["title"]["enum"] = json!(["a", "b"]);
        assert!(validate_value(&schema, &json!({"title": "a"})).is_ok());
        let err = validate_value(&schema, &json!({"title": "c"})).unwrap_err();
        assert!(err.contains("$.title") && err.contains("one of"), "{err}");
        assert!(validate_value(&schema, &json!({"title": 1})).is_err());
        assert!(validate_value(&schema, &json!({"minutes": 1})).is_err());
        let strict = strict_schema(schema);
        assert!(validate_value(&strict, &json!({"title": "a", "minutes": null})).is_ok());
        assert!(validate_value(&strict, &json!({"title": "a", "minutes": 2, "x": 1})).is_err());
    }
}
