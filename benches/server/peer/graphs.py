"""The server benchmark's two graphs for `langgraph dev`, the same shapes as
examples/serve_bench.rs (and ../shared/bench/WORKLOADS.md, the chain cut to 10 nodes).

No checkpointer here: `langgraph dev` gives every graph its in-memory one (langgraph-runtime-inmem).
"""
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class Count(TypedDict):
    count: int


def _chain(n=10):
    g = StateGraph(Count)
    names = [f"n{i}" for i in range(n)]
    for name in names:
        g.add_node(name, lambda s: {"count": s["count"] + 1})
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile()


class Fan(TypedDict):
    results: Annotated[list, operator.add]


def _fanout(width=10):
    g = StateGraph(Fan)
    g.add_node("split", lambda s: {"results": []})
    workers = [f"w{i}" for i in range(width)]
    for i, w in enumerate(workers):
        g.add_node(w, (lambda i: lambda s: {"results": [i]})(i))
        g.add_edge("split", w)
    g.add_node("join", lambda s: {"results": [len(s["results"])]})
    g.add_edge(START, "split")
    g.add_edge(workers, "join")
    g.add_edge("join", END)
    return g.compile()


chain10 = _chain()
fanout = _fanout()
