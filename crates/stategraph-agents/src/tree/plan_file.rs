//! A plan file, `{name}_plan.md`, beside its task file: what the engine writes about a task.
//!
//! ```markdown
//! # Plan: Web scraper
//!
//! ## Analysis
//! (decompose: why the task splits the way it does)
//!
//! ## Children
//! - [Fetch URLs](web_scraper_children/fetch_urls.md) (simple): Download each page.
//!
//! ## Progress
//! (solve: where the task and its children stand)
//!
//! ## Result
//! (solve: the task's result)
//! ```
//!
//! The engine replaces one of these four sections at a time and keeps everything else as
//! found, so notes a person adds survive. A section runs to the next of the four headings, so
//! a result may hold headings of its own.

use super::markdown::{escape_link_text, link_dest, Outline};

/// The sections the engine writes, in the order it writes them.
const SECTIONS: [&str; 4] = ["Analysis", "Children", "Progress", "Result"];

/// A `{name}_plan.md` file's text, edited a section at a time.
///
/// ```
/// use stategraph_agents::tree::PlanFile;
/// let mut plan = PlanFile::new("Web scraper");
/// plan.set("Result", "It works.");
/// plan.set("Progress", "- [x] solved");
/// let text = plan.text();
/// assert!(text.find("## Progress").unwrap() < text.find("## Result").unwrap());
/// assert_eq!(PlanFile::parse(&text).section("Result").as_deref(), Some("It works."));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFile {
    text: String,
}

impl PlanFile {
    /// An empty plan for the task titled `title`.
    pub fn new(title: &str) -> PlanFile {
        PlanFile {
            text: format!("# Plan: {}\n", title.trim()),
        }
    }

    /// A plan file as read from disk (any text is accepted: it is only ever added to).
    pub fn parse(text: &str) -> PlanFile {
        PlanFile {
            text: text.to_string(),
        }
    }

    /// The text to write.
    pub fn text(&self) -> String {
        let mut text = self.text.clone();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    /// Where each of the engine's sections stands: (name, heading start, body start, end).
    fn sections(&self) -> Vec<(&'static str, usize, usize, usize)> {
        let outline = Outline::parse(&self.text);
        let ours: Vec<_> = outline
            .headings
            .iter()
            .filter(|h| h.level == 2)
            .filter_map(|h| {
                SECTIONS
                    .iter()
                    .find(|s| s.eq_ignore_ascii_case(&h.text))
                    .map(|s| (*s, h.range.clone()))
            })
            .collect();
        ours.iter()
            .enumerate()
            .map(|(i, (name, range))| {
                let end = ours
                    .get(i + 1)
                    .map(|(_, next)| next.start)
                    .unwrap_or(self.text.len());
                (*name, range.start, range.end, end)
            })
            .collect()
    }

    /// A section's text, trimmed, when the file has it.
    pub fn section(&self, name: &str) -> Option<String> {
        self.sections()
            .into_iter()
            .find(|(n, ..)| n.eq_ignore_ascii_case(name))
            .map(|(_, _, body, end)| self.text[body..end].trim().to_string())
    }

    /// Replaces a section's text (`Analysis`, `Children`, `Progress` or `Result`), or adds the
    /// section before the first of the engine's sections that comes after it.
    pub fn set(&mut self, name: &str, content: &str) {
        let order = SECTIONS
            .iter()
            .position(|s| s.eq_ignore_ascii_case(name))
            .unwrap_or(SECTIONS.len());
        let name = SECTIONS.get(order).copied().unwrap_or(name);
        let block = format!("## {name}\n{}\n\n", content.trim());
        let sections = self.sections();
        if let Some((_, start, _, end)) = sections.iter().find(|(n, ..)| *n == name) {
            self.text.replace_range(*start..*end, &block);
        } else if let Some((_, start, ..)) = sections
            .iter()
            .find(|(n, ..)| SECTIONS.iter().position(|s| s == n).unwrap_or(0) > order)
        {
            self.text.insert_str(*start, &block);
        } else {
            let trimmed = self.text.trim_end().len();
            self.text.truncate(trimmed);
            self.text.push_str("\n\n");
            self.text.push_str(&block);
        }
        let trimmed = self.text.trim_end().len();
        self.text.truncate(trimmed);
        self.text.push('\n');
    }

    /// The link targets listed under `## Children`, in order (relative to the plan's folder).
    pub fn children(&self) -> Vec<String> {
        let Some((_, _, body, end)) = self.sections().into_iter().find(|(n, ..)| *n == "Children")
        else {
            return Vec::new();
        };
        Outline::parse(&self.text)
            .links_in(&(body..end))
            .map(|l| l.dest.split('#').next().unwrap_or_default().to_string())
            .collect()
    }
}

/// One line of a `## Children` list.
pub(crate) fn child_line(title: &str, target: &str, kind: &str, summary: &str) -> String {
    format!(
        "- [{}]({}) ({kind}): {summary}",
        escape_link_text(title),
        link_dest(target)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_replaced_whole_and_sections_keep_their_order() {
        let mut plan = PlanFile::new("A");
        plan.set("Analysis", "Split in two.");
        plan.set(
            "Children",
            &child_line("B", "a_children/b.md", "simple", "Do b."),
        );
        plan.set("Result", "## Findings\nfirst");
        plan.text.push_str("\nmy note\n");
        plan.set("Progress", "- [ ] b");
        plan.set("Result", "second");
        let text = plan.text();
        assert_eq!(text.matches("## Result").count(), 1);
        assert!(
            !text.contains("first") && !text.contains("my note"),
            "{text}"
        );
        assert_eq!(plan.section("analysis").as_deref(), Some("Split in two."));
        assert_eq!(plan.children(), ["a_children/b.md"]);
        let order: Vec<_> = ["Analysis", "Children", "Progress", "Result"]
            .iter()
            .map(|s| text.find(&format!("## {s}")).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn a_result_with_its_own_headings_stays_whole() {
        let mut plan = PlanFile::new("A");
        plan.set("Result", "## Usage\nrun it\n\n## Notes\nnone");
        plan.set("Progress", "done");
        assert_eq!(
            plan.section("Result").as_deref(),
            Some("## Usage\nrun it\n\n## Notes\nnone")
        );
    }

    #[test]
    fn a_persons_notes_outside_the_sections_survive() {
        let mut plan = PlanFile::parse("# Plan: A\n\nMy own intro.\n\n## Result\nold\n");
        plan.set("Result", "new");
        plan.set("Analysis", "why");
        let text = plan.text();
        assert!(text.contains("My own intro."), "{text}");
        assert!(text.find("## Analysis").unwrap() < text.find("## Result").unwrap());
        assert_eq!(plan.section("Result").as_deref(), Some("new"));
    }
}
