"""Exports of a graph snapshot to other tools; pure functions of the snapshot dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from ..store.records import Snapshot

GRAPH_FIELDS = ("graph_id", "seed", "intensity", "checkpoint_mode", "status", "root_node_id")


def to_networkx(snapshot: Snapshot) -> nx.MultiDiGraph:
    """The snapshot as a ``MultiDiGraph``: every node and edge field kept as attributes.

    A multigraph, because two answers may be linked both as a convergence and a
    contradiction; each edge's key is its ``edge_type``.
    """
    fields: Mapping[str, Any] = snapshot
    graph = nx.MultiDiGraph(**{field: fields[field] for field in GRAPH_FIELDS})
    for node in snapshot["nodes"]:
        graph.add_node(node["node_id"], **{k: v for k, v in node.items() if k != "node_id"})
    for edge in snapshot["edges"]:
        graph.add_edge(
            edge["from_node"],
            edge["to_node"],
            key=edge["edge_type"],
            **{k: v for k, v in edge.items() if k not in ("from_node", "to_node")},
        )
    return graph
