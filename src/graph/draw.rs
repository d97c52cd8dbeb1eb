//! Drawing a compiled graph as Mermaid or Graphviz DOT.

use super::command::{END, START};
use super::compiled::CompiledGraph;
use crate::state::State;
use std::fmt::Write;

/// One drawn edge.
struct Edge<'a> {
    from: &'a str,
    to: &'a str,
    kind: EdgeKind,
    label: Option<&'a str>,
}

#[derive(PartialEq)]
enum EdgeKind {
    Static,
    Conditional,
    Join,
    Command,
}

fn edges<S: State>(g: &CompiledGraph<S>) -> Vec<Edge<'_>> {
    let b = &g.topology.builder;
    let mut out = Vec::new();
    for (from, to) in &b.edges {
        out.push(Edge {
            from,
            to,
            kind: EdgeKind::Static,
            label: None,
        });
    }
    for j in &b.joins {
        for s in &j.sources {
            out.push(Edge {
                from: s,
                to: &j.target,
                kind: EdgeKind::Join,
                label: Some("join"),
            });
        }
    }
    for r in &b.routers {
        for t in &r.targets {
            out.push(Edge {
                from: &r.from,
                to: t,
                kind: EdgeKind::Conditional,
                label: Some(&r.label),
            });
        }
    }
    for n in &b.nodes {
        for t in &n.options.destinations {
            out.push(Edge {
                from: &n.name,
                to: t,
                kind: EdgeKind::Command,
                label: Some("command"),
            });
        }
    }
    out
}

fn mermaid_id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn escape(label: &str) -> String {
    label.replace('"', "'")
}

/// How a drawing is made.
///
/// ```
/// use stategraph::graph::DrawOptions;
/// assert_eq!(DrawOptions::xray(1).xray, 1);
/// assert_eq!(DrawOptions::default().xray, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrawOptions {
    /// How many levels of subgraphs to draw inside the node that runs them, as a Mermaid
    /// `subgraph` block (0: a subgraph is one node; LangGraph's `xray`).
    pub xray: usize,
}

impl DrawOptions {
    /// Subgraphs expanded `levels` deep.
    pub fn xray(levels: usize) -> Self {
        DrawOptions { xray: levels }
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph as a Mermaid flowchart.
    pub fn to_mermaid(&self) -> String {
        mermaid(self, DrawOptions::default())
    }

    /// The graph as a Mermaid flowchart drawn with `options`: with
    /// [`DrawOptions::xray`], subgraphs are drawn inside the nodes that run them.
    pub fn to_mermaid_with(&self, options: DrawOptions) -> String {
        mermaid(self, options)
    }

    /// The graph as Graphviz DOT.
    pub fn to_dot(&self) -> String {
        dot(self)
    }
}

/// Mermaid flowchart text. Conditional edges are dashed and labelled with the router's label.
/// With `xray`, a node that runs subgraphs is drawn as a `subgraph` block holding the child's
/// own nodes and edges (ids prefixed with the node's), and the parent's edges lead to the block.
fn mermaid<S: State>(g: &CompiledGraph<S>, options: DrawOptions) -> String {
    let mut s = String::from("graph TD;\n");
    s.push_str(&mermaid_body(g, "", options.xray));
    s.push_str("\tclassDef first fill-opacity:0\n\tclassDef last fill:#bfb6fc\n");
    s
}

/// The nodes and edges of `g`, one per line, ids prefixed with `prefix`.
pub(crate) fn mermaid_body<S: State>(g: &CompiledGraph<S>, prefix: &str, xray: usize) -> String {
    let id = |name: &str| format!("{prefix}{}", mermaid_id(name));
    let mut s = String::new();
    let _ = writeln!(s, "\t{}([\"START\"]):::first", id(START));
    for n in &g.topology.builder.nodes {
        let views = if xray > 0 {
            g.subgraphs_of(&n.name)
        } else {
            Vec::new()
        };
        if !views.is_empty() {
            let block = id(&n.name);
            let _ = writeln!(s, "\tsubgraph {block}[\"{}\"]", escape(&n.name));
            for (k, view) in views.iter().enumerate() {
                let inner = if views.len() == 1 {
                    format!("{block}__")
                } else {
                    format!("{block}__{k}__")
                };
                for line in view.mermaid_body(&inner, xray - 1).lines() {
                    let _ = writeln!(s, "\t{line}");
                }
            }
            s.push_str("\tend\n");
            continue;
        }
        let shape = if n.options.deferred {
            ("[[\"", "\"]]")
        } else {
            ("(\"", "\")")
        };
        let _ = writeln!(
            s,
            "\t{}{}{}{}",
            id(&n.name),
            shape.0,
            escape(&n.name),
            shape.1
        );
    }
    let _ = writeln!(s, "\t{}([\"END\"]):::last", id(END));
    for e in edges(g) {
        let arrow = match e.kind {
            EdgeKind::Static | EdgeKind::Join => "-->",
            EdgeKind::Conditional | EdgeKind::Command => "-.->",
        };
        match e.label {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "\t{} {}|\"{}\"| {};",
                    id(e.from),
                    arrow,
                    escape(l),
                    id(e.to)
                );
            }
            None => {
                let _ = writeln!(s, "\t{} {} {};", id(e.from), arrow, id(e.to));
            }
        }
    }
    s
}

fn dot_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Graphviz DOT text. Conditional edges are dashed and labelled.
fn dot<S: State>(g: &CompiledGraph<S>) -> String {
    let name = g.topology.builder.name.as_deref().unwrap_or("graph");
    let mut s = format!("digraph {} {{\n\trankdir=TB;\n", dot_quote(name));
    let _ = writeln!(s, "\t{} [label=\"START\", shape=oval];", dot_quote(START));
    let _ = writeln!(s, "\t{} [label=\"END\", shape=oval];", dot_quote(END));
    for n in &g.topology.builder.nodes {
        let extra = if n.options.deferred {
            ", peripheries=2"
        } else {
            ""
        };
        let _ = writeln!(s, "\t{} [shape=box{}];", dot_quote(&n.name), extra);
    }
    for e in edges(g) {
        let mut attrs = Vec::new();
        if matches!(e.kind, EdgeKind::Conditional | EdgeKind::Command) {
            attrs.push("style=dashed".to_string());
        }
        if let Some(l) = e.label {
            attrs.push(format!("label={}", dot_quote(l)));
        }
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(" [{}]", attrs.join(", "))
        };
        let _ = writeln!(
            s,
            "\t{} -> {}{};",
            dot_quote(e.from),
            dot_quote(e.to),
            attrs
        );
    }
    s.push_str("}\n");
    s
}
