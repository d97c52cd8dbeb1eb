//! What `--db` (or `GRAPH_DB`) names, and how the follow-up command lines the CLI prints repeat
//! it: a path as given, a Postgres URL without its password. A URL that holds a password is
//! repeated as `--db "$GRAPH_DB"`, so a password never reaches the terminal, a log or a
//! shell's history from what the CLI prints (the user is told to keep it in `GRAPH_DB`).

use std::path::PathBuf;

/// Where `--db` says the threads are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DbArg {
    /// A directory of threads (the embedded store).
    Folder(PathBuf),
    /// A Postgres connection URL (`postgres://` or `postgresql://`).
    Postgres(String),
}

impl DbArg {
    /// Reads `--db`: a `postgres://` or `postgresql://` URL, else a path.
    pub(crate) fn parse(value: PathBuf) -> DbArg {
        match value.to_str() {
            Some(text) if is_postgres_url(text) => DbArg::Postgres(text.to_string()),
            _ => DbArg::Folder(value),
        }
    }

    /// The value to repeat after `--db` in a printed command line, already quoted for a shell.
    pub(crate) fn shown(&self) -> String {
        match self {
            DbArg::Folder(path) => crate::shell_quote(&path.to_string_lossy()),
            DbArg::Postgres(url) if has_password(url) => "\"$GRAPH_DB\"".to_string(),
            DbArg::Postgres(url) => crate::shell_quote(url),
        }
    }

    /// True for a Postgres URL that holds a password.
    pub(crate) fn has_password(&self) -> bool {
        matches!(self, DbArg::Postgres(url) if has_password(url))
    }
}

fn is_postgres_url(text: &str) -> bool {
    let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// Whether a Postgres URL carries a password: `user:password@` before the host, or a
/// `password=` parameter.
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, query) = match rest.split_once('?') {
        Some((before, query)) => (before, query),
        None => (rest, ""),
    };
    // The authority ends at the first '/' after the last '@' (a password may hold a '/').
    let in_userinfo = authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'));
    let in_query = query
        .split('&')
        .any(|pair| pair.to_ascii_lowercase().starts_with("password="));
    in_userinfo || in_query
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_databases_and_the_rest_paths() {
        let pg = DbArg::parse(PathBuf::from("postgresql://app@db/agents"));
        assert_eq!(pg, DbArg::Postgres("postgresql://app@db/agents".into()));
        let upper = DbArg::parse(PathBuf::from("POSTGRES://app@db/agents"));
        assert!(matches!(upper, DbArg::Postgres(_)));
        let dir = DbArg::parse(PathBuf::from("./postgres/threads"));
        assert_eq!(dir, DbArg::Folder(PathBuf::from("./postgres/threads")));
    }

    #[test]
    fn a_password_is_never_repeated() {
        let with = DbArg::Postgres("postgres://app:s3cr/t@127.0.0.1:5432/agents".into());
        assert_eq!(with.shown(), "\"$GRAPH_DB\"");
        assert!(with.has_password());
        let query = DbArg::Postgres("postgres://app@h/agents?sslmode=require&password=x".into());
        assert_eq!(query.shown(), "\"$GRAPH_DB\"");
        let without = DbArg::Postgres("postgres://app@127.0.0.1:5432/agents".into());
        assert_eq!(without.shown(), "postgres://app@127.0.0.1:5432/agents");
        assert!(!without.has_password());
        let port_only = DbArg::Postgres("postgres://127.0.0.1:5432/agents".into());
        assert!(!port_only.has_password());
    }
}
