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

from .database import Database
from .records import EdgeRecord, NodeRecord


def iso_sql(column: str) -> str:
    """SQL for ``rows.iso(column)``: ``datetime.fromtimestamp(s, UTC).isoformat()``, or NULL.

    The microseconds are rounded half to even from the fraction, as Python does.
    """
    fraction = f"round_even(({column} - trunc({column})) * 1e6, 0)"
    micros = f"(CAST(trunc({column}) AS BIGINT) * 1000000 + CAST({fraction} AS BIGINT))"
    return (
        f"(strftime(make_timestamp({micros}), '%Y-%m-%dT%H:%M:%S') || CASE WHEN {micros} % 1000000 = 0 "
        f"THEN '' ELSE '.' || lpad(CAST({micros} % 1000000 AS VARCHAR), 6, '0') END || '+00:00')"
    )


def _object(fields: list[tuple[str, str]]) -> str:
    """SQL concatenating a JSON object: each (key, SQL expression of JSON text, never NULL)."""
    parts = [f"'{'{' if i == 0 else ','}\"{key}\":' || {value}" for i, (key, value) in enumerate(fields)]
    return " || ".join(parts) + " || '}'"


def _value(column: str) -> str:
    """A column as JSON text (``null`` for NULL)."""
    return f"coalesce(CAST(to_json({column}) AS VARCHAR), 'null')"


def _time(column: str) -> str:
    return f"coalesce(CAST(to_json({iso_sql(column)}) AS VARCHAR), 'null')"


_NODE = _object(
    [
        *(
            (c, _value(c))
            for c in ("node_id", "graph_id", "parent_id", "node_type", "text", "depth", "status")
        ),
        *(
            (c, _value(c))
            for c in ("status_reason", "inherited_from", "owner", "branch_id", "seq", "superseded_turn")
        ),
        ("metadata", "metadata"),  # the stored JSON text as it is
        ("claimed_at", _time("claimed_at")),
        ("created_at", _time("created_at")),
        ("updated_at", _time("updated_at")),
    ]
)
NODES_SQL = f"""
SELECT coalesce('[' || string_agg({_NODE}, ',' ORDER BY seq) || ']', '[]') FROM nodes WHERE graph_id = ?
"""

_EDGE = _object(
    [
        ("from_node", _value("from_node")),
        ("to_node", _value("to_node")),
        ("edge_type", _value("edge_type")),
        ("metadata", "metadata"),
        ("created_at", _time("created_at")),
    ]
)
# Tree edges come from nodes (a child's parent), links from edges; both in creation order (rows.EDGES_SQL).
EDGES_SQL = f"""
SELECT coalesce('[' || string_agg({_EDGE}, ',' ORDER BY seq) || ']', '[]') FROM (
    SELECT seq, parent_id AS from_node, node_id AS to_node, 'parent_child' AS edge_type, '{{}}' AS metadata,
           created_at
    FROM nodes WHERE graph_id = ? AND parent_id IS NOT NULL
    UNION ALL
    SELECT seq, from_node, to_node, edge_type, metadata, created_at FROM edges WHERE graph_id = ?
)
"""


def nodes_and_edges(db: Database, graph_id: str) -> tuple[list[NodeRecord], list[EdgeRecord]]:
    """The graph's nodes and edges, in creation order; call inside the caller's read transaction."""
    nodes = db.fetchone(NODES_SQL, [graph_id])
    edges = db.fetchone(EDGES_SQL, [graph_id, graph_id])
    assert nodes is not None and edges is not None  # aggregates: one row each
    found: tuple[list[NodeRecord], list[EdgeRecord]] = (json.loads(nodes[0]), json.loads(edges[0]))
    return found
