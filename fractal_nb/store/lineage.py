"""Forks: a new graph in the same file from the state of another at an event; where each graph came from.

docs/architecture/store.md, "History and forks" (rules 15-16). A fork copies the state store/replay.py
reads at the event (nodes with their statuses and syntheses, links, the call log then) under new
ids, in a few statements: a map of new ids (``fork_nodes``) and one INSERT per table that joins it
to rewrite every reference (parent, question, branch, path, inherited_from, ids inside metadata),
and the sources added by then with their chunks. The source is only read. Claims in flight at the
event are not the fork's: those questions are open in it, with no holder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..vocabulary import NODE_ID_PATTERN
from .base import StoreCore, new_graph_id
from .dialect import Per, pick
from .journal import columns_of
from .records import Forked, LineageRecord
from .replay import Replay
from .rows import iso

# The id map: a fresh id for every node the source had at the commit. Parameters: fork, gid, commit.
_MAP = Per(
    duckdb="""
    INSERT INTO fork_nodes (graph_id, node_id, source_node_id)
    SELECT ?, 'n-' || substr(replace(uuid()::VARCHAR, '-', ''), 1, 16), node_id
    FROM node_history WHERE graph_id = ? AND event_id <= ?
    GROUP BY node_id
""",
    postgresql="""
    INSERT INTO fork_nodes (graph_id, node_id, source_node_id)
    SELECT ?, 'n-' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16), node_id
    FROM node_history WHERE graph_id = ? AND event_id <= ?
    GROUP BY node_id
""",
)
# Every statement below copies whole rows: ``INSERT INTO t (columns) [WITH ...] SELECT values FROM
# ...``, with the columns the store's tables have now (journal.columns_of) and each column's value
# the source row's (``s.<column>``) unless named here. ``p`` is the statement's parameters as a row.
# The latest images at the commit (store/replay.py), their references rewritten through the id
# map; the ids inside metadata are rewritten in Python after (moved_ids). Parameters: fork, gid, commit.
_NODES = (
    "nodes",
    """WITH p AS (SELECT CAST(? AS VARCHAR) AS fork),
    h AS (
        SELECT * FROM (
            SELECT {columns}, row_number() OVER (PARTITION BY node_id ORDER BY event_id DESC) AS latest
            FROM node_history WHERE graph_id = ? AND event_id <= ?
        ) AS images WHERE latest = 1
    ),
    steps AS (
        SELECT h.node_id, step.old, step.i
        FROM h CROSS JOIN unnest(string_to_array(h.path, '/')) WITH ORDINALITY AS step(old, i)
        WHERE h.path <> ''
    ),
    paths AS (
        SELECT steps.node_id, string_agg(m.node_id, '/' ORDER BY steps.i) AS path
        FROM steps JOIN fork_nodes AS m ON m.graph_id = (SELECT fork FROM p) AND m.source_node_id = steps.old
        GROUP BY steps.node_id
    )""",
    """p CROSS JOIN h AS s
    JOIN fork_nodes AS mine ON mine.graph_id = p.fork AND mine.source_node_id = s.node_id
    LEFT JOIN fork_nodes AS parent ON parent.graph_id = p.fork AND parent.source_node_id = s.parent_id
    LEFT JOIN fork_nodes AS question ON question.graph_id = p.fork AND question.source_node_id = s.question_id
    LEFT JOIN fork_nodes AS branch ON branch.graph_id = p.fork AND branch.source_node_id = s.branch_id
    LEFT JOIN fork_nodes AS inherited
        ON inherited.graph_id = p.fork AND inherited.source_node_id = s.inherited_from
    LEFT JOIN paths ON paths.node_id = s.node_id""",
    {
        "node_id": "mine.node_id",
        "graph_id": "p.fork",
        "parent_id": "coalesce(parent.node_id, s.parent_id)",
        "question_id": "coalesce(question.node_id, s.question_id)",
        "branch_id": "coalesce(branch.node_id, s.branch_id)",
        "path": "coalesce(paths.path, s.path)",
        "inherited_from": "coalesce(inherited.node_id, s.inherited_from)",
        # Claims in flight at the event are not the fork's: those questions are open, with no holder.
        "status": "CASE WHEN s.status = 'claimed' THEN 'open' ELSE s.status END",
        "holder": "CASE WHEN s.status = 'claimed' THEN NULL ELSE s.holder END",
        "claimed_at": "CASE WHEN s.status = 'claimed' THEN NULL ELSE s.claimed_at END",
        "lease_s": "CASE WHEN s.status = 'claimed' THEN NULL ELSE s.lease_s END",
    },
)
# Links under the commit's watermark, their ends rewritten. Parameters: fork, gid, max_seq.
_LINKS = (
    "edges",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork) AS p CROSS JOIN edges AS s
    JOIN fork_nodes AS a ON a.graph_id = p.fork AND a.source_node_id = s.from_node
    JOIN fork_nodes AS b ON b.graph_id = p.fork AND b.source_node_id = s.to_node
    WHERE s.graph_id = ? AND s.seq <= ?""",
    {"graph_id": "p.fork", "from_node": "a.node_id", "to_node": "b.node_id"},
)
# The call log then, its nodes rewritten. Parameters: fork, gid, max_call_id.
_CALLS = (
    "llm_calls",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork) AS p CROSS JOIN llm_calls AS s
    LEFT JOIN fork_nodes AS m ON m.graph_id = p.fork AND m.source_node_id = s.node_id
    WHERE s.graph_id = ? AND s.call_id <= ?""",
    {"graph_id": "p.fork", "node_id": "coalesce(m.node_id, s.node_id)"},
)
# The turns begun by then (docs/architecture/store.md, "Turns and heads"): a head after the event is not
# the fork's, so that turn is open in it. Event ids stay the source's (the fork's history starts at
# its "forked" event). Parameters: fork, event, gid.
_TURNS = (
    "turns",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork, CAST(? AS BIGINT) AS event) AS p CROSS JOIN turns AS s
    WHERE s.graph_id = ? AND s.started_event <= p.event""",
    {
        "graph_id": "p.fork",
        **{
            column: f"CASE WHEN s.head_event <= p.event THEN s.{column} END"
            for column in ("head_event", "status", "root_synthesis", "counts", "tokens", "cost", "ended_at")
        },
    },
)
# Their deepened branches made by the event, on the fork's nodes. Parameters: fork, event, gid.
_ALLOWANCES = (
    "depth_allowances",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork, CAST(? AS BIGINT) AS event) AS p CROSS JOIN depth_allowances AS s
    JOIN fork_nodes AS m ON m.graph_id = p.fork AND m.source_node_id = s.node_id
    WHERE s.graph_id = ? AND s.turn IN (SELECT turn FROM turns WHERE graph_id = p.fork)
        AND (s.made_at IS NULL OR s.made_at <= p.event)""",
    {"graph_id": "p.fork", "node_id": "m.node_id"},
)
# The sources added by the event and their chunks (docs/architecture/store.md, "Sources and citations"):
# ids are the source's, so a citation reads the same in the fork. Parameters: fork, event, gid.
_SOURCES = (
    "sources",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork, CAST(? AS BIGINT) AS event) AS p CROSS JOIN sources AS s
    WHERE s.graph_id = ? AND s.added_event <= p.event""",
    {"graph_id": "p.fork"},
)
# Parameters: fork, gid.
_CHUNKS = (
    "source_chunks",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork) AS p CROSS JOIN source_chunks AS s
    WHERE s.graph_id = ? AND s.source_id IN (SELECT source_id FROM sources WHERE graph_id = p.fork)""",
    {"graph_id": "p.fork"},
)
# The graph's row then, as the fork's. Parameters: fork, now, gid, commit.
_GRAPH = (
    "graphs",
    "",
    """(SELECT CAST(? AS VARCHAR) AS fork, CAST(? AS DOUBLE PRECISION) AS now) AS p
    CROSS JOIN graph_history AS s WHERE s.graph_id = ? AND s.event_id <= ?
    ORDER BY s.event_id DESC LIMIT 1""",
    {
        "graph_id": "p.fork",
        "root_node_id": "(SELECT node_id FROM fork_nodes AS f WHERE f.graph_id = p.fork "
        "AND f.source_node_id = s.root_node_id)",
        "created_at": "p.now",
        "updated_at": "p.now",
    },
)
_COPIES = (_NODES, _LINKS, _CALLS, _TURNS, _ALLOWANCES, _SOURCES, _CHUNKS, _GRAPH)


def copy_statement(
    table: str, before: str, source: str, values: Mapping[str, str], columns: list[str]
) -> str:
    """``INSERT INTO table (columns) before SELECT ... FROM source``, a column ``values[name]`` or ``s.<it>``.

    ``columns`` are quoted, as journal.columns_of gives them; ``{columns}`` in ``before`` reads them.

    >>> print(copy_statement("t", "", "t AS s WHERE s.k = ?", {"k": "?"}, ['"k"', '"v"']))
    INSERT INTO t ("k", "v") SELECT ? AS "k", s."v" AS "v" FROM t AS s WHERE s.k = ?
    """
    listed = ", ".join(columns)
    selected = ", ".join(
        f"{values.get(column.strip(chr(34)), f's.{column}')} AS {column}" for column in columns
    )
    ctes = f"{before.format(columns=listed)} " if before else ""
    return f"INSERT INTO {table} ({listed}) {ctes}SELECT {selected} FROM {source}"


def moved_ids(text: str, moved: Mapping[str, str]) -> str:
    """``text`` with every node id in it that ``moved`` names replaced by its new id (the rest as they are).

    >>> old, kept, new = "n-00000000000000aa", "n-00000000000000bb", "n-1111111111111111"
    >>> moved_ids(f'{{"cites": ["{old}", "{kept}"], "from": "{old}"}}', {old: new})
    '{"cites": ["n-1111111111111111", "n-00000000000000bb"], "from": "n-1111111111111111"}'
    """
    return re.sub(NODE_ID_PATTERN, lambda found: moved.get(found.group(0), found.group(0)), text)


# A graph's lineage: up to its original, then every fork below it. Parameter: gid.
_LINEAGE = """
    WITH RECURSIVE up(graph_id) AS (
        SELECT ?::VARCHAR
        UNION
        SELECT l.forked_from FROM lineage l JOIN up USING (graph_id)
    ),
    down(graph_id) AS (
        SELECT graph_id FROM up WHERE graph_id NOT IN (SELECT graph_id FROM lineage)
        UNION
        SELECT l.graph_id FROM lineage l JOIN down ON l.forked_from = down.graph_id
    )
    SELECT graph_id FROM down
"""
_LISTING = """
    SELECT g.graph_id, l.forked_from, l.forked_at, g.seed, g.status, g.created_at
    FROM graphs g LEFT JOIN lineage l USING (graph_id)
    WHERE {where} ORDER BY g.created_at, l.forked_at NULLS FIRST, g.graph_id
"""


class Lineage:
    """Forks graphs and lists where each came from."""

    def __init__(self, core: StoreCore, replay: Replay) -> None:
        self._core = core
        self._db = core.db
        self._replay = replay
        self._map_sql = pick(_MAP, self._db.dialect)

    def fork(self, graph_id: object, at_event: object) -> Forked:
        """A new graph in this file holding ``graph_id``'s state at ``at_event``; the source is unchanged.

        Refused (nothing written) for an event that is not the graph's or before its history.
        """
        with self._db.write():
            gid, event, commit = self._replay.commit_of(graph_id, at_event)
            fork = new_graph_id()
            now = self._core.clock()
            self._db.execute(self._map_sql, [fork, gid, commit])
            moved = dict(
                self._db.fetchall("SELECT source_node_id, node_id FROM fork_nodes WHERE graph_id = ?", [fork])
            )
            max_seq, max_call_id = self._replay.watermark(gid, commit)
            copies = self._copies()
            self._db.execute(copies["nodes"], [fork, gid, commit])
            self._move_metadata(fork, moved)
            self._db.execute(copies["edges"], [fork, gid, max_seq])
            self._db.execute(copies["llm_calls"], [fork, gid, max_call_id])
            self._db.execute(copies["graphs"], [fork, now, gid, commit])
            for table in ("turns", "depth_allowances", "sources"):
                self._db.execute(copies[table], [fork, event, gid])
            self._db.execute(copies["source_chunks"], [fork, gid])
            self._requests_then(gid, fork, event)
            self._remap_requests(fork, moved)
            self._db.execute(
                "INSERT INTO lineage (graph_id, forked_from, forked_at, created_at) VALUES (?, ?, ?, ?)",
                [fork, gid, event, now],
            )
            row = self._db.fetchone(
                "SELECT (SELECT root_node_id FROM graphs WHERE graph_id = ?), "
                "(SELECT count(*) FROM nodes WHERE graph_id = ?)",
                [fork, fork],
            )
            assert row is not None
            self._core.log(fork, None, "forked", None, {"forked_from": gid, "forked_at": event}, now)
            self._core.journal.baseline(fork)  # the fork's history starts at its "forked" event
            last = self._db.fetchone("SELECT max(event_id) FROM events WHERE graph_id = ?", [fork])
        assert last is not None
        return {
            "graph_id": fork,
            "root_node_id": row[0],
            "forked_from": gid,
            "forked_at": event,
            "nodes": int(row[1]),
            "event_id": int(last[0]),
        }

    def _copies(self) -> dict[str, str]:
        """The fork's copy statements, by table, with every column the tables have now."""
        columns = columns_of(self._db, [table for table, *_ in _COPIES])
        return {
            table: copy_statement(table, before, source, values, columns[table])
            for table, before, source, values in _COPIES
        }

    def _move_metadata(self, fork: str, moved: Mapping[str, str]) -> None:
        """The node ids inside the fork's metadata, as the fork's (the copy took the text as it was)."""
        changed = []
        for node_id, metadata in self._db.fetchall(
            "SELECT node_id, metadata FROM nodes WHERE graph_id = ? AND metadata LIKE '%n-%'", [fork]
        ):
            rewritten = moved_ids(metadata, moved)
            if rewritten != metadata:
                changed.append((node_id, rewritten))
        for start in range(0, len(changed), 1000):
            chunk = changed[start : start + 1000]
            self._db.execute(
                "UPDATE nodes SET metadata = v.meta FROM (VALUES "
                + ", ".join("(?, ?)" for _ in chunk)
                + ") AS v(id, meta) WHERE nodes.node_id = v.id",
                [v for row in chunk for v in row],
            )

    def _requests_then(self, gid: str, fork: str, event: int) -> None:
        """Each copied turn's requests as they were at ``event``: the turn_request events up to it."""
        made: dict[int, list[Any]] = {}
        for (payload,) in self._db.fetchall(
            "SELECT payload FROM events WHERE graph_id = ? AND kind = 'turn_request' AND event_id <= ? "
            "ORDER BY event_id",
            [gid, event],
        ):
            request = json.loads(payload)
            made.setdefault(int(request["turn"]), []).append(request)
        for (turn,) in self._db.fetchall("SELECT turn FROM turns WHERE graph_id = ?", [fork]):
            self._db.execute(
                "UPDATE turns SET requests = ? WHERE graph_id = ? AND turn = ?",
                [json.dumps(made.get(int(turn), [])), fork, turn],
            )

    def _remap_requests(self, fork: str, moved: Mapping[str, str]) -> None:
        """The node ids inside the copied turns' requests, as the fork's."""
        for turn, text in self._db.fetchall("SELECT turn, requests FROM turns WHERE graph_id = ?", [fork]):
            requests = moved_ids(text, moved)
            if requests != text:
                self._db.execute(
                    "UPDATE turns SET requests = ? WHERE graph_id = ? AND turn = ?", [requests, fork, turn]
                )

    def lineage(self, graph_id: str) -> list[LineageRecord]:
        """The lineage of ``graph_id``: its original and every fork of it, oldest first."""
        return self._listing(f"g.graph_id IN ({_LINEAGE})", [graph_id])

    def family(self) -> list[LineageRecord]:
        """Every graph in the file with where it was forked from (None: an original), oldest first."""
        return self._listing("TRUE", [])

    def _listing(self, where: str, params: list[Any]) -> list[LineageRecord]:
        rows = self._db.fetchall(_LISTING.format(where=where), params)
        return [
            {
                "graph_id": graph,
                "forked_from": source,
                "forked_at": at,
                "seed": seed,
                "status": status,
                "created": iso(created),
            }
            for graph, source, at, seed, status, created in rows
        ]
