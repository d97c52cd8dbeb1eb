//! The node cache through the command line, in real processes: a second `graph run` with the
//! same input is served the first run's result (another process's), `graph history` and
//! `--stream updates` mark the hit, `--no-cache` runs the node, `graph cache clear` empties the
//! cache by graph and node, and a damaged entry is a miss reported in the log.
//!
//! The built-in graphs cache nothing, so the commands run in a child process that is this test
//! binary again (the hidden `cli_child` test) with a `lookup` graph registered, as a user's own
//! binary would. Its `fetch` node writes the id of the process that ran it: a result served
//! from the cache names the process that stored it.

use crate::own_binary;
use crate::pg_cluster;

use own_binary::Out;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stategraph::graph::{CachePolicy, CompiledGraph};
use stategraph::runtime::Context;
use stategraph::{State, StateGraph, END, START};
use stategraph_registry::{BuildError, GraphFactory, GraphFile};
use std::path::Path;
use std::sync::Arc;

const CHILD_ENV: &str = "STATEGRAPH_CLI_CACHE_ARGS";

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Lookup {
    query: String,
    #[state(append)]
    fetched: Vec<String>,
}

struct LookupFactory;

impl GraphFactory for LookupFactory {
    type State = Lookup;

    fn name(&self) -> &str {
        "lookup"
    }

    fn description(&self) -> &str {
        "fetches a query, cached"
    }

    fn input_field(&self) -> Option<&str> {
        Some("query")
    }

    fn build(&self, _file: &GraphFile) -> Result<CompiledGraph<Lookup>, BuildError> {
        let mut g = StateGraph::<Lookup>::named("lookup");
        g.add_node("fetch", |s: Arc<Lookup>, _c: Context| async move {
            let by = std::process::id();
            Ok(LookupUpdate::default().fetched(vec![format!("{} by {by}", s.query)]))
        })
        .cache(CachePolicy::new());
        g.add_node("echo", |s: Arc<Lookup>, _c: Context| async move {
            Ok(LookupUpdate::default().fetched(vec![format!("echo {}", s.fetched.len())]))
        });
        g.add_edge(START, "fetch")
            .add_edge("fetch", "echo")
            .add_edge("echo", END);
        Ok(g.compile()?)
    }
}

#[test]
#[ignore = "a child process of the cli_cache tests, started by them"]
fn cli_child() {
    own_binary::run_if_child(CHILD_ENV, || {
        stategraph_cli::App::new().register(LookupFactory)
    });
}

/// `graph --db DB ARGS...` with `lookup` registered, expecting exit `code`.
fn graph(db: &Path, args: &[&str], code: i32) -> Out {
    let out = own_binary::graph_at("cli_cache::cli_child", CHILD_ENV, db, args);
    assert_eq!(out.code, code, "graph {args:?}\n{out}");
    out
}

/// Runs `lookup` on `query` as thread `thread`; returns what `fetch` wrote.
fn run(db: &Path, thread: &str, query: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "run", "lookup", "--input", query, "--thread", thread, "--json",
    ];
    args.extend_from_slice(extra);
    graph(db, &args, 0);
    fetched(db, thread)
}

fn fetched(db: &Path, thread: &str) -> String {
    let state: Value =
        serde_json::from_str(&graph(db, &["state", thread, "--json"], 0).stdout).unwrap();
    state["values"]["fetched"][0].as_str().unwrap().to_string()
}

#[test]
fn a_second_process_is_served_the_first_ones_result_until_the_cache_is_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path();
    let first = run(db, "t1", "rust", &[]);
    assert!(first.starts_with("rust by "), "{first}");
    assert_eq!(run(db, "t2", "rust", &[]), first, "served from the cache");

    let history = graph(db, &["history", "t2"], 0).stdout;
    assert!(history.contains("fetch (cached)"), "{history}");
    let first_history = graph(db, &["history", "t1"], 0).stdout;
    assert!(!first_history.contains("(cached)"), "{first_history}");
    let json: Value =
        serde_json::from_str(&graph(db, &["history", "t2", "--json"], 0).stdout).unwrap();
    let marked: Vec<&Value> = json
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cached"] == serde_json::json!(["fetch"]))
        .collect();
    assert_eq!(marked.len(), 1, "{json:#}");

    // The updates stream marks the hit too.
    let streamed = graph(
        db,
        &[
            "run", "lookup", "--input", "rust", "--thread", "t3", "--stream", "updates",
        ],
        0,
    )
    .stdout;
    let fetch_update = streamed
        .lines()
        .find(|l| l.contains("\"fetch\""))
        .unwrap_or_else(|| panic!("no update of fetch in {streamed}"));
    assert!(fetch_update.contains("\"cached\":true"), "{fetch_update}");

    let bypassed = run(db, "t4", "rust", &["--no-cache"]);
    assert_ne!(bypassed, first, "--no-cache ran the node");
    assert_eq!(run(db, "t5", "rust", &[]), first, "and stored nothing");
    assert_ne!(run(db, "t6", "go", &[]), first, "another input is a miss");

    let cleared = graph(db, &["cache", "clear", "lookup", "--node", "fetch"], 0).stdout;
    assert!(
        cleared.contains("removed 2 cached results of node fetch of graph lookup"),
        "{cleared}"
    );
    let again = run(db, "t7", "rust", &[]);
    assert_ne!(again, first, "a cleared cache runs the node");
    let cleared: Value =
        serde_json::from_str(&graph(db, &["cache", "clear", "--json"], 0).stdout).unwrap();
    assert_eq!(cleared["removed"], 1);
}

#[test]
fn a_damaged_entry_is_a_miss_reported_in_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path();
    let first = run(db, "t1", "rust", &[]);
    assert_eq!(
        stategraph_sled::tamper_cache_entries(&db.join("cache")).unwrap(),
        1
    );
    let out = graph(
        db,
        &[
            "run", "lookup", "--input", "rust", "--thread", "t2", "--json",
        ],
        0,
    );
    assert!(
        out.stderr.contains("damaged"),
        "the damage is logged: {out}"
    );
    let second = fetched(db, "t2");
    assert_ne!(second, first, "the damaged entry was not served");
    assert_eq!(
        run(db, "t3", "rust", &[]),
        second,
        "the new result replaced it"
    );
}

/// `graph --db URL ARGS...` with `lookup` registered, its files in `out`.
fn graph_pg(url: &str, out: &Path, args: &[&str]) -> Out {
    let mut all = vec!["--db".to_string(), url.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(own_binary::child_test_args("cli_cache::cli_child"))
        .env(CHILD_ENV, own_binary::command_line(&all))
        .env_remove("GRAPH_DB")
        .env_remove("RUST_LOG")
        .env("GRAPH_OUT", out)
        .env("XDG_DATA_HOME", out.join("data-home"))
        .output()
        .unwrap();
    let out = Out {
        code: output.status.code().unwrap_or(-1),
        stdout: own_binary::after_mark(&String::from_utf8_lossy(&output.stdout)).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    };
    assert_eq!(out.code, 0, "graph {args:?}\n{out}");
    out
}

#[test]
fn a_postgres_store_shares_its_cache_between_processes() {
    let db = pg_cluster::cluster().database();
    let tmp = tempfile::tempdir().unwrap();
    let fetched = |thread: &str| {
        let out = graph_pg(db.url(), tmp.path(), &["state", thread, "--json"]);
        let state: Value = serde_json::from_str(&out.stdout).unwrap();
        state["values"]["fetched"][0].as_str().unwrap().to_string()
    };
    let run = |thread: &str, extra: &[&str]| {
        let mut args = vec![
            "run", "lookup", "--input", "rust", "--thread", thread, "--json",
        ];
        args.extend_from_slice(extra);
        graph_pg(db.url(), tmp.path(), &args);
        fetched(thread)
    };
    let first = run("p1", &[]);
    assert_eq!(run("p2", &[]), first, "served from the database's cache");
    let history = graph_pg(db.url(), tmp.path(), &["history", "p2"]).stdout;
    assert!(history.contains("fetch (cached)"), "{history}");
    assert_ne!(run("p3", &["--no-cache"]), first);
    let cleared = graph_pg(db.url(), tmp.path(), &["cache", "clear", "--json"]).stdout;
    assert_eq!(
        serde_json::from_str::<Value>(&cleared).unwrap()["removed"],
        1
    );
    assert_ne!(run("p4", &[]), first, "a cleared cache runs the node");
}
