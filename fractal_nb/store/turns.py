"""A graph's turns: opened, joined, recorded and ended in heads; listed with their requests.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md, "Turns
and heads"): the store's core (rows, events) and the graph lifecycle that reopens a
completed graph are passed in. Every query is scoped by ``graph_id``. A steering request
(store/turn_requests.py) joins the open turn or opens the next one here — a completed graph
goes back to ``active`` here and nowhere else — and is recorded on it, in the request's
transaction. ``end_turn`` (at harvest) makes the head.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..checks import require_id
from ..vocabulary import GraphStatus, NodeStatus, NodeType, TurnKind
from .base import StoreCore
from .records import TurnRecord, TurnRequest
from .rows import GraphRow, NodeRow

if TYPE_CHECKING:
    from .graphs import GraphLifecycle


class Turns:
    """The turns of the graphs in one store; ``GraphStore`` delegates its turn calls here.

    Examples
    --------
    >>> from fractal_nb.store import GraphStore
    >>> store = GraphStore()
    >>> g = store.create_graph("Why do cities grow?", "pulse")
    >>> [(t["turn"], t["kind"], t["head_event"]) for t in store.list_turns(g["graph_id"])]
    [(1, 'seed', None)]
    """

    def __init__(self, core: StoreCore, graphs: GraphLifecycle) -> None:
        self._core = core
        self._db = core.db
        self._graphs = graphs

    # -- opening and ending -------------------------------------------------------------

    def open_seed(self, graph_id: str) -> None:
        """Turn 1 (the seed) of a graph just created, in its transaction."""
        self._insert(graph_id, 1, TurnKind.SEED, self._first_event(graph_id))

    def open_turn(self, graph: GraphRow, kind: TurnKind) -> int:
        """The open turn's number, or a new turn's: a completed graph goes back to ``active``.

        Call inside the write transaction of the request that joins it.
        """
        row = self._db.fetchone(
            "SELECT turn FROM turns WHERE graph_id = ? AND head_event IS NULL", [graph.graph_id]
        )
        # A new budget: the turn its budget stopped ends in a head (store/budget_turns.py).
        ends = graph.status == GraphStatus.BUDGET_EXHAUSTED and kind == TurnKind.BUDGET
        if row is not None and not ends:
            return int(row[0])
        if row is not None:
            self._write_head(graph, int(row[0]), cost=None)
        last = self._db.fetchone("SELECT max(turn) FROM turns WHERE graph_id = ?", [graph.graph_id])
        if last is None or last[0] is None:  # a graph from a file older than turns: its seed turn first
            self._insert(graph.graph_id, 1, TurnKind.SEED, self._first_event(graph.graph_id))
            if graph.status != GraphStatus.COMPLETED and not ends:
                return 1  # still being worked on: the request joins the seed turn
            self._write_head(graph, 1, cost=None)  # completed: that was the seed's head
            last = (1,)
        turn = int(last[0]) + 1
        # A head, not a tomb: the only way back to active (a budget_exhausted one: with a new budget).
        if graph.status in (GraphStatus.COMPLETED, GraphStatus.BUDGET_EXHAUSTED):
            self._graphs.change_status(
                graph.graph_id, graph.status, GraphStatus.ACTIVE, f"turn {turn}: {kind.value}"
            )
        now = self._core.clock()
        self._core.log(graph.graph_id, None, "turn_started", None, {"turn": turn, "kind": kind.value}, now)
        self._insert(graph.graph_id, turn, kind, self._last_event(graph.graph_id))
        return turn

    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        """End the open turn in a head (at harvest, after the graph is completed); None if none is open.

        A graph from a file older than turns gets its seed turn here, ended at once.
        """
        gid = require_id(graph_id, "graph_id")
        with self._db.write():
            graph = self._core.graph(gid)
            row = self._db.fetchone("SELECT turn FROM turns WHERE graph_id = ? AND head_event IS NULL", [gid])
            if row is None:
                if self._db.fetchone("SELECT 1 FROM turns WHERE graph_id = ?", [gid]) is not None:
                    return None
                self._insert(gid, 1, TurnKind.SEED, self._first_event(gid))
                turn = 1
            else:
                turn = int(row[0])
            self._write_head(graph, turn, cost=cost)
        return next(t for t in self.list_turns(gid) if t["turn"] == turn)

    def _write_head(self, graph: GraphRow, turn: int, *, cost: float | None) -> None:
        """End ``turn`` in a head: a ``head`` event, then the graph as it is now (caller's transaction)."""
        gid = graph.graph_id
        now = self._core.clock()
        self._core.log(gid, None, "head", None, {"turn": turn, "status": graph.status}, now)
        nodes = self._core.nodes("graph_id = ?", [gid])
        root = next(n for n in nodes if n.node_id == graph.root_node_id)
        tokens = self._db.fetchone(
            "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_calls "
            "WHERE graph_id = ? AND outcome <> 'cached'",
            [gid],
        )
        self._db.execute(
            "UPDATE turns SET head_event = ?, status = ?, root_synthesis = ?, counts = ?, tokens = ?, "
            "cost = ?, ended_at = ? WHERE graph_id = ? AND turn = ?",
            [
                self._last_event(gid),
                graph.status,
                root.metadata.get("synthesis"),
                json.dumps(head_counts(nodes)),
                int(tokens[0]) if tokens else 0,
                cost,
                now,
                gid,
                turn,
            ],
        )

    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        """The graph's turns in order, the open one (``head_event`` None) last."""
        gid = self._core.known_graph(graph_id).graph_id
        rows = self._db.fetchall(
            "SELECT turn, kind, requests, started_event, head_event, status, root_synthesis, counts, "
            "tokens, cost, created_at, ended_at FROM turns WHERE graph_id = ? ORDER BY turn",
            [gid],
        )
        return [
            {
                "graph_id": gid,
                "turn": turn,
                "kind": kind,
                "requests": json.loads(requests),
                "started_event": started,
                "head_event": head,
                "status": status,
                "root_synthesis": synthesis,
                "counts": json.loads(counts) if counts else {},
                "tokens": tokens,
                "cost": cost,
                "created_at": created,
                "ended_at": ended,
            }
            for (
                turn,
                kind,
                requests,
                started,
                head,
                status,
                synthesis,
                counts,
                tokens,
                cost,
                created,
                ended,
            ) in rows
        ]

    # -- requests ----------------------------------------------------------------------

    def record(
        self,
        graph_id: str,
        turn: int,
        kind: TurnKind,
        arguments: dict[str, Any],
        created: list[str],
        reopened: list[str],
    ) -> TurnRequest:
        """Record a steering request on its turn, and log it (the request's transaction)."""
        request: TurnRequest = {
            "turn": turn,
            "kind": kind.value,
            "arguments": arguments,
            "created": created,
            "reopened": reopened,
        }
        row = self._db.fetchone(
            "SELECT requests FROM turns WHERE graph_id = ? AND turn = ?", [graph_id, turn]
        )
        requests = [*json.loads(row[0] if row else "[]"), request]
        self._db.execute(
            "UPDATE turns SET requests = ? WHERE graph_id = ? AND turn = ?",
            [json.dumps(requests), graph_id, turn],
        )
        self._core.log(graph_id, None, "turn_request", None, dict(request), self._core.clock())
        return request

    def _insert(self, graph_id: str, turn: int, kind: TurnKind, started: int) -> None:
        self._db.execute(
            "INSERT INTO turns (graph_id, turn, kind, requests, started_event, created_at) "
            "VALUES (?, ?, ?, '[]', ?, ?)",
            [graph_id, turn, kind.value, started, self._core.clock()],
        )

    def _last_event(self, graph_id: str) -> int:
        row = self._db.fetchone("SELECT max(event_id) FROM events WHERE graph_id = ?", [graph_id])
        return int(row[0]) if row and row[0] is not None else 0

    def _first_event(self, graph_id: str) -> int:
        row = self._db.fetchone("SELECT min(event_id) FROM events WHERE graph_id = ?", [graph_id])
        return int(row[0]) if row and row[0] is not None else 0


def head_counts(nodes: Sequence[NodeRow]) -> dict[str, int]:
    """A head's counts: current questions by status, and the notes and superseded nodes."""
    counts: dict[str, int] = {status.value: 0 for status in NodeStatus if status != NodeStatus.ANSWERED}
    counts[NodeStatus.ANSWERED.value] = 0
    for node in nodes:
        if node.superseded_turn is None and node.node_type == NodeType.QUESTION:
            counts[node.status] += 1
    counts["notes"] = sum(n.node_type == NodeType.NOTE and n.superseded_turn is None for n in nodes)
    counts["superseded"] = sum(n.superseded_turn is not None for n in nodes)
    return counts
