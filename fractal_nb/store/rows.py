"""Row shapes: the columns the store selects and their JSON-ready dict forms."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from ..vocabulary import BUDGETS, DEFAULT_STRATEGY, Intensity, is_chain
from .records import EdgeRecord, GraphRecord, NodeRecord

NODE_COLUMNS = (
    "node_id, graph_id, parent_id, node_type, text, depth, status, status_reason, "
    "inherited_from, owner, claimed_at, lease_s, metadata, created_at, updated_at, "
    "seq, branch_id, question_id, path, superseded_turn"
)
GRAPH_COLUMNS = (
    "graph_id, seed, intensity, checkpoint_mode, status, status_reason, root_node_id, "
    "metadata, created_at, updated_at"
)
# Tree edges come from nodes, links from edges; both carry a seq from node_seq.
EDGES_SQL = """
    SELECT * FROM (
        SELECT seq, parent_id AS from_node, node_id AS to_node, 'parent_child' AS edge_type,
               '{{}}' AS metadata, created_at
        FROM nodes WHERE graph_id = ? AND parent_id IS NOT NULL AND {tree}
        UNION ALL
        SELECT seq, from_node, to_node, edge_type, metadata, created_at
        FROM edges WHERE graph_id = ? AND {links}
    ) AS edges_and_tree ORDER BY seq
"""
EVENT_COLUMNS = "event_id, graph_id, node_id, kind, actor, created_at, payload"


def iso(seconds: float | None) -> str | None:
    """Store-clock seconds as an ISO-8601 UTC string."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@dataclass(frozen=True)
class NodeRow:
    """One row of ``nodes`` as the store reasons about it."""

    node_id: str
    graph_id: str
    parent_id: str | None
    node_type: str
    text: str
    depth: int
    status: str
    status_reason: str | None
    inherited_from: str | None
    owner: str | None
    claimed_at: float | None
    lease_s: float | None
    metadata_json: str
    created_at: float
    updated_at: float
    seq: int
    branch_id: str | None
    question_id: str | None
    path: str
    superseded_turn: int | None = None  # the turn that replaced it (None: current)

    @property
    def ancestors(self) -> list[str]:
        """Ids of the questions above this node, root first (an answer's include its question)."""
        return self.path.split("/") if self.path else []

    @property
    def metadata(self) -> dict[str, Any]:
        """Metadata as a fresh dict."""
        value: dict[str, Any] = json.loads(self.metadata_json)
        return value

    def to_dict(self) -> NodeRecord:
        """The node dict of the tool contract (ids as strings, JSON-ready)."""
        return {
            "node_id": self.node_id,
            "graph_id": self.graph_id,
            "parent_id": self.parent_id,
            "node_type": self.node_type,
            "text": self.text,
            "depth": self.depth,
            "status": self.status,
            "status_reason": self.status_reason,
            "inherited_from": self.inherited_from,
            "owner": self.owner,
            "branch_id": self.branch_id,
            "seq": self.seq,
            "superseded_turn": self.superseded_turn,
            "metadata": self.metadata,
            "claimed_at": iso(self.claimed_at),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


@dataclass(frozen=True)
class GraphRow:
    """One row of ``graphs``."""

    graph_id: str
    seed: str
    intensity: str
    checkpoint_mode: str
    status: str
    status_reason: str | None
    root_node_id: str
    metadata_json: str
    created_at: float
    updated_at: float

    @cached_property
    def strategy(self) -> str:
        """How the graph thinks (metadata ``strategy``; absent: ``fractal``), a registered strategy's name.

        Parsed once per row: the claim query asks it on every claim, and the metadata may hold a harvest.
        """
        meta = json.loads(self.metadata_json)
        return str(meta.get("strategy") or DEFAULT_STRATEGY) if isinstance(meta, dict) else DEFAULT_STRATEGY

    @property
    def chained(self) -> bool:
        """Whether the graph is one chain of levels (the thinkon strategy; store/chain.py).

        What the store's chain rules guard: the root is the first level and claimable,
        a level's sub-goals are its Eval's calls alone (no turns), and a failed level
        stays its failed return (no recovery).
        """
        return is_chain(self.strategy)

    def to_dict(self) -> GraphRecord:
        """Graph fields shared by snapshots and status results."""
        return {
            "graph_id": self.graph_id,
            "seed": self.seed,
            "intensity": self.intensity,
            "checkpoint_mode": self.checkpoint_mode,
            "budget": BUDGETS[Intensity(self.intensity)].to_dict(),
            "status": self.status,
            "status_reason": self.status_reason,
            "root_node_id": self.root_node_id,
            "metadata": json.loads(self.metadata_json),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


def edge_dict(row: tuple[Any, ...]) -> EdgeRecord:
    """An EDGES_SQL row as the contract's edge dict."""
    _seq, from_node, to_node, edge_type, metadata, created_at = row
    return {
        "from_node": from_node,
        "to_node": to_node,
        "edge_type": edge_type,
        "metadata": json.loads(metadata),
        "created_at": iso(created_at),
    }


def event_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """An ``events`` row (EVENT_COLUMNS order) as a JSON-ready dict."""
    event_id, graph_id, node_id, kind, actor, created_at, payload = row
    return {
        "event_id": event_id,
        "graph_id": graph_id,
        "node_id": node_id,
        "kind": kind,
        "actor": actor,
        "created_at": iso(created_at),
        "payload": json.loads(payload),
    }
