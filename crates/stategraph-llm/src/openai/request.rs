//! The request body as Chat Completions wants it: messages (tool calls with their arguments
//! as JSON text), tools, the tool choice, a JSON-schema reply format, the output cap and the
//! stream options.

use serde_json::{json, Value};

use crate::{ChatRequest, Message, Role, ToolChoice};

/// The request body, exactly as sent. `max_tokens_field` names the output cap's field (see
/// [`OpenAiConfig::max_tokens_field`](super::OpenAiConfig::max_tokens_field)).
pub(super) fn body(
    request: &ChatRequest,
    model: &str,
    max_tokens_field: &str,
    stream: bool,
) -> Value {
    let mut body = json!({
        "model": model,
        "messages": request.messages.iter().filter(|m| !m.remove).map(wire_message).collect::<Vec<_>>(),
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
    }
    if let Some(choice) = &request.tool_choice {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let (Some(parallel), false) = (request.parallel_tool_calls, request.tools.is_empty()) {
        body["parallel_tool_calls"] = json!(parallel);
    }
    if let Some(format) = &request.response_format {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": format.name, "schema": format.schema, "strict": format.strict},
        });
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(max) = request.max_tokens {
        body[max_tokens_field] = json!(max);
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        }),
        Role::Assistant if !m.tool_calls.is_empty() => json!({
            "role": "assistant",
            // OpenAI wants null, not "", next to tool calls.
            "content": if m.content.is_empty() { Value::Null } else { json!(m.content) },
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
            })).collect::<Vec<_>>(),
        }),
        role => json!({"role": role_name(role), "content": m.content}),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Arguments go over the wire as a JSON string. A `Value::String` holds arguments the model
/// produced that were not valid JSON; they are sent back verbatim.
pub(super) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}
