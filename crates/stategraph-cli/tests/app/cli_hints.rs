//! The command lines the CLI adds to the library's errors: the library says what is wrong and
//! what mends it in its own words (`as_node`, a setting); the CLI names the command that does
//! it. (The recursion limit's is in `cli_run.rs`, the artifacts' `--restore` in
//! `cli_artifacts_stale.rs` and `memo_files.rs`, a node's setting in `memo_run.rs`.)
//!
//! An ambiguous edit needs a step that two nodes wrote, which no built-in graph has: these
//! commands run in a child process that is this test binary again (`current_exe`, the hidden
//! `cli_child` test) running the `graph` app with a `fan` graph registered, as a user's own
//! binary would.

use crate::own_binary;

use own_binary::Out;
use serde::{Deserialize, Serialize};
use stategraph::graph::CompiledGraph;
use stategraph::runtime::{Context, NodeError};
use stategraph::{State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::path::Path;
use std::sync::Arc;

const CHILD_ENV: &str = "STATEGRAPH_CLI_HINTS_ARGS";

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Fan {
    #[state(append)]
    log: Vec<String>,
}

/// `a` and `b` run in the same step, then `c`.
struct FanFactory;

impl GraphFactory for FanFactory {
    type State = Fan;

    fn name(&self) -> &str {
        "fan"
    }

    fn description(&self) -> &str {
        "two nodes in one step, then a third"
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Fan>, BuildError> {
        let mut g = StateGraph::<Fan>::named("fan");
        for name in ["a", "b", "c"] {
            g.add_node(name, move |_s: Arc<Fan>, _c: Context| async move {
                Ok::<_, NodeError>(FanUpdate::default().log(vec![name.to_string()]))
            });
        }
        g.add_edge(START, "a")
            .add_edge(START, "b")
            .add_edge("a", "c")
            .add_edge("b", "c")
            .add_edge("c", END);
        Ok(g.compile()?)
    }

    fn preflight(&self, file: &GraphFile) -> Result<(), BuildError> {
        match file.settings.get("label") {
            Some(_) => Ok(()),
            None => Err(BuildError::Setting {
                key: "label".into(),
                message: "every run of fan is labelled, and none is set".into(),
            }),
        }
    }
}

#[test]
#[ignore = "a child process of the cli_hints tests, started by them"]
fn cli_child() {
    own_binary::run_if_child(CHILD_ENV, || {
        stategraph_cli::App::new().register(FanFactory)
    });
}

/// `graph --db DB ARGS...` with `fan` registered, expecting exit `code`.
fn expect(db: &Path, args: &[&str], code: i32) -> Out {
    let out = own_binary::graph_at("cli_hints::cli_child", CHILD_ENV, db, args);
    assert_eq!(out.code, code, "graph {args:?}\n{out}");
    out
}

#[test]
fn an_ambiguous_edit_is_refused_with_the_update_that_names_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    let run = [
        "run",
        "fan",
        "--thread",
        "t",
        "--input-json",
        r#"{"log": []}"#,
        "--interrupt-before",
        "c",
        "--set",
        "label=first",
    ];
    expect(db, &run, 3);

    // `a` and `b` wrote the last step: the library says to name the node (as_node), the CLI
    // says with which command line.
    let refused = expect(db, &["update", "t", "--set-json", "{}"], 2);
    for needle in [
        "the edit of thread `t` is ambiguous: `a` and `b` wrote last",
        "say which node the edit stands for with --as-node (a or b)",
        "update t --set-json <JSON> --as-node a",
    ] {
        assert!(refused.stderr.contains(needle), "{needle:?} in:\n{refused}");
    }
    expect(
        db,
        &["update", "t", "--set-json", "{}", "--as-node", "b"],
        0,
    );
}

#[test]
fn a_missing_setting_says_how_to_set_it() {
    let dir = tempfile::tempdir().unwrap();
    let refused = expect(
        dir.path(),
        &["run", "fan", "--input-json", r#"{"log": []}"#],
        2,
    );
    for needle in [
        "setting `label`: every run of fan is labelled, and none is set",
        "set it with --set label=<VALUE> (or in the graph file)",
    ] {
        assert!(refused.stderr.contains(needle), "{needle:?} in:\n{refused}");
    }
}
