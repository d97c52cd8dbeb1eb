//! How a subgraph's records are keyed: a child graph's thread is `{root}/{namespace}`, so every
//! backend keeps a child's records with its root thread's, lists only root threads, and deletes
//! a root's children with it. A root thread's id never holds the separator
//! ([`validate_thread_id`](crate::validate_thread_id) refuses it), so these two functions are all
//! a backend needs to know of namespaces; what a namespace means is the runtime's
//! (`stategraph::runtime::ThreadPath`).

/// What separates a root thread from its namespace, and one namespace level from the next.
pub const NAMESPACE_SEPARATOR: char = '/';

/// True when `thread` is a root thread, not a subgraph's namespace inside one.
///
/// ```
/// use stategraph_checkpoint::is_root_thread;
/// assert!(is_root_thread("t1"));
/// assert!(!is_root_thread("t1/review:0a1b2c3d"));
/// ```
pub fn is_root_thread(thread: &str) -> bool {
    !thread.contains(NAMESPACE_SEPARATOR)
}

/// The root thread that holds `thread`'s records (itself for a root thread).
///
/// ```
/// use stategraph_checkpoint::root_thread;
/// assert_eq!(root_thread("t1/review:0a1b2c3d/ask:99aa00ff"), "t1");
/// assert_eq!(root_thread("t1"), "t1");
/// ```
pub fn root_thread(thread: &str) -> &str {
    thread.split(NAMESPACE_SEPARATOR).next().unwrap_or(thread)
}
