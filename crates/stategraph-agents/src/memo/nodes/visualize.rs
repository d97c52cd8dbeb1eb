//! `enrich_visualizations`: charts drawn from figures the data room states: the first table of
//! a document whose second column is all figures (e.g. ARR by quarter) goes into `Traction`,
//! the deck's use of funds into `Financials and Terms`. Each chart is marked
//! `<!-- viz: ... -->` and names its source.

use super::Stage;
use crate::memo::dataroom::DataRoom;
use crate::memo::figures::{figures, Figure};
use crate::memo::state::{MemoState, MemoStateUpdate};
use stategraph::runtime::{Context, NodeError};
use std::sync::Arc;

/// Widest bar, in characters.
const BAR: usize = 24;

/// A table of figures found in a document.
struct Series {
    title: String,
    label: String,
    column: String,
    rows: Vec<(String, String, f64)>,
    source: String,
}

pub(crate) async fn run(s: Arc<MemoState>, ctx: Context) -> Result<MemoStateUpdate, NodeError> {
    let stage = Stage::begin("enrich_visualizations", &ctx).await?;
    let room = stage.room(&s)?;
    let mut sections = s.sections.clone();
    let mut charts = 0;
    if let Some(series) = first_table(&room) {
        if let Some(section) = sections.iter_mut().find(|x| x.slug == "traction") {
            section.body = format!("{}\n{}", section.body.trim_end(), chart(&series));
            section.body.push('\n');
            charts += 1;
        }
    }
    let deck = s.deck_analysis.clone().unwrap_or_default();
    if let Some(series) = use_of_funds(&deck.use_of_funds, &deck.source) {
        if let Some(section) = sections
            .iter_mut()
            .find(|x| x.slug == "financials-and-terms")
        {
            section.body = format!("{}\n{}", section.body.trim_end(), chart(&series));
            section.body.push('\n');
            charts += 1;
        }
    }
    let note = format!("{charts} charts");
    let update = MemoStateUpdate::default().sections(sections);
    Ok(stage.done(&ctx, &s, update, &note))
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The first Markdown table, in document order, whose rows all have a figure in column 2.
fn first_table(room: &DataRoom) -> Option<Series> {
    for doc in &room.docs {
        let lines: Vec<&str> = doc.text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            if !lines[i].trim().starts_with('|') {
                i += 1;
                continue;
            }
            let start = i;
            while i < lines.len() && lines[i].trim().starts_with('|') {
                i += 1;
            }
            let table = &lines[start..i];
            if table.len() < 4 {
                continue;
            }
            let head = cells(table[0]);
            if head.len() < 2 {
                continue;
            }
            let rows: Vec<(String, String, f64)> = table[2..]
                .iter()
                .filter_map(|row| {
                    let c = cells(row);
                    let f: Figure = figures(c.get(1)?).into_iter().next()?;
                    Some((c[0].clone(), f.text, f.value))
                })
                .collect();
            if rows.len() == table.len() - 2 {
                return Some(Series {
                    title: format!("{} by {}", head[1], head[0].to_lowercase()),
                    label: head[0].clone(),
                    column: head[1].clone(),
                    rows,
                    source: doc.path.clone(),
                });
            }
        }
    }
    None
}

/// `45% engineering, 35% sales and marketing, 20% hardware working capital` as a series.
fn use_of_funds(text: &str, source: &str) -> Option<Series> {
    let rows: Vec<(String, String, f64)> = text
        .split(',')
        .filter_map(|part| {
            let f = figures(part).into_iter().next()?;
            let label = part
                .replace(&f.text, "")
                .trim()
                .trim_end_matches('.')
                .to_string();
            Some((label, f.text, f.value))
        })
        .collect();
    (rows.len() >= 2).then(|| Series {
        title: "Use of funds".into(),
        label: "Use".into(),
        column: "Share".into(),
        rows,
        source: source.to_string(),
    })
}

/// A Markdown table with a bar per row, behind its `viz` marker.
fn chart(series: &Series) -> String {
    let max = series.rows.iter().map(|r| r.2).fold(0.0_f64, f64::max);
    let mut out = format!(
        "\n<!-- viz: bar chart \"{}\" from {} -->\n\n**{}**\n\n| {} | {} | |\n|---|---|---|\n",
        series.title, series.source, series.title, series.label, series.column
    );
    for (label, text, value) in &series.rows {
        let width = if max > 0.0 {
            ((value / max) * BAR as f64).round() as usize
        } else {
            0
        };
        out.push_str(&format!("| {label} | {text} | {} |\n", "█".repeat(width)));
    }
    out.push_str(&format!("\nSource: {}.\n", series.source));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_of_funds_becomes_a_series() {
        let s = use_of_funds("45% engineering, 35% sales and marketing", "deck.md").unwrap();
        assert_eq!(s.rows[1].0, "sales and marketing");
        let text = chart(&s);
        assert!(
            text.contains("<!-- viz: bar chart \"Use of funds\""),
            "{text}"
        );
        assert!(text.contains(&"█".repeat(BAR)), "{text}");
    }
}
