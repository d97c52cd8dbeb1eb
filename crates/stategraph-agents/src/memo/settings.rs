//! What the memo pipeline reads from the run settings (`graphs/memo.toml`, `--set`).

use super::sample;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stategraph_llm::provider::ProviderSettings;
use stategraph_llm::ModelSettings;
use stategraph_registry::decode_settings;
use std::path::{Path, PathBuf};

/// Whether the judgement stages use a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeSetting {
    /// The model when one is configured, else offline.
    #[default]
    Auto,
    /// Never a model.
    Offline,
    /// Always the model; a run without one fails before it starts.
    Model,
}

/// The memo pipeline's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct MemoSettings {
    /// The model: which server and model, sampling, prices (read on their own first: see
    /// [`ModelSettings`]).
    #[serde(flatten)]
    pub llm: ModelSettings,
    /// `auto`, `offline` or `model`.
    pub mode: ModeSetting,
    /// The folder holding one data room per company (`<dataroom>/<company>/`).
    #[schemars(schema_with = "stategraph_registry::path_setting")]
    pub dataroom: PathBuf,
    /// The deck's file name inside a company's data room.
    pub deck: String,
    /// Approve the memo whatever its score.
    pub yes: bool,
    /// A memo scoring below this pauses for review.
    pub review_below: f64,
    /// Documents read per search.
    pub max_results: usize,
    /// Also search the web when `TAVILY_API_KEY` is set.
    pub web: bool,
    /// A pause at the start of each stage, in milliseconds, to watch (or kill) a run.
    pub stage_ms: u64,
}

impl Default for MemoSettings {
    fn default() -> Self {
        MemoSettings {
            llm: ModelSettings::default(),
            mode: ModeSetting::Auto,
            dataroom: PathBuf::from(sample::SAMPLE_ROOMS),
            deck: "deck.md".into(),
            yes: false,
            review_below: 8.0,
            max_results: 4,
            web: true,
            stage_ms: 0,
        }
    }
}

impl MemoSettings {
    /// Reads the settings; unknown top-level keys are ignored (other tools share the table).
    pub fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        // The model's keys on their own first: read through `flatten`, a mistake in them would
        // not be named by its key.
        decode_settings::<ModelSettings>(map)?;
        let settings: MemoSettings = decode_settings(map)?;
        if settings.max_results == 0 {
            return Err("`max_results` must be at least 1".into());
        }
        if !(0.0..=10.0).contains(&settings.review_below) {
            return Err("`review_below` is a score from 0 to 10".into());
        }
        Ok(settings)
    }

    /// The model settings.
    pub fn provider(&self) -> ProviderSettings {
        self.llm.provider_settings()
    }

    /// The company's data room folder: `<dataroom>/<company in lowercase, dashes for
    /// spaces>`. A relative `dataroom` that is not under the current folder is looked for in
    /// the source tree this binary was built from, and the default one's sample company is
    /// written out from the binary when that tree is gone (see `sample`), so the bundled sample
    /// works from anywhere. The default made absolute (a run started where an
    /// `examples/dataroom/` folder is) is still the default: its rooms are looked for there
    /// first, then in the same two places.
    pub fn room(&self, company: &str) -> Result<PathBuf, String> {
        let slug = slug(company);
        if slug.is_empty() {
            return Err(
                "the memo has no company: give one as the run's input (the `company` field)".into(),
            );
        }
        let here = self.dataroom.join(&slug);
        if here.is_dir() {
            return Ok(here);
        }
        if let Some(rooms) = self.in_source_tree() {
            let built = rooms.join(&slug);
            if built.is_dir() {
                return Ok(built);
            }
        }
        if self.is_default() {
            // An installed binary whose source tree is gone still has the sample in it.
            if let Some(under) = sample::default_unpack_dir() {
                if let Some(dir) = sample::unpack(&slug, &under)? {
                    return Ok(dir);
                }
            }
        }
        // The company is the run's input, any length: quoted cut, as is the folder named for it.
        let mut message = format!(
            "no data room for {}: {} is not a folder. Put the company's deck ({}) and \
             documents there, or point the setting `dataroom` at the folder that holds it",
            stategraph::quote::quoted(company),
            stategraph::quote::cut(&here.display().to_string()),
            self.deck
        );
        match self.rooms().as_slice() {
            [] => message.push_str(&format!(
                ". There is no data room in {} yet",
                self.dataroom.display()
            )),
            rooms => message.push_str(&format!(
                ". The data rooms there are for: {}",
                rooms.join(", ")
            )),
        }
        Err(message)
    }

    /// The companies with a data room where [`room`](Self::room) looks (folders of `dataroom`
    /// in the current folder and in the source tree, and the bundled sample), by folder name,
    /// sorted.
    pub fn rooms(&self) -> Vec<String> {
        let mut places = vec![self.dataroom.clone()];
        places.extend(self.in_source_tree());
        let mut rooms: Vec<String> = places
            .iter()
            .filter_map(|place| std::fs::read_dir(place).ok())
            .flat_map(|entries| entries.filter_map(Result::ok))
            .filter(|entry| entry.path().is_dir())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        if self.is_default() {
            rooms.extend(sample::bundled().map(str::to_string));
        }
        rooms.sort();
        rooms.dedup();
        rooms
    }

    /// True for the default `dataroom`, also as made absolute against the folder a run started
    /// in (`/somewhere/examples/dataroom`).
    fn is_default(&self) -> bool {
        self.dataroom.ends_with(sample::SAMPLE_ROOMS)
    }

    /// Where `dataroom` is in the source tree this binary was built from: a relative one, or
    /// the default made absolute.
    fn in_source_tree(&self) -> Option<PathBuf> {
        let relative = match self.dataroom.is_relative() {
            true => self.dataroom.as_path(),
            false if self.is_default() => Path::new(sample::SAMPLE_ROOMS),
            false => return None,
        };
        // This crate sits two folders below the workspace's top, where `examples/` is.
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let top = crate_dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(crate_dir);
        Some(top.join(relative))
    }
}

/// `Fernstone Labs` -> `fernstone-labs`.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.trim().chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_defaults() {
        assert_eq!(slug(" Fernstone Labs, Inc. "), "fernstone-labs-inc");
        let s = MemoSettings::from_map(&serde_json::Map::new()).unwrap();
        assert_eq!(s.review_below, 8.0);
        let bad = serde_json::json!({"review_below": 11.0});
        assert!(MemoSettings::from_map(bad.as_object().unwrap()).is_err());
    }
}
