"""A whole graph's nodes and edges as the tool contract's dicts, the JSON written by the database.

``get_snapshot`` is what an outside agent reads at every step of the seed-000
worker loop, so it must not cost Python per node: the database writes each node and
edge as a JSON object (metadata spliced in as the stored JSON text, byte for
byte; timestamps as ``rows.iso`` writes them). The dicts are the ones
``NodeRow.to_dict`` and ``rows.edge_dict`` make, key for key and in the same
order (tests/store/test_snapshot_sql.py compares them on every graph shape), and
PostgreSQL writes the bytes DuckDB writes (tests/store/test_dialect_reads.py).

A step of that loop changes a node or two, so :class:`SnapshotTexts` keeps each
row's text with a hash of the row it was written from, and has the database write
again only the rows whose hash differs (docs/architecture/store.md, "The snapshot").
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .database import Database
from .dialect import Dialect, Per, pick


def micros_sql(column: str, dialect: Dialect = Dialect.DUCKDB) -> str:
    """SQL for a timestamp column's whole microseconds since the epoch, as ``datetime.fromtimestamp`` counts.

    The fraction is rounded half to even on its own, as Python does (PostgreSQL's
    ``round`` of a double precision rounds half to even).

    >>> micros_sql("t", Dialect.POSTGRESQL)
    '(CAST(trunc(t) AS BIGINT) * 1000000 + CAST(round((t - trunc(t)) * 1e6::float8) AS BIGINT))'
    """
    if dialect is Dialect.DUCKDB:
        fraction = f"round_even(({column} - trunc({column})) * 1e6, 0)"
    else:
        fraction = f"round(({column} - trunc({column})) * 1e6::float8)"
    return f"(CAST(trunc({column}) AS BIGINT) * 1000000 + CAST({fraction} AS BIGINT))"


def iso_sql(micros: str, dialect: Dialect = Dialect.DUCKDB) -> str:
    """SQL for ``rows.iso``: ``datetime.fromtimestamp(s, UTC).isoformat()`` of a :func:`micros_sql` column.

    A fraction of 0 is left out, as Python does (no other part of the text can read ``.000000``).
    On PostgreSQL the microseconds are added to the epoch as an interval, in integers: no
    float of seconds on the way (``to_timestamp`` of one can be a microsecond off).
    """
    if dialect is Dialect.DUCKDB:
        stamp = f"strftime(make_timestamp({micros}), '%Y-%m-%dT%H:%M:%S.%f')"
    else:
        stamp = (
            f"to_char(TIMESTAMP 'epoch' + {micros} * INTERVAL '1 microsecond', "
            """'YYYY-MM-DD"T"HH24:MI:SS.US')"""
        )
    return f"replace({stamp}, '.000000', '') || '+00:00'"


# DuckDB binds and plans a query at every call, and that cost grows with the expression
# (a graph of a few nodes paid 10-15 ms for the first form of these queries): the columns go
# through json_object, each timestamp is made microseconds once in the inner query, and the
# stored metadata is spliced between the two objects as its own JSON text, never parsed.
# PostgreSQL's json_build_object writes '"key" : value': there the object is concatenated from
# each value's to_json text, so both engines write the same bytes (but for a control character's
# escape, which DuckDB writes in upper-case hex: \u001F against \u001f; both read back alike).
_TIMES = ("claimed_at", "created_at", "updated_at")
_Pairs = Sequence[tuple[str, str]]  # an object's keys and the SQL of each value's JSON text (PostgreSQL)


def _json_of(value: str) -> str:
    """PostgreSQL: the JSON text of the SQL value ``value`` (``null`` for NULL)."""
    return f"coalesce(to_json({value})::text, 'null')"


def _concatenated(pairs: _Pairs) -> str:
    """PostgreSQL: SQL writing one JSON object from ``pairs``, with no spaces (as DuckDB writes it)."""
    parts = [f"""'{"{" if i == 0 else ","}"{key}":' || {value}""" for i, (key, value) in enumerate(pairs)]
    return " || ".join(parts) + " || '}'"


def _spliced(first: str, stamps: Sequence[str], metadata: str = "metadata") -> str:
    """SQL for one JSON object: ``first`` (json_object), then the metadata text, then the timestamps."""
    times = "json_object(" + ", ".join(f"'{c}', {iso_sql(c)}" for c in stamps) + ")"
    head, tail = f"rtrim(CAST({first} AS VARCHAR), '}}')", f"ltrim(CAST({times} AS VARCHAR), '{{')"
    return f"""{head} || ',"metadata":' || {metadata} || ',' || {tail}"""


def _spliced_pg(first: _Pairs, stamps: Sequence[str], metadata: str = "metadata") -> str:
    """:func:`_spliced` on PostgreSQL: the same object, key for key, byte for byte."""
    times = [(c, _json_of(iso_sql(c, Dialect.POSTGRESQL))) for c in stamps]
    return _concatenated([*first, ("metadata", metadata), *times])


def _fields(columns: Sequence[str]) -> str:
    return "json_object(" + ", ".join(f"'{c}', {c}" for c in columns) + ")"


def _fields_pg(columns: Sequence[str]) -> _Pairs:
    return [(c, _json_of(c)) for c in columns]


def _row_hash_pg(columns: Sequence[str]) -> str:
    """PostgreSQL: a 64-bit hash of a row's columns (DuckDB's ``hash(...)``; only ever compared)."""
    return f"hashtextextended(row({', '.join(columns)})::text, 0)"


_NODE_COLUMNS = (
    "node_id", "graph_id", "parent_id", "node_type", "text", "depth", "status",
    "status_reason", "inherited_from", "owner", "branch_id", "seq", "superseded_turn",
)  # fmt: skip
_ROW = (*_NODE_COLUMNS, "metadata", *_TIMES)
_NODE_MICROS = ", ".join(f"{micros_sql(c)} AS {c}" for c in _TIMES)
_NODE_MICROS_PG = ", ".join(f"{micros_sql(c, Dialect.POSTGRESQL)} AS {c}" for c in _TIMES)

# Each node's row: its id, seq and a hash of every column the snapshot shows, in creation order; then
# each link's (its node_id NULL), in one statement: each statement costs DuckDB its bind and plan.
_LINK = ("from_node", "to_node", "edge_type", "metadata", "created_at")
_HASHES = """SELECT node_id, seq, row_hash FROM (
    SELECT node_id, seq, {nodes} AS row_hash FROM nodes WHERE graph_id = ?
    UNION ALL SELECT NULL, seq, {links} FROM edges WHERE graph_id = ?
) AS hashed ORDER BY node_id IS NULL, seq"""
ROW_HASHES = Per(
    duckdb=_HASHES.format(nodes=f"hash({', '.join(_ROW)})", links=f"hash({', '.join(_LINK)})"),
    postgresql=_HASHES.format(nodes=_row_hash_pg(_ROW), links=_row_hash_pg(_LINK)),
)
_TREE_EDGE = "json_object('from_node', parent_id, 'to_node', node_id, 'edge_type', 'parent_child')"
_TREE_EDGE_PG = (
    ("from_node", _json_of("parent_id")),
    ("to_node", _json_of("node_id")),
    ("edge_type", """'"parent_child"'"""),
)
# Rows as JSON: the node's object and, under a parent, its tree edge (rows.EDGES_SQL).
NODE_TEXTS = Per(
    duckdb=f"""
SELECT node_id, {_spliced(_fields(_NODE_COLUMNS), _TIMES)},
       CASE WHEN parent_id IS NULL THEN NULL ELSE {_spliced(_TREE_EDGE, ["created_at"], "'{}'")} END
FROM (
    SELECT {", ".join(_NODE_COLUMNS)}, metadata, {_NODE_MICROS}
    FROM nodes WHERE graph_id = ? AND (? OR list_contains(?, node_id))
)
""",
    postgresql=f"""
SELECT node_id, {_spliced_pg(_fields_pg(_NODE_COLUMNS), _TIMES)},
       CASE WHEN parent_id IS NULL THEN NULL ELSE {_spliced_pg(_TREE_EDGE_PG, ["created_at"], "'{}'")} END
FROM (
    SELECT {", ".join(_NODE_COLUMNS)}, metadata, {_NODE_MICROS_PG}
    FROM nodes WHERE graph_id = ? AND (? OR node_id = ANY(?::text[]))
) AS node
""",
)
LINK_TEXTS = Per(
    duckdb=f"""
SELECT seq, {_spliced(_fields(_LINK[:3]), ["created_at"])}
FROM (
    SELECT seq, {", ".join(_LINK[:4])}, {micros_sql("created_at")} AS created_at
    FROM edges WHERE graph_id = ? AND (? OR list_contains(?, seq))
)
""",
    postgresql=f"""
SELECT seq, {_spliced_pg(_fields_pg(_LINK[:3]), ["created_at"])}
FROM (
    SELECT seq, {", ".join(_LINK[:4])}, {micros_sql("created_at", Dialect.POSTGRESQL)} AS created_at
    FROM edges WHERE graph_id = ? AND (? OR seq = ANY(?::bigint[]))
) AS link
""",
)


@dataclass
class _Texts:
    """One graph's rows as last written: id → (hash, node text, tree edge text); link seq → (hash, text)."""

    nodes: dict[str, tuple[int, str, str | None]] = field(default_factory=dict)
    links: dict[int, tuple[int, str]] = field(default_factory=dict)


class SnapshotTexts:
    """Each graph's snapshot as JSON text, rows written again by the database only where they changed.

    A row's text is kept beside the hash of the row it was written from; a call
    reads every row's hash in its own read transaction and has the changed rows
    written, so what it returns is that transaction's graph, whatever other
    threads read or cached meanwhile.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._row_hashes = pick(ROW_HASHES, db.dialect)
        self._node_texts, self._link_texts = pick(NODE_TEXTS, db.dialect), pick(LINK_TEXTS, db.dialect)
        self._lock = threading.Lock()
        self._graphs: dict[str, _Texts] = {}

    def nodes_and_edges(self, graph_id: str) -> tuple[str, str]:
        """The graph's nodes and edges as two JSON arrays in creation order (inside a read transaction)."""
        rows = self._db.fetchall(self._row_hashes, [graph_id, graph_id])
        first_link = next((i for i, row in enumerate(rows) if row[0] is None), len(rows))
        node_rows, link_rows = rows[:first_link], [row[1:] for row in rows[first_link:]]
        with self._lock:
            kept = self._graphs.get(graph_id) or _Texts()
            nodes = _refreshed(self._db, self._node_texts, graph_id, kept.nodes, node_rows)
            links = _refreshed(self._db, self._link_texts, graph_id, kept.links, link_rows)
            self._graphs[graph_id] = _Texts(nodes, links)
        tree = ((seq, nodes[node_id][2]) for node_id, seq, _ in node_rows if nodes[node_id][2] is not None)
        edges = heapq.merge(tree, ((seq, links[seq][1]) for seq, _ in link_rows))
        return (
            "[" + ",".join(nodes[node_id][1] for node_id, _, _ in node_rows) + "]",
            "[" + ",".join(text for _, text in edges) + "]",
        )


def _refreshed(db: Database, sql: str, graph_id: str, kept: Any, rows: list[tuple[Any, ...]]) -> Any:
    """``kept`` for exactly the rows listed now: each changed or new row written again by ``sql``."""
    hashes = {row[0]: row[-1] for row in rows}
    stale = [key for key, h in hashes.items() if key not in kept or kept[key][0] != h]
    if not stale:
        return {key: kept[key] for key in hashes} if len(kept) != len(hashes) else kept
    every = len(stale) == len(hashes)  # the first call on a graph: every row, no list to look in
    params = [graph_id, every, [] if every else stale]
    written = {key: (hashes[key], *texts) for key, *texts in db.fetchall(sql, params)}
    return {key: written.get(key) or kept[key] for key in hashes}
