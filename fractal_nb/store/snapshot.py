"""A whole graph's nodes and edges as the tool contract's dicts, the JSON written by DuckDB.

``get_snapshot`` is what an outside agent reads at every step of the seed-000
worker loop, so it must not cost Python per row: DuckDB writes each node and
edge as a JSON object (metadata spliced in as the stored JSON text, byte for
byte; timestamps as ``rows.iso`` writes them) and the list as one JSON array,
which ``json.loads`` reads in C. The dicts are the ones ``NodeRow.to_dict`` and
``rows.edge_dict`` make, key for key and in the same order
(tests/store/test_snapshot_sql.py compares them on every graph shape).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .database import Database
from .records import EdgeRecord, NodeRecord


def micros_sql(column: str) -> str:
    """SQL for a timestamp column's whole microseconds since the epoch, as ``datetime.fromtimestamp`` counts.

    The fraction is rounded half to even on its own, as Python does.
    """
    fraction = f"round_even(({column} - trunc({column})) * 1e6, 0)"
    return f"(CAST(trunc({column}) AS BIGINT) * 1000000 + CAST({fraction} AS BIGINT))"


def iso_sql(micros: str) -> str:
    """SQL for ``rows.iso``: ``datetime.fromtimestamp(s, UTC).isoformat()`` of a :func:`micros_sql` column.

    A fraction of 0 is left out, as Python does (no other part of the text can read ``.000000``).
    """
    return f"replace(strftime(make_timestamp({micros}), '%Y-%m-%dT%H:%M:%S.%f'), '.000000', '') || '+00:00'"


# DuckDB binds and plans a query at every call, and that cost grows with the expression
# (a graph of a few nodes paid 10-15 ms for the first form of these queries): the columns go
# through json_object, each timestamp is made microseconds once in the inner query, and the
# stored metadata is spliced between the two objects as its own JSON text, never parsed.
_TIMES = ("claimed_at", "created_at", "updated_at")


def _spliced(first: str, stamps: Sequence[str]) -> str:
    """SQL for one JSON object: ``first`` (json_object), then the metadata text, then the timestamps."""
    times = "json_object(" + ", ".join(f"'{c}', {iso_sql(c)}" for c in stamps) + ")"
    head, tail = f"rtrim(CAST({first} AS VARCHAR), '}}')", f"ltrim(CAST({times} AS VARCHAR), '{{')"
    return f"""{head} || ',"metadata":' || metadata || ',' || {tail}"""


def _fields(columns: Sequence[str]) -> str:
    return "json_object(" + ", ".join(f"'{c}', {c}" for c in columns) + ")"


_NODE_COLUMNS = (
    "node_id", "graph_id", "parent_id", "node_type", "text", "depth", "status",
    "status_reason", "inherited_from", "owner", "branch_id", "seq", "superseded_turn",
)  # fmt: skip
NODES_SQL = f"""
SELECT coalesce('[' || string_agg({_spliced(_fields(_NODE_COLUMNS), _TIMES)}, ',' ORDER BY seq) || ']', '[]')
FROM (
    SELECT {", ".join(_NODE_COLUMNS)}, metadata, {", ".join(f"{micros_sql(c)} AS {c}" for c in _TIMES)}
    FROM nodes WHERE graph_id = ?
)
"""

# Tree edges come from nodes (a child's parent), links from edges; both in creation order (rows.EDGES_SQL).
EDGES_SQL = f"""
SELECT coalesce('[' || string_agg({_spliced(_fields(("from_node", "to_node", "edge_type")), ["created_at"])},
                                  ',' ORDER BY seq) || ']', '[]')
FROM (
    SELECT seq, from_node, to_node, edge_type, metadata, {micros_sql("created_at")} AS created_at FROM (
        SELECT seq, parent_id AS from_node, node_id AS to_node, 'parent_child' AS edge_type,
               '{{}}' AS metadata, created_at
        FROM nodes WHERE graph_id = ? AND parent_id IS NOT NULL
        UNION ALL
        SELECT seq, from_node, to_node, edge_type, metadata, created_at FROM edges WHERE graph_id = ?
    )
)
"""


def nodes_and_edges(db: Database, graph_id: str) -> tuple[list[NodeRecord], list[EdgeRecord]]:
    """The graph's nodes and edges, in creation order; call inside the caller's read transaction."""
    nodes = db.fetchone(NODES_SQL, [graph_id])
    edges = db.fetchone(EDGES_SQL, [graph_id, graph_id])
    assert nodes is not None and edges is not None  # aggregates: one row each
    found: tuple[list[NodeRecord], list[EdgeRecord]] = (json.loads(nodes[0]), json.loads(edges[0]))
    return found
