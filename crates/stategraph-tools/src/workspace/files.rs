//! `list_dir`, `read_file`, `write_file`, `edit_file`.

use std::io::Write as _;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::paths::{confine, shown};
use super::Workspace;
use crate::ToolFailure;

/// Arguments of `list_dir`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// The folder, relative to the workspace root (`.` for the root).
    #[serde(default)]
    pub path: Option<String>,
}

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// First line to read (1-based); from the start when absent.
    #[serde(default)]
    pub start_line: Option<usize>,
    /// Last line to read (inclusive); to the end when absent.
    #[serde(default)]
    pub end_line: Option<usize>,
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// The file, relative to the workspace root; missing folders are created.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The exact text to replace; it must occur exactly once in the file.
    pub old: String,
    /// The text to put in its place.
    pub new: String,
}

fn io_failure(what: &str, rel: &str, e: std::io::Error) -> ToolFailure {
    let hint = match e.kind() {
        std::io::ErrorKind::NotFound => " (it does not exist; use list_dir to see what does)",
        std::io::ErrorKind::PermissionDenied => " (permission denied)",
        _ => "",
    };
    ToolFailure(format!("cannot {what} `{rel}`: {e}{hint}"))
}

pub(crate) fn list_dir(ws: &Workspace, args: ListDirArgs) -> Result<String, ToolFailure> {
    let rel = args.path.unwrap_or_else(|| ".".into());
    let dir = confine(ws.root(), &rel)?;
    let mut entries: Vec<(String, bool, u64)> = std::fs::read_dir(&dir)
        .map_err(|e| io_failure("list", &rel, e))?
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = entry.metadata().ok();
            let is_dir = meta.as_ref().is_some_and(|m| m.is_dir());
            (name, is_dir, meta.map(|m| m.len()).unwrap_or(0))
        })
        .collect();
    entries.sort();
    let total = entries.len();
    let cap = ws.limits().max_list_entries;
    let mut out: Vec<String> = entries
        .iter()
        .take(cap)
        .map(|(name, is_dir, len)| {
            if *is_dir {
                format!("{name}/")
            } else {
                format!("{name} ({len} bytes)")
            }
        })
        .collect();
    if total == 0 {
        out.push(format!("`{}` is empty", shown(ws.root(), &dir)));
    } else if total > cap {
        out.push(format!("... and {} more entries", total - cap));
    }
    Ok(out.join("\n"))
}

pub(crate) fn read_file(ws: &Workspace, args: ReadFileArgs) -> Result<String, ToolFailure> {
    let path = confine(ws.root(), &args.path)?;
    if path.is_dir() {
        return Err(ToolFailure(format!(
            "`{}` is a folder; use list_dir to see its files",
            args.path
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| io_failure("read", &args.path, e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolFailure(format!("`{}` is not a UTF-8 text file", args.path)))?;
    let lines: Vec<&str> = text.lines().collect();
    let start = args.start_line.unwrap_or(1).max(1);
    let end = args.end_line.unwrap_or(lines.len()).min(lines.len());
    if start > lines.len().max(1) || (args.end_line.is_some() && end < start) {
        return Err(ToolFailure(format!(
            "lines {start}..{} are not in `{}`, which has {} lines",
            args.end_line.unwrap_or(start),
            args.path,
            lines.len()
        )));
    }
    let cap = ws.limits().max_read_bytes;
    let mut out = String::new();
    let mut last = start.saturating_sub(1);
    for (i, line) in lines.iter().enumerate().take(end).skip(start - 1) {
        if out.len() + line.len() + 1 > cap {
            break;
        }
        out.push_str(line);
        out.push('\n');
        last = i + 1;
    }
    if last < end {
        out.push_str(&format!(
            "[cut at {cap} bytes: lines {start}-{last} of {} shown; read from line {} with \
             start_line]\n",
            lines.len(),
            last + 1
        ));
    }
    Ok(out)
}

/// Writes `content` to `path` so that a reader (or a crash) sees the old file or the new one,
/// never half of it: a temporary file in the same folder, flushed, then renamed over.
pub(crate) fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".write-")
        .tempfile_in(dir)?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Keep the old file's mode (an executable script stays executable).
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

pub(crate) fn write_file(ws: &Workspace, args: WriteFileArgs) -> Result<String, ToolFailure> {
    let path = confine(ws.root(), &args.path)?;
    if path.is_dir() {
        return Err(ToolFailure(format!("`{}` is a folder", args.path)));
    }
    let existed = path.exists();
    write_atomic(&path, args.content.as_bytes()).map_err(|e| io_failure("write", &args.path, e))?;
    Ok(format!(
        "{} `{}` ({} bytes, {} lines)",
        if existed { "overwrote" } else { "created" },
        shown(ws.root(), &path),
        args.content.len(),
        args.content.lines().count()
    ))
}

pub(crate) fn edit_file(ws: &Workspace, args: EditFileArgs) -> Result<String, ToolFailure> {
    let path = confine(ws.root(), &args.path)?;
    let text = std::fs::read_to_string(&path).map_err(|e| io_failure("edit", &args.path, e))?;
    if args.old.is_empty() {
        return Err(ToolFailure(
            "`old` is empty; give the exact text to replace (use write_file to write a whole file)"
                .into(),
        ));
    }
    let count = text.matches(&args.old).count();
    match count {
        0 => Err(ToolFailure(format!(
            "`old` does not occur in `{}`; read the file again and copy the exact text, \
             including whitespace",
            args.path
        ))),
        1 => {
            let edited = text.replacen(&args.old, &args.new, 1);
            write_atomic(&path, edited.as_bytes())
                .map_err(|e| io_failure("write", &args.path, e))?;
            let line = text[..text.find(&args.old).unwrap_or(0)]
                .matches('\n')
                .count()
                + 1;
            Ok(format!(
                "edited `{}` at line {line}",
                shown(ws.root(), &path)
            ))
        }
        n => Err(ToolFailure(format!(
            "`old` occurs {n} times in `{}`; include more surrounding text so it is unique",
            args.path
        ))),
    }
}
