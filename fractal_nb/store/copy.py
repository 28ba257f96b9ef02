"""Copy graphs from one store into another, on either engine: every row of theirs, ids and all.

docs/architecture/store.md, "Moving between stores". A fork (store/lineage.py) copies a graph's state
inside one store under new ids; a copy moves whole graphs between two stores (DuckDB to PostgreSQL
and back) as they are: the same graph, node, event and call ids, statuses, links, events, history
images and baselines, the call log, turns, deepened branches, lineage and the fork's id map,
sources and their chunks. It reads through the source's connection in one snapshot and writes
through the destination's in one transaction, with the columns each table has now
(journal.columns_of), so a refused copy changes nothing.

What it leaves: the source's ``store_info`` and ``holders`` (its processes, not the graph's), and
claims in flight: a graph with a question or a synthesis claimed is refused, since its holder
would be a process the destination has never seen. The completion cache is the store's, keyed by
model, schema and messages (no graph's): every row of it is copied, and a key the destination has
keeps the destination's row.

Ids are kept, so the destination must not hold them: a graph id, a node id or an event id it
already has (the same graph copied twice, or a graph of another store whose events overlap) is
refused. Event ids name their graph across the store (an ``at()`` of a fork's head reads its
origin's event), so they stay unique there. The destination's sequences end above every copied
id, so its later writes never take one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from ..checks import require_id, shown
from ..errors import InvalidInputError, NotFoundError, StateError
from .database import Database
from .dialect import Dialect
from .journal import columns_of

# The tables of a graph's rows, each with the order its rows are copied in (the source's order of
# writing them), all keyed by graph_id.
GRAPH_TABLES = {
    "graphs": "created_at, graph_id",
    "nodes": "seq",
    "edges": "seq",
    "events": "event_id",
    "llm_calls": "call_id",
    "node_history": "event_id, seq, node_id",
    "graph_history": "event_id",
    "history_baselines": "event_id",
    "lineage": "graph_id",
    "fork_nodes": "node_id",
    "turns": "turn",
    "depth_allowances": "turn, node_id, made_at",
    "sources": "added_event, source_id",
    "source_chunks": "source_id, line_start",
}
CACHE_TABLE = "llm_cache"  # the store's completion cache: every row, a key the destination has kept
# The tables a copy leaves: the store's own facts and its processes, and claims in flight (refused).
# With the two above, every table of database.OWN_TABLES (tests/store/test_copy.py holds it).
NOT_COPIED = frozenset({"store_info", "holders", "synthesis_claims"})
# Each sequence and the ids it gives, so the destination's ends above every copied one.
SEQUENCES = {
    "node_seq": (("nodes", "seq"), ("edges", "seq")),
    "event_seq": (("events", "event_id"),),
    "call_seq": (("llm_calls", "call_id"),),
}
_CHUNK = 1_000  # ids in one IN list
_VALUES = 8_000  # parameters in one INSERT on PostgreSQL (it takes at most 65,535)
_UNNESTED = 50_000  # rows in one INSERT on DuckDB (a list per column)


class Copied(TypedDict):
    """``copy_to``: the graphs copied (oldest first), the rows of each table, and the two stores."""

    graph_ids: list[str]
    rows: dict[str, int]
    source: str
    destination: str


class _Rows(TypedDict):
    """One table's rows as the source holds them: its column names (quoted) and the values."""

    columns: list[str]
    values: list[tuple[Any, ...]]


def copy_graphs_between(source: Database, destination: Database, graph_ids: object = None) -> Copied:
    """Copy ``graph_ids`` (None: every graph of ``source``) with all their rows into ``destination``.

    Refused, with nothing written: a read-only destination (StateError), the same store twice,
    a graph id that is not a list of ids or not in the source (NotFoundError), a graph with claims
    in flight (StateError), ids the destination already holds (InvalidInputError), and a
    destination whose tables lack a column the source's have (StateError: open it with this
    version of fractal_nb first).
    """
    if destination.read_only:
        raise StateError(
            f"{destination.location} was opened read_only=True; open it without read_only to copy into it"
        )
    if source is destination or (
        source.dialect is destination.dialect
        and source.location == destination.location
        and source.location != ":memory:"
    ):
        raise InvalidInputError(f"the source and the destination are the same store ({source.location})")
    wanted = _graph_ids(graph_ids)
    with source.read():
        graphs = _graphs(source, wanted)
        _refuse_claims(source, graphs)
        rows = _read(source, graphs)
    columns = columns_of(destination, [*GRAPH_TABLES, CACHE_TABLE])
    for table, read in rows.items():
        missing = sorted(set(read["columns"]) - set(columns[table]))
        if missing:
            raise StateError(
                f"{destination.location}: table {table} has no column {', '.join(missing)} that "
                f"{source.location} has; open it with this version of fractal_nb first (it migrates on open)"
            )
    with destination.write():
        _refuse_held(destination, graphs, rows)
        counts = {table: _insert(destination, table, read) for table, read in rows.items()}
        _raise_sequences(destination, rows)
    return {
        "graph_ids": graphs,
        "rows": counts,
        "source": source.location,
        "destination": destination.location,
    }


def _graph_ids(graph_ids: object) -> list[str] | None:
    """The graph ids asked for, each once, in order (None: every graph)."""
    if graph_ids is None:
        return None
    if isinstance(graph_ids, str) or not isinstance(graph_ids, list | tuple):
        raise InvalidInputError(
            f"graph_ids must be a list of graph ids or None (every graph), not {shown(graph_ids)}"
        )
    if not graph_ids:
        raise InvalidInputError("graph_ids is empty: name at least one graph, or pass None for every graph")
    return list(dict.fromkeys(require_id(g, f"graph_ids[{i}]") for i, g in enumerate(graph_ids)))


def _graphs(source: Database, wanted: list[str] | None) -> list[str]:
    """The graphs to copy, oldest first: ``wanted``, each of which the source must hold."""
    held = [g for (g,) in source.fetchall("SELECT graph_id FROM graphs ORDER BY created_at, graph_id")]
    if wanted is None:
        if not held:
            raise NotFoundError(f"{source.location} holds no graph to copy")
        return held
    unknown = [g for g in wanted if g not in set(held)]
    if unknown:
        raise NotFoundError(
            f"graph {unknown[0]!r} not found in {source.location}; its graphs: {', '.join(held) or 'none'}",
            graph_id=unknown[0],
        )
    return [g for g in held if g in set(wanted)]


def _marks(items: Sequence[object]) -> str:
    return ", ".join("?" for _ in items)


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[start : start + size] for start in range(0, len(items), size))


def _refuse_claims(source: Database, graphs: list[str]) -> None:
    """A graph with a question or a synthesis claimed is not copied: its holder is the source's process."""
    marks = _marks(graphs)
    held = source.fetchall(
        f"SELECT graph_id, node_id FROM nodes WHERE graph_id IN ({marks}) AND status = 'claimed' "
        f"UNION ALL SELECT graph_id, node_id FROM synthesis_claims WHERE graph_id IN ({marks}) "
        "ORDER BY graph_id, node_id",
        [*graphs, *graphs],
    )
    if held:
        graph_id = held[0][0]
        nodes = sorted({node for graph, node in held if graph == graph_id})
        raise StateError(
            f"graph {graph_id} has {len(nodes)} claim(s) in flight ({', '.join(nodes[:5])}"
            f"{', ...' if len(nodes) > 5 else ''}); a copy would hold them for a process the destination "
            "never saw. Let its workers finish or pause it (Exploration.pause), or reopen a dead run's "
            "claims (Exploration.open does; or store.recover_stuck(graph_id)), then copy",
            graph_id=graph_id,
        )


def _read(source: Database, graphs: list[str]) -> dict[str, _Rows]:
    """Every row of the graphs in each table the source has, and its whole completion cache."""
    columns = columns_of(source, [*GRAPH_TABLES, CACHE_TABLE])
    rows: dict[str, _Rows] = {}
    for table, order in GRAPH_TABLES.items():
        if not columns[table]:  # a table an older file never had (opened read-only: not migrated)
            continue
        listed = ", ".join(columns[table])
        values: list[tuple[Any, ...]] = []
        for chunk in _chunks(graphs, _CHUNK):
            values += source.fetchall(
                f"SELECT {listed} FROM {table} WHERE graph_id IN ({_marks(chunk)}) "
                f"ORDER BY graph_id, {order}",
                list(chunk),
            )
        rows[table] = {"columns": columns[table], "values": values}
    listed = ", ".join(columns[CACHE_TABLE])
    cache = source.fetchall(f"SELECT {listed} FROM {CACHE_TABLE} ORDER BY created_at, cache_key")
    rows[CACHE_TABLE] = {"columns": columns[CACHE_TABLE], "values": cache}
    return rows


def _column(read: _Rows, name: str) -> list[Any]:
    index = read["columns"].index(f'"{name}"')
    return [row[index] for row in read["values"]]


def _refuse_held(destination: Database, graphs: list[str], rows: dict[str, _Rows]) -> None:
    """Ids the destination already holds: the graphs (in any table), their nodes, their events."""
    for table in GRAPH_TABLES:
        found = destination.fetchall(
            f"SELECT DISTINCT graph_id FROM {table} WHERE graph_id IN ({_marks(graphs)}) ORDER BY graph_id",
            graphs,
        )
        if found:
            raise InvalidInputError(
                f"{destination.location} already holds graph {found[0][0]} (rows in {table}); a copy keeps "
                "its ids, so it goes into a store without it (delete it there first to copy it again)",
                graph_id=found[0][0],
            )
    nodes = _column(rows["nodes"], "node_id")
    for chunk in _chunks(nodes, _CHUNK):
        found = destination.fetchall(
            f"SELECT node_id, graph_id FROM nodes WHERE node_id IN ({_marks(chunk)})", chunk
        )
        if found:
            raise InvalidInputError(
                f"{destination.location} already holds node {found[0][0]} (of graph {found[0][1]}); a copy "
                "keeps node ids, so they must be new there"
            )
    events = sorted(_column(rows["events"], "event_id"))
    span = [events[0], events[-1]]  # every graph has events: its "created" one at least
    if destination.fetchone("SELECT 1 FROM events WHERE event_id BETWEEN ? AND ? LIMIT 1", span) is None:
        return  # no event in the copied span (a new store): none to look up one by one
    for chunk in _chunks(events, _CHUNK):
        found = destination.fetchall(
            f"SELECT event_id, graph_id FROM events WHERE event_id IN ({_marks(chunk)}) ORDER BY event_id",
            chunk,
        )
        if found:
            raise InvalidInputError(
                f"{destination.location} already holds event {found[0][0]} (of graph {found[0][1]}); a copy "
                "keeps event ids, which name their graph across a store: copy into a store whose events "
                f"do not overlap the copied ones ({events[0]}-{events[-1]}), e.g. a new one"
            )


def _insert(destination: Database, table: str, read: _Rows) -> int:
    """The rows into ``table``, many to a statement; the cache's keys the destination has are kept.

    PostgreSQL takes rows of parameters (``VALUES``); DuckDB binds each parameter slowly (a
    quarter of a millisecond a row that way), so it takes one list per column and unnests them.
    """
    columns, values = read["columns"], read["values"]
    if not values:
        return 0
    listed = ", ".join(columns)
    keep = " ON CONFLICT (cache_key) DO NOTHING" if table == CACHE_TABLE else ""
    if destination.dialect is Dialect.DUCKDB:
        unnested = ", ".join("unnest(?)" for _ in columns)
        for chunk in _chunks(values, _UNNESTED):
            destination.execute(
                f"INSERT INTO {table} ({listed}) SELECT {unnested}{keep}",
                [list(c) for c in zip(*chunk, strict=True)],
            )
        return len(values)
    row = f"({_marks(columns)})"
    for chunk in _chunks(values, max(1, _VALUES // len(columns))):
        destination.execute(
            f"INSERT INTO {table} ({listed}) VALUES {', '.join(row for _ in chunk)}{keep}",
            [value for each in chunk for value in each],
        )
    return len(values)


def _raise_sequences(destination: Database, rows: dict[str, _Rows]) -> None:
    """Each sequence past every id copied from it (and never back): later writes take new ids."""
    for sequence, sources in SEQUENCES.items():
        copied = [v for table, column in sources if table in rows for v in _column(rows[table], column)]
        if not copied:
            continue
        row = destination.fetchone(f"SELECT nextval('{sequence}')")  # the next id it would give
        assert row is not None
        if int(row[0]) <= max(copied):
            destination.execute(f"SELECT setval('{sequence}', ?)", [max(copied)])
