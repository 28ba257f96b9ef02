"""Every read of a graph's nodes, edges or events is scoped by ``graph_id``.

docs/architecture/store.md, "History and forks".

Forks live beside their source in one file: a query that filters nodes by a parent or a
question, or events by a node, without naming the graph scans every graph of the file. A key
lookup (``node_id = ?`` on its own) is the only unscoped read allowed.
"""

from __future__ import annotations

import re

from fractal_nb import Exploration, SimulatedLLM
from tests.conftest import Backend

_READS = re.compile(r"\bFROM (nodes|edges|events)\b")
_KEY_LOOKUP = re.compile(r"FROM nodes WHERE node_id = \?\s*$")


def unscoped(statements: list[str]) -> set[str]:
    """The statements reading nodes, edges or events that name no graph (key lookups aside)."""
    return {
        " ".join(s.split())
        for s in statements
        if _READS.search(s) and "graph_id" not in s and not _KEY_LOOKUP.search(" ".join(s.split()))
    }


def test_steering_and_its_run_read_only_their_own_graph(backend: Backend) -> None:
    seen: list[str] = []
    with backend.open(tracer=lambda sql, _params: seen.append(sql)) as store:
        other = store.create_graph("Why do rivers meander?", "pulse")["graph_id"]
        graph_id = store.create_graph("Why do cities grow?", "pulse")["graph_id"]
        ex = Exploration(store, graph_id, SimulatedLLM())
        ex.run(max_workers=1, progress=False)
        ex.harvest()
        store.fork_graph(graph_id, int(ex.events()["event_id"].max()))  # a fork beside it
        seeds = ex.nodes().query("depth == 1 and node_type == 'question'")["node_id"].tolist()
        seen.clear()
        ex.ask("What about the rivers through them?")
        dropped = ex.ask("What about the weather?").created[0]
        ex.prune(dropped)  # a prune cascades over what is below
        ex.note(seeds[0], "A census says so.")
        ex.redecompose(seeds[1], hint="money first")
        ex.deepen(seeds[2])
        ex.run(max_workers=1, progress=False)
        ex.harvest()
        store.get_branch(graph_id, seeds[2])
        assert unscoped(seen) == set()
        assert store.get_graph(other)["status"] == "active"


def test_a_link_between_answers_reads_only_its_own_graph(backend: Backend) -> None:
    seen: list[str] = []
    with backend.open(tracer=lambda sql, _params: seen.append(sql)) as store:
        graph_id = store.create_graph("Why do cities grow?", "pulse")["graph_id"]
        ex = Exploration(store, graph_id, SimulatedLLM())
        ex.run(max_workers=1, progress=False)
        answers = ex.nodes().query("depth == 1 and node_type == 'answer'")["node_id"].tolist()
        seen.clear()
        link = {"convergence_with": [answers[1]], "convergence_insight": "the same cause"}
        store.update_node(graph_id, answers[0], link)
        store.update_node(graph_id, answers[0], link)  # linked already: no second edge
        assert unscoped(seen) == set()
        edges = ex.edges().query("edge_type == 'convergence'")
        pair = {answers[0], answers[1]}
        assert sum({e.from_node, e.to_node} == pair for e in edges.itertuples()) == 1  # one edge, not two
