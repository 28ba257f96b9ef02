"""The DataFrames of store records: a graph's nodes and edges, syntheses, events and model calls.

``Exploration.nodes()`` / ``edges()`` and the state at an event (``Exploration.at``) both build
their frames here, so the two are the same shape column for column; ``syntheses()``,
``events()``, ``llm_calls()``, ``inspect()``, ``gates`` and ``held()`` take theirs from here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..store.records import EdgeRecord, GateRecord, NodeRecord
from ..vocabulary import Support, WeakReason, track_name, track_of

NODE_COLUMNS = [
    "node_id",
    "parent_id",
    "node_type",
    "depth",
    "status",
    "status_reason",
    "inherited_from",
    "owner",
    "branch_id",
    "seq",
    "superseded_turn",
    "text",
    "claimed_at",
    "created_at",
    "updated_at",
]
EDGE_COLUMNS = ["from_node", "to_node", "edge_type", "metadata", "created_at"]
SYNTHESIS_COLUMNS = ["node_id", "depth", "question", "synthesis", "parent_id", "track", "findings", "support"]
EVENT_COLUMNS = ["event_id", "node_id", "kind", "actor", "created_at", "payload"]
CALL_COLUMNS = [
    "call_id",
    "node_id",
    "worker",
    "role",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "tokens_estimated",
    "attempts",
    "corrections",
    "queue_s",
    "latency_s",
    "mode",
    "outcome",
    "error",
    "retry_sampling",
    "refused_usage",
    "created_at",
]


def node_frame(nodes: Sequence[NodeRecord]) -> pd.DataFrame:
    """Nodes in the order given, metadata flattened into ``meta_*`` columns.

    >>> node_frame([]).columns[:3].tolist()
    ['node_id', 'parent_id', 'node_type']
    """
    frame = pd.DataFrame(list(nodes), columns=NODE_COLUMNS)
    meta = pd.json_normalize([n["metadata"] for n in nodes], max_level=0)
    frame = pd.concat([frame, meta.add_prefix("meta_")], axis=1) if len(meta.columns) else frame
    return timestamps(frame, ["claimed_at", "created_at", "updated_at"])


def edge_frame(edges: Sequence[EdgeRecord]) -> pd.DataFrame:
    """Edges (tree and links) in the order given."""
    return timestamps(pd.DataFrame(list(edges), columns=EDGE_COLUMNS), ["created_at"])


def synthesis_frame(nodes: Sequence[NodeRecord]) -> pd.DataFrame:
    """Synthesized questions with their synthesis, root first, deepest last (``Exploration.syntheses``)."""
    rows = [
        {
            "node_id": n["node_id"],
            "depth": n["depth"],
            "question": n["text"],
            "synthesis": n["metadata"]["synthesis"],
            "parent_id": n["parent_id"],
            "track": track_name(n["metadata"]),
            "findings": len(n["metadata"].get("findings") or []),
            "support": _track_support(n["metadata"]),
        }
        for n in nodes
        if n["status"] == "synthesized"
    ]
    frame = pd.DataFrame(rows, columns=SYNTHESIS_COLUMNS)
    return frame.sort_values("depth", kind="stable").reset_index(drop=True)


def event_frame(events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Events (one row per mutation) in the order given."""
    return timestamps(pd.DataFrame(list(events), columns=EVENT_COLUMNS), ["created_at"])


def call_frame(calls: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Model calls in the order given: role, node, worker, model, tokens, latency, outcome, error."""
    return timestamps(pd.DataFrame(list(calls), columns=CALL_COLUMNS), ["created_at"])


def gate_frame(nodes: pd.DataFrame, gates: Sequence[GateRecord]) -> pd.DataFrame:
    """The gated rows of :func:`node_frame`'s ``nodes``, with their halts' ``held``, ``asks``, ``options``."""
    gated = nodes[nodes["status"] == "gated"].reset_index(drop=True)
    halts = {g["node_id"]: g["halt"] for g in gates if g["halt"]}
    gated["held"] = [halts[n]["kind"] if n in halts else None for n in gated["node_id"]]
    gated["asks"] = [halts[n]["question"] if n in halts else None for n in gated["node_id"]]
    gated["options"] = [list(halts[n]["options"]) if n in halts else [] for n in gated["node_id"]]
    return gated


def held_rows(gates: Sequence[GateRecord]) -> list[dict[str, Any]]:
    """The questions a worker holds for the person: node_id, question, kind, asks, options."""
    return [
        {
            "node_id": g["node_id"],
            "question": g["text"],
            "kind": g["halt"]["kind"],
            "asks": g["halt"]["question"],
            "options": list(g["halt"]["options"]),
        }
        for g in gates
        if g["halt"] is not None
    ]


def timestamps(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """ISO-8601 strings of ``columns`` as UTC datetimes (in place; the frame is returned)."""
    for column in columns:
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame


def _track_support(meta: Mapping[str, Any]) -> str | None:
    """A track's support: from its findings' ``support``; None for others.

    See docs/architecture/engine.md, "Tracks".
    """
    if track_of(meta) is None:
        return None
    supports = {f.get("support") for f in meta.get("findings") or []}
    uncited = any(m.get("reason") == WeakReason.UNCITED for m in meta.get("weak") or [])
    if Support.SUPPORTED.value in supports:
        return Support.SUPPORTED.value
    return (
        Support.UNSUPPORTED.value
        if uncited or Support.UNSUPPORTED.value in supports
        else Support.NO_SOURCES.value
    )
