//! What the task and plan files need from Markdown: their headings and links, with the line
//! each stands on. CommonMark parsing (pulldown-cmark) rather than line matching, so a `# `
//! inside a code block is not a heading and a link is read as Markdown reads it.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use std::ops::Range;

/// A heading: its level (1 for `#`), its text, where it stands and where its section's text
/// begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Heading {
    pub level: u8,
    pub text: String,
    /// The heading's own bytes.
    pub range: Range<usize>,
    /// 1-based.
    pub line: usize,
}

/// An inline link `[text](dest)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub text: String,
    pub dest: String,
    pub range: Range<usize>,
    /// 1-based line of its first byte.
    pub line: usize,
}

/// A parsed document: its headings, links and first paragraphs, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outline {
    pub headings: Vec<Heading>,
    pub links: Vec<Link>,
    /// The byte ranges of top-level paragraphs.
    pub paragraphs: Vec<Range<usize>>,
    line_starts: Vec<usize>,
}

impl Outline {
    pub(crate) fn parse(text: &str) -> Outline {
        let mut outline = Outline {
            line_starts: line_starts(text),
            ..Outline::default()
        };
        let mut heading: Option<(u8, usize)> = None;
        let mut link: Option<(String, usize)> = None;
        let (mut heading_text, mut link_text) = (String::new(), String::new());
        // Lists, items and quotes open around a paragraph that is not top-level.
        let mut containers = 0usize;
        // A YAML front matter block (`---` ... `---` first in the file, as Obsidian, Jekyll
        // or Hugo write it) is the file's metadata, not its text: no heading, link or paragraph.
        let options = Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
        for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level_number(level), range.start));
                    heading_text.clear();
                }
                Event::End(TagEnd::Heading(_)) => {
                    if let Some((level, start)) = heading.take() {
                        outline.headings.push(Heading {
                            level,
                            text: heading_text.trim().to_string(),
                            range: start..range.end,
                            line: outline.line_of(start),
                        });
                    }
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    link = Some((dest_url.to_string(), range.start));
                    link_text.clear();
                }
                Event::End(TagEnd::Link) => {
                    if let Some((dest, start)) = link.take() {
                        outline.links.push(Link {
                            text: link_text.trim().to_string(),
                            dest,
                            range: start..range.end,
                            line: outline.line_of(start),
                        });
                    }
                }
                Event::Start(Tag::Paragraph) if containers == 0 => {
                    outline.paragraphs.push(range.clone())
                }
                Event::Start(Tag::BlockQuote(_) | Tag::List(_) | Tag::Item) => containers += 1,
                Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item) => {
                    containers = containers.saturating_sub(1)
                }
                Event::Text(t) | Event::Code(t) => {
                    heading_text.push_str(&t);
                    link_text.push_str(&t);
                }
                Event::SoftBreak | Event::HardBreak => {
                    heading_text.push(' ');
                    link_text.push(' ');
                }
                _ => {}
            }
        }
        outline
    }

    /// The 1-based line holding byte `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// The byte range of line `line` (1-based), without its line break.
    pub(crate) fn line_range(&self, text: &str, line: usize) -> Range<usize> {
        let start = self.line_starts[line - 1];
        let end = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(text.len())
            .max(start);
        let slice = &text[start..end];
        start..start + slice.trim_end_matches(['\n', '\r']).len()
    }

    /// The section each heading opens runs to the next heading (of any level) or the end.
    pub(crate) fn section_body(&self, text_len: usize, index: usize) -> Range<usize> {
        let start = self.headings[index].range.end;
        let end = self
            .headings
            .get(index + 1)
            .map(|h| h.range.start)
            .unwrap_or(text_len);
        start..end.max(start)
    }

    /// The links whose first byte lies in `range`.
    pub(crate) fn links_in(&self, range: &Range<usize>) -> impl Iterator<Item = &Link> {
        let range = range.clone();
        self.links
            .iter()
            .filter(move |l| range.contains(&l.range.start))
    }
}

fn level_number(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// Text safe inside a link's `[...]`.
pub(crate) fn escape_link_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A link destination as Markdown needs it written (angle brackets around one with spaces).
pub(crate) fn link_dest(dest: &str) -> String {
    if dest.contains([' ', '(', ')']) {
        format!("<{dest}>")
    } else {
        dest.to_string()
    }
}

/// Collapses `text` to one line of at most `max` characters, cut at a word with `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let keep = max.saturating_sub(1);
    let cut: String = flat.chars().take(keep).collect();
    let at_word_end = flat.chars().nth(keep) == Some(' ');
    let cut = match cut.rfind(' ') {
        Some(i) if !at_word_end && i > max / 2 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{}…", cut.trim_end_matches([',', ';', ':', '.', ' ']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_in_code_blocks_are_not_headings() {
        let text = "# Title\n\n```sh\n# not a heading\n```\n\n## Type\nsimple\n";
        let o = Outline::parse(text);
        let found: Vec<_> = o
            .headings
            .iter()
            .map(|h| (h.level, h.text.as_str(), h.line))
            .collect();
        assert_eq!(found, [(1, "Title", 1), (2, "Type", 7)]);
        assert_eq!(&text[o.section_body(text.len(), 1)], "simple\n");
    }

    #[test]
    fn links_carry_text_destination_and_line() {
        let text = "intro\n\n- [Parse `HTML`](../parse_html.md)\n- [b](<with space.md>)\n";
        let o = Outline::parse(text);
        assert_eq!(o.links.len(), 2);
        assert_eq!(o.links[0].text, "Parse HTML");
        assert_eq!(o.links[0].dest, "../parse_html.md");
        assert_eq!(o.links[0].line, 3);
        assert_eq!(o.links[1].dest, "with space.md");
        assert_eq!(o.line_range(text, 3), 7..text.find("\n- [b]").unwrap());
    }

    #[test]
    fn one_line_cuts_at_a_word() {
        assert_eq!(one_line("a  b\nc", 10), "a b c");
        assert_eq!(
            one_line("Download every page listed in the file", 20),
            "Download every page…"
        );
    }
}
