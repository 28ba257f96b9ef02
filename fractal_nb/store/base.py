"""What every part of the store shares: the database, the clock, loading rows, events."""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from ..checks import require_id, require_text
from ..errors import GraphNotActiveError, InvalidInputError, NotFoundError
from ..vocabulary import (
    BUDGETS,
    Budget,
    CheckpointMode,
    ClaimKind,
    GraphStatus,
    Intensity,
    NodeStatus,
    NodeType,
    check_node_transition,
)
from .database import Database
from .journal import Journal
from .records import ClaimRecord
from .rows import GRAPH_COLUMNS, NODE_COLUMNS, GraphRow, NodeRow

DEFAULT_LEASE_S = 300.0
Event = tuple[str | None, str, str | None, dict[str, Any]]  # an event to log: node_id, kind, actor, payload


_ROW_FIELDS = frozenset(f.name for f in fields(NodeRow)) - {"status"}  # columns a NodeRow carries
# A node's current children (those a turn superseded are its history). Parameters: graph_id, node_id.
_EVENT_COLUMNS = "event_id, graph_id, node_id, kind, actor, created_at, payload"
CHILDREN_COUNT = "SELECT count(*) FROM nodes WHERE graph_id = ? AND parent_id = ? AND superseded_turn IS NULL"


class StoreCore:
    """What every step of the store shares: the connection, the clock, rows, events, status moves.

    Each step (claim.py, context.py, answer.py, synthesis.py, ...) is a plain class
    given this core and the other steps it calls, by :class:`GraphStore`
    (docs/architecture/store.md, "The store's layout"). Nothing here is a tool: these
    are the reads and writes every step's rules are built from. The journal
    records what each commit touched (rule 13).
    """

    def __init__(self, db: Database, journal: Journal, clock: Callable[[], float]) -> None:
        self.db = db
        self.journal = journal
        self.clock = clock

    # -- loading ------------------------------------------------------------------

    def graph(self, graph_id: object) -> GraphRow:
        """The graph's row as it is now (status included)."""
        gid = require_id(graph_id, "graph_id")
        row = self.db.fetchone(f"SELECT {GRAPH_COLUMNS} FROM graphs WHERE graph_id = ?", [gid])
        if row is None:
            self.db.file.graphs.pop(gid, None)
            raise NotFoundError(f"graph {gid!r} not found in this store", graph_id=gid)
        graph = GraphRow(*row)
        self.db.file.graphs[gid] = graph
        return graph

    def known_graph(self, graph_id: object) -> GraphRow:
        """The graph's row for reads that need only its id, seed, intensity or mode.

        Served from memory once seen (those fields never change), which spares hot
        reads a query; its ``status`` may be stale, so never decide on it here.
        """
        gid = require_id(graph_id, "graph_id")
        graph: GraphRow | None = self.db.file.graphs.get(gid)
        return graph if graph is not None else self.graph(gid)

    def active_graph(self, graph_id: object) -> GraphRow:
        """The graph's row, or GraphNotActiveError saying how to make it take writes."""
        graph = self.graph(graph_id)
        if graph.status != GraphStatus.ACTIVE:
            hint = (
                "resume it first (resume_graph)"
                if graph.status == GraphStatus.PAUSED
                else "its budget is spent: a new turn with a new budget goes on (new_budget), the harvest "
                "finishes it"
                if graph.status == GraphStatus.BUDGET_EXHAUSTED
                else "it is finished and takes no more writes"
            )
            raise GraphNotActiveError(
                f"graph {graph.graph_id} is {graph.status!r}; writes need an active graph: {hint}",
                graph_id=graph.graph_id,
            )
        return graph

    def active_node(
        self, graph_id: object, node_id: object, what: str = "node_id"
    ) -> tuple[GraphRow, NodeRow]:
        """The active graph and one of its nodes in one query: the first step of hot writes."""
        gid, nid = require_id(graph_id, "graph_id"), require_id(node_id, what)
        # By node_id alone: the key's index finds it (with graph_id too DuckDB scans the table);
        # node ids are unique in the file, so the graph is checked on the row.
        status = "(SELECT status FROM graphs WHERE graph_id = ?)"
        row = self.db.fetchone(f"SELECT {NODE_COLUMNS}, {status} FROM nodes WHERE node_id = ?", [gid, nid])
        if row is None or row[1] != gid or row[-1] != GraphStatus.ACTIVE:  # say precisely what is wrong
            graph = self.active_graph(gid)
            return graph, self.node(gid, nid, what)
        return replace(self.known_graph(gid), status=GraphStatus.ACTIVE.value), NodeRow(*row[:-1])

    def active_parent(self, graph_id: object, node_id: object, what: str) -> tuple[GraphRow, NodeRow, int]:
        """:meth:`active_node` and the node's current children (``Children.check_room``'s), in one query.

        A write adding children reads both first; each statement costs DuckDB its bind and
        plan (docs/architecture/store.md, "Store rules", concurrency), so they go together.
        """
        gid, nid = require_id(graph_id, "graph_id"), require_id(node_id, what)
        row = self.db.fetchone(
            f"SELECT {NODE_COLUMNS}, (SELECT status FROM graphs WHERE graph_id = ?), ({CHILDREN_COUNT}) "
            "FROM nodes WHERE node_id = ?",
            [gid, gid, nid, nid],
        )
        if row is None or row[1] != gid or row[-2] != GraphStatus.ACTIVE:
            self.active_node(gid, nid, what)  # raises, saying precisely what is wrong
            raise AssertionError("active_node accepted what active_parent refused")  # pragma: no cover
        graph = replace(self.known_graph(gid), status=GraphStatus.ACTIVE.value)
        return graph, NodeRow(*row[:-2]), int(row[-1])

    def node(self, graph_id: str, node_id: object, what: str = "node_id") -> NodeRow:
        """One node of the graph, or NotFoundError naming the argument (``what``)."""
        nid = require_id(node_id, what)
        row = self.db.fetchone(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE node_id = ?", [nid]
        )  # the key's index
        if row is None or row[1] != graph_id:
            raise NotFoundError(f"node {nid!r} not found in graph {graph_id}", graph_id=graph_id, node_id=nid)
        return NodeRow(*row)

    def missing(self, graph_id: str, node_ids: list[str]) -> list[str]:
        """Those of ``node_ids`` that are not nodes of the graph, in order (one read, by the key's index)."""
        if not node_ids:
            return []
        marks = ", ".join("?" for _ in node_ids)
        rows = self.db.fetchall(f"SELECT node_id, graph_id FROM nodes WHERE node_id IN ({marks})", node_ids)
        found = {nid for nid, gid in rows if gid == graph_id}
        return [n for n in node_ids if n not in found]

    def nodes(self, where: str, params: list[Any]) -> list[NodeRow]:
        """The nodes matching a WHERE fragment, in creation order."""
        rows = self.db.fetchall(f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} ORDER BY seq", params)
        return [NodeRow(*r) for r in rows]

    def question_of(self, node: NodeRow) -> NodeRow:
        """The node itself if a question, else the question it answers."""
        if node.node_type == NodeType.QUESTION or node.question_id is None:
            return node
        return self.node(node.graph_id, node.question_id)

    def descendants(self, graph_id: str, node_id: str) -> list[str]:
        """The ids below ``node_id``, in creation order; read in its graph only (forks share the file)."""
        rows = self.db.fetchall(
            """
            WITH RECURSIVE sub(node_id) AS (
                SELECT node_id FROM nodes WHERE graph_id = ? AND parent_id = ?
                UNION ALL
                SELECT n.node_id FROM nodes n JOIN sub ON n.parent_id = sub.node_id WHERE n.graph_id = ?
            )
            SELECT n.node_id FROM nodes n JOIN sub USING (node_id) WHERE n.graph_id = ? ORDER BY n.seq
            """,
            [graph_id, node_id, graph_id, graph_id],
        )
        return [r[0] for r in rows]

    def depth_ceiling(self, graph: GraphRow, question: NodeRow, needed: int) -> int:
        """How deep questions may sit below ``question`` (exclusive): the intensity's, or a deepened branch's.

        A branch the open turn deepened (store/turn_requests.py, ``deepen``) goes further; its
        allowances are read only when ``needed`` reaches past the intensity's depth.
        """
        base = self.budget(graph).max_depth
        if needed < base:
            return base
        ids = [*question.ancestors, question.node_id]
        marks = ", ".join("?" for _ in ids)
        row = self.db.fetchone(
            "SELECT max(a.levels) FROM depth_allowances a JOIN turns t ON t.graph_id = a.graph_id "
            f"AND t.turn = a.turn WHERE a.graph_id = ? AND t.head_event IS NULL AND a.node_id IN ({marks})",
            [graph.graph_id, *ids],
        )
        return base + int(row[0]) if row and row[0] is not None else base

    @staticmethod
    def budget(graph: GraphRow) -> Budget:
        """The graph's intensity's budget (max depth, nodes, tokens)."""
        return BUDGETS[Intensity(graph.intensity)]

    @staticmethod
    def checkpoint(graph: GraphRow) -> CheckpointMode:
        """The graph's checkpoint mode (which depths start gated)."""
        return CheckpointMode.parse(graph.checkpoint_mode)

    # -- writing ------------------------------------------------------------------

    def log(
        self,
        graph_id: str,
        node_id: str | None,
        kind: str,
        actor: str | None,
        payload: dict[str, Any],
        at: float,
    ) -> None:
        """Append one event; call inside the write transaction of the mutation it records."""
        row = self.db.execute(
            f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES (nextval('event_seq'), ?, ?, ?, ?, ?, ?) "
            "RETURNING event_id",
            [graph_id, node_id, kind, actor, at, json.dumps(payload)],
        ).fetchone()
        assert row is not None
        self.journal.logged(graph_id, int(row[0]), [node_id], [kind])

    def log_many(self, graph_id: str, events: list[Event], at: float) -> None:
        """Append several events (node_id, kind, actor, payload) in one statement."""
        if not events:
            return
        rows = ", ".join("(nextval('event_seq'), ?, ?, ?, ?, ?, ?)" for _ in events)
        ids = self.db.execute(
            f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES {rows} RETURNING event_id",
            [
                v
                for node_id, kind, actor, payload in events
                for v in (graph_id, node_id, kind, actor, at, json.dumps(payload))
            ],
        ).fetchall()
        self.journal.logged(
            graph_id, max(int(i) for (i,) in ids), [e[0] for e in events], [e[1] for e in events]
        )

    def set_status(
        self,
        node: NodeRow,
        status: str,
        at: float,
        *,
        actor: str | None,
        reason: str | None = None,
        inherited_from: str | None = None,
        kind: str = "status_changed",
        through: str | None = None,
        metadata: dict[str, Any] | None = None,
        columns: dict[str, Any] | None = None,
        payload: dict[str, Any] | None = None,
        turn: bool = False,
        chain: bool = False,
        before: list[Event] | None = None,
    ) -> NodeRow:
        """Move one node to ``status`` and log it: every status change in the store comes here.

        The move is checked against the transition table (docs/architecture/store.md,
        rule 6) before anything is written. ``through``: a status passed on the way
        in the same update (a leaf goes open -> answered -> synthesized at once),
        checked and logged too. ``metadata`` replaces the node's metadata and
        ``columns`` sets other columns (a claim's owner and lease) in the same
        statement; ``payload`` adds to the event's. ``turn``: a move only a turn
        makes (``vocabulary.TURN_TRANSITIONS``, store/reopening.py); ``chain``: one only a
        thinkon chain makes (``vocabulary.CHAIN_TRANSITIONS``, store/chain.py). ``before``:
        events of the same write logged first, in the same INSERT (a node's children added).
        Returns the row as the update left it (a claim reads its context around it).
        """
        steps = [node.status, *([through] if through is not None else []), status]
        for current, target in zip(steps, steps[1:], strict=False):
            check_node_transition(node.node_id, node.node_type, current, target, turn=turn, chain=chain)
        if status == NodeStatus.SATURATED and reason is not None:  # also where MCP agents look for it
            metadata = {**(node.metadata if metadata is None else metadata), "saturation_reason": reason}
        assigned: dict[str, Any] = {
            "status": status,
            "status_reason": reason,
            "inherited_from": inherited_from,
            "updated_at": at,
            **(columns or {}),
        }
        if metadata is not None:
            assigned["metadata"] = json.dumps(metadata)
        sets = ", ".join(f"{column} = ?" for column in assigned)
        self.db.execute(f"UPDATE nodes SET {sets} WHERE node_id = ?", [*assigned.values(), node.node_id])
        logged: dict[str, Any] = {"from": through or node.status, "to": status, **(payload or {})}
        if reason is not None:
            logged["reason"] = reason
        if inherited_from is not None:
            logged["inherited_from"] = inherited_from
        events: list[Event] = [(node.node_id, kind, actor, logged)]
        if through is not None:  # the first hop's event, before the second's (one INSERT for both)
            events.insert(0, (node.node_id, "status_changed", actor, {"from": node.status, "to": through}))
        self.log_many(node.graph_id, [*(before or []), *events], at)
        written = {column: value for column, value in assigned.items() if column in _ROW_FIELDS}
        return replace(
            node, **written, status=str(status), metadata_json=assigned.get("metadata", node.metadata_json)
        )

    def set_statuses(
        self,
        nodes: list[NodeRow],
        status: str,
        at: float,
        *,
        reason: str,
        inherited_from: str,
        kind: str,
        payload: dict[str, Any],
    ) -> None:
        """:meth:`set_status` for many nodes (a turn superseding a sub-tree): same checks, same events.

        Every move is checked against the transition table before anything is
        written; the rows change in one UPDATE per thousand nodes, the events in
        one INSERT each.
        """
        for node in nodes:
            check_node_transition(node.node_id, node.node_type, node.status, status)
        for start in range(0, len(nodes), 1000):
            chunk = nodes[start : start + 1000]
            metadata = [
                {**n.metadata, "saturation_reason": reason} if status == NodeStatus.SATURATED else n.metadata
                for n in chunk
            ]
            rows = ", ".join("(?, ?)" for _ in chunk)
            self.db.execute(
                "UPDATE nodes SET status = ?, status_reason = ?, inherited_from = ?, updated_at = ?, "
                f"metadata = v.meta FROM (VALUES {rows}) AS v(id, meta) WHERE nodes.node_id = v.id",
                [
                    status,
                    reason,
                    inherited_from,
                    at,
                    *(v for n, m in zip(chunk, metadata, strict=True) for v in (n.node_id, json.dumps(m))),
                ],
            )
            logged = {"to": status, "reason": reason, "inherited_from": inherited_from, **payload}
            self.log_many(
                chunk[0].graph_id, [(n.node_id, kind, None, {"from": n.status, **logged}) for n in chunk], at
            )

    def reopen_synthesis(self, question: NodeRow, actor: str | None, now: float) -> NodeRow:
        """Send a synthesized question, and each synthesized question above it, back to ``answered``.

        A new sub-question makes their syntheses stale: each is dropped from the
        node's metadata and kept in its ``reopened`` event; the cascade synthesizes
        them again once the new question is done (docs/notebook.md, "Boundary questions").
        """
        above = (
            [
                q
                for q in self.nodes(
                    f"node_id IN ({', '.join('?' for _ in question.ancestors)})", question.ancestors
                )
                if q.node_type == NodeType.QUESTION
            ]
            if question.ancestors
            else []
        )
        reopened = question
        for node in [question, *sorted(above, key=lambda q: -q.depth)]:
            if node.status != NodeStatus.SYNTHESIZED:
                break  # nothing above an unsynthesized question is synthesized
            meta = node.metadata
            stale = meta.pop("synthesis", None)
            meta.pop("claims", None)  # the stale synthesis's claims; its weak mark stays until rewritten
            self.set_status(
                node,
                NodeStatus.ANSWERED,
                now,
                actor=actor,
                kind="reopened",
                metadata=meta,
                payload={"synthesis": stale},
            )
            if node.node_id == question.node_id:
                reopened = replace(node, status=NodeStatus.ANSWERED.value, metadata_json=json.dumps(meta))
        return reopened


def new_id(prefix: str) -> str:
    """A fresh random id such as ``n-3f9c0a1b2c4d5e6f``."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


_last_graph = [0]  # the last graph id made in this process, as a number (guarded by _GRAPH_IDS)
_GRAPH_IDS = threading.Lock()


def new_graph_id() -> str:
    """A fresh graph id that sorts after every graph id made before it: ``g-`` and 16 hex digits.

    The milliseconds since the epoch, then 20 random bits (one more than the last
    id made in this process, when that is larger). Every query is scoped by graph,
    and DuckDB skips a row group whose graph ids all sort below the one asked for:
    a new graph's rows come after the older graphs' rows in the file, so its
    queries skip theirs (docs/architecture/store.md, "Cost by graph").

    >>> a, b = new_graph_id(), new_graph_id()
    >>> len(a), a < b
    (18, True)
    """
    value = (time.time_ns() // 1_000_000) << 20 | secrets.randbits(20)
    with _GRAPH_IDS:
        value = _last_graph[0] = max(value, _last_graph[0] + 1)
    return f"g-{value:016x}"


def require_claims(value: object) -> list[ClaimRecord]:
    """A synthesis's claims: a list of ``{kind, text, support, source}``.

    See docs/architecture/engine.md, "Facts, assumptions, unknowns".

    None is no claims. ``kind`` is a :class:`~fractal_nb.vocabulary.ClaimKind`, ``text`` free text,
    ``support`` text ("" when none) and ``source`` a node id or None.

    >>> require_claims([{"kind": "unknown", "text": "how big it is"}])
    [{'kind': 'unknown', 'text': 'how big it is', 'support': '', 'source': None}]
    """
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise InvalidInputError(
            f"claims must be a list of objects (kind, text, support, source), not {value!r}"
        )
    claims: list[ClaimRecord] = []
    for item in value:
        kind = item.get("kind")
        if kind not in tuple(ClaimKind):
            raise InvalidInputError(f"a claim's kind must be one of {', '.join(ClaimKind)}, not {kind!r}")
        support, source = item.get("support") or "", item.get("source")
        claims.append(
            {
                "kind": str(kind),
                "text": require_text(item.get("text"), "a claim's text"),
                "support": require_text(support, "a claim's support") if support else "",
                "source": None if source is None else require_id(source, "a claim's source"),
            }
        )
    return claims
