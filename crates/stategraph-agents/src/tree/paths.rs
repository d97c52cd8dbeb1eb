//! The tree's naming rules: where a task's children and plan live, and what a relative link
//! names. Paths are relative to the root task file's folder, with `/` separators.

/// The folder holding a task's children: `a/b.md` -> `a/b_children`.
pub fn children_dir(task_path: &str) -> String {
    format!("{}_children", task_path.trim_end_matches(".md"))
}

/// A task's plan file: `a/b.md` -> `a/b_plan.md`.
pub fn plan_path(task_path: &str) -> String {
    format!("{}_plan.md", task_path.trim_end_matches(".md"))
}

/// The tree-relative path a link in the task file at `from` names, or why it names none
/// (it leaves the tree's folder, or is absolute).
pub fn resolve_link(from: &str, target: &str) -> Result<String, String> {
    if target.starts_with('/') {
        return Err("links are relative to the task file's folder".into());
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("it leads out of the root task's folder".into());
                }
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

/// The path of `to` relative to the folder of `from` (both tree-relative), as a link in
/// `from` would name it.
pub fn relative_link(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = {
        let mut p: Vec<&str> = from.split('/').collect();
        p.pop();
        p
    };
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dir
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts: Vec<&str> = vec![".."; from_dir.len() - common];
    parts.extend(&to_parts[common..]);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_relative_to_their_file() {
        assert_eq!(resolve_link("a_children/b.md", "../c.md").unwrap(), "c.md");
        assert_eq!(
            resolve_link("a_children/b.md", "./d.md").unwrap(),
            "a_children/d.md"
        );
        assert!(resolve_link("a.md", "../x.md").is_err());
        assert_eq!(relative_link("a_children/b.md", "c.md"), "../c.md");
        assert_eq!(relative_link("a_children/b.md", "a_children/d.md"), "d.md");
        assert_eq!(
            relative_link("a_children/b.md", "a_children/b_children/e.md"),
            "b_children/e.md"
        );
        assert_eq!(children_dir("a_children/b.md"), "a_children/b_children");
        assert_eq!(plan_path("a.md"), "a_plan.md");
    }
}
