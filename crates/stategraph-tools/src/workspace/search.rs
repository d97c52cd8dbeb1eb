//! `search_files`: a regex over the workspace's text files, honouring `.gitignore`.

use std::io::BufRead as _;

use schemars::JsonSchema;
use serde::Deserialize;

use super::paths::{confine, shown};
use super::Workspace;
use crate::ToolFailure;

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchFilesArgs {
    /// A regular expression (Rust regex syntax), matched against each line.
    pub pattern: String,
    /// A folder or file to search, relative to the workspace root; the whole workspace when
    /// absent.
    #[serde(default)]
    pub path: Option<String>,
}

pub(crate) fn search_files(ws: &Workspace, args: SearchFilesArgs) -> Result<String, ToolFailure> {
    let regex = regex::Regex::new(&args.pattern).map_err(|e| {
        ToolFailure(format!(
            "`{}` is not a valid regular expression: {e}",
            args.pattern
        ))
    })?;
    let rel = args.path.clone().unwrap_or_else(|| ".".into());
    let start = confine(ws.root(), &rel)?;
    if !start.exists() {
        return Err(ToolFailure(format!(
            "`{rel}` does not exist; use list_dir to see what does"
        )));
    }
    let cap = ws.limits().max_search_results;
    let mut hits = Vec::new();
    let mut more = 0usize;
    // `.gitignore` applies even outside a git repository; hidden files are skipped, as git
    // tools do; symlinks are not followed, so nothing outside the workspace is read.
    let walker = ignore::WalkBuilder::new(&start)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    for entry in walker.filter_map(Result::ok) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(file) = std::fs::File::open(entry.path()) else {
            continue;
        };
        let name = shown(ws.root(), entry.path());
        for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
            // A line that is not UTF-8 means a binary file: skip the rest of it.
            let Ok(line) = line else { break };
            if regex.is_match(&line) {
                if hits.len() < cap {
                    let shown_line: String = line.chars().take(300).collect();
                    hits.push(format!("{name}:{}: {shown_line}", n + 1));
                } else {
                    more += 1;
                }
            }
        }
    }
    if hits.is_empty() {
        return Ok(format!("no line matches `{}` under `{rel}`", args.pattern));
    }
    if more > 0 {
        hits.push(format!(
            "... and {more} more matches; narrow the pattern or the path"
        ));
    }
    Ok(hits.join("\n"))
}
