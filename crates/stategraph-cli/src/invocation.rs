//! How the command was started, for the follow-up commands it prints (`graph resume ID --db
//! DIR`): the program's name, where `--db` (or `GRAPH_DB`, or the default) says the threads
//! are, and whether `--db` was on the command line. It is known before any store is opened, so
//! the commands that read no thread (`graph graphs`, `graph draw`) open none: a database that
//! is down or a key that does not fit does not stop them.

use crate::error::bad_input;
use crate::shell_quote;
use crate::store::DbArg;
use std::path::PathBuf;

pub(crate) struct Invocation {
    /// The name the program was started as.
    pub bin: String,
    /// Where `--db` (or `GRAPH_DB`, or the default) says the threads are.
    pub db: DbArg,
    /// `--db` as given on the command line, when follow-up commands must repeat it (as
    /// [`DbArg::shown`] says it: never with a password).
    pub db_flag: Option<PathBuf>,
}

impl Invocation {
    /// `db` is `--db` or `GRAPH_DB`, `explicit_db` whether it came from the command line.
    pub(crate) fn new(
        bin: String,
        db: Option<&PathBuf>,
        explicit_db: bool,
    ) -> anyhow::Result<Invocation> {
        let place = match db {
            Some(p) => DbArg::parse(p.clone()),
            None => DbArg::Folder(dirs::data_dir().map(|d| d.join("stategraph")).ok_or_else(
                || {
                    bad_input(
                        "this system has no user data directory: pass --db PATH or set GRAPH_DB",
                    )
                },
            )?),
        };
        let db_flag = if explicit_db { db.cloned() } else { None };
        if db_flag.is_some() && place.has_password() {
            say!(
                "note: a password given with --db can be read by other users of this machine \
                 (ps) and stays in your shell's history; keep the URL in GRAPH_DB instead \
                 (the commands printed here name it as \"$GRAPH_DB\")"
            );
        }
        Ok(Invocation {
            bin,
            db: place,
            db_flag,
        })
    }

    /// A follow-up command, ready to paste: `graph <words> [--db PATH]`.
    pub(crate) fn command_line(&self, words: &[&str]) -> String {
        self.command_line_with(words, "")
    }

    /// Like [`Invocation::command_line`], with `tail` (already quoted, may hold placeholders)
    /// after the words.
    pub(crate) fn command_line_with(&self, words: &[&str], tail: &str) -> String {
        let mut parts = vec![shell_quote(&self.bin)];
        parts.extend(words.iter().map(|w| shell_quote(w)));
        if !tail.is_empty() {
            parts.push(tail.to_string());
        }
        if self.db_flag.is_some() {
            parts.push("--db".to_string());
            parts.push(self.db.shown());
        }
        parts.join(" ")
    }
}
