//! `graphs` and `draw`: what can be run, and what it looks like.

use crate::args::{DrawArgs, FormatArg};
use crate::error::{bad_input, EXIT_DONE};
use crate::invocation::Invocation;
use crate::out;
use serde_json::{json, Value};
use stategraph_registry::{DrawFormat, GraphFileError, Registry, RegistryError};

/// `graph graphs`: every registered graph as its name resolves here, then the other graph
/// files of `./graphs/` by path. A graph file that cannot be used is named with its line on
/// stderr (and as a row with its `error` in `--json`), and the rest are listed: exit 0, as
/// `graph threads` lists damaged threads beside the others. The listing did its job; the
/// warning says which file to mend, and `graph run` of that graph refuses it with exit 2.
pub(crate) fn graphs(
    registry: &Registry,
    invocation: &Invocation,
    json: bool,
) -> anyhow::Result<u8> {
    let listing = registry.listing();
    let mut list = Vec::new();
    for g in &listing.graphs {
        let (resolved, factory) = (&g.resolved, &g.resolved.factory);
        list.push(json!({
            "name": g.name,
            "description": if resolved.file.description.is_empty() { factory.description() } else { &resolved.file.description },
            "input_field": factory.input_field(),
            "output_field": factory.output_field(),
            "nodes": g.graph.node_names(),
            "settings": resolved.file.settings,
            "source": resolved.path.as_ref().map(|p| p.display().to_string()),
        }));
    }
    for bad in &listing.bad_files {
        let at = bad.line.map(|l| format!(":{l}")).unwrap_or_default();
        let mut warning = format!("warning: {}{at}: {}", bad.source, with_causes(&bad.error));
        if let Some(name) = &bad.shadows {
            warning.push_str(&format!(
                " (`{}` here uses {}: mend it, or remove it to run the built-in copy)",
                invocation.command_line(&["run", name]),
                bad.source
            ));
        }
        say!("{warning}");
        list.push(json!({
            "name": bad.shadows.as_deref().unwrap_or(&bad.source),
            "source": bad.source,
            "line": bad.line,
            "error": with_causes(&bad.error),
        }));
    }
    if json {
        out(&format!("{:#}", Value::Array(list)));
        return Ok(EXIT_DONE);
    }
    if list.is_empty() {
        say!("no graphs are registered in this binary");
        return Ok(EXIT_DONE);
    }
    let good = &list[..listing.graphs.len()];
    let width = good
        .iter()
        .filter_map(|g| g["name"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(4)
        .max(4);
    for g in good {
        let input = match g["input_field"].as_str() {
            Some(f) => format!(" (--input fills `{f}`)"),
            None => String::new(),
        };
        let source = g["source"].as_str().unwrap_or("built-in");
        out(&format!(
            "{:<width$}  {}{input} [{source}]",
            g["name"].as_str().unwrap_or_default(),
            g["description"].as_str().unwrap_or_default()
        ));
    }
    Ok(EXIT_DONE)
}

/// A registry error with its causes, as one line; a graph file's own error without the file's
/// name, which the line it is printed on starts with.
fn with_causes(e: &RegistryError) -> String {
    if let RegistryError::File(GraphFileError::Invalid { message, .. }) = e {
        return message.clone();
    }
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// `graph draw`.
pub(crate) fn draw(registry: &Registry, args: &DrawArgs) -> anyhow::Result<u8> {
    let resolved = registry.resolve(&args.graph, &[])?;
    let graph = resolved.build(None)?;
    let format = match args.format {
        FormatArg::Mermaid => DrawFormat::Mermaid,
        FormatArg::Dot => DrawFormat::Dot,
    };
    // `--xray` alone expands every level; drawing stops where the graphs do.
    let xray = match args.xray {
        None => 0,
        Some(None) => usize::MAX,
        Some(Some(levels)) => levels,
    };
    if xray > 0 && format == DrawFormat::Dot {
        return Err(bad_input(
            "--xray draws subgraphs as Mermaid blocks only: drop --format dot (or --xray)",
        ));
    }
    out(graph.draw(format, xray).trim_end());
    Ok(EXIT_DONE)
}
