//! [`StructuredOptions`]: how a typed reply is asked for.

use std::fmt;

use serde_json::Value;

use super::super::TokenSink;

/// Options for [`structured`](super::structured).
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
