//! Readable text from HTML, for indexing local pages and for page fetches.

use scraper::{Html, Node};

/// Elements whose text is not part of what a reader reads.
const SKIPPED: &[&str] = &[
    "script", "style", "nav", "noscript", "template", "svg", "iframe", "head", "object", "canvas",
    "button", "select",
];

/// Elements that start a new line.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "table",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "main",
    "aside",
    "hr",
    "title",
];

/// The readable text of an HTML document: scripts, styles, navigation and the like dropped,
/// blocks on their own lines, whitespace collapsed.
///
/// ```
/// let text = stategraph_tools::html_to_text(
///     "<html><head><title>T</title><style>p{}</style></head>\
///      <body><nav>Home | About</nav><h1>Hello</h1><p>World <b>wide</b></p>\
///      <script>alert(1)</script></body></html>",
/// );
/// assert_eq!(text, "Hello\nWorld wide");
/// ```
pub fn html_to_text(html: &str) -> String {
    extract(html).1
}

/// The document's title (`<title>`, else the first `<h1>`) and its readable text.
pub(crate) fn extract(html: &str) -> (Option<String>, String) {
    let document = Html::parse_document(html);
    let title = find_text(&document, "title").or_else(|| find_text(&document, "h1"));
    let root = document.tree.root();
    let mut out = String::new();
    // An explicit stack, not recursion: hostile pages can nest elements arbitrarily deep.
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        match node.value() {
            Node::Text(text) => {
                out.push_str(text);
                continue;
            }
            Node::Element(element) => {
                let name = element.name();
                if SKIPPED.contains(&name) {
                    continue;
                }
                if BLOCKS.contains(&name) {
                    out.push('\n');
                } else if name == "td" || name == "th" {
                    out.push(' ');
                }
            }
            _ => {}
        }
        // Children are pushed in reverse so that they pop in document order.
        let children: Vec<_> = node.children().collect();
        stack.extend(children.into_iter().rev());
    }
    (title, tidy(&out))
}

fn find_text(document: &Html, tag: &str) -> Option<String> {
    let node = document
        .tree
        .root()
        .descendants()
        .find(|n| n.value().as_element().is_some_and(|e| e.name() == tag))?;
    let text: String = node
        .descendants()
        .filter_map(|n| n.value().as_text().map(|t| t.to_string()))
        .collect();
    let text = collapse(&text);
    (!text.is_empty()).then_some(text)
}

/// Collapses whitespace inside lines and drops empty lines.
fn tidy(text: &str) -> String {
    text.lines()
        .map(collapse)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_falls_back_to_h1() {
        let (title, text) = extract("<body><h1>Big  News</h1><p>a</p></body>");
        assert_eq!(title.as_deref(), Some("Big News"));
        assert_eq!(text, "Big News\na");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        // The walk is iterative; the depth is kept moderate because html5ever's own cost
        // grows with the square of the nesting depth.
        let html = "<div>".repeat(3_000) + "deep" + &"</div>".repeat(3_000);
        assert!(html_to_text(&html).contains("deep"));
    }
}
