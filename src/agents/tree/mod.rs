//! The task-tree workflow: decompose a task file into a tree of task files, let a person edit
//! them, then solve the tree leaves first.

mod markdown;
mod plan_file;
mod task_file;
mod tree;

pub use plan_file::PlanFile;
pub use task_file::{render_task, FormatError, TaskFile, TaskLink, TaskType};
pub use tree::{
    children_dir, plan_path, relative_link, resolve_link, Problem, Task, TaskTree, TreeError,
    TreeView,
};
