//! A company's data room: its documents read once, searched through the corpus tool, and
//! quoted line by line, so every passage the memo cites can be found again in its file.

use std::path::{Path, PathBuf};

/// One document of the data room.
#[derive(Clone, Debug)]
pub struct Doc {
    /// Its file name inside the room, e.g. `financials.md`.
    pub name: String,
    /// Its path as the memo cites it (the room's path joined with the name).
    pub path: String,
    /// Its canonical path, to recognise search hits (`file://` URLs).
    canonical: PathBuf,
    /// Its text.
    pub text: String,
}

/// The documents of one company's data room.
#[derive(Clone, Debug)]
pub struct DataRoom {
    /// The folder, as the memo cites it.
    pub dir: PathBuf,
    /// The documents, sorted by name.
    pub docs: Vec<Doc>,
}

/// Words that say nothing about what a line is about.
const STOP: &[&str] = &[
    "a", "an", "and", "at", "for", "in", "is", "of", "on", "or", "per", "the", "to", "with", "its",
    "by", "as", "from", "it",
];

/// Why a document is refused when it is not UTF-8 (a Windows or Latin-1 file, say): where, and
/// how to convert it.
fn not_utf8(path: &Path, e: &std::string::FromUtf8Error) -> String {
    let bytes = e.as_bytes();
    let at = e.utf8_error().valid_up_to();
    let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
    format!(
        "{} is not UTF-8 text (line {line}: byte 0x{:02X}); save it as UTF-8 (for a Windows or \
         Latin-1 file: `iconv -f windows-1252 -t utf-8`), or move it out of the data room",
        path.display(),
        bytes.get(at).copied().unwrap_or_default()
    )
}

impl DataRoom {
    /// Reads every `.md` and `.txt` file of `dir`.
    pub fn open(dir: &Path) -> Result<DataRoom, String> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read the data room {}: {e}", dir.display()))?;
        let mut docs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let path = entry.path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !path.is_file() || !matches!(ext, "md" | "txt") {
                continue;
            }
            let bytes =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let text = String::from_utf8(bytes).map_err(|e| not_utf8(&path, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            docs.push(Doc {
                path: dir.join(&name).display().to_string(),
                name,
                canonical,
                text,
            });
        }
        docs.sort_by(|a, b| a.name.cmp(&b.name));
        if docs.is_empty() {
            return Err(format!(
                "the data room {} has no .md or .txt documents",
                dir.display()
            ));
        }
        Ok(DataRoom {
            dir: dir.to_path_buf(),
            docs,
        })
    }

    /// The document named `name`.
    pub fn doc(&self, name: &str) -> Option<&Doc> {
        self.docs.iter().find(|d| d.name == name)
    }

    /// The document a search hit's `file://` URL points at.
    pub fn by_url(&self, url: &str) -> Option<&Doc> {
        let path = Path::new(url.strip_prefix("file://")?);
        self.docs.iter().find(|d| d.canonical == path)
    }

    /// `(name, url)` of every `- Name: https://...` line of the room, first occurrence of
    /// each name kept, longest names first (so `Frostline` is linked before `Fernstone`
    /// could swallow part of a longer name).
    pub fn links(&self) -> Vec<(String, String)> {
        let mut links: Vec<(String, String)> = Vec::new();
        for doc in &self.docs {
            for line in doc.text.lines() {
                let Some(item) = line.trim().strip_prefix("- ") else {
                    continue;
                };
                let Some((name, url)) = item.split_once(": ") else {
                    continue;
                };
                let url = url.trim();
                // Labels of a page, not names of something the memo mentions.
                let generic = ["Website", "Site", "Web", "URL", "LinkedIn", "Homepage"];
                if generic.contains(&name.trim()) {
                    continue;
                }
                if (url.starts_with("https://") || url.starts_with("http://"))
                    && !url.contains(' ')
                    && !links.iter().any(|(n, _)| n == name.trim())
                {
                    links.push((name.trim().to_string(), url.to_string()));
                }
            }
        }
        links.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        links
    }
}

impl Doc {
    /// Every quotable line: `(1-based line, text)` without list markers; headings, table
    /// rows and blank lines are not passages.
    pub fn passages(&self) -> impl Iterator<Item = (usize, &str)> {
        self.text.lines().enumerate().filter_map(|(i, line)| {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with('|') {
                return None;
            }
            let t = t
                .strip_prefix("- ")
                .or_else(|| t.strip_prefix("* "))
                .unwrap_or(t);
            Some((i + 1, t))
        })
    }

    /// The lines sharing most words with `query`, best first (ties by position), at most
    /// `max`, each sharing at least one.
    pub fn best_lines(&self, query: &str, max: usize) -> Vec<(usize, String)> {
        let wanted = words(query);
        let mut scored: Vec<(usize, usize, &str)> = self
            .passages()
            .map(|(line, text)| {
                let have = words(text);
                let score = wanted
                    .iter()
                    .filter(|w| have.iter().any(|h| stem_eq(h, w)))
                    .count();
                (score, line, text)
            })
            .filter(|(score, ..)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(max)
            .map(|(_, line, text)| (line, text.to_string()))
            .collect()
    }

    /// The first passage containing `needle` (case-insensitive).
    pub fn line_with(&self, needle: &str) -> Option<(usize, String)> {
        let needle = needle.to_lowercase();
        self.passages()
            .find(|(_, t)| t.to_lowercase().contains(&needle))
            .map(|(l, t)| (l, t.to_string()))
    }
}

/// The content words of `text`, lowercased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .map(|w| w.trim_matches('-').to_lowercase())
        .filter(|w| !w.is_empty() && !STOP.contains(&w.as_str()))
        .collect()
}

/// Two words are the same word when they share a stem: equal, or one is the other plus a
/// short ending (`customer` / `customers`, `margin` / `margins`).
fn stem_eq(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    a == b || (long.starts_with(short) && long.len() - short.len() <= 2 && short.len() >= 3)
}

/// True when `passage` is in `text`, ignoring differences of whitespace.
pub fn contains_passage(text: &str, passage: &str) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let passage = squash(passage);
    !passage.is_empty() && squash(text).contains(&passage)
}

/// True when every content word of `name` is in `line` (as a word, stems allowed).
pub fn mentions(line: &str, name: &str) -> bool {
    let name = match name.find('(') {
        Some(i) => &name[..i],
        None => name,
    };
    let wanted = words(name);
    let have = words(line);
    !wanted.is_empty() && wanted.iter().all(|w| have.iter().any(|h| stem_eq(h, w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Doc {
        Doc {
            name: "d.md".into(),
            path: "room/d.md".into(),
            canonical: PathBuf::from("/room/d.md"),
            text: text.into(),
        }
    }

    #[test]
    fn best_lines_rank_by_shared_words() {
        let d = doc("# Title\n\n- Paying customers: 17\nGross margin: 68%.\n| a | b |\n");
        let lines = d.best_lines("customers margin gross", 2);
        assert_eq!(lines[0], (4, "Gross margin: 68%.".to_string()));
        assert_eq!(lines[1], (3, "Paying customers: 17".to_string()));
    }

    #[test]
    fn mentions_needs_every_word() {
        assert!(mentions(
            "Net revenue retention (trailing twelve months): 124%.",
            "Net revenue retention"
        ));
        assert!(!mentions(
            "Gross revenue retention: 96%.",
            "Net revenue retention"
        ));
        assert!(mentions("Paying customers: 17", "Customers"));
        assert!(contains_passage("a  b\nc", "a b c"));
    }
}
