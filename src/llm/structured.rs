//! Typed replies ("structured output").
//!
//! [`structured`] derives a JSON schema from a Rust type with schemars, asks the model for a
//! reply matching it, and parses the reply into the type. A reply that does not parse, or
//! does not match the schema, is shown back to the model with the error, a bounded number of
//! times, before the call fails with [`LlmError::Structured`].
//!
//! The schema can be replaced at run time: the research agent narrows a field to the ids it
//! actually has, so the model cannot invent one:
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use stategraph::llm::{schema_for, structured, FakeChatModel, Message, StructuredOptions};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Pick { source_id: String, reason: String }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut schema = schema_for::<Pick>();
//! schema["properties"]["source_id"]["enum"] = json!(["s1", "s2"]);
//!
//! let model = FakeChatModel::with_replies([
//!     r#"{"source_id": "s9", "reason": "made up"}"#,   // not an allowed id: retried
//!     r#"{"source_id": "s2", "reason": "most recent"}"#,
//! ]);
//! let (pick, usage): (Pick, _) = structured(
//!     &model,
//!     vec![Message::user("Which source is best?")],
//!     StructuredOptions::default().with_schema(schema),
//! ).await?;
//! assert_eq!(pick.source_id, "s2");
//! assert_eq!(model.requests().len(), 2);
//! # let _ = (pick.reason, usage);
//! # Ok::<(), stategraph::llm::LlmError>(()) });
//! ```

use std::fmt;

use schemars::gen::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ChatModel, ChatRequest, JsonSchemaFormat, LlmError, Message, TokenSink, Usage};

/// Options for [`structured`].
#[derive(Clone)]
pub struct StructuredOptions {
    /// The schema's name; defaults to the Rust type's name (e.g. `Plan`).
    pub name: Option<String>,
    /// A schema to use instead of the derived one (e.g. with a field narrowed to an enum).
    pub schema: Option<Value>,
    /// How many times an invalid reply is sent back to the model for correction.
    pub max_retries: u32,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// A cap on output tokens.
    pub max_tokens: Option<u32>,
    /// Streams the reply's text (the JSON) to this sink.
    pub stream: Option<TokenSink>,
}

impl Default for StructuredOptions {
    fn default() -> Self {
        StructuredOptions {
            name: None,
            schema: None,
            max_retries: 2,
            temperature: None,
            max_tokens: None,
            stream: None,
        }
    }
}

impl fmt::Debug for StructuredOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StructuredOptions")
            .field("name", &self.name)
            .field("schema", &self.schema)
            .field("max_retries", &self.max_retries)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("stream", &self.stream.as_ref().map(|_| "TokenSink"))
            .finish()
    }
}

impl StructuredOptions {
    /// Names the schema (instead of the Rust type's name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Uses this schema instead of the derived one.
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Sets how many corrections are asked for (default 2).
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps the output tokens.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Streams the reply's text to `sink`.
    pub fn with_stream(mut self, sink: TokenSink) -> Self {
        self.stream = Some(sink);
        self
    }
}

/// Asks `model` for a reply of type `T` and parses it. Returns the value and the usage of
/// all attempts together (`usage.requests` says how many there were); when no attempt fits,
/// the [`LlmError::Structured`] carries that usage instead, since every attempt was billed, and
/// a request that fails after answered attempts is an [`LlmError::AfterAnswers`] that keeps
/// theirs. See the [module docs](self) for an example.
pub async fn structured<T>(
    model: &dyn ChatModel,
    messages: Vec<Message>,
    opts: StructuredOptions,
) -> Result<(T, Usage), LlmError>
where
    T: JsonSchema + DeserializeOwned,
{
    structured_validated(model, messages, opts, |_: &T| Ok(())).await
}

/// Like [`structured`], plus a check of the parsed value; a rejected value is sent back to
/// the model with `validate`'s message, like a parse error.
///
/// ```
/// # use stategraph::llm::*;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Score { value: u8 }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = FakeChatModel::with_replies([r#"{"value": 11}"#, r#"{"value": 7}"#]);
/// let (score, _) = structured_validated(
///     &model,
///     vec![Message::user("Rate it from 0 to 10")],
///     StructuredOptions::default(),
///     |s: &Score| if s.value <= 10 { Ok(()) } else { Err("value must be at most 10".into()) },
/// ).await?;
/// assert_eq!(score.value, 7);
/// # Ok::<(), LlmError>(()) });
/// ```
pub async fn structured_validated<T, F>(
    model: &dyn ChatModel,
    mut messages: Vec<Message>,
    opts: StructuredOptions,
    validate: F,
) -> Result<(T, Usage), LlmError>
where
    T: JsonSchema + DeserializeOwned,
    F: Fn(&T) -> Result<(), String>,
{
    let name = sanitize_name(&opts.name.clone().unwrap_or_else(T::schema_name));
    let schema = opts.schema.clone().unwrap_or_else(schema_for::<T>);
    let format = JsonSchemaFormat::strict(name.clone(), schema.clone());
    let mut usage = Usage::default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut request = ChatRequest::new(messages.clone()).with_response_format(format.clone());
        request.temperature = opts.temperature;
        request.max_tokens = opts.max_tokens;
        request.stream = opts.stream.clone();
        // A failure after answered attempts keeps what they used: they were billed.
        let response = match model.chat(request).await {
            Ok(response) => response,
            Err(e) => return Err(e.after_answers(usage)),
        };
        usage += response.usage;
        let reply = response.message.content;
        let error = match parse_reply::<T>(&reply, &schema) {
            Ok(value) => match validate(&value) {
                Ok(()) => return Ok((value, usage)),
                Err(e) => e,
            },
            Err(e) => e,
        };
        tracing::debug!(schema = %name, attempt, %error, "structured reply rejected");
        if attempt > opts.max_retries {
            return Err(LlmError::Structured {
                name,
                attempts: attempt,
                error,
                last_reply: reply,
                usage,
            });
        }
        messages.push(Message::assistant(reply));
        messages.push(Message::user(format!(
            "Your reply could not be used: {error}. Reply again with only a JSON object \
             that matches the `{name}` schema."
        )));
    }
}

/// Extracts, checks and decodes a reply.
fn parse_reply<T: DeserializeOwned>(reply: &str, schema: &Value) -> Result<T, String> {
    let json = extract_json(reply)?;
    validate_value(schema, &json)?;
    serde_path_to_error::deserialize(json).map_err(|e| e.to_string())
}

/// The JSON in a reply. Models without enforced schemas often wrap it in a ```json fence
/// or add a sentence around it; accept those rather than spend a retry on them.
fn extract_json(reply: &str) -> Result<Value, String> {
    let trimmed = reply.trim();
    if trimmed.is_empty() {
        return Err("the reply was empty".to_string());
    }
    let first_error = match serde_json::from_str(trimmed) {
        Ok(v) => return Ok(v),
        Err(e) => format!("the reply is not valid JSON ({e})"),
    };
    if let Some(fenced) = trimmed.strip_prefix("```") {
        let body = fenced.split_once('\n').map(|(_, rest)| rest).unwrap_or("");
        let body = body.trim_end().trim_end_matches("```");
        if let Ok(v) = serde_json::from_str(body) {
            return Ok(v);
        }
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}')) {
        if start < end {
            if let Ok(v) = serde_json::from_str(&trimmed[start..=end]) {
                return Ok(v);
            }
        }
    }
    Err(first_error)
}

/// The JSON schema of `T` as schemars derives it (draft 2019-09, definitions under `$defs`),
/// ready to be edited before it is passed to [`StructuredOptions::with_schema`].
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Plan { steps: Vec<String> }
/// let schema = stategraph::llm::schema_for::<Plan>();
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
/// let strict = stategraph::llm::strict_schema(json!({
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
    if map.contains_key("$ref") && map.len() > 1 {
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

fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
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
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        check(target, value, root, path, depth + 1)?;
    }
    if let Some(types) = map.get("type") {
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
    if let Some(Value::Array(allowed)) = map.get("enum") {
        if !allowed.contains(value) {
            return Err(format!(
                "{path} is {}, but must be one of {}",
                short(value),
                Value::Array(allowed.clone())
            ));
        }
    }
    if let Some(expected) = map.get("const") {
        if expected != value {
            return Err(format!("{path} must be {expected}"));
        }
    }
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
    if let Some(Value::Array(all)) = map.get("allOf") {
        for sub in all {
            check(sub, value, root, path, depth + 1)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = map.get(key) {
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

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(
            extract_json("```json\n{\"a\": 1}\n```").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            extract_json("Sure! {\"a\": 1} Hope that helps").unwrap(),
            json!({"a": 1})
        );
        assert!(extract_json("no json here").is_err());
        assert!(extract_json("  ").is_err());
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    struct Pick {
        id: String,
    }

    fn fits(p: &Pick) -> Result<(), String> {
        match p.id.as_str() {
            "a" | "b" => Ok(()),
            other => Err(format!("`{other}` is not an id")),
        }
    }

    #[tokio::test]
    async fn every_attempt_is_counted_when_a_retry_succeeds() {
        let model = crate::llm::FakeChatModel::with_replies([
            "no json at all",
            r#"{"id": "z"}"#,
            r#"{"id": "a"}"#,
        ]);
        let (pick, usage): (Pick, Usage) = structured_validated(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default(),
            fits,
        )
        .await
        .unwrap();
        assert_eq!(pick.id, "a");
        assert_eq!(model.call_count(), 3);
        assert_eq!(usage.requests, 3, "three requests were answered: {usage:?}");
        // The fake counts one input token per word: each retry resends the conversation so far.
        assert!(usage.input_tokens > 3 * 2, "{usage:?}");
    }

    #[tokio::test]
    async fn a_reply_that_never_fits_reports_what_its_attempts_used() {
        let model = crate::llm::FakeChatModel::with_replies([r#"{"id": "x"}"#, r#"{"id": "y"}"#]);
        let err = structured_validated::<Pick, _>(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default().with_max_retries(1),
            fits,
        )
        .await
        .unwrap_err();
        assert_eq!(model.call_count(), 2);
        let usage = err.usage().expect("a structured failure says what it used");
        assert_eq!(usage.requests, 2);
        assert!(usage.output_tokens >= 2, "{usage:?}");
    }

    #[tokio::test]
    async fn a_retry_that_fails_keeps_what_the_answered_attempts_used() {
        let model = crate::llm::FakeChatModel::with_replies([r#"{"id": "x"}"#]).then_error(
            LlmError::Stream {
                provider: "fake".into(),
                detail: "connection reset".into(),
            },
        );
        let err = structured_validated::<Pick, _>(
            &model,
            vec![Message::user("pick one")],
            StructuredOptions::default(),
            fits,
        )
        .await
        .unwrap_err();
        assert_eq!(model.call_count(), 2);
        let usage = err.usage().expect("the answered attempt was billed");
        assert_eq!(usage.requests, 1, "{usage:?}");
        assert!(
            usage.input_tokens > 0 && usage.output_tokens > 0,
            "{usage:?}"
        );
        // Still the stream's error in every other respect: retryable, and said as it was.
        assert!(matches!(err.cause(), LlmError::Stream { .. }), "{err:?}");
        assert!(err.should_retry());
        assert!(!err.is_about_the_reply());
        assert_eq!(err.to_string(), err.cause().to_string());
    }

    #[tokio::test]
    async fn a_failure_before_any_reply_reports_no_usage() {
        let model = crate::llm::FakeChatModel::new()
            .then_error(LlmError::Fake("connection refused".into()));
        let err = structured::<Pick>(&model, vec![Message::user("pick")], Default::default())
            .await
            .unwrap_err();
        assert_eq!(err.usage(), None);
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_name("Wrapper<Plan>"), "Wrapper_Plan_");
        assert_eq!(sanitize_name(""), "response");
    }
}
