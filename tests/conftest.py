"""Shared fixtures: an in-memory store, a clock tests can move, a small graph builder."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fractal_nb import GraphStore


class FakeClock:
    """A clock that moves only when told to (leases, timestamps)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fresh_store(clock: FakeClock) -> Iterator[GraphStore]:
    with GraphStore(clock=clock, lease_s=60) as store:
        yield store


@dataclass
class Tree:
    """A graph with the root answered and seed questions hung under that answer."""

    store: GraphStore
    graph_id: str
    root: str
    root_answer: str
    seeds: list[str]

    def answer(self, question: str, text: str = "an answer", **kw: Any) -> str:
        return self.store.add_node(self.graph_id, question, "answer", text, **kw)["node_id"]

    def ask(self, parent: str, text: str = "a question", **kw: Any) -> str:
        return self.store.add_node(self.graph_id, parent, "question", text, **kw)["node_id"]

    def node(self, node_id: str) -> dict[str, Any]:
        nodes = self.store.get_snapshot(self.graph_id)["nodes"]
        return next(n for n in nodes if n["node_id"] == node_id)

    def status(self, node_id: str) -> str:
        return str(self.node(node_id)["status"])


def make_tree(
    store: GraphStore, intensity: str = "explore", checkpoint: str = "autonomous", seeds: int = 3
) -> Tree:
    g = store.create_graph("What makes a city grow?", intensity, checkpoint)
    gid, root = g["graph_id"], g["root_node_id"]
    ans = store.add_node(gid, root, "answer", "Seed decomposition.")["node_id"]
    qs = [store.add_node(gid, ans, "question", f"Seed question {i}")["node_id"] for i in range(seeds)]
    return Tree(store, gid, root, ans, qs)


@pytest.fixture
def tree(fresh_store: GraphStore) -> Tree:
    return make_tree(fresh_store)
