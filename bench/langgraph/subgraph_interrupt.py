#!/usr/bin/env python3
"""LangGraph side of the subgraph-with-an-interrupt differential (docs/composition.md).

A writer graph `outline -> research -> draft -> END` whose `research` node is a compiled subgraph
`search -> confirm -> END`; `confirm` asks a person (`interrupt`). The run is invoked once (it stops at
the question), then resumed with `Command(resume="the book")`. Prints one JSON object: the final state,
how many times each node's function ran, and how many checkpoints the parent and the subgraph wrote.

Usage (after bench/langgraph/setup.sh):
    bench/.venv/bin/python bench/langgraph/subgraph_interrupt.py
The Rust side is `tests/tests/engine/langgraph.rs` (`a_subgraph_interrupt_resumes_in_place_as_in_langgraph`).
"""

from __future__ import annotations

import json
import operator
from collections import Counter
from importlib.metadata import version as pkg_version
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

RUNS: Counter[str] = Counter()


class Draft(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


class Findings(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


def search(s: Findings) -> Findings:
    RUNS["search"] += 1
    return {"notes": [f"search:{s['topic']}"]}


def confirm(s: Findings) -> Findings:
    RUNS["confirm"] += 1
    source = interrupt("which source should we trust?")
    return {"notes": [source]}


def outline(s: Draft) -> Draft:
    RUNS["outline"] += 1
    return {"notes": [f"outline:{s['topic']}"]}


def draft(s: Draft) -> Draft:
    RUNS["draft"] += 1
    return {"notes": ["drafted"]}


def main() -> None:
    sub = StateGraph(Findings)
    sub.add_node("search", search)
    sub.add_node("confirm", confirm)
    sub.add_edge(START, "search")
    sub.add_edge("search", "confirm")
    sub.add_edge("confirm", END)
    research = sub.compile()

    # The subgraph's state shares the `topic` and `notes` keys with the parent's: LangGraph maps them
    # by name (the Rust side writes the two mapping functions).
    g = StateGraph(Draft)
    g.add_node("outline", outline)
    g.add_node("research", research)
    g.add_node("draft", draft)
    g.add_edge(START, "outline")
    g.add_edge("outline", "research")
    g.add_edge("research", "draft")
    g.add_edge("draft", END)
    saver = InMemorySaver()
    app = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "w"}}

    first = app.invoke({"topic": "rust", "notes": []}, config)
    asked = [i.value for i in first.get("__interrupt__", [])]
    final = app.invoke(Command(resume="the book"), config)
    namespaces = Counter(
        c.config["configurable"].get("checkpoint_ns", "") == "" for c in saver.list(None)
    )
    print(
        json.dumps(
            {
                "langgraph": pkg_version("langgraph"),
                "asked": asked,
                "notes": final["notes"],
                "runs": dict(sorted(RUNS.items())),
                "parent_checkpoints": namespaces[True],
                "subgraph_checkpoints": namespaces[False],
            }
        )
    )


if __name__ == "__main__":
    main()
