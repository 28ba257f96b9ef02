"""Exports keep every node and edge with its attributes.

Covers: exploration/exploration.py.
"""

from __future__ import annotations

import networkx as nx

from fractal_nb import Exploration, SimulatedLLM
from tests.engine.test_runs import FAST


def test_to_networkx_keeps_nodes_edges_and_attributes() -> None:
    with Exploration.create(
        "Why do rivers meander?", intensity="explore", llm=SimulatedLLM(seed=3, link_rate=0.5), clock=FAST
    ) as ex:
        ex.run(progress=False)
        snapshot = ex.store.get_snapshot(ex.graph_id)
        graph = ex.to_networkx()
        assert isinstance(graph, nx.MultiDiGraph)
        assert graph.graph["graph_id"] == ex.graph_id and graph.graph["seed"] == snapshot["seed"]
        assert list(graph.nodes) == [n["node_id"] for n in snapshot["nodes"]]
        assert graph.number_of_edges() == len(snapshot["edges"])
        for node in snapshot["nodes"]:
            attrs = graph.nodes[node["node_id"]]
            assert attrs["text"] == node["text"] and attrs["metadata"] == node["metadata"]
            assert attrs["status"] == node["status"] and attrs["depth"] == node["depth"]
        kinds = {key for _, _, key in graph.edges(keys=True)}
        assert "parent_child" in kinds and kinds & {"convergence", "contradiction"}
        tree = nx.DiGraph((u, v) for u, v, k in graph.edges(keys=True) if k == "parent_child")
        assert nx.is_arborescence(tree), "parent-child edges form one tree from the root"
        link = next((u, v, k) for u, v, k in graph.edges(keys=True) if k != "parent_child")
        assert graph.edges[link]["edge_type"] == link[2]
