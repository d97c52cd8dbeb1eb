//! Where a subgraph's checkpoints live: a namespace inside its root thread.
//!
//! A child graph run by the task of node `review` stores its checkpoints as the thread
//! `{root}/review:{task_id}`; a grandchild under its node `ask` as
//! `{root}/review:{task_id}/ask:{task_id2}`. So every backend keeps a child's records with its
//! root thread's (the folder backend in the root's own store), a kill inside a child resumes from
//! the child's last step, and deleting the root deletes its children.
//!
//! The task id is a hash of the checkpoint the parent's step started from and the task's
//! position, so a rerun of the same task (after a crash, a failure or an interrupt) finds the
//! same child thread, and the next run of that node (a later step) starts a fresh one.

use crate::checkpoint::{validate_thread_id, CheckpointError, CheckpointId};
use std::fmt;

/// One level of a namespace: the parent's node and its task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The parent graph's node that ran the child.
    pub node: String,
    /// The task's id (stable across reruns of the task).
    pub task: String,
}

/// A thread id taken apart: the root thread and the subgraph levels below it.
///
/// ```
/// use stategraph::runtime::ThreadPath;
/// let path: ThreadPath = "t1/review:0a1b2c3d/ask:99aa00ff".parse().unwrap();
/// assert_eq!(path.root(), "t1");
/// assert_eq!(path.nodes(), vec!["review", "ask"]);
/// assert_eq!(path.namespace(), "review:0a1b2c3d/ask:99aa00ff");
/// assert_eq!(path.parent().unwrap().to_string(), "t1/review:0a1b2c3d");
/// assert_eq!(path.to_string(), "t1/review:0a1b2c3d/ask:99aa00ff");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadPath {
    root: String,
    segments: Vec<Segment>,
}

/// Why a string is not a thread path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{given}` is not a thread or subgraph namespace: {reason}")]
pub struct BadPath {
    given: String,
    reason: String,
}

impl ThreadPath {
    /// A root thread (no namespace).
    pub fn root_of(thread: impl Into<String>) -> Self {
        ThreadPath {
            root: thread.into(),
            segments: Vec::new(),
        }
    }

    /// The root thread's id.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The levels below the root, outermost first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// True for a root thread.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The nodes on the way down, outermost first.
    pub fn nodes(&self) -> Vec<&str> {
        self.segments.iter().map(|s| s.node.as_str()).collect()
    }

    /// The namespace below the root (`review:ab12/ask:cd34`); empty for a root thread.
    pub fn namespace(&self) -> String {
        // Written piece by piece (no string per level, no join): each child run builds it.
        let mut out = String::new();
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                out.push('/');
            }
            out.push_str(&s.node);
            out.push(':');
            out.push_str(&s.task);
        }
        out
    }

    /// The path written out (as `Display` writes it) into one allocation: every child run
    /// needs its thread id.
    pub(crate) fn thread_id(&self) -> String {
        let len = self.root.len()
            + self
                .segments
                .iter()
                .map(|s| s.node.len() + s.task.len() + 2)
                .sum::<usize>();
        let mut out = String::with_capacity(len);
        out.push_str(&self.root);
        for s in &self.segments {
            out.push('/');
            out.push_str(&s.node);
            out.push(':');
            out.push_str(&s.task);
        }
        out
    }

    /// The path one level down: the child run by `node`'s task `task`.
    pub fn child(&self, node: &str, task: &str) -> ThreadPath {
        self.child_of_task(node, task.to_string())
    }

    /// The child that the `call`-th subgraph run (from 0) of the frontier's task `task` at
    /// `checkpoint` runs in, when that task's node is `node`: where a node's child is found
    /// again after a crash, and where what it spent is looked up.
    ///
    /// ```
    /// use stategraph::runtime::ThreadPath;
    /// # let checkpoint = uuid::Uuid::from_u128(7);
    /// let child = ThreadPath::root_of("t1").task_child("review", checkpoint, 0, 0);
    /// assert_eq!(child.nodes(), vec!["review"]);
    /// assert_eq!(child, ThreadPath::root_of("t1").task_child("review", checkpoint, 0, 0));
    /// assert_ne!(child, ThreadPath::root_of("t1").task_child("review", checkpoint, 1, 0));
    /// ```
    pub fn task_child(
        &self,
        node: &str,
        checkpoint: CheckpointId,
        task: usize,
        call: u32,
    ) -> ThreadPath {
        self.child_of_task(node, task_id(checkpoint, task, call))
    }

    /// True when `thread` names a root thread, not a subgraph's namespace inside one.
    pub fn is_root_id(thread: &str) -> bool {
        crate::checkpoint::is_root_thread(thread)
    }

    /// [`child`](Self::child) taking the task id it was just given (every child run's path).
    pub(crate) fn child_of_task(&self, node: &str, task: String) -> ThreadPath {
        let mut segments = Vec::with_capacity(self.segments.len() + 1);
        segments.extend_from_slice(&self.segments);
        segments.push(Segment {
            node: node.to_string(),
            task,
        });
        ThreadPath {
            root: self.root.clone(),
            segments,
        }
    }

    /// The path one level up; `None` for a root thread.
    pub fn parent(&self) -> Option<ThreadPath> {
        let mut up = self.clone();
        up.segments.pop()?;
        Some(up)
    }

    /// The node path for messages: `plan > review > ask` (what a person reads in an error).
    pub fn node_path(&self, last: &str) -> String {
        let mut parts = self.nodes();
        parts.push(last);
        parts.join(" > ")
    }

    /// The path with `namespace` (as [`ThreadPath::namespace`] writes it) below this root.
    pub fn with_namespace(&self, namespace: &str) -> Result<ThreadPath, BadPath> {
        if namespace.is_empty() {
            return Ok(ThreadPath::root_of(self.root.clone()));
        }
        format!("{}/{namespace}", self.root).parse()
    }
}

impl fmt::Display for ThreadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.root)?;
        for s in &self.segments {
            write!(f, "/{}:{}", s.node, s.task)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ThreadPath {
    type Err = BadPath;

    fn from_str(s: &str) -> Result<Self, BadPath> {
        let bad = |reason: String| BadPath {
            given: s.to_string(),
            reason,
        };
        let mut parts = s.split('/');
        let root = parts.next().unwrap_or_default();
        validate_thread_id(root).map_err(|e| match e {
            CheckpointError::InvalidThreadId { reason, .. } => {
                bad(format!("its root thread id is invalid ({reason})"))
            }
            other => bad(other.to_string()),
        })?;
        let mut segments = Vec::new();
        for part in parts {
            let Some((node, task)) = part.rsplit_once(':') else {
                return Err(bad(format!(
                    "level `{part}` is not `node:task` (e.g. `review:0a1b2c3d`)"
                )));
            };
            if node.is_empty() || task.is_empty() {
                return Err(bad(format!("level `{part}` has an empty node or task")));
            }
            segments.push(Segment {
                node: node.to_string(),
                task: task.to_string(),
            });
        }
        Ok(ThreadPath {
            root: root.to_string(),
            segments,
        })
    }
}

/// The id of a task's n-th subgraph call at a checkpoint: stable across reruns of the task.
pub(crate) fn task_id(checkpoint: CheckpointId, task: usize, call: u32) -> String {
    let mut h = crc32fast::Hasher::new();
    h.update(checkpoint.as_bytes());
    h.update(&(task as u64).to_le_bytes());
    // Written digit by digit: every child run needs one, and `format!` cost more than the
    // hash.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = h.finalize();
    let mut id = String::with_capacity(19);
    for shift in (0..8).rev() {
        id.push(char::from(HEX[((hash >> (shift * 4)) & 0xf) as usize]));
    }
    if call != 0 {
        id.push('-');
        id.push_str(&call.to_string());
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_round_trips_and_names_its_nodes() {
        let root = ThreadPath::root_of("t");
        let child = root.child("plan", "aa").child("ask", "bb");
        assert_eq!(child.to_string(), "t/plan:aa/ask:bb");
        assert_eq!(child.thread_id(), child.to_string());
        assert_eq!(root.thread_id(), "t");
        assert_eq!(child.to_string().parse::<ThreadPath>().unwrap(), child);
        assert_eq!(child.node_path("q"), "plan > ask > q");
        assert_eq!(child.parent().unwrap(), root.child("plan", "aa"));
        assert!(root.parent().is_none());
        assert_eq!(root.with_namespace("plan:aa/ask:bb").unwrap(), child);
    }

    #[test]
    fn node_names_with_colons_keep_them() {
        let p: ThreadPath = "t/a:b:cc".parse().unwrap();
        assert_eq!(p.segments()[0].node, "a:b");
        assert_eq!(p.segments()[0].task, "cc");
    }

    #[test]
    fn malformed_paths_are_refused_with_a_reason() {
        assert!("t/plan".parse::<ThreadPath>().is_err());
        assert!("/plan:aa".parse::<ThreadPath>().is_err());
        assert!("t/:aa".parse::<ThreadPath>().is_err());
        let e = "t/plan".parse::<ThreadPath>().unwrap_err().to_string();
        assert!(e.contains("node:task"), "{e}");
    }

    #[test]
    fn task_ids_are_stable_and_distinct() {
        let c = CheckpointId::from_u128(7);
        assert_eq!(task_id(c, 1, 0), task_id(c, 1, 0));
        assert_ne!(task_id(c, 1, 0), task_id(c, 2, 0));
        assert_ne!(task_id(c, 1, 0), task_id(c, 1, 1));
    }

    /// Namespaces are stored: a thread saved by an earlier version must find its children.
    #[test]
    fn task_ids_keep_their_written_form() {
        for (checkpoint, task, call) in [(7u128, 1usize, 0u32), (u128::MAX, 0, 0), (1, 3, 12)] {
            let c = CheckpointId::from_u128(checkpoint);
            let mut h = crc32fast::Hasher::new();
            h.update(c.as_bytes());
            h.update(&(task as u64).to_le_bytes());
            let base = format!("{:08x}", h.finalize());
            let expected = if call == 0 {
                base
            } else {
                format!("{base}-{call}")
            };
            assert_eq!(task_id(c, task, call), expected);
        }
    }
}
