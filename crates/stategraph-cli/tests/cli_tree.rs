//! The task-tree workflow through the real `graph` binary, against a stand-in OpenAI-compatible
//! server on 127.0.0.1: `graph decompose` writes the files and pauses, a person edits them,
//! `graph tree` shows them, `graph solve` solves them leaves first and picks up every edit; a
//! kill -9 or a Ctrl+C in the middle loses nothing that was paid for. No network, no key.

#[path = "../../../tests/support/fake_openai.rs"]
mod fake_openai;
#[path = "../../../tests/support/cli.rs"]
mod harness;
#[path = "../../../tests/support/task_plans.rs"]
mod task_plans;

use fake_openai::{tool_calls, Call, FakeOpenAi};
use harness::{Db, TestCommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use task_plans::{task_plan, Child};

const ROOT: &str = "web_scraper.md";
const FETCH: &str = "web_scraper_children/fetch.md";
const PARSE: &str = "web_scraper_children/parse.md";
const EXTRACT: &str = "web_scraper_children/extract.md";
const SELECTORS: &str = "web_scraper_children/extract_children/selectors.md";
const FIELDS: &str = "web_scraper_children/extract_children/fields.md";
const REPORT: &str = "web_scraper_children/report.md";
const CSV: &str = "web_scraper_children/report_children/csv.md";
const SUMMARY: &str = "web_scraper_children/report_children/summary.md";

/// The model's decomposition of each task.
fn plan_for(task: &str) -> Value {
    let children: &[Child] = match task {
        ROOT => &[
            ("fetch", "simple", &[]),
            ("parse", "simple", &["fetch.md"]),
            ("extract", "complex", &["parse.md"]),
            ("report", "complex", &[]),
        ],
        EXTRACT => &[
            ("selectors", "simple", &[]),
            ("fields", "simple", &["selectors.md", "../parse.md"]),
        ],
        _ => &[("csv", "simple", &[]), ("summary", "simple", &["csv"])],
    };
    task_plan(task, children)
}

fn respond(call: &Call) -> String {
    match call.kind.as_str() {
        "TaskPlan" => plan_for(&call.key).to_string(),
        "Solve" => format!("RESULT of {}", call.key),
        other => panic!("unexpected request {other}: {}", call.body),
    }
}

/// A store, a folder holding the example task, and the stand-in model.
struct Setup {
    db: Db,
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

impl Setup {
    fn new() -> Setup {
        Setup::answering(respond)
    }

    fn answering(respond: impl Fn(&Call) -> String + Send + Sync + 'static) -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let example =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tasks/web_scraper.md");
        std::fs::copy(example, dir.path().join(ROOT)).expect("copy the example task");
        Setup {
            db: Db::new(),
            dir,
            server: FakeOpenAi::answering(respond),
        }
    }

    fn root(&self) -> String {
        self.path(ROOT).display().to_string()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `graph <args> TASK` with the model configured.
    fn graph(&self, args: &[&str]) -> TestCommand {
        let root = self.root();
        let mut all: Vec<&str> = args.to_vec();
        all.push(&root);
        self.db.graph(&all).with_model_at(&self.server.base_url())
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
    }

    /// Every file under the folder, relative, sorted.
    fn files(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(self.dir.path()).unwrap();
                    found.push(rel.display().to_string());
                }
            }
        }
        found.sort();
        found
    }

    fn decomposed(&self) -> Vec<String> {
        self.server.keys("TaskPlan")
    }

    fn solved(&self) -> Vec<String> {
        self.server.keys("Solve")
    }

    /// The user message of the (first) solve request of `task`.
    fn solve_request(&self, task: &str) -> String {
        let call = self
            .server
            .calls()
            .into_iter()
            .find(|c| c.kind == "Solve" && c.key == task)
            .unwrap_or_else(|| panic!("{task} was never solved"));
        call.body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

#[test]
fn decompose_writes_the_files_recursing_into_complex_children_and_pauses_with_the_tree() {
    let s = Setup::new();
    let task_before = s.read(ROOT);
    let out = s.graph(&["decompose"]).expect(3);
    assert_eq!(s.decomposed(), [ROOT, EXTRACT, REPORT]);
    let mut expected = vec![
        ROOT,
        "web_scraper_plan.md",
        FETCH,
        PARSE,
        EXTRACT,
        REPORT,
        "web_scraper_children/extract_plan.md",
        SELECTORS,
        FIELDS,
        "web_scraper_children/report_plan.md",
        CSV,
        SUMMARY,
    ];
    expected.sort();
    assert_eq!(s.files(), expected, "exactly these files, nothing moved");
    assert_eq!(s.read(ROOT), task_before, "the task file is never written");
    assert_eq!(
        s.read(FIELDS),
        "# Title fields\n\n## Type\nsimple\n\n## Summary\nSummary of fields.\n\n### Dependents\n\
         - [Title selectors](selectors.md)\n- [Title parse](../parse.md)\n"
    );
    let plan = s.read("web_scraper_plan.md");
    assert!(
        plan.starts_with(
            "# Plan: Web scraper\n\n## Analysis\nHow web_scraper.md splits.\n\n## Children\n\
        - [Title fetch](web_scraper_children/fetch.md) (simple): Summary of fetch.\n"
        ),
        "{plan}"
    );
    // The tree, then what continues.
    assert!(
        out.stdout.starts_with(
            "web_scraper.md [complex] Web scraper: Build a small, polite command-line web scraper"
        ),
        "{out}"
    );
    assert!(out.stdout.contains("│   └── fields.md [simple] Title fields: Summary of fields. (after: web_scraper_children/extract_children/selectors.md, web_scraper_children/parse.md)"), "{out}");
    out.stderr_has(&[
        "decomposed 3 tasks: web_scraper.md, web_scraper_children/extract.md, web_scraper_children/report.md",
        "paused for review",
        &format!("continue with:\n  graph solve {}", s.root()),
    ]);
    // Each decomposition saw the tree so far, its task marked.
    let request = &s.server.calls()[1].body["messages"][1]["content"];
    let request = request.as_str().unwrap();
    assert!(request.contains("├── web_scraper_children/extract.md [complex] Title extract: Summary of extract. (after: web_scraper_children/parse.md)  [YOU ARE HERE]"), "{request}");
    assert!(
        request.contains("--- web_scraper_children/extract.md\n# Title extract\n"),
        "{request}"
    );
    assert_eq!(
        s.server.calls()[0].body["response_format"]["json_schema"]["name"],
        "TaskPlan"
    );
}

#[test]
fn the_node_limit_caps_decompositions_and_a_file_already_seen_is_never_decomposed_again() {
    let s = Setup::new();
    let out = s.graph(&["decompose", "--max-nodes", "2"]).expect(3);
    assert_eq!(s.decomposed(), [ROOT, EXTRACT]);
    out.stderr_has(&[
        "not decomposed, the limit of 2 decompositions was reached: web_scraper_children/report.md",
        "web_scraper_children/report.md: complex task without children",
    ]);
    // The same complex task reached twice, through a link: decomposed once.
    std::os::unix::fs::symlink(
        s.path(REPORT),
        s.path("web_scraper_children/extract_children/again.md"),
    )
    .unwrap();
    let out = s.graph(&["decompose"]).expect(3);
    assert_eq!(
        s.decomposed(),
        [
            ROOT,
            EXTRACT,
            "web_scraper_children/extract_children/again.md"
        ]
    );
    out.stderr_has(&["web_scraper_children/report.md: the same file as web_scraper_children/extract_children/again.md; counted once"]);
    // Nothing is left: a third run calls nothing.
    s.graph(&["decompose"])
        .expect(3)
        .stderr_has(&["nothing to decompose: every complex task has children"]);
    assert_eq!(s.decomposed().len(), 3);
    let json = s.graph(&["decompose", "--json"]).expect(3).json();
    assert_eq!(json["status"], "paused");
    assert_eq!(json["decomposed"], json!([]));
    assert!(
        json["continue_with"].as_str().unwrap().contains(" solve "),
        "{json}"
    );
    assert!(
        json["tree"]
            .as_str()
            .unwrap()
            .starts_with("web_scraper.md [complex]"),
        "{json}"
    );
}

#[test]
fn tree_shows_types_summaries_status_and_warnings_and_solve_refuses_what_it_cannot_solve() {
    let s = Setup::new();
    s.graph(&["decompose"]).expect(3);
    s.write(
        FETCH,
        "# Fetch\n\n## Type\ncomplex\n\n## Summary\nFetch.\n\n### Dependents\n- [Gone](gone.md)\n",
    );
    s.write(CSV, "# CSV\n\n## Type\nsimple\n\n## Summary\nWrite.\n\n### Dependents\n- [Summary](summary.md)\n");
    // `graph tree` needs no model.
    let out = s.db.graph(&["tree", &s.root()]).without_model().expect(0);
    for line in [
        "├── fetch.md [complex] Fetch: Fetch. — not solved yet",
        "│   ├── selectors.md [simple] Title selectors: Summary of selectors. — not solved yet",
        "0 of 9 tasks solved",
        "warnings:",
        "  web_scraper_children/fetch.md:10: broken link to `gone.md`: no such file: web_scraper_children/gone.md",
        "  dependency cycle: web_scraper_children/report_children/csv.md -> web_scraper_children/report_children/summary.md -> web_scraper_children/report_children/csv.md",
        "  web_scraper_children/fetch.md: complex task without children",
    ] {
        assert!(out.stdout.contains(line), "missing {line:?}\n{out}");
    }
    let refused = s.graph(&["solve"]).expect(2);
    refused.stderr_has(&[
        "the task tree cannot be solved as it stands (nothing was changed)",
        "web_scraper_children/fetch.md:10: broken link to `gone.md`",
        "dependency cycle: web_scraper_children/report_children/csv.md -> web_scraper_children/report_children/summary.md",
    ]);
    s.write(FETCH, "# Fetch\n\n## Type\nsometimes\n");
    s.graph(&["solve"]).expect(2).stderr_has(&[
        "web_scraper_children/fetch.md:4: cannot be read as a task: `## Type` must be `simple` or `complex`, not `sometimes`",
    ]);
    assert!(s.solved().is_empty());
    assert!(!s.path("web_scraper_children/fetch_plan.md").exists());
    let json = s.db.graph(&["tree", &s.root(), "--json"]).expect(0).json();
    assert_eq!(json["tasks"][0]["path"], ROOT);
    assert!(json["problems"].as_array().unwrap().len() >= 2, "{json}");
}

#[test]
fn solve_goes_leaves_first_and_writes_progress_and_results_into_the_plan_files() {
    let s = Setup::new();
    s.graph(&["decompose"]).expect(3);
    let before: Vec<String> = [ROOT, FETCH, FIELDS].iter().map(|f| s.read(f)).collect();
    let out = s.graph(&["solve"]).expect(0);
    assert_eq!(
        s.solved(),
        [FETCH, PARSE, SELECTORS, FIELDS, EXTRACT, CSV, SUMMARY, REPORT, ROOT]
    );
    assert_eq!(out.stdout.trim(), "RESULT of web_scraper.md");
    let after: Vec<String> = [ROOT, FETCH, FIELDS].iter().map(|f| s.read(f)).collect();
    assert_eq!(before, after, "task files are never written by solve");
    let fields = s.read("web_scraper_children/extract_children/fields_plan.md");
    assert!(
        fields.starts_with("# Plan: Title fields\n\n## Progress\n- Solved (step "),
        "{fields}"
    );
    assert!(fields.contains("- Builds on: [Title selectors](selectors.md) (solved), [Title parse](../parse.md) (solved).\n"), "{fields}");
    assert!(
        fields.ends_with("## Result\nRESULT of web_scraper_children/extract_children/fields.md\n"),
        "{fields}"
    );
    let root = s.read("web_scraper_plan.md");
    for section in [
        "## Analysis\n",
        "## Children\n",
        "## Progress\n- Solved",
        "- Children: 4 of 4 solved.",
        "## Result\nRESULT of web_scraper.md\n",
    ] {
        assert!(root.contains(section), "missing {section:?}\n{root}");
    }
    // What a solve is given: the tree with [YOU ARE HERE], the task file, the results it needs.
    let fields = s.solve_request(FIELDS);
    assert!(fields.contains("│   └── web_scraper_children/extract_children/fields.md [simple] Title fields: Summary of fields. (after: web_scraper_children/extract_children/selectors.md, web_scraper_children/parse.md) — not solved yet  [YOU ARE HERE]"), "{fields}");
    assert!(
        fields.contains(
            "├── web_scraper_children/fetch.md [simple] Title fetch: Summary of fetch. — solved"
        ),
        "{fields}"
    );
    assert!(
        fields.contains(&format!("--- {FIELDS}\n# Title fields\n")),
        "{fields}"
    );
    assert!(fields.contains("## Results of the tasks it depends on\n\n### Title selectors (web_scraper_children/extract_children/selectors.md)\nRESULT of web_scraper_children/extract_children/selectors.md\n"), "{fields}");
    let extract = s.solve_request(EXTRACT);
    assert!(
        extract.contains("## Results of its children\n\n### Title selectors"),
        "{extract}"
    );
    assert!(
        extract.contains("Integrate the results of its children"),
        "{extract}"
    );
    // Solved as the files stand: solving again calls nothing.
    s.graph(&["solve"])
        .expect(0)
        .stderr_has(&["every task is solved as the files stand"]);
    assert_eq!(s.solved().len(), 9);
    let tree = s.db.graph(&["tree", &s.root()]).expect(0);
    assert!(tree.stdout.contains("9 of 9 tasks solved"), "{tree}");
    // Nothing is being solved once the solve has finished: the last task solved (the root) is
    // shown solved, in words and in JSON.
    assert!(!tree.stdout.contains("being solved"), "{tree}");
    let root = tree.stdout.lines().next().unwrap_or_default();
    assert!(
        root.starts_with("web_scraper.md [complex]") && root.ends_with("— solved"),
        "{tree}"
    );
    let json = s.db.graph(&["tree", &s.root(), "--json"]).expect(0).json();
    let statuses: Vec<&str> = (json["tasks"].as_array().unwrap().iter())
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["solved"; 9], "{json:#}");
}

#[test]
fn a_deleted_child_is_not_solved_and_an_added_dependency_changes_the_order() {
    let s = Setup::new();
    s.graph(&["decompose"]).expect(3);
    std::fs::remove_file(s.path(SUMMARY)).unwrap();
    s.write(FETCH, "# Fetch\n\n## Type\nsimple\n\n## Summary\nFetch after the CSV layout is known.\n\n### Dependents\n- [CSV](report_children/csv.md)\n");
    s.graph(&["solve"]).expect(0);
    assert_eq!(
        s.solved(),
        [CSV, FETCH, PARSE, SELECTORS, FIELDS, EXTRACT, REPORT, ROOT]
    );
    let report = s.solve_request(REPORT);
    assert!(!report.contains("summary.md"), "{report}");
}

#[test]
fn an_edited_task_is_solved_again_with_what_builds_on_it_and_the_cli_says_which() {
    let s = Setup::new();
    s.graph(&["decompose"]).expect(3);
    s.graph(&["solve"]).expect(0);
    let text = s
        .read(PARSE)
        .replace("Summary of parse.", "Parse with lxml, not regexes.");
    s.write(PARSE, &text);
    let out = s.graph(&["solve"]).expect(0);
    out.stderr_has(&[
        "solving again, since the files changed:\n  \
         web_scraper_children/parse.md: its task file was edited since it was solved\n  \
         web_scraper_children/extract_children/fields.md: it builds on web_scraper_children/parse.md, which is solved again\n  \
         web_scraper_children/extract.md: it builds on web_scraper_children/extract_children/fields.md, which is solved again\n  \
         web_scraper.md: it builds on web_scraper_children/parse.md, which is solved again\n",
        "4 tasks to solve, in this order: web_scraper_children/parse.md, web_scraper_children/extract_children/fields.md, web_scraper_children/extract.md, web_scraper.md",
    ]);
    assert_eq!(s.solved()[9..], [PARSE, FIELDS, EXTRACT, ROOT]);
    assert!(
        s.solve_request(PARSE).contains("Summary of parse."),
        "the first solve had the old text"
    );
    let again = s
        .server
        .calls()
        .into_iter()
        .rfind(|c| c.key == PARSE)
        .unwrap();
    assert!(again.body.to_string().contains("Parse with lxml"));
}

#[test]
fn a_kill_9_during_decompose_or_solve_resumes_without_repeating_finished_work() {
    let s = Setup::new();
    // Killed while the model decomposes the second task: the first is not asked again.
    s.server
        .hold(|c: &Call| c.kind == "TaskPlan" && c.key == EXTRACT);
    let run = s.graph(&["decompose"]).spawn();
    s.server
        .wait_for(|c| c.kind == "TaskPlan" && c.key == EXTRACT);
    run.signal(libc::SIGKILL);
    let _ = run.finish();
    s.server.release();
    s.graph(&["decompose"])
        .expect(3)
        .stderr_has(&["continuing the decomposition that was stopped"]);
    assert_eq!(s.decomposed(), [ROOT, EXTRACT, EXTRACT, REPORT]);

    // Killed while the model solves fields.md: what was solved is not solved again.
    s.server
        .hold(|c: &Call| c.kind == "Solve" && c.key == FIELDS);
    let run = s.graph(&["solve"]).spawn();
    s.server.wait_for(|c| c.kind == "Solve" && c.key == FIELDS);
    run.signal(libc::SIGKILL);
    let _ = run.finish();
    s.server.release();
    let out = s.graph(&["solve"]).expect(0);
    out.stderr_has(&["continuing the solve that was stopped"]);
    assert_eq!(
        s.solved(),
        [FETCH, PARSE, SELECTORS, FIELDS, FIELDS, EXTRACT, CSV, SUMMARY, REPORT, ROOT]
    );
}

#[test]
fn ctrl_c_during_solve_stops_with_130_and_solve_continues_with_the_unsolved_tasks() {
    let s = Setup::new();
    s.graph(&["decompose"]).expect(3);
    s.server.hold(|c: &Call| c.kind == "Solve" && c.key == CSV);
    let run = s.graph(&["solve"]).spawn();
    s.server.wait_for(|c| c.kind == "Solve" && c.key == CSV);
    run.signal(libc::SIGINT);
    let out = run.finish();
    assert_eq!(out.code, Some(130), "{out}");
    out.stderr_has(&[&format!("graph solve {}", s.root())]);
    s.server.release();
    s.graph(&["solve"]).expect(0);
    let solved = s.solved();
    assert_eq!(
        solved.iter().filter(|k| *k == PARSE).count(),
        1,
        "{solved:?}"
    );
    assert_eq!(solved.last().map(String::as_str), Some(ROOT));
}

#[test]
fn with_no_model_configured_decompose_and_solve_fail_at_once_saying_what_to_set() {
    let s = Setup::new();
    let root = s.root();
    for command in ["decompose", "solve"] {
        let out = s.db.graph(&[command, &root]).without_model().expect(2);
        out.stderr_has(&[
            "no model provider is configured",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
        ]);
    }
    assert_eq!(s.files(), [ROOT], "nothing was written");
    assert!(s.server.calls().is_empty());
    let threads = s.db.graph(&["threads", "--json"]).expect(0).json();
    assert_eq!(threads, json!([]), "no thread was made");
    s.db.graph(&["decompose", "missing.md"])
        .without_model()
        .expect(2)
        .stderr_has(&["cannot read the task file missing.md"]);
}

#[test]
fn decompose_leaves_a_simple_task_alone_and_refuses_what_is_not_a_task_file() {
    let s = Setup::new();
    s.write(
        ROOT,
        "# Tiny\n\n## Type\nsimple\n\n## Summary\nPrint hello.\n",
    );
    s.graph(&["decompose"])
        .expect(3)
        .stderr_has(&["nothing to decompose: web_scraper.md is marked simple"]);
    assert!(s.decomposed().is_empty());
    s.write("notes_plan.md", "# Plan: notes\n");
    let plan = s.path("notes_plan.md").display().to_string();
    s.db.graph(&["decompose", &plan])
        .with_model_at(&s.server.base_url())
        .expect(2)
        .stderr_has(&["this is a plan file (written by the engine); give its task file"]);
    s.write(ROOT, "no title here\n");
    s.graph(&["decompose"])
        .expect(2)
        .stderr_has(&["web_scraper.md:1: cannot be read as a task: no `# Title` heading"]);
}

/// The tool results a request carries, in order.
fn tool_results(call: &Call) -> Vec<String> {
    call.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_solve_reads_other_files_of_the_tree_with_the_reading_tools_and_cannot_write() {
    // CSV's solve reads the fetch task's plan file (its result) and tries to write the root task
    // file; the reads reach the model, the write is not a tool it has.
    let s = Setup::answering(|call| {
        if call.kind != "Solve" || call.key != CSV {
            return respond(call);
        }
        match tool_results(call).as_slice() {
            [] => tool_calls(&[
                (
                    "read_file",
                    json!({"path": "web_scraper_children/fetch_plan.md"}),
                ),
                (
                    "write_file",
                    json!({"path": ROOT, "content": "overwritten"}),
                ),
            ]),
            [read, write] => format!("CSV built on <{read}> and <{write}>"),
            other => panic!("unexpected tool results {other:?}"),
        }
    });
    s.graph(&["decompose"]).expect(3);
    let root_before = s.read(ROOT);
    s.write(CSV, "# CSV\n\n## Type\nsimple\n\n## Summary\nWrite the CSV.\n\n### Dependents\n- [Fetch](../fetch.md)\n");
    s.graph(&["solve"]).expect(0);
    let csv_calls: Vec<Call> = s
        .server
        .calls()
        .into_iter()
        .filter(|c| c.kind == "Solve" && c.key == CSV)
        .collect();
    assert_eq!(csv_calls.len(), 2, "one call with tools, one after reading");
    let offered: Vec<&str> = csv_calls[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["list_dir", "read_file", "search_files"]);
    let plan = s.read("web_scraper_children/report_children/csv_plan.md");
    assert!(
        plan.contains("CSV built on <# Plan: Title fetch")
            && plan.contains("## Result\nRESULT of web_scraper_children/fetch.md\n>"),
        "the read reached the model: {plan}"
    );
    assert!(
        plan.contains("there is no tool named `write_file`"),
        "{plan}"
    );
    assert_eq!(
        s.read(ROOT),
        root_before,
        "a solve never writes a task file"
    );
    // Solved as the files stand: nothing is asked again.
    let paid = s.server.calls().len();
    s.graph(&["solve"]).expect(0);
    assert_eq!(s.server.calls().len(), paid);
}
