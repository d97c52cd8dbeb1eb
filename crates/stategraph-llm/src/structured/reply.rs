//! Reading a model's reply: finding the JSON in it, checking it against the schema, decoding it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::validate_value;

/// Extracts, checks and decodes a reply.
pub(super) fn parse_reply<T: DeserializeOwned>(reply: &str, schema: &Value) -> Result<T, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
