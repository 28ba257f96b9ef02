"""The DataFrames of store records: one shape for a graph's nodes and edges, now or at an event.

``Exploration.nodes()`` / ``edges()`` and the state at an event (``Exploration.at``) both build
their frames here, so the two are the same shape column for column.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..store.records import EdgeRecord, NodeRecord

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


def timestamps(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """ISO-8601 strings of ``columns`` as UTC datetimes (in place; the frame is returned)."""
    for column in columns:
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame
