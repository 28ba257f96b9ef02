"""``Exploration.sql``: SQL over one graph's rows, read-only, on a DuckDB database of its own.

docs/architecture/facade.md, "Inspecting a file": the analyst's query never runs on the
store's connection. The store's ``frame_sql`` opens a private in-memory DuckDB
database with the store's network rule (rule 12: no extension install or load,
no file or network access, configuration locked; Python variables are not
tables either), checks the query there, registers this graph's rows as the
tables of :data:`TABLES` it names (fetched through the store's own listing
methods), and runs the one ``SELECT`` it was given. Nothing the query does can
reach the file, another graph, the disk or the network; the database is gone
when the call returns.

Adding a table is one line of :data:`TABLES`: a name and the function that
returns its frame from a :class:`GraphRows` (and, when a column of it can be
all None or a nullable integer, its SQL type in :data:`DECLARED`: a frame of
None or NaN cannot say the store's type, so the view casts to it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from types import MappingProxyType, NoneType
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

import pandas as pd

from ..engine import gap_rows
from ..store.frame_sql import SqlParams, select_frames
from ..store.records import EdgeRecord, NodeRecord, Snapshot

if TYPE_CHECKING:
    from .exploration import Exploration

_JSON_COLUMNS = ("metadata", "payload")  # kept as JSON text in the frames, typed JSON in the query
GAP_COLUMNS = ["node_id", "depth", "kind", "question", "detail"]  # Exploration.gaps(), the gaps table


class GraphRows:
    """One graph's rows for one query, each listing fetched once (nodes and edges share a snapshot)."""

    def __init__(self, exploration: Exploration) -> None:
        self.exploration = exploration
        self.store = exploration.store
        self.graph_id = exploration.graph_id

    @cached_property
    def snapshot(self) -> Snapshot:
        """The graph's nodes and edges, read at one moment (``store.get_snapshot``)."""
        return self.store.get_snapshot(self.graph_id)


def _nodes(rows: GraphRows) -> pd.DataFrame:
    return _frame(rows.snapshot["nodes"], list(NodeRecord.__annotations__))


def _edges(rows: GraphRows) -> pd.DataFrame:
    return _frame(rows.snapshot["edges"], list(EdgeRecord.__annotations__))


TableSource = Callable[[GraphRows], pd.DataFrame]

TABLES: Mapping[str, TableSource] = MappingProxyType(
    {
        "nodes": _nodes,
        "edges": _edges,
        "events": lambda rows: _json_text(rows.exploration.events()),
        "llm_calls": lambda rows: rows.exploration.llm_calls(),
        "gaps": lambda rows: pd.DataFrame(gap_rows(rows.snapshot["nodes"]), columns=GAP_COLUMNS),
        "turns": lambda rows: rows.exploration.turns(),
        "heads": lambda rows: rows.exploration.heads(),
    }
)
"""The tables a query sees: name -> the function that returns its frame (one line per table)."""

_SQL_TYPES: Mapping[type, str] = MappingProxyType(
    {bool: "BOOLEAN", int: "BIGINT", float: "DOUBLE", str: "VARCHAR"}
)


def declared_types(record: type) -> dict[str, str]:
    """The SQL type of each plain field of a record TypedDict (times and JSON are typed apart).

    >>> declared_types(EdgeRecord)
    {'from_node': 'VARCHAR', 'to_node': 'VARCHAR', 'edge_type': 'VARCHAR'}
    """
    types = {}
    for name, hint in get_type_hints(record).items():
        kinds = [k for k in get_args(hint) if k is not NoneType] or [hint]
        if len(kinds) == 1 and kinds[0] in _SQL_TYPES and not name.endswith("_at"):
            types[name] = _SQL_TYPES[kinds[0]]
    return types


DECLARED: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "nodes": declared_types(NodeRecord),
        "edges": declared_types(EdgeRecord),
        "events": {"node_id": "VARCHAR"},
        "llm_calls": {
            "node_id": "VARCHAR",
            "error": "VARCHAR",
            "retry_sampling": "VARCHAR",
            "refused_usage": "VARCHAR",
        },
        "turns": {"head_event": "BIGINT", "status": "VARCHAR", "tokens": "BIGINT", "cost": "DOUBLE"},
        "heads": {"root_synthesis": "VARCHAR", "tokens": "BIGINT", "cost": "DOUBLE"},
    }
)
"""Per table, the SQL type of the columns whose frame may not carry it (``superseded_turn`` is
NaN-padded DOUBLE in pandas, an all-None ``inherited_from`` has no type at all)."""


def run_sql(exploration: Exploration, query: str, params: SqlParams = None) -> pd.DataFrame:
    """Run ``query`` (one SELECT) over the graph's tables; the result as a DataFrame.

    Only the tables the query names are fetched. A query that is not one
    ``SELECT`` (or ``WITH … SELECT``), or that fails, raises
    :class:`~fractal_nb.InvalidInputError` saying what is allowed.
    """
    rows = GraphRows(exploration)
    return select_frames(
        query,
        params,
        tables=list(TABLES),
        frame=lambda name: TABLES[name](rows),
        declared=DECLARED,
        json_columns=_JSON_COLUMNS,
    )


def _frame(records: Sequence[Mapping[str, Any]], columns: list[str]) -> pd.DataFrame:
    """Records as a frame of these columns (none: still these columns), times as UTC timestamps."""
    frame = _json_text(pd.DataFrame.from_records(list(records), columns=columns))
    for column in columns:
        if column.endswith("_at"):
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    return frame


def _json_text(frame: pd.DataFrame) -> pd.DataFrame:
    """JSON objects (metadata, payload) as JSON text: the view types them JSON."""
    for column in _JSON_COLUMNS:
        if column in frame.columns:
            frame[column] = [json.dumps(value) for value in frame[column]]
    return frame
