"""The live view's feed: snapshots and deltas read from the store's event log.

The feed remembers the last event id it has sent, so each ``delta()`` holds
only the nodes and links touched since, in their current state. A view that
opens late asks for ``snapshot()``; both carry the event id they reach
(``seq``), so a view can tell a gap and ask again.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Literal, TypedDict

from ..model import NodeStatus
from ..store import GraphStore
from ..store.records import FeedNode
from .network_style import LIVE_PHYSICS_LIMIT, network_options, radial_positions, vis_items


class SnapshotMessage(TypedDict):
    """The whole graph for a view that opens or lost a delta (vis-network items and options)."""

    type: Literal["snapshot"]
    seq: int  # the last event id it covers
    status: str  # the graph's
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    counts: dict[str, int]
    physics_limit: int
    options: dict[str, Any]


class DeltaMessage(TypedDict):
    """What changed after event ``since``, up to ``seq``: nodes and edges in their current state."""

    type: Literal["delta"]
    since: int
    seq: int
    status: str
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    counts: dict[str, int]


class GraphFeed:
    """Deltas of one graph for the live view, from its event log."""

    def __init__(self, store: GraphStore, graph_id: str) -> None:
        self.store = store
        self.graph_id = graph_id
        self.seq = 0
        self.status = ""
        self._questions: dict[str, str] = {}  # question id → status
        self._answers: set[str] = set()
        self._gated: dict[str, str] = {}  # gated question id → its text
        self._lock = threading.Lock()

    def counts(self) -> dict[str, int]:
        """Questions by status (zeros included), then ``answers`` and ``total`` nodes."""
        with self._lock:
            tally = Counter(self._questions.values())
            answers = len(self._answers)
        counts = {s.value: tally.get(s.value, 0) for s in NodeStatus}
        counts["answers"] = answers
        counts["total"] = len(self._questions) + answers
        return counts

    def gated(self) -> dict[str, str]:
        """Gated questions (id → text) in creation order, as of the last snapshot or delta."""
        with self._lock:
            return dict(self._gated)

    def _track(self, rows: list[FeedNode]) -> None:
        for row in rows:
            nid = row["node_id"]
            if row["node_type"] == "answer":
                self._answers.add(nid)
                continue
            self._questions[nid] = row["status"]
            if row["status"] == NodeStatus.GATED:
                self._gated[nid] = row["text"]
            else:
                self._gated.pop(nid, None)

    def snapshot(self) -> SnapshotMessage:
        """The whole graph as a ``snapshot`` message (positions laid out when physics is off)."""
        with self._lock:
            changes = self.store.get_changes(self.graph_id)
            self._questions, self._answers, self._gated = {}, set(), {}
            self._track(changes["nodes"])
            self.seq, self.status = changes["last_event_id"], changes["status"]
        nodes, edges = vis_items(changes)
        if len(nodes) > LIVE_PHYSICS_LIMIT:
            positions = radial_positions(changes["nodes"])
            for node in nodes:
                node["x"], node["y"] = positions[node["id"]]
        return {
            "type": "snapshot",
            "seq": changes["last_event_id"],
            "status": changes["status"],
            "nodes": nodes,
            "edges": edges,
            "counts": self.counts(),
            "physics_limit": LIVE_PHYSICS_LIMIT,
            "options": network_options(len(nodes), physics_limit=LIVE_PHYSICS_LIMIT),
        }

    def delta(self) -> DeltaMessage | None:
        """A ``delta`` message of what changed since the last one, or None when nothing did."""
        with self._lock:
            since = self.seq
            changes = self.store.get_changes(self.graph_id, since=since)
            if changes["last_event_id"] == since and changes["status"] == self.status:
                return None
            self._track(changes["nodes"])
            self.seq, self.status = changes["last_event_id"], changes["status"]
        nodes, edges = vis_items(changes)
        return {
            "type": "delta",
            "since": since,
            "seq": changes["last_event_id"],
            "status": changes["status"],
            "nodes": nodes,
            "edges": edges,
            "counts": self.counts(),
        }
