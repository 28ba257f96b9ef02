"""The state of a graph at an event, folded from the history the journal wrote.

docs/architecture/store.md, "History and forks" (rule 14). Every event belongs to one commit; the
state at an event is the state after that commit (a commit is atomic: nothing between its
events was ever visible). It is read in SQL, scoped by graph: the latest ``node_history``
image of each node at or before the commit's last event, the graph's latest
``graph_history`` image, and the links under the commit's ``node_seq`` watermark. The cost is
that of reading the graph's history rows up to the event: no Python loop over the log.
"""

from __future__ import annotations

from typing import Any

from ..checks import MAX_COUNT, require_count, require_id, shown
from ..errors import InvalidInputError, NotFoundError, StateError
from .database import Database
from .records import SnapshotAt
from .rows import GRAPH_COLUMNS, NODE_COLUMNS, GraphRow, NodeRow, edge_dict

# Where an event stands in its graph: its owner, the graph's last event, the commit holding it
# (the first recorded event at or after it), where the graph's history starts (a baseline, else
# its first event), whether the graph exists. Parameters: event, gid, gid, event, gid, event, gid x3.
_PLACE = """
    SELECT (SELECT graph_id FROM events WHERE event_id = ?),
           (SELECT max(event_id) FROM events WHERE graph_id = ?),
           (SELECT min(event_id) FROM (
                SELECT event_id FROM node_history WHERE graph_id = ? AND event_id >= ?
                UNION ALL SELECT event_id FROM graph_history WHERE graph_id = ? AND event_id >= ?) AS later),
           (SELECT max(event_id) FROM history_baselines WHERE graph_id = ?),
           (SELECT min(event_id) FROM events WHERE graph_id = ?),
           (SELECT count(*) FROM graphs WHERE graph_id = ?)
"""
# The watermark at a commit: the largest node_seq / call_seq its images recorded. Parameters:
# gid, commit, gid, commit.
WATERMARK_AT = """
    SELECT max(max_seq), max(max_call_id) FROM (
        SELECT max_seq, max_call_id FROM node_history WHERE graph_id = ? AND event_id = ?
        UNION ALL
        SELECT max_seq, max_call_id FROM graph_history WHERE graph_id = ? AND event_id = ?) AS images
"""
# The latest image of each node at or before the commit, in creation order. Parameters: gid, commit.
_LATEST = f"""
    SELECT {NODE_COLUMNS} FROM (
        SELECT {NODE_COLUMNS}, row_number() OVER (PARTITION BY node_id ORDER BY event_id DESC) AS latest
        FROM node_history WHERE graph_id = ? AND event_id <= ?
    ) AS images WHERE latest = 1 ORDER BY seq
"""
# The links under the commit's watermark, as EDGES_SQL gives them. Parameters: gid, max_seq.
_LINKS_AT = """
    SELECT seq, from_node, to_node, edge_type, metadata, created_at FROM edges
    WHERE graph_id = ? AND seq <= ?
"""
_SEQ, _NODE_ID, _PARENT_ID, _CREATED_AT = (
    NODE_COLUMNS.split(", ").index(c) for c in ("seq", "node_id", "parent_id", "created_at")
)


class Replay:
    """Reads the state of a graph at any event of its history; never writes."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def commit_of(self, graph_id: object, event_id: object) -> tuple[str, int, int]:
        """The graph's id, the event, and the last event of the commit that wrote the event.

        Refuses, saying what is allowed: a non-integer or negative event id, a graph not in the
        store, an event of another graph or none at all, one past the graph's last event, and
        one before the graph's history starts (a file written before history was kept).
        """
        gid = require_id(graph_id, "graph_id")
        if isinstance(event_id, bool) or not isinstance(event_id, int):
            raise InvalidInputError(
                f"event_id must be an integer event id of graph {gid} (its events() list them), "
                f"not {shown(event_id)}"
            )
        event = require_count(event_id, "event_id", minimum=1, maximum=MAX_COUNT)
        owner, last, commit, baseline, first, graphs = self._place(gid, event)
        if not graphs:
            raise NotFoundError(f"graph {gid!r} not found in this store", graph_id=gid)
        if last is None or event > last:
            raise InvalidInputError(
                f"event {event} is past the last event of graph {gid} ({last}); pass one from its "
                f"events() list, at most {last}",
                graph_id=gid,
            )
        if owner != gid:
            whose = f"graph {owner}'s" if owner is not None else "not an event of any graph in this store"
            raise InvalidInputError(
                f"event {event} is {whose}, not one of graph {gid}; pass an event_id from its events() list",
                graph_id=gid,
            )
        start = baseline if baseline is not None else first
        if commit is None:  # events after the last image: a version without history wrote them
            raise StateError(
                f"event {event} of graph {gid} has no recorded state: a version that keeps no history "
                "wrote it after this one last did. The events up to the last one this version wrote "
                "can be read",
                graph_id=gid,
            )
        if event < start:
            raise StateError(
                f"graph {gid}'s history starts at event {start}: the file was written by a version that "
                "kept no history before then (history begins when this version first opens a file). "
                f"Pass an event from {start} to {last}",
                graph_id=gid,
            )
        return gid, event, int(commit)

    def state_at(self, graph_id: object, event_id: object) -> SnapshotAt:
        """The graph as it was at ``event_id``: its fields, nodes and edges as get_snapshot gives them."""
        with self._db.read():
            gid, event, commit = self.commit_of(graph_id, event_id)
            graph_row, nodes, edges = self.rows_at(gid, commit)
        return {
            **GraphRow(*graph_row).to_dict(),
            "nodes": [NodeRow(*n).to_dict() for n in nodes],
            "edges": [edge_dict(e) for e in edges],
            "event_id": event,
        }

    def rows_at(
        self, graph_id: str, commit: int
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The graph row, node rows (NODE_COLUMNS) and edge rows (EDGES_SQL) at a commit's last event."""
        graph_row = self._db.fetchone(
            f"SELECT {GRAPH_COLUMNS} FROM graph_history WHERE graph_id = ? AND event_id <= ? "
            "ORDER BY event_id DESC LIMIT 1",
            [graph_id, commit],
        )
        if graph_row is None:  # every commit that made a graph wrote its row's image
            raise StateError(f"graph {graph_id} has no recorded row at event {commit}", graph_id=graph_id)
        nodes = self._db.fetchall(_LATEST, [graph_id, commit])
        max_seq, _max_call_id = self.watermark(graph_id, commit)
        links = self._db.fetchall(_LINKS_AT, [graph_id, max_seq])
        # Tree edges are read off the nodes, as EDGES_SQL does, and merged with the links by seq.
        tree = [
            (n[_SEQ], n[_PARENT_ID], n[_NODE_ID], "parent_child", "{}", n[_CREATED_AT])
            for n in nodes
            if n[_PARENT_ID] is not None
        ]
        return graph_row, nodes, sorted(tree + links, key=lambda edge: int(edge[0]))

    def watermark(self, graph_id: str, commit: int) -> tuple[int, int]:
        """The ``node_seq`` and ``call_seq`` values at a commit: the links and calls that existed then."""
        row = self._db.fetchone(WATERMARK_AT, [graph_id, commit, graph_id, commit])
        assert row is not None and row[0] is not None  # a commit's images carry it (rule 13)
        return int(row[0]), int(row[1])

    def _place(self, gid: str, event: int) -> tuple[Any, ...]:
        try:
            row = self._db.fetchone(_PLACE, [event, gid, gid, event, gid, event, gid, gid, gid])
        except Exception as exc:  # a read-only file an older version wrote has no history tables
            if "_history" not in str(exc):
                raise
            raise StateError(
                f"{self._db.path} has no history yet: it was written by an older version; open it once "
                "without read_only=True (history begins then)"
            ) from exc
        assert row is not None
        return row
