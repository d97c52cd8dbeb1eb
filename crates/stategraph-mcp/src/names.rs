//! A server's tool under two names: the one people read and write in settings
//! (`fs.read_file`: server, a dot, the tool's own name) and the one the model calls on the wire
//! (`fs__read_file`).
//!
//! Why two: OpenAI's and Anthropic's APIs accept tool names of `[a-zA-Z0-9_-]` only, at most 64
//! characters, so a dot cannot go on the wire, while MCP tool names may also hold `.` and `/`.
//! The wire name is the server's name, `__`, and the tool's name with every other character
//! made `_`; a name past 64 characters is cut and ends with a hash of the whole, so it stays the
//! same from one run to its resume (the conversation stores it). Server names are letters,
//! digits, `-` and single `_` inside the name, so the first `__` of a wire name always ends the
//! server's part and two servers never make the same wire name.
//!
//! ```
//! use stategraph_mcp::names::{display_name, wire_name};
//! assert_eq!(wire_name("fs", "read_file"), "fs__read_file");
//! assert_eq!(wire_name("docs", "search.v2/all"), "docs__search_v2_all");
//! assert_eq!(display_name("fs", "read_file"), "fs.read_file");
//! ```

use crate::error::McpError;

/// The longest tool name model APIs accept (OpenAI's limit; Anthropic's is the same or more).
pub const MAX_WIRE_NAME: usize = 64;

/// What joins the server's name and the tool's on the wire.
pub const WIRE_SEPARATOR: &str = "__";

/// The name the model calls `tool` of `server` by: `server__tool`, characters outside
/// `[a-zA-Z0-9_-]` made `_`, at most [`MAX_WIRE_NAME`] characters.
pub fn wire_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{server}{WIRE_SEPARATOR}{clean}");
    if full.len() <= MAX_WIRE_NAME {
        return full;
    }
    // Cut, and told apart by a hash of the original: stable across processes and versions.
    let hash = format!(
        "{:08x}",
        fnv1a(format!("{server}.{tool}").as_bytes()) as u32
    );
    let keep = MAX_WIRE_NAME - hash.len() - 1;
    format!("{}_{hash}", &full[..keep])
}

/// The name people read: `server.tool`.
pub fn display_name(server: &str, tool: &str) -> String {
    format!("{server}.{tool}")
}

/// Checks that `name` can name a server: 1-32 of letters, digits, `-`, and `_` that neither
/// starts, ends nor doubles.
///
/// ```
/// use stategraph_mcp::names::check_server_name;
/// assert!(check_server_name("my_fs-2").is_ok());
/// assert!(check_server_name("my__fs").is_err());
/// assert!(check_server_name("fs.local").is_err());
/// ```
pub fn check_server_name(name: &str) -> Result<(), McpError> {
    let fits = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.starts_with('_')
        && !name.ends_with('_')
        && !name.contains(WIRE_SEPARATOR);
    if fits {
        Ok(())
    } else {
        Err(McpError::Setting {
            server: name.to_string(),
            message: "a server's name prefixes its tools' names, so it must be 1 to 32 letters, \
                      digits, `-` or `_` (not at either end, never two `_` in a row)"
                .into(),
        })
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_to_the_limit_and_stay_distinct_and_stable() {
        let a = wire_name("server", &"x".repeat(100));
        let b = wire_name("server", &format!("{}y", "x".repeat(99)));
        assert_eq!(a.len(), MAX_WIRE_NAME);
        assert_ne!(a, b);
        assert_eq!(a, wire_name("server", &"x".repeat(100)));
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }

    #[test]
    fn servers_whose_names_share_a_prefix_never_share_a_wire_name() {
        // `fs` + `_x` and `fs_` + `x` would both be `fs___x`; `fs_` is not a server name.
        assert!(check_server_name("fs_").is_err());
        assert_ne!(wire_name("fs", "_x"), wire_name("fs-", "x"));
    }
}
