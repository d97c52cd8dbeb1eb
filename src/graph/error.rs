/// A graph that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The graph has problems; each says what to fix.
    #[error("the graph is invalid:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
    /// A name given to the compiled graph (interrupt, node lookup) is not one of its nodes.
    #[error("no node named `{name}` in this graph ({context}); its nodes are: {known}")]
    UnknownNode {
        /// The name given.
        name: String,
        /// Where it was given.
        context: &'static str,
        /// The graph's nodes.
        known: String,
    },
}
