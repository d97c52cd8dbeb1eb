//! A tool's result as the text of a tool message: text blocks as they are, an image or audio
//! clip as a note saying what it was (tool messages carry text), an embedded resource's text
//! with its URI, a resource link as its name and URI, and structured content as JSON when the
//! text does not already hold it.
//!
//! Blocks are read through their JSON form (MCP's wire format, which rmcp keeps stable) rather
//! than rmcp's enums, which are non-exhaustive: a block kind added later shows as its JSON.

use rmcp::model::CallToolResult;
use serde_json::Value;

/// The most characters of a result the model is given; the rest is cut with a note.
pub const MAX_RESULT_CHARS: usize = 100_000;

/// The text the model reads for `result`.
pub(crate) fn render(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| render_block(&serde_json::to_value(block).unwrap_or(Value::Null)))
        .collect();
    if let Some(structured) = &result.structured_content {
        // Servers are asked to repeat structured content as a text block; add it only if none
        // does, so the model does not read it twice.
        let repeated = parts
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).ok().as_ref() == Some(structured));
        if !repeated {
            let json = serde_json::to_string_pretty(structured).unwrap_or_default();
            parts.push(format!("structured content:\n{json}"));
        }
    }
    if parts.is_empty() {
        return "(the tool returned no content)".to_string();
    }
    cut(parts.join("\n"))
}

fn render_block(block: &Value) -> String {
    let text = |key: &str| block[key].as_str().unwrap_or("").to_string();
    match block["type"].as_str() {
        Some("text") => text("text"),
        Some(kind @ ("image" | "audio")) => format!(
            "[{} ({}, about {} bytes) was returned; it is not shown here]",
            if kind == "image" {
                "an image"
            } else {
                "an audio clip"
            },
            block["mimeType"].as_str().unwrap_or("unknown type"),
            base64_bytes(block["data"].as_str().unwrap_or(""))
        ),
        Some("resource") => {
            let resource = &block["resource"];
            let uri = resource["uri"].as_str().unwrap_or("?");
            match resource["text"].as_str() {
                Some(body) => format!("[resource {uri}]\n{body}"),
                None => format!(
                    "[resource {uri} ({}, about {} bytes of binary data; not shown here)]",
                    resource["mimeType"].as_str().unwrap_or("unknown type"),
                    base64_bytes(resource["blob"].as_str().unwrap_or(""))
                ),
            }
        }
        Some("resource_link") => {
            let mut line = format!("[resource link: {} {}", text("name"), text("uri"));
            if let Some(description) = block["description"].as_str() {
                line.push_str(&format!(" ({description})"));
            }
            line.push(']');
            line
        }
        _ => block.to_string(),
    }
}

/// The size of the data `encoded` in base64 holds.
fn base64_bytes(encoded: &str) -> usize {
    encoded.trim_end_matches('=').len() * 3 / 4
}

fn cut(text: String) -> String {
    if text.chars().count() <= MAX_RESULT_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_RESULT_CHARS).collect();
    format!(
        "{kept}\n[cut: the result has {} characters; the first {MAX_RESULT_CHARS} are shown]",
        text.chars().count()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_kind_of_block_becomes_text_the_model_reads() {
        let r = result(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b", "description": "the b file"}
        ]}));
        let text = render(&r);
        assert!(
            text.starts_with("hello\n[an image (image/png, about 5 bytes)"),
            "{text}"
        );
        assert!(text.contains("[resource file:///a.txt]\ninside"), "{text}");
        assert!(
            text.contains("[resource link: b file:///b (the b file)]"),
            "{text}"
        );
    }

    #[test]
    fn structured_content_is_added_once() {
        let repeated = result(json!({
            "content": [{"type": "text", "text": "{\"sum\":3}"}],
            "structuredContent": {"sum": 3}
        }));
        assert_eq!(render(&repeated), "{\"sum\":3}");
        let alone = result(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert!(render(&alone).contains("\"sum\": 3"), "{}", render(&alone));
        assert_eq!(
            render(&result(json!({"content": []}))),
            "(the tool returned no content)"
        );
    }
}
