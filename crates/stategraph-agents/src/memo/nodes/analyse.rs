//! `deck_analyst`: decides the run's mode, finds the data room and reads the deck into a
//! [`DeckAnalysis`]: by the model, or offline from the deck's `- Key: value` lines.

use super::{messages, Stage};
use crate::memo::prompts;
use crate::memo::settings::ModeSetting;
use crate::memo::state::{DeckAnalysis, MemoState, MemoStateUpdate, Metric, Mode, Person};
use crate::memo::MemoAgent;
use stategraph::runtime::{Context, NodeError, PROGRESS_EVENT};
use stategraph_llm::http::non_empty_env;
use stategraph_llm::provider;
use std::sync::Arc;

/// What offline mode says about itself.
pub(crate) const OFFLINE_NOTE: &str = "offline mode: no model configured, so fields are \
     extracted, passages quoted and scores computed from the sources (set ANTHROPIC_API_KEY, \
     OPENAI_API_KEY or OPENAI_BASE_URL + GRAPH_MODEL to use a model)";

pub(crate) async fn run(
    agent: &MemoAgent,
    s: Arc<MemoState>,
    ctx: Context,
) -> Result<MemoStateUpdate, NodeError> {
    let mut stage = Stage::begin("deck_analyst", &ctx).await?;
    let dir = stage.settings.room(&s.company).map_err(NodeError::new)?;
    // Why model mode, said on the stage's line: an exported OPENAI_BASE_URL (say) is easy to
    // forget, and it turns the keyless run into one that calls a model.
    let (mode, why) = match stage.settings.mode {
        ModeSetting::Offline => (Mode::Offline, String::new()),
        ModeSetting::Model => (Mode::Model, "the setting `mode` is `model`".to_string()),
        ModeSetting::Auto if agent.has_model() => (Mode::Model, "a model was given".to_string()),
        ModeSetting::Auto => {
            let settings = stage.settings.provider();
            match provider::detect(&settings, &non_empty_env) {
                Ok(_) => (Mode::Model, configured_by(&settings, &non_empty_env)),
                Err(_) => (Mode::Offline, String::new()),
            }
        }
    };
    if mode == Mode::Model {
        // Said before the first call, which may fail (a server that is not running).
        let line = format!("model mode ({why}; `--set mode=offline` runs without a model)");
        ctx.emit(PROGRESS_EVENT, line);
    }
    let room = crate::memo::dataroom::DataRoom::open(&dir).map_err(NodeError::new)?;
    let deck_name = stage.settings.deck.clone();
    let deck = room.doc(&deck_name).ok_or_else(|| {
        NodeError::new(format!(
            "the data room {} has no deck `{deck_name}` (setting `deck`)",
            dir.display()
        ))
    })?;
    let mut analysis = match mode {
        Mode::Offline => parse_deck(&deck.text),
        Mode::Model => {
            let user = format!("Company: {}\n\nDeck:\n{}", s.company.trim(), deck.text);
            stage
                .ask(
                    &ctx,
                    agent,
                    "deck",
                    messages(prompts::DECK, user),
                    |a: &DeckAnalysis| {
                        if a.metrics.is_empty() {
                            Err("list the deck's metrics (name and value as written)".into())
                        } else {
                            Ok(())
                        }
                    },
                )
                .await?
        }
    };
    if analysis.company.trim().is_empty() {
        analysis.company = s.company.trim().to_string();
    }
    analysis.source = deck.path.clone();
    let note = match mode {
        Mode::Offline if stage.settings.mode == ModeSetting::Offline => {
            "offline mode: the setting `mode` is `offline`, so fields are extracted, passages \
             quoted and scores computed from the sources, with no model"
                .to_string()
        }
        Mode::Offline => OFFLINE_NOTE.to_string(),
        Mode::Model => format!(
            "model mode: {} metrics, {} people",
            analysis.metrics.len(),
            analysis.team.len()
        ),
    };
    let s = MemoState {
        mode: Some(mode),
        ..(*s).clone()
    };
    let update = MemoStateUpdate::default()
        .mode(Some(mode))
        .dataroom(Some(dir.display().to_string()))
        .deck_analysis(Some(analysis));
    Ok(stage.done(&ctx, &s, update, &note))
}

/// What selected a model when the setting `mode` is `auto`: the settings or the environment
/// variables [`provider::detect`] reads, in its order, e.g. "OPENAI_BASE_URL is set".
fn configured_by(
    settings: &stategraph_llm::provider::ProviderSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    if settings.provider.is_some() {
        return "the setting `provider` names one".to_string();
    }
    let set: Vec<&str> = [
        "GRAPH_PROVIDER",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ]
    .into_iter()
    .filter(|var| env(var).is_some())
    .collect();
    match set.as_slice() {
        [] if settings.base_url.is_some() => "the setting `base_url` is set".to_string(),
        [] => "a model is configured".to_string(),
        [one] => format!("{one} is set"),
        several => format!("{} are set", several.join(" and ")),
    }
}

/// Reads a deck written as slides (`## Slide N — Title`) of `- Key: value` lines.
pub(crate) fn parse_deck(text: &str) -> DeckAnalysis {
    let mut a = DeckAnalysis::default();
    let mut slide = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(heading) = t.strip_prefix("## ") {
            slide = heading.to_lowercase();
            continue;
        }
        let Some(item) = t.strip_prefix("- ") else {
            continue;
        };
        let Some((key, value)) = item.split_once(": ") else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        if slide.contains("cover") {
            let field = match key.to_lowercase().as_str() {
                "company" => &mut a.company,
                "tagline" => &mut a.tagline,
                "stage" => &mut a.stage,
                "raise" => &mut a.raise,
                "pre-money valuation" | "valuation" => &mut a.valuation,
                "headquarters" => &mut a.headquarters,
                "founded" => &mut a.founded,
                "sector" => &mut a.sector,
                "website" => &mut a.website,
                _ => continue,
            };
            *field = value;
        } else if ["traction", "financials", "market"]
            .iter()
            .any(|k| slide.contains(k))
        {
            a.metrics.push(Metric {
                name: key.to_string(),
                value,
            });
        } else if slide.contains("team") {
            let (name, role) = key.split_once(", ").unwrap_or((key, ""));
            a.team.push(Person {
                name: name.trim().to_string(),
                role: role.trim().to_string(),
                background: value,
            });
        } else if slide.contains("competition") {
            a.competitors.push(key.to_string());
        } else if slide.contains("ask") && key.eq_ignore_ascii_case("use of funds") {
            a.use_of_funds = value;
        }
    }
    // The company's own name is not a competitor.
    a.competitors.retain(|c| !c.is_empty());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_deck_parses() {
        let deck = include_str!("../../../../../examples/dataroom/fernstone/deck.md");
        let a = parse_deck(deck);
        assert_eq!(a.company, "Fernstone, Inc.");
        assert_eq!(a.raise, "$12M");
        assert_eq!(a.team.len(), 3);
        assert_eq!(a.team[0].name, "Maren Okafor");
        assert_eq!(a.team[0].role, "CEO");
        assert_eq!(a.competitors, ["Glacio Systems", "VoltKeep"]);
        assert!(a
            .metrics
            .iter()
            .any(|m| m.name == "Net revenue retention" && m.value == "131%"));
        assert!(a.use_of_funds.starts_with("45% engineering"));
    }
}
