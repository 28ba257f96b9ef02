"""Forks: a new graph in the same file from the state of another at an event; where each graph came from.

docs/architecture.md, "History and forks" (rules 15-16). A fork copies the state store/replay.py
reads at the event (nodes with their statuses and syntheses, links, the call log then) under new
ids, in a few statements: a map of new ids (``fork_nodes``) and one INSERT per table that joins it
to rewrite every reference (parent, question, branch, path, inherited_from, ids inside metadata),
and the sources added by then with their chunks. The source is only read. Claims in flight at the
event are not the fork's: those questions are open in it, with no holder.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..model import NODE_ID_PATTERN
from .base import StoreCore, new_graph_id
from .records import Forked, LineageRecord
from .replay import Replay
from .rows import iso

# The id map: a fresh id for every node the source had at the commit. Parameters: fork, gid, commit.
_MAP = """
    INSERT INTO fork_nodes
    SELECT ?, 'n-' || substr(replace(uuid()::VARCHAR, '-', ''), 1, 16), node_id
    FROM node_history WHERE graph_id = ? AND event_id <= ?
    GROUP BY node_id
"""
# The latest images at the commit (store/replay.py) with every reference rewritten through the
# map. Parameters: gid, commit, fork, fork.
_NODES = f"""
    INSERT INTO nodes BY NAME
    WITH h AS (
        SELECT * EXCLUDE (event_id, max_seq, max_call_id) FROM node_history
        WHERE graph_id = ? AND event_id <= ?
        QUALIFY row_number() OVER (PARTITION BY node_id ORDER BY event_id DESC) = 1
    ),
    m AS (SELECT source_node_id AS old, node_id AS new FROM fork_nodes WHERE graph_id = ?),
    steps AS (
        SELECT node_id, unnest(string_split(path, '/')) AS old,
               unnest(range(len(string_split(path, '/')))) AS i
        FROM h WHERE path <> ''
    ),
    paths AS (
        SELECT steps.node_id, string_agg(m.new, '/' ORDER BY steps.i) AS path
        FROM steps JOIN m USING (old) GROUP BY steps.node_id
    ),
    found AS (
        SELECT DISTINCT node_id, unnest(regexp_extract_all(metadata, '{NODE_ID_PATTERN}')) AS old
        FROM h WHERE regexp_matches(metadata, '{NODE_ID_PATTERN}')
    ),
    metas AS (
        SELECT found.node_id, list(found.old || '|' || m.new) AS pairs
        FROM found JOIN m USING (old) GROUP BY found.node_id
    )
    SELECT h.* REPLACE (
        self.new AS node_id,
        ? AS graph_id,
        coalesce(parent.new, h.parent_id) AS parent_id,
        coalesce(question.new, h.question_id) AS question_id,
        coalesce(branch.new, h.branch_id) AS branch_id,
        coalesce(paths.path, h.path) AS path,
        coalesce(inherited.new, h.inherited_from) AS inherited_from,
        coalesce(list_reduce(
            metas.pairs,
            lambda acc, pair: replace(acc, split_part(pair, '|', 1), split_part(pair, '|', 2)),
            h.metadata), h.metadata) AS metadata,
        CASE WHEN h.status = 'claimed' THEN 'open' ELSE h.status END AS status,
        CASE WHEN h.status = 'claimed' THEN NULL ELSE h.holder END AS holder,
        CASE WHEN h.status = 'claimed' THEN NULL ELSE h.claimed_at END AS claimed_at,
        CASE WHEN h.status = 'claimed' THEN NULL ELSE h.lease_s END AS lease_s
    )
    FROM h
    JOIN m AS self ON self.old = h.node_id
    LEFT JOIN m AS parent ON parent.old = h.parent_id
    LEFT JOIN m AS question ON question.old = h.question_id
    LEFT JOIN m AS branch ON branch.old = h.branch_id
    LEFT JOIN m AS inherited ON inherited.old = h.inherited_from
    LEFT JOIN paths ON paths.node_id = h.node_id
    LEFT JOIN metas ON metas.node_id = h.node_id
"""
# Links under the commit's watermark, their ends rewritten. Parameters: fork, fork, gid, max_seq.
_LINKS = """
    INSERT INTO edges BY NAME
    WITH m AS (SELECT source_node_id AS old, node_id AS new FROM fork_nodes WHERE graph_id = ?)
    SELECT e.* REPLACE (? AS graph_id, a.new AS from_node, b.new AS to_node)
    FROM edges e JOIN m AS a ON a.old = e.from_node JOIN m AS b ON b.old = e.to_node
    WHERE e.graph_id = ? AND e.seq <= ?
"""
# The call log then, its nodes rewritten. Parameters: fork, fork, gid, max_call_id.
_CALLS = """
    INSERT INTO llm_calls BY NAME
    WITH m AS (SELECT source_node_id AS old, node_id AS new FROM fork_nodes WHERE graph_id = ?)
    SELECT c.* REPLACE (? AS graph_id, coalesce(m.new, c.node_id) AS node_id)
    FROM llm_calls c LEFT JOIN m ON m.old = c.node_id
    WHERE c.graph_id = ? AND c.call_id <= ?
"""
# The turns begun by then (docs/architecture.md, "Turns and heads"): a head after the event is not
# the fork's, so that turn is open in it. Event ids stay the source's (the fork's history starts at
# its "forked" event). Parameters: fork, event x 7, gid, event.
_TURNS = """
    INSERT INTO turns BY NAME
    SELECT t.* REPLACE (
        ? AS graph_id,
        CASE WHEN t.head_event <= ? THEN t.head_event END AS head_event,
        CASE WHEN t.head_event <= ? THEN t.status END AS status,
        CASE WHEN t.head_event <= ? THEN t.root_synthesis END AS root_synthesis,
        CASE WHEN t.head_event <= ? THEN t.counts END AS counts,
        CASE WHEN t.head_event <= ? THEN t.tokens END AS tokens,
        CASE WHEN t.head_event <= ? THEN t.cost END AS cost,
        CASE WHEN t.head_event <= ? THEN t.ended_at END AS ended_at
    )
    FROM turns t WHERE t.graph_id = ? AND t.started_event <= ?
"""
# Their deepened branches made by the event, on the fork's nodes. Parameters: fork, fork, gid, fork,
# event.
_ALLOWANCES = """
    INSERT INTO depth_allowances BY NAME
    WITH m AS (SELECT source_node_id AS old, node_id AS new FROM fork_nodes WHERE graph_id = ?)
    SELECT a.* REPLACE (? AS graph_id, m.new AS node_id)
    FROM depth_allowances a JOIN m ON m.old = a.node_id
    WHERE a.graph_id = ? AND a.turn IN (SELECT turn FROM turns WHERE graph_id = ?)
        AND (a.made_at IS NULL OR a.made_at <= ?)
"""
# The sources added by the event and their chunks (docs/architecture.md, "Sources and citations"):
# ids are the source's, so a citation reads the same in the fork. Parameters: fork, gid, event.
_SOURCES = """
    INSERT INTO sources BY NAME
    SELECT s.* REPLACE (? AS graph_id) FROM sources s WHERE s.graph_id = ? AND s.added_event <= ?
"""
# Parameters: fork, gid, fork.
_CHUNKS = """
    INSERT INTO source_chunks BY NAME
    SELECT c.* REPLACE (? AS graph_id) FROM source_chunks c
    WHERE c.graph_id = ? AND c.source_id IN (SELECT source_id FROM sources WHERE graph_id = ?)
"""
# The graph's row then, as the fork's. Parameters: fork, now, now, fork, gid, commit.
_GRAPH = """
    INSERT INTO graphs BY NAME
    SELECT g.* EXCLUDE (event_id, max_seq, max_call_id) REPLACE (
        ? AS graph_id,
        (SELECT node_id FROM fork_nodes WHERE graph_id = ? AND source_node_id = g.root_node_id)
            AS root_node_id,
        ? AS created_at, ? AS updated_at)
    FROM graph_history g WHERE graph_id = ? AND event_id <= ?
    ORDER BY event_id DESC LIMIT 1
"""
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

    def fork(self, graph_id: object, at_event: object) -> Forked:
        """A new graph in this file holding ``graph_id``'s state at ``at_event``; the source is unchanged.

        Refused (nothing written) for an event that is not the graph's or before its history.
        """
        with self._db.write():
            gid, event, commit = self._replay.commit_of(graph_id, at_event)
            fork = new_graph_id()
            now = self._core.clock()
            self._db.execute(_MAP, [fork, gid, commit])
            self._db.execute(_NODES, [gid, commit, fork, fork])
            max_seq, max_call_id = self._replay.watermark(gid, commit)
            self._db.execute(_LINKS, [fork, fork, gid, max_seq])
            self._db.execute(_CALLS, [fork, fork, gid, max_call_id])
            self._db.execute(_GRAPH, [fork, fork, now, now, gid, commit])
            self._db.execute(_TURNS, [fork, *[event] * 7, gid, event])
            self._db.execute(_ALLOWANCES, [fork, fork, gid, fork, event])
            self._db.execute(_SOURCES, [fork, gid, event])
            self._db.execute(_CHUNKS, [fork, gid, fork])
            self._requests_then(gid, fork, event)
            self._remap_requests(fork)
            self._db.execute("INSERT INTO lineage VALUES (?, ?, ?, ?)", [fork, gid, event, now])
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

    def _remap_requests(self, fork: str) -> None:
        """The node ids inside the copied turns' requests, as the fork's."""
        rows = self._db.fetchall("SELECT turn, requests FROM turns WHERE graph_id = ?", [fork])
        found = {old for _, text in rows for old in re.findall(NODE_ID_PATTERN, text)}
        if not found:
            return
        marks = ", ".join("?" for _ in found)
        mapping = dict(
            self._db.fetchall(
                "SELECT source_node_id, node_id FROM fork_nodes"
                f" WHERE graph_id = ? AND source_node_id IN ({marks})",
                [fork, *sorted(found)],
            )
        )
        for turn, text in rows:
            moved = re.sub(NODE_ID_PATTERN, lambda m: mapping.get(m.group(0), m.group(0)), text)
            if moved != text:
                self._db.execute(
                    "UPDATE turns SET requests = ? WHERE graph_id = ? AND turn = ?", [moved, fork, turn]
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
