//! Decomposing one task: the model's `TaskPlan`, checked against the tree, and the files it
//! becomes (`{name}_plan.md` and `{name}_children/{child}.md`).

use super::cycles::{find_cycles, needs_edges};
use super::disk::{write_atomic, write_new, Written};
use super::paths::{children_dir, plan_path, relative_link, resolve_link};
use super::plan_file::{child_line, PlanFile};
use super::task_file::{render_task, TaskType};
use super::task_tree::{TaskTree, TreeView};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// The structured reply of a decomposition (schema name `TaskPlan`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPlan {
    /// What the task really asks, how it splits into children and why, and in what order.
    pub analysis: String,
    /// The child tasks.
    pub children: Vec<PlannedChild>,
}

/// One child task as the model plans it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedChild {
    /// A short file-safe slug (lowercase letters, digits, `_`): the child's file is `<name>.md`.
    pub name: String,
    /// A short title.
    pub title: String,
    /// `simple` (solved in one go) or `complex` (decomposed again).
    #[serde(rename = "type")]
    pub task_type: TaskType,
    /// What to produce and how to tell it is done.
    pub summary: String,
    /// The task files this child needs finished first, relative to the children's folder
    /// (`sibling.md`, `../elsewhere.md`).
    pub dependents: Vec<String>,
}

/// A child ready to be written.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildFile {
    /// Relative to the root task's folder.
    pub path: String,
    /// Its Markdown.
    pub text: String,
}

/// A checked decomposition of one task: the files it writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Decomposition {
    /// The decomposed task, relative to the root task's folder.
    pub task: String,
    /// Its plan file, relative to the root task's folder.
    pub plan_path: String,
    /// The plan file's new text (an existing plan keeps its other sections).
    pub plan_text: String,
    /// The children, in the model's order.
    pub children: Vec<ChildFile>,
}

/// What writing a decomposition did to each child file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteReport {
    /// Children written.
    pub created: Vec<String>,
    /// Children whose file already existed with other text, kept as found.
    pub kept: Vec<String>,
}

/// The file-safe form of a child's name: lowercase ASCII letters, digits, `_` and `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().trim_end_matches(".md").chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if c == '-' {
            out.push('-');
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches(['_', '-']).chars().take(60).collect()
}

/// Checks `plan` as a decomposition of task `index` of `tree` and turns it into files, or says
/// what is wrong in words the model can act on.
///
/// ```
/// use stategraph_agents::tree::{prepare, PlannedChild, TaskPlan, TaskTree, TaskType};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.md"), "# App\n\nBuild it.\n").unwrap();
/// let tree = TaskTree::load(&dir.path().join("app.md")).unwrap();
/// let child = |name: &str, deps: &[&str]| PlannedChild {
///     name: name.into(), title: name.into(), task_type: TaskType::Simple,
///     summary: "Do it.".into(), dependents: deps.iter().map(|d| d.to_string()).collect(),
/// };
/// let plan = TaskPlan { analysis: "Two parts.".into(), children: vec![child("api", &[]), child("ui", &["api.md"])] };
/// let files = prepare(&plan, &tree, 0, 6).unwrap();
/// assert_eq!(files.children[1].path, "app_children/ui.md");
/// assert!(files.children[1].text.contains("- [api](api.md)"));
/// let cycle = TaskPlan { children: vec![child("api", &["ui"]), child("ui", &["api"])], ..plan };
/// assert!(prepare(&cycle, &tree, 0, 6).unwrap_err().contains("cycle"));
/// ```
pub fn prepare(
    plan: &TaskPlan,
    tree: &TaskTree,
    index: usize,
    max_children: usize,
) -> Result<Decomposition, String> {
    let task = tree.task(index);
    let names = child_names(plan, max_children)?;
    let folder = children_dir(&task.path);
    let paths: Vec<String> = names.iter().map(|n| format!("{folder}/{n}.md")).collect();
    let deps = dependencies(plan, tree, index, &names, &paths)?;
    check_cycles(tree, index, &paths, &deps)?;
    let title_of = |path: &str| -> String {
        match paths.iter().position(|p| p == path) {
            Some(n) => plan.children[n].title.trim().to_string(),
            None => tree
                .find(path)
                .map(|i| tree.task(i).file.title.clone())
                .unwrap_or_default(),
        }
    };
    let children: Vec<ChildFile> = plan
        .children
        .iter()
        .enumerate()
        .map(|(n, child)| {
            let links: Vec<(String, String)> = deps[n]
                .iter()
                .map(|d| (title_of(d), relative_link(&paths[n], d)))
                .collect();
            ChildFile {
                path: paths[n].clone(),
                text: render_task(&child.title, child.task_type, &child.summary, &links),
            }
        })
        .collect();
    let plan_file = plan_path(&task.path);
    let mut plan_text = std::fs::read_to_string(tree.file_path(&plan_file))
        .map(|t| PlanFile::parse(&t))
        .unwrap_or_else(|_| PlanFile::new(&task.file.title));
    plan_text.set("Analysis", &plan.analysis);
    let lines: Vec<String> = plan
        .children
        .iter()
        .zip(&paths)
        .map(|(c, p)| {
            child_line(
                c.title.trim(),
                &relative_link(&task.path, p),
                c.task_type.as_str(),
                &super::markdown::one_line(&c.summary, 100),
            )
        })
        .collect();
    plan_text.set("Children", &lines.join("\n"));
    Ok(Decomposition {
        task: task.path.clone(),
        plan_path: plan_file,
        plan_text: plan_text.text(),
        children,
    })
}

/// The children's file-safe names, once the plan's shape is checked.
fn child_names(plan: &TaskPlan, max_children: usize) -> Result<Vec<String>, String> {
    if plan.children.is_empty() {
        return Err("the plan has no children; give at least one child task".into());
    }
    if plan.children.len() > max_children {
        return Err(format!(
            "the plan has {} children but at most {max_children} are allowed; merge some",
            plan.children.len()
        ));
    }
    if plan.analysis.trim().is_empty() {
        return Err("the analysis is empty; say how and why the task splits".into());
    }
    let mut names = Vec::with_capacity(plan.children.len());
    for (n, child) in plan.children.iter().enumerate() {
        let name = slug(&child.name);
        let which = format!("child #{} (`{}`)", n + 1, child.name);
        if name.is_empty() {
            return Err(format!("{which}: the name has no letters or digits"));
        }
        if name.ends_with("_plan") || name.ends_with("_children") {
            return Err(format!(
                "{which}: a name may not end in `_plan` or `_children` (those are the engine's files)"
            ));
        }
        if names.contains(&name) {
            return Err(format!("{which}: two children are named `{name}`"));
        }
        if child.title.trim().is_empty() || child.summary.trim().is_empty() {
            return Err(format!(
                "{which}: the title and the summary must not be empty"
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// Each child's dependencies as tree-relative paths: siblings or tasks of the tree, never the
/// child itself, the task being decomposed or its ancestors.
fn dependencies(
    plan: &TaskPlan,
    tree: &TaskTree,
    index: usize,
    names: &[String],
    paths: &[String],
) -> Result<Vec<Vec<String>>, String> {
    let ancestors: HashSet<&str> = std::iter::successors(Some(index), |&i| tree.task(i).parent)
        .map(|i| tree.task(i).path.as_str())
        .collect();
    let mut deps: Vec<Vec<String>> = Vec::with_capacity(names.len());
    for (n, child) in plan.children.iter().enumerate() {
        let mut mine = Vec::new();
        for written in &child.dependents {
            let fail = |why: String| format!("child `{}`: dependent `{written}`: {why}", names[n]);
            let path = resolve_dependent(written, names, &paths[n]).map_err(fail)?;
            if path == paths[n] {
                return Err(fail("a task cannot depend on itself".into()));
            }
            if ancestors.contains(path.as_str()) {
                return Err(fail(format!(
                    "{path} is the task being decomposed or one of its ancestors, which are \
                     finished after their children"
                )));
            }
            if !paths.contains(&path) && tree.find(&path).is_none() {
                return Err(fail(format!(
                    "{path} is not a task of this tree; name a sibling (`<name>.md`) or a task \
                     file listed in the tree"
                )));
            }
            if !mine.contains(&path) {
                mine.push(path);
            }
        }
        deps.push(mine);
    }
    Ok(deps)
}

/// A dependent as the model wrote it (`sibling`, `sibling.md`, `../x.md`, `[X](x.md)`) as a
/// tree-relative path.
fn resolve_dependent(written: &str, siblings: &[String], from: &str) -> Result<String, String> {
    let mut target = written.trim();
    if let (Some(open), Some(close)) = (target.find("]("), target.rfind(')')) {
        if open < close {
            target = &target[open + 2..close];
        }
    }
    let target = target.trim().trim_start_matches("./");
    if target.is_empty() {
        return Err("it is empty".into());
    }
    if siblings.iter().any(|s| s == target) {
        return resolve_link(from, &format!("{target}.md"));
    }
    let with_md = if target.ends_with(".md") {
        target.to_string()
    } else {
        format!("{target}.md")
    };
    resolve_link(from, &with_md)
}

/// Refuses dependents that would put a new child in a cycle with the tree as it stands.
fn check_cycles(
    tree: &TaskTree,
    index: usize,
    paths: &[String],
    deps: &[Vec<String>],
) -> Result<(), String> {
    let n = tree.tasks().len();
    let mut edges = needs_edges(tree.tasks());
    let at = |path: &str| {
        paths
            .iter()
            .position(|p| p == path)
            .map(|k| n + k)
            .or_else(|| tree.find(path))
    };
    for (k, mine) in deps.iter().enumerate() {
        edges.push((index, n + k));
        edges.extend(mine.iter().filter_map(|d| at(d)).map(|d| (n + k, d)));
    }
    let name = |i: usize| {
        if i >= n {
            paths[i - n].clone()
        } else {
            tree.task(i).path.clone()
        }
    };
    match find_cycles(n + paths.len(), &edges)
        .into_iter()
        .find(|c| c.iter().any(|&i| i >= n))
    {
        Some(cycle) => Err(format!(
            "the dependents make a cycle: {} (each needs the next first); remove one of them",
            cycle.into_iter().map(name).collect::<Vec<_>>().join(" -> ")
        )),
        None => Ok(()),
    }
}

impl Decomposition {
    /// Writes the plan file (whole) and each child file not already there; a child file that
    /// exists with other text is kept as found (a person's edit is never replaced).
    pub fn write(&self, tree: &TaskTree) -> std::io::Result<WriteReport> {
        let mut report = WriteReport::default();
        let folder = tree.file_path(&children_dir(&self.task));
        std::fs::create_dir_all(&folder).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", folder.display()))
        })?;
        for child in &self.children {
            match write_new(&tree.file_path(&child.path), &child.text)? {
                Written::Created | Written::Unchanged => report.created.push(child.path.clone()),
                Written::Kept => report.kept.push(child.path.clone()),
            }
        }
        write_atomic(&tree.file_path(&self.plan_path), &self.plan_text)?;
        Ok(report)
    }
}

/// The tasks to decompose, in tree order: complex tasks without children that are not in
/// `seen` (the root counts as complex unless it says otherwise).
pub fn to_decompose(tree: &TaskTree, seen: &[String]) -> Vec<usize> {
    tree.tasks()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_complex() && t.children.is_empty() && !seen.contains(&t.path))
        .map(|(i, _)| i)
        .collect()
}

/// The user message asking to decompose task `index`.
pub fn decompose_request(tree: &TaskTree, index: usize, max_children: usize) -> String {
    let task = tree.task(index);
    let drawn = tree.render(&TreeView {
        here: Some(index),
        paths: true,
        status: None,
    });
    let mut out = format!(
        "The task tree so far (paths from the root task's folder):\n\n{drawn}\n\
         The task to decompose: {path}\nIts children will be written to {folder}/.\n\n\
         --- {path}\n{text}\n---\n",
        path = task.path,
        folder = children_dir(&task.path),
        text = task.file.text.trim_end(),
    );
    if let Some(parent) = task.parent {
        let analysis = std::fs::read_to_string(tree.file_path(&plan_path(&tree.task(parent).path)))
            .ok()
            .and_then(|t| PlanFile::parse(&t).section("Analysis"));
        if let Some(analysis) = analysis {
            out.push_str(&format!(
                "\nThe analysis of its parent's plan, for context:\n{analysis}\n"
            ));
        }
    }
    out.push_str(&format!(
        "\nWrite a TaskPlan with at most {max_children} children."
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_with(files: &[(&str, &str)]) -> (tempfile::TempDir, TaskTree) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        let tree = TaskTree::load(&dir.path().join("root.md")).unwrap();
        (dir, tree)
    }

    fn child(name: &str, kind: TaskType, deps: &[&str]) -> PlannedChild {
        PlannedChild {
            name: name.into(),
            title: format!("Title of {name}"),
            task_type: kind,
            summary: format!("Do {name}."),
            dependents: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn plan(children: Vec<PlannedChild>) -> TaskPlan {
        TaskPlan {
            analysis: "Because.".into(),
            children,
        }
    }

    const SIMPLE: TaskType = TaskType::Simple;

    #[test]
    fn the_schema_has_exactly_the_fields_of_the_contract() {
        let schema = stategraph_llm::strict_schema(stategraph_llm::schema_for::<TaskPlan>());
        let text = schema.to_string();
        let plan_fields: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(plan_fields, ["analysis", "children"]);
        for field in [
            "\"name\"",
            "\"title\"",
            "\"type\"",
            "\"summary\"",
            "\"dependents\"",
        ] {
            assert!(text.contains(field), "{field} missing from {text}");
        }
        assert!(
            text.contains("\"simple\"") && text.contains("\"complex\""),
            "{text}"
        );
        assert!(!text.contains("task_type"), "{text}");
    }

    #[test]
    fn names_become_slugs_and_dependents_resolve_from_the_childrens_folder() {
        let (_d, tree) = tree_with(&[
            ("root.md", "# Root\n\nAll.\n"),
            ("root_children/parse.md", "# Parse\n## Type\nsimple\n"),
            ("root_children/extract.md", "# Extract\n## Type\ncomplex\n"),
        ]);
        let extract = tree.find("root_children/extract.md").unwrap();
        let files = prepare(
            &plan(vec![
                child("Find Selectors!", SIMPLE, &["../parse.md"]),
                child(
                    "paginate",
                    SIMPLE,
                    &["[Sel](find_selectors.md)", "./find_selectors"],
                ),
            ]),
            &tree,
            extract,
            6,
        )
        .unwrap();
        assert_eq!(files.plan_path, "root_children/extract_plan.md");
        assert_eq!(
            files.children[0].path,
            "root_children/extract_children/find_selectors.md"
        );
        assert!(files.children[0].text.contains("- [Parse](../parse.md)"));
        assert_eq!(
            files.children[1].text.matches("find_selectors.md").count(),
            1
        );
        assert!(files.plan_text.contains(
            "- [Title of paginate](extract_children/paginate.md) (simple): Do paginate."
        ));
    }

    #[test]
    fn what_the_model_gets_wrong_is_said_in_words_it_can_act_on() {
        let (_d, tree) = tree_with(&[
            ("root.md", "# Root\n\nAll.\n"),
            (
                "root_children/a.md",
                "# A\n## Type\ncomplex\n### Dependents\n- [B](b.md)\n",
            ),
            ("root_children/b.md", "# B\n## Type\nsimple\n"),
        ]);
        let a = tree.find("root_children/a.md").unwrap();
        let b = tree.find("root_children/b.md").unwrap();
        let err = |p: TaskPlan, at: usize| prepare(&p, &tree, at, 3).unwrap_err();
        assert!(err(plan(vec![]), a).contains("no children"));
        assert!(err(plan(vec![child("x", SIMPLE, &[]); 4]), a).contains("at most 3"));
        assert!(err(
            plan(vec![child("x", SIMPLE, &[]), child("X", SIMPLE, &[])]),
            a
        )
        .contains("two children are named `x`"));
        assert!(err(plan(vec![child("x_plan", SIMPLE, &[])]), a).contains("_plan"));
        assert!(err(plan(vec![child("x", SIMPLE, &["../nope.md"])]), a)
            .contains("root_children/nope.md is not a task of this tree"));
        assert!(err(plan(vec![child("x", SIMPLE, &["../a.md"])]), a).contains("ancestors"));
        assert!(err(plan(vec![child("x", SIMPLE, &["../../root.md"])]), a).contains("ancestors"));
        assert!(err(plan(vec![child("x", SIMPLE, &["x"])]), a).contains("itself"));
        assert!(err(plan(vec![child("x", SIMPLE, &["../../../out.md"])]), a).contains("leads out"));
        // b needs nothing yet; a child of b that needs a (which needs b) closes a cycle.
        let cycle = err(plan(vec![child("y", SIMPLE, &["../a.md"])]), b);
        assert!(
            cycle.contains("root_children/a.md -> root_children/b.md -> root_children/b_children/y.md -> root_children/a.md"),
            "{cycle}"
        );
    }

    #[test]
    fn writing_keeps_a_persons_file_and_the_plans_other_sections() {
        let (dir, tree) = tree_with(&[
            ("root.md", "# Root\n\nAll.\n"),
            ("root_children/mine.md", "# Mine\nmy own words\n"),
            ("root_plan.md", "# Plan: Root\n\n## Progress\nhalfway\n"),
        ]);
        let files = prepare(
            &plan(vec![child("mine", SIMPLE, &[]), child("new", SIMPLE, &[])]),
            &tree,
            0,
            6,
        )
        .unwrap();
        let report = files.write(&tree).unwrap();
        assert_eq!(report.kept, ["root_children/mine.md"]);
        assert_eq!(report.created, ["root_children/new.md"]);
        let mine = std::fs::read_to_string(dir.path().join("root_children/mine.md")).unwrap();
        assert_eq!(mine, "# Mine\nmy own words\n");
        let plan_text = std::fs::read_to_string(dir.path().join("root_plan.md")).unwrap();
        assert!(
            plan_text.contains("## Analysis\nBecause.")
                && plan_text.contains("## Progress\nhalfway"),
            "{plan_text}"
        );
        assert_eq!(
            files.write(&tree).unwrap().created,
            ["root_children/new.md"],
            "a second write changes nothing"
        );
    }

    #[test]
    fn the_request_shows_the_tree_the_task_and_the_parents_analysis() {
        let (_d, tree) = tree_with(&[
            ("root.md", "# Root\n\nAll of it.\n"),
            (
                "root_plan.md",
                "# Plan: Root\n\n## Analysis\nSplit by layer.\n",
            ),
            (
                "root_children/api.md",
                "# API\n## Type\ncomplex\n## Summary\nServe it.\n",
            ),
        ]);
        let text = decompose_request(&tree, 1, 4);
        assert!(
            text.contains("└── root_children/api.md [complex] API: Serve it.  [YOU ARE HERE]"),
            "{text}"
        );
        assert!(text.contains("--- root_children/api.md\n# API\n"), "{text}");
        assert!(text.contains("Its children will be written to root_children/api_children/."));
        assert!(text.contains("Split by layer."));
        assert!(text.ends_with("at most 4 children."));
        assert_eq!(to_decompose(&tree, &[]), [1]);
        assert!(to_decompose(&tree, &["root_children/api.md".into()]).is_empty());
    }
}
