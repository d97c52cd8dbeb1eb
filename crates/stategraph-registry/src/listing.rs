//! What can be run from a folder: every registered graph (as its name resolves there) and every
//! graph file of the folder's `graphs/`, each either ready or a file that cannot be used, with
//! what is wrong and on which line. One bad file never hides the others.

use super::{ErasedGraph, GraphFileError, Registry, RegistryError, Resolved};
use std::path::{Path, PathBuf};

/// The folder whose graph files a name resolves to first (see [`Registry::local_file`]).
const LOCAL_FOLDER: &str = "graphs";

/// A graph that can be run: by its registered name, or by the path of its file.
pub struct Listed {
    /// The registered name, or the path of a graph file that no name resolves to.
    pub name: String,
    /// The graph as it resolves (its file, its factory).
    pub resolved: Resolved,
    /// The graph built, unattached (for its nodes).
    pub graph: Box<dyn ErasedGraph>,
}

/// A graph file that cannot be used.
#[derive(Debug)]
pub struct BadFile {
    /// The registered graph it stands in for (`graphs/NAME.toml` of a registered `NAME`): that
    /// name cannot run here until the file is mended.
    pub shadows: Option<String>,
    /// The file (a graph's name for a built-in file).
    pub source: String,
    /// The line of the file the problem is on, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub error: RegistryError,
}

/// Every graph that can be run from a folder, and every graph file there that cannot.
pub struct Listing {
    /// Registered graphs by name, then the other graph files of `graphs/` by path.
    pub graphs: Vec<Listed>,
    /// In the same order.
    pub bad_files: Vec<BadFile>,
}

impl Registry {
    /// Every registered graph as its name resolves in the current folder, then every other
    /// graph file of `./graphs/` (by path): a file that cannot be read, parsed or built is a
    /// [`BadFile`] naming its line, and the rest are still listed.
    ///
    /// ```
    /// use stategraph_registry::Registry;
    /// let mut registry = Registry::new();
    /// registry.extend(stategraph_agents::builtin_factories());
    /// let listing = registry.listing();
    /// assert!(listing.graphs.iter().any(|g| g.name == "pipeline"));
    /// ```
    pub fn listing(&self) -> Listing {
        let mut listing = Listing {
            graphs: Vec::new(),
            bad_files: Vec::new(),
        };
        for factory in self.iter() {
            let name = factory.name().to_string();
            let source = Registry::local_file(&name).map(|p| p.display().to_string());
            listing.add(name.clone(), self.resolve(&name, &[]), source, Some(name));
        }
        for path in local_files() {
            let named = path
                .file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|stem| self.get(stem).is_some());
            if named {
                continue;
            }
            let shown = path.display().to_string();
            listing.add(shown.clone(), self.resolve(&shown, &[]), Some(shown), None);
        }
        listing
    }
}

impl Listing {
    fn add(
        &mut self,
        name: String,
        resolved: Result<Resolved, RegistryError>,
        source: Option<String>,
        shadows: Option<String>,
    ) {
        let built = resolved.and_then(|r| r.build(None).map(|graph| (r, graph)));
        match built {
            Ok((resolved, graph)) => self.graphs.push(Listed {
                name,
                resolved,
                graph,
            }),
            Err(error) => {
                let source = source.unwrap_or_else(|| name.clone());
                self.bad_files.push(BadFile {
                    line: line_of(&source, &error),
                    shadows: shadows.filter(|s| *s != source),
                    source,
                    error,
                })
            }
        }
    }
}

/// The `.toml` files of `./graphs/`, sorted; none when there is no such folder.
fn local_files() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(LOCAL_FOLDER) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| Path::new(LOCAL_FOLDER).join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    files
}

/// The line a problem of the file at `source` is on: the one TOML names ("at line N"), else
/// the line that sets the key the message names first (`` `key` ``), when the file has it.
fn line_of(source: &str, error: &RegistryError) -> Option<usize> {
    let message = match error {
        RegistryError::File(GraphFileError::Invalid { message, .. }) => message.clone(),
        other => other.to_string(),
    };
    if let Some(at) = message.find("at line ") {
        let digits: String = message[at + "at line ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return digits.parse().ok();
    }
    let key = message.split('`').nth(1)?.rsplit('.').next()?;
    let text = std::fs::read_to_string(source).ok()?;
    text.lines()
        .position(|line| {
            let line = line.trim_start().trim_start_matches('[').trim_start();
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(['=', ']', '.']))
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_tomls_or_the_named_keys() {
        let file = std::env::temp_dir().join(format!("listing-{}.toml", std::process::id()));
        std::fs::write(&file, "graph = \"x\"\n\n[limts]\nmax = 1\n").unwrap();
        let source = file.display().to_string();
        let invalid = |message: &str| {
            RegistryError::File(GraphFileError::Invalid {
                origin: source.clone(),
                message: message.to_string(),
            })
        };
        let parse = invalid("TOML parse error at line 7, column 3: invalid table header");
        assert_eq!(line_of(&source, &parse), Some(7));
        let key = invalid("there is no key `limts` at the top of a graph file");
        assert_eq!(line_of(&source, &key), Some(3));
        let elsewhere = invalid("there is no key `nowhere` at the top of a graph file");
        assert_eq!(line_of(&source, &elsewhere), None);
        std::fs::remove_file(&file).unwrap();
    }
}
