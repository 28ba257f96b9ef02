"""Metadata writes and the edges their link keys make (convergences, contradictions)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidInputError, StateError
from ..model import EdgeType, NodeStatus, parse_metadata
from .base import StoreCore, merged_metadata
from .records import NodeUpdated
from .rows import NodeRow

# Metadata keys that create edges, and the key whose text becomes the edge's metadata.
_LINK_KEYS = {
    "convergence_with": (EdgeType.CONVERGENCE, "convergence_insight", "insight"),
    "contradiction_with": (EdgeType.CONTRADICTION, "contradiction_tension", "tension"),
}


class Links:
    """Merging metadata into a node, with the edges its link keys ask for (never doubled)."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db

    def update_node(self, graph_id: str, node_id: str, metadata: dict[str, Any] | str) -> NodeUpdated:
        """Merge ``metadata`` into the node's (shallow); link keys create edges once.

        ``convergence_with`` / ``contradiction_with`` (lists of node ids) create
        convergence / contradiction edges carrying ``convergence_insight`` /
        ``contradiction_tension``; an edge between the same pair is never doubled.
        """
        meta = parse_metadata(metadata)
        if not meta:  # nothing to merge: a no-op, as the reference treats it
            node = self._core.node(self._core.known_graph(graph_id).graph_id, node_id)
            return {"node_id": node.node_id, "metadata": node.metadata, "edges_created": 0}
        with self._db.write():
            graph, node = self._core.active_node(graph_id, node_id)
            question = self._core.question_of(node)
            if NodeStatus.SATURATED in (node.status, question.status):
                raise StateError(
                    f"node {node.node_id} is in a saturated branch "
                    f"({question.status_reason or node.status_reason}); it takes no more writes",
                    graph_id=graph.graph_id,
                    node_id=node.node_id,
                )
            merged, created = self.merge(graph.graph_id, node, meta)
        return {"node_id": node.node_id, "metadata": merged, "edges_created": created}

    def merge(self, graph_id: str, node: NodeRow, meta: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """Merge ``meta`` into the node's metadata and create the edges its link keys ask for."""
        links = self._link_targets(graph_id, node.node_id, meta)
        merged, text = merged_metadata(node.metadata, meta, f"node {node.node_id}")
        now = self._core.clock()
        self._db.execute(
            "UPDATE nodes SET metadata = ?, updated_at = ? WHERE node_id = ?",
            [text, now, node.node_id],
        )
        self._core.log(graph_id, node.node_id, "metadata_updated", None, {"keys": sorted(meta)}, now)
        created = 0
        for edge_type, target, edge_meta in links:
            if not self._linked(graph_id, node.node_id, target, edge_type):
                self._insert_edge(graph_id, node.node_id, target, edge_type, edge_meta, now)
                created += 1
        return merged, created

    def _link_targets(
        self, graph_id: str, node_id: str, meta: dict[str, Any]
    ) -> list[tuple[EdgeType, str, dict[str, Any]]]:
        """Validate link keys before anything is written; return the edges they ask for."""
        links = []
        for key, (edge_type, text_key, edge_key) in _LINK_KEYS.items():
            if key not in meta:
                continue
            targets = meta[key]
            if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
                raise InvalidInputError(f"metadata[{key!r}] must be a list of node ids, not {targets!r}")
            text = meta.get(text_key)
            if text is not None and not isinstance(text, str):
                raise InvalidInputError(f"metadata[{text_key!r}] must be a string, not {text!r}")
            for target in dict.fromkeys(targets):
                if target == node_id:
                    raise InvalidInputError(f"metadata[{key!r}] names node {node_id} itself")
                self._core.node(graph_id, target, f"metadata[{key!r}]")
                links.append((edge_type, target, {edge_key: text} if text else {}))
        return links

    def _linked(self, graph_id: str, a: str, b: str, edge_type: EdgeType) -> bool:
        row = self._db.fetchone(
            "SELECT 1 FROM edges WHERE graph_id = ? AND edge_type = ? AND ((from_node = ? AND to_node = ?) "
            "OR (from_node = ? AND to_node = ?))",
            [graph_id, edge_type, a, b, b, a],
        )
        return row is not None

    def _insert_edge(
        self,
        graph_id: str,
        from_node: str,
        to_node: str,
        edge_type: EdgeType,
        meta: dict[str, Any],
        now: float,
    ) -> None:
        self._db.execute(
            "INSERT INTO edges VALUES (nextval('node_seq'), ?, ?, ?, ?, ?, ?)",
            [graph_id, from_node, to_node, edge_type.value, json.dumps(meta), now],
        )
        self._core.log(
            graph_id,
            from_node,
            "edge_added",
            None,
            {"to_node": to_node, "edge_type": edge_type.value, **meta},
            now,
        )
