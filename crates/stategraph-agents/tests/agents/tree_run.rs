//! The task-tree agent at library level: decompose a task file into files, pause, solve leaves
//! first; edits to the files between runs are what the next run works from. A scripted model
//! answers by what each request is about; no network, no key.

use crate::task_plans;

use serde_json::json;
use stategraph::checkpoint::MemoryCheckpointer;
use stategraph::runtime::{Resume, RunConfig};
use stategraph::CompiledGraph;
use stategraph_agents::tree::{
    build, decompose_input, solve_input, TaskTree, TreeState, TreeStateUpdate,
};
use stategraph_llm::{ChatRequest, FakeChatModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use task_plans::{task_plan, Child};

/// The line of the last user message that starts with `prefix`.
fn line_after(request: &ChatRequest, prefix: &str) -> Option<String> {
    let user = request.messages.last()?.content.clone();
    user.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|s| s.trim().to_string())
}

/// The model's decomposition of each task.
fn plan_for(task: &str) -> serde_json::Value {
    let children: &[Child] = match task {
        "app.md" => &[
            ("fetch", "simple", &[]),
            ("parse", "complex", &["fetch.md"]),
            ("report", "complex", &[]),
        ],
        "app_children/parse.md" => &[
            ("tokens", "simple", &[]),
            ("tree", "complex", &["tokens.md", "../fetch.md"]),
        ],
        _ => &[("part_a", "simple", &[]), ("part_b", "simple", &["part_a"])],
    };
    task_plan(task, children)
}

fn model() -> FakeChatModel {
    FakeChatModel::from_fn(|request: &ChatRequest| {
        let text = if let Some(task) = line_after(request, "The task to decompose: ") {
            plan_for(&task).to_string()
        } else {
            let task = line_after(request, "Your task: ").unwrap_or_default();
            format!("RESULT({task})")
        };
        Ok(FakeChatModel::text_reply(text))
    })
}

struct Setup {
    dir: tempfile::TempDir,
    fake: Arc<FakeChatModel>,
    graph: CompiledGraph<TreeState>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("app.md"),
            "# App\n\nBuild the app: fetch pages, parse them, report.\n",
        )
        .unwrap();
        let fake = Arc::new(model());
        let graph = build(fake.clone())
            .unwrap()
            .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
        Setup { dir, fake, graph }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("app.md")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn config(&self) -> RunConfig {
        RunConfig::new().thread("tree")
    }

    fn root_text(&self) -> String {
        self.root().display().to_string()
    }

    fn decompose(&self, max_nodes: Option<u32>) -> TreeStateUpdate {
        decompose_input(&self.root_text(), max_nodes)
    }

    fn solve(&self) -> TreeStateUpdate {
        solve_input(&self.root_text())
    }

    /// The tasks each solve request was about, in order.
    fn solved_in_order(&self) -> Vec<String> {
        self.fake
            .requests()
            .iter()
            .filter_map(|r| line_after(r, "Your task: "))
            .collect()
    }

    fn decomposed_in_order(&self) -> Vec<String> {
        self.fake
            .requests()
            .iter()
            .filter_map(|r| line_after(r, "The task to decompose: "))
            .collect()
    }
}

fn tree_paths(root: &Path) -> Vec<String> {
    TaskTree::load(root)
        .unwrap()
        .tasks()
        .iter()
        .map(|t| t.path.clone())
        .collect()
}

#[tokio::test]
async fn decompose_writes_the_files_recursing_into_complex_children_then_pauses() {
    let s = Setup::new();
    let out = s.graph.invoke(s.decompose(None), s.config()).await.unwrap();
    assert!(
        out.is_interrupted(),
        "decomposition ends with a pause for review"
    );
    assert_eq!(
        s.decomposed_in_order(),
        [
            "app.md",
            "app_children/parse.md",
            "app_children/parse_children/tree.md",
            "app_children/report.md"
        ],
        "depth first"
    );
    assert_eq!(
        tree_paths(&s.root()),
        [
            "app.md",
            "app_children/fetch.md",
            "app_children/parse.md",
            "app_children/parse_children/tokens.md",
            "app_children/parse_children/tree.md",
            "app_children/parse_children/tree_children/part_a.md",
            "app_children/parse_children/tree_children/part_b.md",
            "app_children/report.md",
            "app_children/report_children/part_a.md",
            "app_children/report_children/part_b.md",
        ]
    );
    let tree = s.read("app_children/parse_children/tree.md");
    assert_eq!(
        tree,
        "# Title tree\n\n## Type\ncomplex\n\n## Summary\nSummary of tree.\n\n### Dependents\n\
         - [Title tokens](tokens.md)\n- [Title fetch](../fetch.md)\n"
    );
    let plan = s.read("app_plan.md");
    assert!(plan.starts_with("# Plan: App\n\n## Analysis\nHow app.md splits.\n\n## Children\n- [Title fetch](app_children/fetch.md) (simple): Summary of fetch.\n"), "{plan}");
    assert_eq!(
        s.read("app.md"),
        "# App\n\nBuild the app: fetch pages, parse them, report.\n",
        "the task file is never written"
    );
    // The request shows the tree so far, with the task being decomposed marked.
    let request = &s.fake.requests()[1];
    let user = &request.messages[1].content;
    assert!(
        user.contains("├── app_children/parse.md [complex] Title parse: Summary of parse. (after: app_children/fetch.md)  [YOU ARE HERE]"),
        "{user}"
    );
    assert_eq!(request.response_format.as_ref().unwrap().name, "TaskPlan");
}

#[tokio::test]
async fn the_node_limit_caps_decompositions_and_names_what_was_left() {
    let s = Setup::new();
    let out = s
        .graph
        .invoke(s.decompose(Some(2)), s.config())
        .await
        .unwrap();
    assert_eq!(s.decomposed_in_order(), ["app.md", "app_children/parse.md"]);
    assert_eq!(
        out.state.not_decomposed,
        [
            "app_children/parse_children/tree.md",
            "app_children/report.md"
        ]
    );
    // A second decomposition goes on with what is left, never redoing a decomposed task.
    let out = s
        .graph
        .invoke(s.decompose(Some(5)), s.config())
        .await
        .unwrap();
    assert!(out.state.not_decomposed.is_empty());
    assert_eq!(s.decomposed_in_order().len(), 4);
    assert_eq!(
        out.state.decomposed,
        [
            "app_children/parse_children/tree.md",
            "app_children/report.md"
        ]
    );
}

#[tokio::test]
async fn solve_goes_leaves_first_writes_plan_files_and_a_parent_integrates_its_children() {
    let s = Setup::new();
    s.graph
        .invoke(s.decompose(Some(2)), s.config())
        .await
        .unwrap();
    // app_children/report.md stays complex without children: it is solved directly.
    let out = s
        .graph
        .resume("tree", Resume::Value(json!("solve")), s.config())
        .await
        .unwrap();
    assert!(!out.is_interrupted());
    assert_eq!(
        s.solved_in_order(),
        [
            "app_children/fetch.md",
            "app_children/parse_children/tokens.md",
            "app_children/parse_children/tree.md",
            "app_children/parse.md",
            "app_children/report.md",
            "app.md",
        ]
    );
    assert_eq!(out.state.result.as_deref(), Some("RESULT(app.md)"));
    let plan = s.read("app_children/parse_plan.md");
    assert!(
        plan.contains("## Result\nRESULT(app_children/parse.md)\n"),
        "{plan}"
    );
    assert!(
        plan.contains(
            "- Children: 2 of 2 solved.\n  - [x] [Title tokens](parse_children/tokens.md) — solved"
        ),
        "{plan}"
    );
    let leaf = s.read("app_children/fetch_plan.md");
    assert!(
        leaf.starts_with("# Plan: Title fetch\n\n## Progress\n- Solved (step "),
        "{leaf}"
    );
    // The parent's request holds its children's results; the tree marks where it is.
    let requests = s.fake.requests();
    let parse = requests
        .iter()
        .find(|r| line_after(r, "Your task: ").as_deref() == Some("app_children/parse.md"))
        .unwrap();
    let user = &parse.messages[1].content;
    assert!(user.contains("## Results of its children\n\n### Title tokens (app_children/parse_children/tokens.md)\nRESULT(app_children/parse_children/tokens.md)"), "{user}");
    assert!(
        user.contains("### Title fetch (app_children/fetch.md)\nRESULT(app_children/fetch.md)"),
        "{user}"
    );
    assert!(
        user.contains("[YOU ARE HERE]") && user.contains("Integrate the results"),
        "{user}"
    );
    let report = requests
        .iter()
        .find(|r| line_after(r, "Your task: ").as_deref() == Some("app_children/report.md"))
        .unwrap();
    assert!(report.messages[1]
        .content
        .contains("marked complex but has no children"));

    // Nothing changed: solving again calls nothing.
    let calls = s.fake.call_count();
    s.graph.invoke(s.solve(), s.config()).await.unwrap();
    assert_eq!(s.fake.call_count(), calls);
}

#[tokio::test]
async fn edits_are_picked_up_a_deleted_child_is_not_solved_and_an_edit_resolves_what_builds_on_it()
{
    let s = Setup::new();
    s.graph
        .invoke(s.decompose(Some(1)), s.config())
        .await
        .unwrap();
    std::fs::write(
        s.path("app_children/parse.md"),
        "# Parse\n\n## Type\nsimple\n\n## Summary\nParse pages.\n\n### Dependents\n- [F](fetch.md)\n",
    )
    .unwrap();
    std::fs::remove_file(s.path("app_children/report.md")).unwrap();
    s.graph.invoke(s.solve(), s.config()).await.unwrap();
    assert_eq!(
        s.solved_in_order(),
        ["app_children/fetch.md", "app_children/parse.md", "app.md"]
    );
    // Editing fetch solves it again, then parse (which depends on it), then the root.
    std::fs::write(
        s.path("app_children/fetch.md"),
        "# Fetch\n\n## Type\nsimple\n\n## Summary\nFetch pages politely.\n",
    )
    .unwrap();
    s.graph.invoke(s.solve(), s.config()).await.unwrap();
    assert_eq!(
        s.solved_in_order()[3..],
        ["app_children/fetch.md", "app_children/parse.md", "app.md"]
    );
}
