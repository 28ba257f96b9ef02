"""Metadata writes and the edges their link keys make (convergences, contradictions)."""

from __future__ import annotations

import json
from typing import Any

from ..checks import merged_metadata, require_id
from ..errors import InvalidInputError, NotFoundError, StateError
from ..vocabulary import EdgeType, JsonArgument, NodeStatus, parse_metadata
from .base import Event, StoreCore
from .records import NodeUpdated
from .rows import NodeRow

Link = tuple[EdgeType, str, dict[str, Any]]  # an edge a link key asks for: its type, target, metadata
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

    def update_node(self, graph_id: str, node_id: str, metadata: JsonArgument) -> NodeUpdated:
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
        """Merge ``meta`` into the node's metadata and create the edges its link keys ask for.

        Set-based: the targets checked in one read, the pairs already linked in one
        more, the new edges in one INSERT, and every event of the merge in one INSERT.
        """
        links = self.targets(graph_id, meta, node.node_id)
        merged, text = merged_metadata(node.metadata, meta, f"node {node.node_id}")
        now = self._core.clock()
        self._db.execute(
            "UPDATE nodes SET metadata = ?, updated_at = ? WHERE node_id = ?",
            [text, now, node.node_id],
        )
        updated: Event = (node.node_id, "metadata_updated", None, {"keys": sorted(meta)})
        return merged, self.add_edges(
            graph_id, node.node_id, self._unlinked(graph_id, node.node_id, links), now, updated
        )

    def add_edges(self, graph_id: str, node_id: str, links: list[Link], now: float, *before: Event) -> int:
        """Insert ``links`` from ``node_id`` (checked by :meth:`targets`, none an edge yet) and log them.

        A node just added has no edge yet, so its links need no read first
        (store/answer.py: a worker's answer with its links).
        """
        if links:
            rows = ", ".join("(nextval('node_seq'), ?, ?, ?, ?, ?, ?)" for _ in links)
            self._db.execute(
                "INSERT INTO edges (seq, graph_id, from_node, to_node, edge_type, metadata, created_at) "
                f"VALUES {rows}",
                [
                    v
                    for edge_type, target, edge_meta in links
                    for v in (graph_id, node_id, target, edge_type.value, json.dumps(edge_meta), now)
                ],
            )
        events = [*before]
        events += [
            (node_id, "edge_added", None, {"to_node": target, "edge_type": edge_type.value, **edge_meta})
            for edge_type, target, edge_meta in links
        ]
        self._core.log_many(graph_id, events, now)
        return len(links)

    def targets(self, graph_id: str, meta: dict[str, Any], node_id: str | None = None) -> list[Link]:
        """Validate link keys before anything is written; return the edges they ask for.

        Every target is a node of the graph (one read), never ``node_id`` itself.
        """
        links: list[Link] = []
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
                links.append(
                    (edge_type, require_id(target, f"metadata[{key!r}]"), {edge_key: text} if text else {})
                )
        missing = self._core.missing(graph_id, list(dict.fromkeys(t for _, t, _ in links)))
        if missing:
            raise NotFoundError(
                f"node {missing[0]!r} not found in graph {graph_id}", graph_id=graph_id, node_id=missing[0]
            )
        return links

    def _unlinked(self, graph_id: str, node_id: str, links: list[Link]) -> list[Link]:
        """The links not already an edge of their type between the pair (either direction): one read."""
        if not links:
            return []
        marks = ", ".join("?" for _ in links)
        targets = [t for _, t, _ in links]
        existing = {
            (edge_type, a if b == node_id else b)
            for a, b, edge_type in self._db.fetchall(
                "SELECT from_node, to_node, edge_type FROM edges WHERE graph_id = ? AND "
                f"((from_node = ? AND to_node IN ({marks})) OR (to_node = ? AND from_node IN ({marks})))",
                [graph_id, node_id, *targets, node_id, *targets],
            )
        }
        return [(t, target, m) for t, target, m in links if (t.value, target) not in existing]
