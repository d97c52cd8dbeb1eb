//! Names: an artifact's path pattern (`2-sections/{index}-{slug}.md`), the run folder's pattern
//! (`{graph}-v{N}`, `{company}-v0.0.{N}`), and slugs safe in a file name.

use super::error::ArtifactError;
use serde_json::Value;
use std::path::{Component, Path};

/// A text made safe for a file name: lower case ASCII letters and digits, words joined by `-`.
///
/// ```
/// assert_eq!(stategraph_artifacts::slug("Team & Founders (2024)"), "team-founders-2024");
/// assert_eq!(stategraph_artifacts::slug("../.."), "item");
/// ```
pub fn slug(text: &str) -> String {
    file_safe(&text.to_lowercase())
}

/// `text` as a file-safe name that keeps its case, for a folder named after a field (a company
/// is `Fernstone-v0.0.1`, as people name it).
fn file_safe(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out.truncate(80);
    if out.is_empty() {
        "item".to_string()
    } else {
        out
    }
}

/// One piece of a file-name pattern.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Literal(String),
    Index,
    Slug,
}

/// An artifact's path relative to the run folder; for a folder artifact, its file name holds
/// `{index}` and/or `{slug}`.
#[derive(Clone, Debug)]
pub(crate) struct FilePattern {
    text: String,
    /// The folder part (`2-sections`), empty for the run folder itself.
    dir: String,
    /// The file name, in pieces; a single literal for a one-file artifact.
    name: Vec<Piece>,
}

impl FilePattern {
    pub(crate) fn new(text: &str) -> Self {
        let (dir, file) = match text.rsplit_once('/') {
            Some((d, f)) => (d.to_string(), f),
            None => (String::new(), text),
        };
        let mut name = Vec::new();
        let mut rest = file;
        while !rest.is_empty() {
            let next = [("{index}", Piece::Index), ("{slug}", Piece::Slug)]
                .into_iter()
                .filter_map(|(tag, piece)| rest.find(tag).map(|at| (at, tag, piece)))
                .min_by_key(|(at, _, _)| *at);
            match next {
                Some((at, tag, piece)) => {
                    if at > 0 {
                        name.push(Piece::Literal(rest[..at].to_string()));
                    }
                    name.push(piece);
                    rest = &rest[at + tag.len()..];
                }
                None => {
                    name.push(Piece::Literal(rest.to_string()));
                    rest = "";
                }
            }
        }
        FilePattern {
            text: text.to_string(),
            dir,
            name,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    pub(crate) fn is_folder(&self) -> bool {
        self.name.iter().any(|p| !matches!(p, Piece::Literal(_)))
    }

    /// The folder the files go in, relative to the run folder ("" for the run folder).
    pub(crate) fn dir(&self) -> &str {
        &self.dir
    }

    /// Why the pattern cannot name files inside the run folder, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        let path = Path::new(&self.text);
        if self.text.is_empty() {
            return Some("its path is empty".into());
        }
        for c in path.components() {
            match c {
                Component::Normal(part) if part.to_string_lossy().starts_with('.') => {
                    return Some(format!("`{}`: names starting with a dot are kept for the run folder's temporary files", self.text));
                }
                Component::Normal(_) => {}
                _ => {
                    return Some(format!(
                    "`{}` must be a relative path inside the run folder (no `..`, no leading `/`)",
                    self.text
                ))
                }
            }
        }
        if self.dir.contains('{') {
            return Some(format!(
                "`{}`: only the file name may hold `{{index}}` or `{{slug}}`",
                self.text
            ));
        }
        let adjacent = self
            .name
            .windows(2)
            .any(|w| !matches!(w[0], Piece::Literal(_)) && !matches!(w[1], Piece::Literal(_)));
        if adjacent {
            return Some(format!(
                "`{}`: put a separator between `{{index}}` and `{{slug}}`",
                self.text
            ));
        }
        None
    }

    /// The path of the `index`-th entry (from 1) with `slug`.
    pub(crate) fn fill(&self, index: usize, slug_text: &str) -> String {
        let mut name = String::new();
        for p in &self.name {
            match p {
                Piece::Literal(l) => name.push_str(l),
                Piece::Index => name.push_str(&format!("{index:02}")),
                Piece::Slug => name.push_str(&slug(slug_text)),
            }
        }
        if self.dir.is_empty() {
            name
        } else {
            format!("{}/{name}", self.dir)
        }
    }

    /// Reads a file name of this pattern back: (index, slug), or `None` when it does not match.
    pub(crate) fn matches(&self, file_name: &str) -> Option<(usize, String)> {
        let mut index = 0usize;
        let mut slug_text = String::new();
        match_pieces(&self.name, file_name, &mut index, &mut slug_text)
            .then_some((index, slug_text))
    }
}

fn match_pieces(pieces: &[Piece], text: &str, index: &mut usize, slug_out: &mut String) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return text.is_empty();
    };
    match first {
        Piece::Literal(l) => text
            .strip_prefix(l.as_str())
            .is_some_and(|t| match_pieces(rest, t, index, slug_out)),
        Piece::Index => {
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            (1..=digits).rev().any(|n| {
                let ok = match_pieces(rest, &text[n..], index, slug_out);
                if ok {
                    *index = text[..n].parse().unwrap_or(0);
                }
                ok
            })
        }
        Piece::Slug => (1..=text.len()).rev().any(|n| {
            if !text.is_char_boundary(n) {
                return false;
            }
            let ok = match_pieces(rest, &text[n..], index, slug_out);
            if ok {
                *slug_out = text[..n].to_string();
            }
            ok
        }),
    }
}

/// How a thread's run folders are named: `{name}-{version}`, where the name may use `{graph}`
/// and any top-level text or number field of the state (`{company}`, made file-safe, its case
/// kept), and the version holds `{N}`, the version number. The default is `{graph}-v{N}`:
/// `output/memo-v1/`, `output/memo-v2/`.
///
/// ```
/// use stategraph_artifacts::FolderPattern;
/// let p = FolderPattern::new("{company}", "v0.0.{N}");
/// let state = serde_json::json!({"company": "Fernstone Labs"});
/// assert_eq!(p.folder_name("memo", &state, 3).unwrap(), "Fernstone-Labs-v0.0.3");
/// assert_eq!(p.label(3), "v0.0.3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderPattern {
    name: String,
    version: String,
}

impl Default for FolderPattern {
    fn default() -> Self {
        FolderPattern::new("{graph}", "v{N}")
    }
}

impl FolderPattern {
    /// A pattern; `version` must hold `{N}` (a pattern without it gets `-{N}` added).
    pub fn new(name: &str, version: &str) -> Self {
        let version = if version.contains("{N}") {
            version.to_string()
        } else {
            format!("{version}-{{N}}")
        };
        FolderPattern {
            name: name.to_string(),
            version,
        }
    }

    /// The version label of number `n` (`v3`, `v0.0.3`).
    pub fn label(&self, n: u32) -> String {
        self.version.replace("{N}", &n.to_string())
    }

    /// The version number a label stands for (`v3` or `3` for the default pattern).
    pub fn number_of(&self, label: &str) -> Option<u32> {
        let (before, after) = self.version.split_once("{N}")?;
        let digits = label.strip_prefix(before).unwrap_or(label);
        let digits = digits.strip_suffix(after).unwrap_or(digits);
        digits.parse().ok()
    }

    /// The name part for this state (`{graph}` and state fields filled in, made safe).
    pub fn base_name(&self, graph: &str, state: &Value) -> Result<String, ArtifactError> {
        let mut out = String::new();
        let mut rest = self.name.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                return Err(self.error("a `{` is not closed".into()));
            };
            let key = &rest[open + 1..open + close];
            let value = match key {
                "graph" => graph.to_string(),
                field => match state.get(field) {
                    Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => {
                        return Err(self.error(format!(
                        "the state has no text in field `{field}` yet (give it in the run's input)"
                    )))
                    }
                },
            };
            out.push_str(&file_safe(&value));
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        if out.is_empty() || out.starts_with('.') || out.contains('/') {
            return Err(self.error(format!("`{out}` is not a folder name")));
        }
        Ok(out)
    }

    /// The whole folder name of version `n`.
    pub fn folder_name(&self, graph: &str, state: &Value, n: u32) -> Result<String, ArtifactError> {
        Ok(format!(
            "{}-{}",
            self.base_name(graph, state)?,
            self.label(n)
        ))
    }

    /// The version number of an existing folder named `dir_name` for `base_name`, if it is one.
    pub(crate) fn number_in(&self, base_name: &str, dir_name: &str) -> Option<u32> {
        let label = dir_name.strip_prefix(base_name)?.strip_prefix('-')?;
        let n = self.number_of(label)?;
        (self.label(n) == label).then_some(n)
    }

    fn error(&self, message: String) -> ArtifactError {
        ArtifactError::FolderName {
            pattern: format!("{}-{}", self.name, self.version),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_patterns_fill_and_read_back() {
        let p = FilePattern::new("2-sections/{index}-{slug}.md");
        assert!(p.is_folder());
        assert_eq!(
            p.fill(4, "Team & Founders"),
            "2-sections/04-team-founders.md"
        );
        assert_eq!(
            p.matches("04-team-founders.md"),
            Some((4, "team-founders".into()))
        );
        assert_eq!(p.matches("12-a-b-c.md"), Some((12, "a-b-c".into())));
        assert_eq!(p.matches("team.md"), None);
        assert_eq!(p.matches("04-team.md.bak"), None);
        assert!(p.problem().is_none());
        assert!(FilePattern::new("../x.md").problem().is_some());
        assert!(FilePattern::new("/x.md").problem().is_some());
        assert!(FilePattern::new("{index}{slug}.md").problem().is_some());
        assert!(!FilePattern::new("1-research.json").is_folder());
    }

    #[test]
    fn versions_are_read_back_from_folder_names() {
        let p = FolderPattern::default();
        assert_eq!(p.number_in("memo", "memo-v12"), Some(12));
        assert_eq!(p.number_in("memo", "memo-v12x"), None);
        assert_eq!(p.number_in("memo", "memox-v1"), None);
        assert_eq!(p.number_of("v7"), Some(7));
        assert_eq!(p.number_of("7"), Some(7));
        let q = FolderPattern::new("{company}", "v0.0.{N}");
        assert_eq!(q.number_in("acme", "acme-v0.0.4"), Some(4));
        let state = serde_json::json!({"company": "Fernstone Robotics"});
        assert_eq!(
            q.folder_name("memo", &state, 1).unwrap(),
            "Fernstone-Robotics-v0.0.1"
        );
        let err = q.base_name("memo", &serde_json::json!({})).unwrap_err();
        assert!(err.to_string().contains("field `company`"), "{err}");
    }
}
