//! Graph files: the TOML that configures a registered graph (model, prompts, limits...), and
//! `KEY=VALUE` overrides of it.

use super::SettingsSchema;
use serde::{Deserialize, Serialize};
use stategraph::runtime::{Durability, RunConfig};

/// The keys a graph file may have at its top level; every other override key goes to `settings`.
const TOP_LEVEL: &[&str] = &[
    "graph",
    "description",
    "recursion_limit",
    "durability",
    "interrupt_before",
    "interrupt_after",
    "settings",
    "retention",
];

/// What the top-level keys of a graph file take, in the words an error uses.
fn top_level_schema() -> SettingsSchema {
    let text = serde_json::json!({"type": "string"});
    let names = serde_json::json!({"type": "array", "items": {"type": "string"}});
    SettingsSchema::from_json(
        serde_json::json!({"type": "object", "properties": {
            "graph": text,
            "description": text,
            // A run of 0 steps would fail at its first: refused with the other mistakes.
            "recursion_limit": {"type": "integer", "minimum": 1},
            "durability": {"enum": ["sync", "async", "exit"]},
            "interrupt_before": names,
            "interrupt_after": names,
            "settings": {"type": "object"},
            "retention": {"type": "object"},
        }}),
        true,
    )
}

/// A graph file (`graphs/<name>.toml`): which registered graph it configures and how.
///
/// Unknown top-level keys are an error, so a misspelt `recursion_limt` is caught instead of
/// silently ignored. Free-form configuration goes under `[settings]`, which nodes read with
/// [`Context::setting`](stategraph::runtime::Context::setting).
///
/// ```
/// use stategraph_registry::GraphFile;
/// let file = GraphFile::parse(r#"
///     graph = "pipeline"
///     recursion_limit = 40
///     [settings]
///     step_ms = 10
/// "#, "inline", &[]).unwrap();
/// assert_eq!(file.run_config().recursion_limit, 40);
/// assert_eq!(file.settings["step_ms"], 10);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// The registered Rust graph this file configures.
    pub graph: String,
    /// One line saying what the graph does.
    #[serde(default)]
    pub description: String,
    /// Most supersteps per run (the engine's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion_limit: Option<u64>,
    /// When checkpoints reach the disk (sync when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
    /// Nodes every run pauses before.
    #[serde(default)]
    pub interrupt_before: Vec<String>,
    /// Nodes every run pauses after.
    #[serde(default)]
    pub interrupt_after: Vec<String>,
    /// Settings handed to nodes as run settings.
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
    /// When this graph's threads are deleted or pruned (`[retention]`, see [`sweep`](crate::sweep)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::RetentionPolicy>,
}

/// A graph file that cannot be read or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphFileError {
    /// The file is not valid TOML, or has a key or value it should not.
    #[error("graph file {origin}: {message}")]
    Invalid {
        /// Where the file came from (a path, or the graph's name for a built-in file).
        origin: String,
        /// What is wrong, with the line when known.
        message: String,
    },
    /// An override is not `KEY=VALUE` or cannot be applied.
    #[error("override `{}`: {message}", stategraph::quote::cut(text))]
    BadOverride {
        /// The override as given.
        text: String,
        /// What is wrong.
        message: String,
    },
}

/// One `KEY=VALUE` override of a graph file.
///
/// A key naming a top-level field (`recursion_limit`, `durability`...) sets it; any other key
/// goes into `[settings]`, with dots reaching into tables (`search.corpus=docs/` sets
/// `settings.search.corpus`). The value is read as a TOML value (`50`, `true`, `["a", "b"]`,
/// `"quoted"`), else as JSON, else taken as a plain string.
///
/// ```
/// use stategraph_registry::Override;
/// let o: Override = "search.max_results=5".parse().unwrap();
/// assert_eq!(o.key(), ["search", "max_results"]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    text: String,
    key: Vec<String>,
    value: toml::Value,
}

impl Override {
    /// The override as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The dotted key, split.
    pub fn key(&self) -> &[String] {
        &self.key
    }

    /// Checks the override against the graph's settings (or, for a top-level key such as
    /// `recursion_limit`, against what a graph file takes), before it is applied.
    pub(super) fn check(
        &self,
        graph: &str,
        settings: &SettingsSchema,
    ) -> Result<(), GraphFileError> {
        let value = serde_json::to_value(&self.value).unwrap_or(serde_json::Value::Null);
        let checked = match self.key.split_first() {
            Some((head, rest)) if head == "settings" => settings.check(rest, &value),
            Some((head, _)) if TOP_LEVEL.contains(&head.as_str()) => {
                top_level_schema().check(&self.key, &value)
            }
            _ => settings.check(&self.key, &value),
        };
        checked.map_err(|message| GraphFileError::BadOverride {
            text: self.text.clone(),
            message: format!("graph `{graph}`: {message}"),
        })
    }

    fn apply(&self, table: &mut toml::Table) -> Result<(), GraphFileError> {
        let bad = |message: String| GraphFileError::BadOverride {
            text: self.text.clone(),
            message,
        };
        let mut path: Vec<&str> = self.key.iter().map(String::as_str).collect();
        let head = path.first().copied().unwrap_or_default();
        if !TOP_LEVEL.contains(&head) {
            path.insert(0, "settings");
        } else if head != "settings" && path.len() > 1 {
            return Err(bad(format!("`{head}` is not a table")));
        }
        let (last, parents) = path.split_last().ok_or_else(|| bad("empty key".into()))?;
        let mut current = table;
        let mut walked = String::new();
        for part in parents {
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(part);
            let entry = current
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            current = match entry {
                toml::Value::Table(t) => t,
                other => {
                    return Err(bad(format!(
                        "`{walked}` is a {}, not a table",
                        other.type_str()
                    )))
                }
            };
        }
        current.insert(last.to_string(), self.value.clone());
        Ok(())
    }
}

impl std::str::FromStr for Override {
    type Err = GraphFileError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |message: &str| GraphFileError::BadOverride {
            text: text.to_string(),
            message: message.to_string(),
        };
        let (key, raw) = text
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE"))?;
        let key: Vec<String> = key
            .trim()
            .split('.')
            .map(|k| k.trim().to_string())
            .collect();
        if key.iter().any(String::is_empty) {
            return Err(bad("the key is empty or has an empty part between dots"));
        }
        Ok(Override {
            text: text.to_string(),
            key,
            value: parse_value(raw.trim()),
        })
    }
}

/// Reads an override's value: TOML, else JSON, else the text itself.
fn parse_value(raw: &str) -> toml::Value {
    if let Ok(mut t) = toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        if let Some(v) = t.remove("v") {
            // A bare date would become a TOML datetime, which has no JSON form nodes could read.
            if !matches!(v, toml::Value::Datetime(_)) {
                return v;
            }
        }
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(raw) {
        if let Ok(v) = toml::Value::try_from(json) {
            return v;
        }
    }
    toml::Value::String(raw.to_string())
}

/// Refuses a key at the top of a graph file that the file format does not have (`[limts]`),
/// with the key it most likely meant: a top-level one, or one of the graph's `settings`
/// (`known_settings`, dotted). Text that is not TOML is left to [`GraphFile::parse`].
pub(super) fn check_top_level(
    text: &str,
    origin: &str,
    known_settings: &[String],
) -> Result<(), GraphFileError> {
    let Ok(table) = toml::from_str::<toml::Table>(text) else {
        return Ok(());
    };
    let Some(key) = table.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) else {
        return check_top_level_values(&table, origin);
    };
    let mut known: Vec<String> = TOP_LEVEL.iter().map(|k| k.to_string()).collect();
    known.extend(known_settings.iter().map(|k| format!("settings.{k}")));
    let mut message = format!("there is no key `{key}` at the top of a graph file");
    if let Some(near) = stategraph::state::nearest(key, &known) {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    message.push_str(&format!(
        " (top-level keys: {}; the graph's own settings go under [settings])",
        TOP_LEVEL.join(", ")
    ));
    Err(GraphFileError::Invalid {
        origin: origin.to_string(),
        message,
    })
}

/// Refuses a top-level value of the wrong type (`recursion_limit = "x"`) in the words an
/// override's check uses, rather than serde's ("expected u64").
fn check_top_level_values(table: &toml::Table, origin: &str) -> Result<(), GraphFileError> {
    let schema = top_level_schema();
    for (key, value) in table {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        schema
            .check(std::slice::from_ref(key), &value)
            .map_err(|message| GraphFileError::Invalid {
                origin: origin.to_string(),
                message,
            })?;
    }
    Ok(())
}

impl GraphFile {
    /// Reads a graph file's text, then applies `overrides` in order. `origin` names the file in
    /// errors.
    pub fn parse(
        text: &str,
        origin: &str,
        overrides: &[Override],
    ) -> Result<GraphFile, GraphFileError> {
        let invalid = |message: String| GraphFileError::Invalid {
            origin: origin.to_string(),
            message,
        };
        // Decoding the text as written first keeps line numbers in the error.
        toml::from_str::<GraphFile>(text).map_err(|e| invalid(one_line(&e.to_string())))?;
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| invalid(one_line(&e.to_string())))?;
        for o in overrides {
            o.apply(&mut table)?;
        }
        GraphFile::deserialize(toml::Value::Table(table))
            .map_err(|e| invalid(format!("after the overrides: {}", one_line(&e.to_string()))))
    }

    /// The minimal file of a graph registered without one.
    pub fn bare(graph: &str) -> GraphFile {
        GraphFile {
            graph: graph.to_string(),
            ..GraphFile::default()
        }
    }

    /// A run configuration carrying this file's limits, durability and settings.
    pub fn run_config(&self) -> RunConfig {
        let mut config = RunConfig::new();
        if let Some(limit) = self.recursion_limit {
            config.recursion_limit = limit;
        }
        if let Some(d) = self.durability {
            config.durability = d;
        }
        config.settings = self.settings.clone();
        config
    }
}

/// toml's errors span several lines with a source excerpt; keep the first line and the
/// position, which is what a terminal user needs.
fn one_line(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let head = lines.next().unwrap_or_default().to_string();
    // The excerpt lines start with a line number and a pipe; the last line is the reason.
    let reason = message
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    if reason == head {
        head
    } else {
        format!("{head}: {reason}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
graph = "pipeline"
recursion_limit = 10
[settings]
model = "small"
search = { corpus = "docs" }
"#;

    #[test]
    fn overrides_reach_top_level_keys_and_nested_settings() {
        let sets: Vec<Override> = [
            "recursion_limit=50",
            "search.corpus=notes/",
            "yes=true",
            "model=gpt-4o",
            "n=[1, 2]",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let f = GraphFile::parse(FILE, "t.toml", &sets).unwrap();
        assert_eq!(f.recursion_limit, Some(50));
        assert_eq!(f.settings["search"]["corpus"], "notes/");
        assert_eq!(f.settings["yes"], true);
        assert_eq!(f.settings["model"], "gpt-4o");
        assert_eq!(f.settings["n"], serde_json::json!([1, 2]));
    }

    #[test]
    fn an_unknown_key_names_itself_and_the_file() {
        let err = GraphFile::parse("graph = \"x\"\nrecursion_limt = 3\n", "graphs/x.toml", &[])
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("graphs/x.toml") && text.contains("recursion_limt"),
            "{text}"
        );
    }

    #[test]
    fn an_override_through_a_plain_value_is_refused() {
        let o: Override = "model.name=x".parse().unwrap();
        let err = GraphFile::parse(FILE, "t.toml", &[o]).unwrap_err();
        assert!(
            err.to_string().contains("`settings.model` is a string"),
            "{err}"
        );
        assert!("novalue".parse::<Override>().is_err());
    }

    #[test]
    fn every_top_level_key_has_a_type() {
        let schema = top_level_schema();
        for key in TOP_LEVEL {
            let o: Override = format!("{key}=0.5").parse().unwrap();
            let err = o.check("g", &schema).unwrap_err().to_string();
            assert!(err.contains("expects"), "{key}: {err}");
        }
    }

    #[test]
    fn a_bad_value_for_a_typed_key_is_an_error() {
        let o: Override = "durability=sometimes".parse().unwrap();
        let err = GraphFile::parse(FILE, "t.toml", &[o]).unwrap_err();
        assert!(err.to_string().contains("sometimes"), "{err}");
    }
}
