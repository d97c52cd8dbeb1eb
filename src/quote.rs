//! A value a person gave (an input, a setting, a file's text) quoted in a message: whole when
//! short, else its start and its size, so a 5 MB company name makes a one-line error, not
//! megabytes on a terminal. Every layer that echoes what it was given quotes it through here.

use std::borrow::Cow;

/// Longest text quoted whole, in characters: a name, a path, a sentence.
const WHOLE_UP_TO: usize = 240;
/// How much of a longer text is shown, in characters.
const SHOWN: usize = 40;

/// `text` in double quotes (escaped as JSON writes a string), cut when long.
///
/// ```
/// use stategraph::quote::quoted;
/// assert_eq!(quoted("Fernstone"), "\"Fernstone\"");
/// assert_eq!(quoted(&"Fern".repeat(1_300_000)), format!("\"{}…\" (5.2 MB)", "Fern".repeat(10)));
/// ```
pub fn quoted(text: &str) -> String {
    match long(text, WHOLE_UP_TO) {
        Some(start) => {
            let open = json_string(start);
            // The closing quote goes after the `…`; an escaped quote before it stays.
            let open = open.strip_suffix('"').unwrap_or(&open);
            format!("{open}…\" ({})", size(text))
        }
        None => json_string(text),
    }
}

/// `text` as it is when short; else its start, `…` and its size, for a message that quotes it
/// its own way (in backticks, in a path).
///
/// ```
/// use stategraph::quote::cut;
/// assert_eq!(cut("Fernstone"), "Fernstone");
/// assert_eq!(cut(&"x".repeat(2_000)), format!("{}… (2.0 KB)", "x".repeat(40)));
/// ```
pub fn cut(text: &str) -> Cow<'_, str> {
    cut_to(text, WHOLE_UP_TO)
}

/// Like [`cut`], for a message with room for up to `whole_up_to` characters of it (a field
/// shown on a line of its own).
///
/// ```
/// use stategraph::quote::cut_to;
/// assert_eq!(cut_to(&"x".repeat(500), 1_000).len(), 500);
/// assert_eq!(cut_to(&"x".repeat(5_000), 1_000), format!("{}… (5.0 KB)", "x".repeat(40)));
/// ```
pub fn cut_to(text: &str, whole_up_to: usize) -> Cow<'_, str> {
    match long(text, whole_up_to) {
        Some(start) => Cow::Owned(format!("{start}… ({})", size(text))),
        None => Cow::Borrowed(text),
    }
}

/// The start shown of a text longer than `whole_up_to` characters; `None` when it is quoted
/// whole.
fn long(text: &str, whole_up_to: usize) -> Option<&str> {
    let mut ends = text.char_indices().map(|(i, _)| i);
    // Quoted whole: a text with no character past `whole_up_to`.
    ends.clone().nth(whole_up_to)?;
    let end = ends.nth(SHOWN).unwrap_or(text.len());
    Some(&text[..end])
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// A size in bytes, as people read it: `312 bytes`, `48.0 KB`, `5.2 MB`.
fn size(text: &str) -> String {
    let bytes = text.len() as f64;
    match text.len() {
        n if n < 1_000 => format!("{n} bytes"),
        n if n < 1_000_000 => format!("{:.1} KB", bytes / 1e3),
        n if n < 1_000_000_000 => format!("{:.1} MB", bytes / 1e6),
        _ => format!("{:.1} GB", bytes / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_on_a_character_boundary_and_escaped() {
        assert_eq!(quoted("a \"b\""), "\"a \\\"b\\\"\"");
        let accents = "é".repeat(300);
        assert_eq!(cut(&accents), format!("{}… (600 bytes)", "é".repeat(40)));
        assert_eq!(cut(&"x".repeat(240)), "x".repeat(240));
        assert_eq!(
            quoted(&"\"".repeat(241)),
            format!("\"{}…\" (241 bytes)", "\\\"".repeat(40))
        );
    }
}
