//! The request body as Anthropic's Messages API wants it: the conversation as turns, system
//! messages lifted into `system`, tools, the tool choice, and a structured-output format as a
//! forced tool call.

use serde_json::{json, Value};

use crate::{ChatRequest, Message, Role, ToolChoice};

/// The request body, exactly as sent. `default_max_tokens` fills the output cap the API
/// requires when the request sets none.
pub(super) fn body(
    request: &ChatRequest,
    model: &str,
    default_max_tokens: u32,
    stream: bool,
) -> Value {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| m.content.as_str())
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(default_max_tokens),
        "messages": wire_messages(&request.messages),
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    let (tools, tool_choice) = tools_and_choice(request);
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(choice) = tool_choice {
        body["tool_choice"] = choice;
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// The `tools` and `tool_choice` fields: the caller's tools, plus the structured-output format
/// as one more tool the model is forced to call.
fn tools_and_choice(request: &ChatRequest) -> (Vec<Value>, Option<Value>) {
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    let mut tool_choice = request.tool_choice.as_ref().map(|choice| match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    });
    if let Some(format) = &request.response_format {
        tools.push(json!({
            "name": format.name,
            "description": "Give your answer by calling this tool; its input is your answer \
                            and must match the schema.",
            "input_schema": format.schema,
        }));
        tool_choice = Some(json!({"type": "tool", "name": format.name}));
    }
    if request.parallel_tool_calls == Some(false) && !request.tools.is_empty() {
        let mut choice = tool_choice.unwrap_or_else(|| json!({"type": "auto"}));
        choice["disable_parallel_tool_use"] = json!(true);
        tool_choice = Some(choice);
    }
    (tools, tool_choice)
}

/// Converts the conversation into Anthropic turns: system messages are left out (they go in
/// `system`), tool results become `tool_result` blocks of a user turn, and consecutive
/// turns of the same role are joined, because all results answering one assistant turn
/// must arrive in a single user turn.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages.iter().filter(|m| !m.remove) {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", text_block(&m.content)),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = text_block(&m.content);
                blocks.extend(m.tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(&c.arguments)})
                }));
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// Tool input must be an object; arguments kept as a raw string (invalid JSON from another
/// model) are wrapped rather than dropped.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        other => json!({"input": other}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    #[test]
    fn tool_results_share_one_user_turn_and_system_is_lifted() {
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Weather in Oslo and Rome?"),
            Message::assistant_tool_calls(
                "",
                vec![
                    ToolCall {
                        id: "a".into(),
                        name: "weather".into(),
                        arguments: json!({"city": "Oslo"}),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "weather".into(),
                        arguments: json!({"city": "Rome"}),
                    },
                ],
            ),
            Message::tool_result("a", "cold"),
            Message::tool_result("b", "warm"),
        ];
        let wire = wire_messages(&messages);
        assert_eq!(wire.len(), 3);
        assert_eq!(wire[1]["content"][0]["type"], "tool_use");
        assert_eq!(wire[2]["role"], "user");
        assert_eq!(wire[2]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(wire[2]["content"][1]["tool_use_id"], "b");
    }
}
