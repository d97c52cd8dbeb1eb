//! What a new run of a graph takes, as a JSON schema, for front ends that describe their inputs
//! to a client (the MCP server's tool for a graph, the HTTP server's assistant schemas).
//!
//! A state's update type carries no schema of its own, so this says what the registry knows:
//! the field a plain-text input fills (required, a text) and that any other field of the
//! state may be given too. What does not fit the state is named when the run is checked
//! ([`ErasedGraph::check_update`](super::ErasedGraph::check_update)), in the words of JSON.

use super::AnyFactory;
use serde_json::{json, Map, Value};

/// The JSON schema of a new run's input of the graph `factory` builds: an object whose
/// [input field](super::GraphFactory::input_field), when the graph has one, is a required
/// text; other fields of the state are let through, for the graph to check.
///
/// ```
/// use stategraph_registry::{input_schema, Registry};
/// let mut registry = Registry::new();
/// registry.extend(stategraph_agents::builtin_factories());
/// let schema = input_schema(registry.get("pipeline").unwrap().as_ref());
/// assert_eq!(schema["required"], serde_json::json!(["topic"]));
/// assert_eq!(schema["properties"]["topic"]["type"], "string");
/// ```
pub fn input_schema(factory: &dyn AnyFactory) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    if let Some(field) = factory.input_field() {
        properties.insert(
            field.to_string(),
            json!({
                "type": "string",
                "description": format!("what the run of `{}` works on", factory.name()),
            }),
        );
        required.push(Value::String(field.to_string()));
    }
    json!({
        "type": "object",
        "title": format!("{}Input", factory.name()),
        "description": format!(
            "A new run's input: an update of the state of graph `{}`",
            factory.name()
        ),
        "properties": properties,
        "required": required,
        "additionalProperties": true,
    })
}
