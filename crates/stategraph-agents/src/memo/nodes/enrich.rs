//! The enrichment stages, each taking what it adds from the data room and never inventing it:
//! `enrich_trademark` writes `header.md` with the company's mark as its registration says;
//! `enrich_socials` links the team's LinkedIn profiles in `04-team.md`; `enrich_links` links
//! the first mention of each named site in every section.

use super::Stage;
use crate::memo::dataroom::DataRoom;
use crate::memo::state::{MemoState, MemoStateUpdate};
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

pub(crate) async fn trademark(
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("enrich_trademark", &ctx).await?;
    let room = stage.room(&s)?;
    let deck = s.deck_analysis.clone().unwrap_or_default();
    let name = short_name(&deck.company, &s.company);
    let (mark, notice) = mark_of(&room, &name);
    let row = |k: &str, v: &str| {
        if v.trim().is_empty() {
            String::new()
        } else {
            format!("| {k} | {v} |\n")
        }
    };
    let round = if deck.raise.is_empty() {
        String::new()
    } else {
        format!("{} at {} pre-money", deck.raise, deck.valuation)
    };
    let mut header = format!("# {name}{mark} — Investment Memo\n\n");
    if !deck.tagline.is_empty() {
        header.push_str(&format!("*{}*\n\n", deck.tagline));
    }
    header.push_str("| | |\n|---|---|\n");
    header.push_str(&row("Company", &deck.company));
    header.push_str(&row("Stage", &deck.stage));
    header.push_str(&row("Round", &round));
    header.push_str(&row("Headquarters", &deck.headquarters));
    header.push_str(&row("Founded", &deck.founded));
    header.push_str(&row("Sector", &deck.sector));
    header.push_str(&row("Website", &deck.website));
    header.push_str(&row(
        "Prepared",
        &format!(
            "{} mode, from the data room {}",
            super::mode(&s).as_str(),
            room.dir.display()
        ),
    ));
    if let Some(notice) = &notice {
        header.push_str(&format!("\n{notice}\n"));
    }
    let note = match notice {
        Some(_) => format!("mark `{name}{mark}` from the data room"),
        None => "no trademark found in the data room".into(),
    };
    let update = MemoStateUpdate::default().header(Some(header));
    Ok(stage.done(&ctx, &s, update, &note))
}

/// `Fernstone, Inc.` -> `Fernstone`.
fn short_name(company: &str, input: &str) -> String {
    let name = if company.trim().is_empty() {
        input
    } else {
        company
    };
    name.split(',').next().unwrap_or(name).trim().to_string()
}

/// The mark to write after the name (`®` registered, `™` pending, else nothing) and the line
/// of the data room that says so.
fn mark_of(room: &DataRoom, name: &str) -> (&'static str, Option<String>) {
    let upper = name.to_uppercase();
    for doc in &room.docs {
        for (_, line) in doc.passages() {
            let lower = line.to_lowercase();
            if !line.starts_with(&format!("{upper} ")) || !lower.contains("trademark") {
                continue;
            }
            if lower.contains("registered") {
                return ("®", Some(line.to_string()));
            }
            if lower.contains("pending") || lower.contains("application") {
                return ("™", Some(line.to_string()));
            }
        }
    }
    ("", None)
}

pub(crate) async fn socials(s: Arc<MemoState>, ctx: Context) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("enrich_socials", &ctx).await?;
    let room = stage.room(&s)?;
    let team = s
        .deck_analysis
        .as_ref()
        .map(|d| d.team.clone())
        .unwrap_or_default();
    let mut sections = s.sections.clone();
    let mut linked = 0;
    if let Some(section) = sections.iter_mut().find(|x| x.slug == "team") {
        for person in &team {
            let Some(url) = linkedin_of(&room, &person.name) else {
                continue;
            };
            if let Some(body) = after_first(
                &section.body,
                &person.name,
                &format!(" ([LinkedIn]({url}))"),
            ) {
                section.body = body;
                linked += 1;
            }
        }
    }
    let note = format!("{linked} of {} people linked to their profiles", team.len());
    let update = MemoStateUpdate::default().sections(sections);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// The LinkedIn address under the heading that names `person`, in any document.
fn linkedin_of(room: &DataRoom, person: &str) -> Option<String> {
    for doc in &room.docs {
        let mut under = false;
        for line in doc.text.lines() {
            if line.starts_with('#') {
                under = line.contains(person);
                continue;
            }
            if under {
                if let Some(at) = line.find("https://www.linkedin.com/in/") {
                    let url = line[at..].split_whitespace().next().unwrap_or("");
                    return Some(url.to_string());
                }
            }
        }
    }
    None
}

pub(crate) async fn links(s: Arc<MemoState>, ctx: Context) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("enrich_links", &ctx).await?;
    let room = stage.room(&s)?;
    let links = room.links();
    let mut sections = s.sections.clone();
    let mut added = 0;
    for section in &mut sections {
        for (name, url) in &links {
            if let Some(body) = link_first(&section.body, name, url) {
                section.body = body;
                added += 1;
            }
        }
    }
    let note = format!("{added} links to {} named sites", links.len());
    let update = MemoStateUpdate::default().sections(sections);
    Ok(stage.done(&ctx, &s, update, &note))
}

/// Byte ranges of the Markdown links (`[text](url)`) in `body`.
fn link_spans(body: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(open) = body[from..].find('[').map(|i| i + from) {
        let Some(mid) = body[open..].find("](").map(|i| i + open) else {
            break;
        };
        let Some(close) = body[mid..].find(')').map(|i| i + mid) else {
            break;
        };
        if body[open..mid].contains('\n') {
            from = open + 1;
            continue;
        }
        spans.push((open, close + 1));
        from = close + 1;
    }
    spans
}

/// Where `name` first appears as a whole word outside headings and existing links.
fn first_mention(body: &str, name: &str) -> Option<usize> {
    let spans = link_spans(body);
    let mut from = 0;
    while let Some(at) = body[from..].find(name).map(|i| i + from) {
        from = at + name.len();
        let before = body[..at].chars().next_back();
        let after = body[from..].chars().next();
        let word = !before.is_some_and(|c| c.is_alphanumeric() || c == '[' || c == '/')
            && !after.is_some_and(|c| c.is_alphanumeric());
        let line_start = body[..at].rfind('\n').map_or(0, |i| i + 1);
        let heading = body[line_start..].starts_with('#');
        let linked = spans.iter().any(|&(a, b)| a <= at && at < b);
        if word && !heading && !linked {
            return Some(at);
        }
    }
    None
}

/// `body` with the first mention of `name` made a link to `url`.
pub(crate) fn link_first(body: &str, name: &str, url: &str) -> Option<String> {
    let at = first_mention(body, name)?;
    let end = at + name.len();
    Some(format!("{}[{name}]({url}){}", &body[..at], &body[end..]))
}

/// `body` with `suffix` inserted after the first mention of `name`.
fn after_first(body: &str, name: &str, suffix: &str) -> Option<String> {
    let at = first_mention(body, name)?;
    let end = at + name.len();
    Some(format!("{}{suffix}{}", &body[..end], &body[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_the_first_plain_mention_only() {
        let body = "## 8. Glacio\n\nSee [Glacio](https://a.example) and Glacio Systems, Glacio.";
        let out = link_first(body, "Glacio", "https://g.example").unwrap();
        assert_eq!(
            out,
            "## 8. Glacio\n\nSee [Glacio](https://a.example) and [Glacio](https://g.example) Systems, Glacio."
        );
        assert!(link_first("Glacios only", "Glacio", "u").is_none());
    }
}
