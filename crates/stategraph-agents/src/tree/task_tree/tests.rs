//! Loading, ordering and drawing trees written to a temporary folder.

use super::{Problem, TaskTree, TreeError, TreeView};
use crate::tree::task_file::render_task;
use crate::tree::task_file::TaskType;

struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Files {
        Files(tempfile::tempdir().unwrap())
    }
    fn task(&self, path: &str, kind: TaskType, deps: &[&str]) -> &Self {
        let deps: Vec<(String, String)> = deps
            .iter()
            .map(|d| (d.to_string(), d.to_string()))
            .collect();
        let title = path.rsplit('/').next().unwrap().trim_end_matches(".md");
        self.write(
            path,
            &render_task(title, kind, &format!("Do {title}."), &deps),
        )
    }
    fn write(&self, path: &str, text: &str) -> &Self {
        let file = self.0.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
        self
    }
    fn load(&self) -> TaskTree {
        TaskTree::load(&self.0.path().join("root.md")).unwrap()
    }
}

fn paths(tree: &TaskTree, order: &[usize]) -> Vec<String> {
    order.iter().map(|&i| tree.task(i).path.clone()).collect()
}

#[test]
fn children_come_in_plan_order_then_by_name_and_solve_after_their_dependencies() {
    let f = Files::new();
    f.task("root.md", TaskType::Complex, &[])
        .task("root_children/fetch.md", TaskType::Simple, &[])
        .task("root_children/parse.md", TaskType::Simple, &["fetch.md"])
        .task("root_children/extract.md", TaskType::Complex, &["parse.md"])
        .task(
            "root_children/extract_children/select.md",
            TaskType::Simple,
            &["../fetch.md"],
        )
        .task("root_children/zz_extra.md", TaskType::Simple, &[])
        .write(
            "root_plan.md",
            "# Plan: root\n\n## Children\n- [F](root_children/fetch.md)\n- [P](root_children/parse.md)\n- [E](root_children/extract.md)\n",
        );
    let tree = f.load();
    assert!(tree.problems().is_empty(), "{:?}", tree.problems());
    let children: Vec<_> = tree
        .task(0)
        .children
        .iter()
        .map(|&c| tree.task(c).name())
        .collect();
    assert_eq!(
        children,
        ["fetch.md", "parse.md", "extract.md", "zz_extra.md"]
    );
    assert_eq!(
        paths(&tree, &tree.solve_order()),
        [
            "root_children/fetch.md",
            "root_children/parse.md",
            "root_children/extract_children/select.md",
            "root_children/extract.md",
            "root_children/zz_extra.md",
            "root.md"
        ]
    );
    let drawn = tree.render(&TreeView {
        here: tree.find("root_children/parse.md"),
        ..TreeView::default()
    });
    assert!(
        drawn.contains("├── parse.md [simple] parse: Do parse. (after: root_children/fetch.md)  [YOU ARE HERE]\n"),
        "{drawn}"
    );
    assert!(drawn.contains("│   └── select.md"), "{drawn}");
}

#[test]
fn broken_links_cycles_and_undecomposed_tasks_are_problems() {
    let f = Files::new();
    f.task("root.md", TaskType::Complex, &[])
        .task("root_children/a.md", TaskType::Simple, &["b.md"])
        .task("root_children/b.md", TaskType::Simple, &["a.md"])
        .task(
            "root_children/c.md",
            TaskType::Complex,
            &["gone.md", "../../x.md"],
        )
        .task("root_children/d.md", TaskType::Simple, &["../root.md"])
        .write("root_children/e.md", "# E\n## Type\nhuge\n")
        .task("root_children/f.md", TaskType::Simple, &["e.md"])
        .task("root_children/lost_children/x.md", TaskType::Simple, &[]);
    let tree = f.load();
    let shown: Vec<String> = tree.problems().iter().map(ToString::to_string).collect();
    let expected = [
        "root_children/e.md:3: cannot be read as a task: `## Type` must be `simple` or `complex`, not `huge`",
        "root_children/lost_children/: no task file root_children/lost.md beside it",
        "root_children/c.md:10: broken link to `gone.md`: no such file: root_children/gone.md",
        "root_children/c.md:11: broken link to `../../x.md`: it leads out of the root task's folder",
        "root_children/f.md:10: broken link to `e.md`: root_children/e.md cannot be read as a task",
        "dependency cycle: root.md -> root_children/d.md -> root.md",
        "dependency cycle: root_children/a.md -> root_children/b.md -> root_children/a.md",
        "root_children/c.md: complex task without children",
    ];
    for e in expected {
        assert!(
            shown.iter().any(|s| s.starts_with(e)),
            "missing {e:?} in {shown:#?}"
        );
    }
    assert_eq!(shown.len(), expected.len(), "{shown:#?}");
    let err = tree.check().unwrap_err().to_string();
    assert!(
        err.contains("root_children/e.md:3") && !err.contains("without children"),
        "{err}"
    );
}

#[test]
fn a_file_linked_twice_is_read_once() {
    let f = Files::new();
    f.task("root.md", TaskType::Complex, &[])
        .task("root_children/a.md", TaskType::Complex, &[]);
    let dir = f.0.path();
    std::fs::create_dir_all(dir.join("root_children/a_children")).unwrap();
    std::os::unix::fs::symlink(
        dir.join("root.md"),
        dir.join("root_children/a_children/up.md"),
    )
    .unwrap();
    let tree = f.load();
    assert_eq!(tree.tasks().len(), 2);
    assert_eq!(
        tree.problems()[0],
        Problem::SameFile {
            path: "root_children/a_children/up.md".into(),
            same_as: "root.md".into()
        }
    );
}

#[test]
fn the_root_must_be_a_readable_task_file() {
    let f = Files::new();
    f.write("root.md", "no title\n").write("x.txt", "");
    let err = TaskTree::load(&f.0.path().join("root.md")).unwrap_err();
    assert!(err.to_string().ends_with("root.md:1: cannot be read as a task: no `# Title` heading; a task file starts with its title as `# Title`"), "{err}");
    assert!(matches!(
        TaskTree::load(&f.0.path().join("x.txt")),
        Err(TreeError::NotATaskFile { .. })
    ));
    assert!(matches!(
        TaskTree::load(&f.0.path().join("none.md")),
        Err(TreeError::Io { .. })
    ));
    std::fs::write(f.0.path().join("bin.md"), b"# T\n\nab\xff\n").unwrap();
    let err = TaskTree::load(&f.0.path().join("bin.md")).unwrap_err();
    assert!(
        err.to_string()
            .contains("bin.md:3: cannot be read as a task: not UTF-8"),
        "{err}"
    );
}
