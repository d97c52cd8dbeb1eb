//! `graphs` and `draw`: what can be run, and what it looks like.

use crate::args::{DrawArgs, FormatArg};
use crate::error::{bad_input, EXIT_DONE};
use crate::{out, Ctx};
use serde_json::{json, Value};
use stategraph_registry::DrawFormat;

/// `graph graphs`.
pub(crate) fn graphs(ctx: &Ctx, json: bool) -> anyhow::Result<u8> {
    let mut list = Vec::new();
    for factory in ctx.registry.iter() {
        let resolved = ctx.registry.resolve(factory.name(), &[])?;
        let graph = resolved.build(None)?;
        list.push(json!({
            "name": factory.name(),
            "description": if resolved.file.description.is_empty() { factory.description() } else { &resolved.file.description },
            "input_field": factory.input_field(),
            "output_field": factory.output_field(),
            "nodes": graph.node_names(),
            "settings": resolved.file.settings,
            "source": resolved.path.as_ref().map(|p| p.display().to_string()),
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
    let width = list
        .iter()
        .filter_map(|g| g["name"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(4)
        .max(4);
    for g in &list {
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

/// `graph draw`.
pub(crate) fn draw(ctx: &Ctx, args: DrawArgs) -> anyhow::Result<u8> {
    let resolved = ctx.registry.resolve(&args.graph, &[])?;
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
