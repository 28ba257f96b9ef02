"""The claim step: atomic claims with leases and branch affinity, renewal, release, recovery.

A claim is a lease held by a holder (:mod:`.holders`); the holder's heartbeat
renews it, and recovery returns only the claims of holders that are gone.
"""

from __future__ import annotations

from typing import Any

from ..checks import optional_name, require_count, require_id, require_seconds, require_text
from ..errors import StateError
from ..vocabulary import (
    BUDGETS,
    PENDING_QUESTION,
    TERMINAL_GRAPH,
    GraphStatus,
    Intensity,
    NodeStatus,
    SaturationReason,
)
from .base import StoreCore
from .dialect import Per
from .holders import HOLDER_LEASE_S, OWN_HOLDER, HolderArgument, HolderInfo, is_gone, parse_holder
from .records import Claim, ClaimReleased, Heartbeat, Recovered
from .rows import NODE_COLUMNS, GraphRow, NodeRow

# Claimable: an open question below the root (or a thinkon chain's root: claimable()), or a claim
# whose lease ran out (docs/architecture/store.md, rule 5). Affinity first (branches this worker has owned
# nodes in), then shallower first, then creation order (the reference's order).
CLAIMABLE = f"""
    SELECT {NODE_COLUMNS} FROM nodes
    WHERE graph_id = ? AND node_type = 'question' AND {{below_root}} {{active}}
      AND (status = 'open' OR (status = 'claimed' AND claimed_at + lease_s <= ?))
    ORDER BY (branch_id IN (
                SELECT DISTINCT branch_id FROM nodes
                WHERE graph_id = ? AND owner = ? AND branch_id IS NOT NULL)) IS TRUE DESC,
             depth, seq
"""


def claimable(graph: GraphRow, worker: str | None, now: float, *, active: bool) -> tuple[str, list[Any]]:
    """The claimable query for ``graph`` and its parameters (``active``: only while the graph is active).

    Questions below the root; in a thinkon graph the root too, the chain's first
    level (store/chain.py). A graph's strategy never changes, so it is read off
    its row rather than in the query.
    """
    chain = graph.chained
    sql = CLAIMABLE.format(
        below_root="(depth > 0 OR node_id = ?)" if chain else "depth > 0", active=_IF_ACTIVE if active else ""
    )
    gid = graph.graph_id
    return sql, [gid, *([graph.root_node_id] if chain else []), *([gid] if active else []), now, gid, worker]


# The claim takes the first claimable row. On PostgreSQL it locks that row, and passes over a row
# another transaction holds rather than wait for it (docs/architecture/store.md, rule 1).
_PICK_ONE = Per(duckdb=" LIMIT 1", postgresql=" LIMIT 1 FOR UPDATE SKIP LOCKED")
# A holder's heartbeat renews its claims. On PostgreSQL a row another transaction holds is skipped,
# never waited for: that transaction is changing the claim (its lease is renewed at the next beat).
_RENEW_NODES = Per(
    duckdb="UPDATE nodes SET claimed_at = ? WHERE holder = ? AND status = 'claimed' "
    "RETURNING graph_id, node_id",
    postgresql="UPDATE nodes SET claimed_at = ? WHERE node_id IN (SELECT node_id FROM nodes "
    "WHERE holder = ? AND status = 'claimed' FOR UPDATE SKIP LOCKED) RETURNING graph_id, node_id",
)
_RENEW_SYNTHESES = Per(
    duckdb="UPDATE synthesis_claims SET claimed_at = ? WHERE holder = ?",
    postgresql="UPDATE synthesis_claims SET claimed_at = ? WHERE node_id IN (SELECT node_id "
    "FROM synthesis_claims WHERE holder = ? FOR UPDATE SKIP LOCKED)",
)
# Rule 17, the agent ceiling: the other workers holding a live claim on the graph (a question or a
# synthesis), in every process. Parameters: gid, worker, now, gid, worker, now.
_BUSY = """
    SELECT count(*) FROM (
        SELECT owner AS worker FROM nodes
        WHERE graph_id = ? AND status = 'claimed' AND owner <> ? AND claimed_at + lease_s >= ?
        UNION SELECT worker FROM synthesis_claims
        WHERE graph_id = ? AND worker <> ? AND claimed_at + lease_s >= ?
    ) AS busy
"""


def _busy_params(graph_id: str, worker: str, now: float) -> list[Any]:
    """The parameters of ``_BUSY``."""
    return [graph_id, worker, now] * 2


# A question no worker holds: its lease cleared.
NO_LEASE = {"holder": None, "claimed_at": None, "lease_s": None}
_IF_ACTIVE = "AND EXISTS (SELECT 1 FROM graphs WHERE graph_id = ? AND status = 'active')"
# Holders of a graph's claims (questions and syntheses), to tell which are gone. Parameters: gid, gid.
_CLAIM_HOLDERS = """
    SELECT holder_id, host, pid, proc_start FROM holders WHERE holder_id IN (
        SELECT holder FROM nodes WHERE graph_id = ? AND status = 'claimed'
        UNION SELECT holder FROM synthesis_claims WHERE graph_id = ?)
"""


class Claims:
    """Claiming questions, renewing and giving back claims, and getting stuck claims back.

    ``holder`` is this store's own (this process, while the store is open) and
    ``lease_s`` its claims' lease; :class:`~fractal_nb.store.synthesis.Synthesis` leases
    its syntheses through :meth:`held`, :meth:`lease_for`, :meth:`register` and
    :meth:`recover_gone` too.
    """

    def __init__(self, core: StoreCore, holder: HolderInfo, lease_s: float) -> None:
        self._core = core
        self._db = core.db
        self.holder = holder
        self.lease_s = lease_s
        dialect = self._db.dialect
        self._pick_one = _PICK_ONE(dialect)
        self._renew_nodes = _RENEW_NODES(dialect)
        self._renew_syntheses = _RENEW_SYNTHESES(dialect)

    def claim_question(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
    ) -> tuple[Claim, NodeRow | None]:
        """Atomically claim the next question for ``worker_id`` (docs/architecture/store.md, rule 1).

        Returns the claimed node, or ``node_id: null`` with ``graph_done`` (no
        question open, claimed or gated; on a graph that is not active, true only
        when it is terminal) and ``graph_status``. The claim records its holder:
        by default this store (this process, while the store is open), or a remote
        worker's :class:`HolderInfo`; a holder's heartbeat renews its claims, and
        they come back at once when it is gone. ``holder=None`` makes a plain lease
        (MCP agents that send no holder). With nothing to claim, claims of holders
        that are gone are recovered first.

        With the claim comes the claimed question's row as the claim left it
        (None when nothing was claimed): what its context is read around.
        """
        gid = require_id(graph_id, "graph_id")
        worker = require_id(worker_id, "worker_id")
        held = self.held(holder)
        with self._db.write():
            now = self._core.clock()
            # The hot path asks once: a candidate, only if the graph is active.
            sql, params = claimable(self._core.known_graph(gid), worker, now, active=True)
            # The candidate and the count of rule 17 in one statement (each statement costs DuckDB
            # its bind and plan, about a millisecond inside a transaction: "Store rules", concurrency).
            busy_sql, busy_params = self.busy_read(gid, worker, now)
            pick = f"SELECT picked.*, ({busy_sql}) AS busy FROM ({sql}{self._pick_one}) AS picked"
            params = [*busy_params, *params]
            row = self._db.fetchone(pick, params)
            if row is None and self.recover_gone(gid, now):  # a dead worker's claims come back
                row = self._db.fetchone(pick, params)
            if row is not None and (busy := self.seats_taken(gid, worker, now, int(row[-1]))) is not None:
                return {
                    "node_id": None,
                    "graph_done": False,
                    "graph_status": "active",
                    "busy_workers": busy,
                }, None
            if row is None:
                return self._nothing_to_claim(gid), None
            node = NodeRow(*row[:-1])
            if held is not None:
                self.register(held, now)
            lease = self.lease_for(held and held["holder_id"])
            claimed = self._take(node, worker, held, lease, now)
        if held is not None:
            self._db.file.holders.add(held["holder_id"])  # registered, now that it committed
        return {
            "node_id": node.node_id,
            "graph_id": gid,
            "text": node.text,
            "depth": node.depth,
            "parent_id": node.parent_id,
            "metadata": node.metadata,
            "lease_s": lease,
            "graph_done": False,
            "graph_status": GraphStatus.ACTIVE.value,
        }, claimed

    def _nothing_to_claim(self, gid: str) -> Claim:
        """The claim of a worker that found no question: whether the graph is done, and its status.

        On a graph that is not active, done means terminal.
        """
        graph = self._core.graph(gid)
        if graph.status != GraphStatus.ACTIVE:
            return {
                "node_id": None,
                "graph_done": graph.status in TERMINAL_GRAPH,
                "graph_status": graph.status,
            }
        return {"node_id": None, "graph_done": self.graph_done(gid), "graph_status": graph.status}

    def _take(self, node: NodeRow, worker: str, held: HolderInfo | None, lease: float, now: float) -> NodeRow:
        """The claim's write: the question claimed for ``worker`` under ``held``, its lease from now."""
        payload: dict[str, Any] = {"lease_s": lease}
        if node.status == NodeStatus.CLAIMED:  # taken over: its lease ran out
            payload["lease_expired_for"] = node.owner
        return self._core.set_status(
            node,
            NodeStatus.CLAIMED,
            now,
            actor=worker,
            kind="claimed",
            columns={
                "owner": worker,
                "holder": held and held["holder_id"],
                "claimed_at": now,
                "lease_s": lease,
            },
            payload=payload,
        )

    @staticmethod
    def busy_read(graph_id: str, worker: str, now: float) -> tuple[str, list[Any]]:
        """Rule 17's count of the other workers holding claims: a subquery a pick reads with its candidate."""
        return _BUSY, _busy_params(graph_id, worker, now)

    def seats_taken(self, graph_id: str, worker: str, now: float, busy: int) -> int | None:
        """How many other workers hold claims on the graph, if as many as its budget's agents (rule 17).

        ``busy`` is the count a pick read with its candidate (:meth:`busy_read`). The
        ceiling holds across every process working the graph, for a question's claim and a
        synthesis's alike: a worker beyond it claims nothing until one of those claims ends
        (a gone holder's come back first, and the count is read again). Inside the caller's
        write transaction.
        """
        ceiling = BUDGETS[Intensity(self._core.known_graph(graph_id).intensity)].max_agents
        if busy >= ceiling and self.recover_gone(graph_id, now):
            busy = self._count(_busy_params(graph_id, worker, now))
        return busy if busy >= ceiling else None

    def _count(self, params: list[Any]) -> int:
        row = self._db.fetchone(_BUSY, params)
        return int(row[0]) if row else 0

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> Recovered:
        """Return stuck claims to open: by default those past their lease and those of gone holders.

        A live holder's claims are never taken: its heartbeat renews them.
        ``older_than_s`` also takes claims at least that old (since claimed or last
        renewed) unless their holder is known to be alive; ``worker_id`` limits
        recovery to that worker's claims and, without ``older_than_s``, takes all of
        them (a worker thread that crashed); ``include_errors`` also reopens
        questions marked ``error``.
        """
        if older_than_s is not None:
            older_than_s = require_seconds(older_than_s, "older_than_s", none="claims past their lease")
        worker = optional_name(worker_id, "worker_id")
        with self._db.write():
            graph = self._core.graph(graph_id)
            if graph.status in TERMINAL_GRAPH:
                raise StateError(
                    f"graph {graph.graph_id} is {graph.status!r} (terminal); nothing to recover",
                    graph_id=graph.graph_id,
                )
            now = self._core.clock()
            gid = graph.graph_id
            stuck = self.recover_gone(gid, now) if worker is None else []
            where, params = self._stuck_claims(gid, now, older_than_s, worker)
            nodes = self._core.nodes(where, params)
            if include_errors and not graph.chained:  # a chain's failed level stays its failed return
                nodes += self._core.nodes("graph_id = ? AND status = 'error'", [gid])
                # Failed questions a harvest saturated as such, and the syntheses written over them
                # (weak: docs/architecture/engine.md, "Facts, assumptions, unknowns"), reopen too.
                for failed in self._reopenable_failures(gid):
                    if failed.question_id is not None:
                        self._core.reopen_synthesis(self._core.node(gid, failed.question_id), None, now)
                    nodes.append(failed)
            self._reopen(nodes, now)
            if worker is not None:
                self._db.execute(
                    "DELETE FROM synthesis_claims WHERE graph_id = ? AND worker = ?", [gid, worker]
                )
        recovered = stuck + [n.node_id for n in nodes]
        return {"graph_id": gid, "recovered": recovered, "count": len(recovered)}

    def heartbeat(self, holder_id: str) -> Heartbeat:
        """A live holder renews the leases of all its claims (questions and syntheses), in every graph."""
        hid = require_id(holder_id, "holder_id")
        with self._db.write():
            now = self._core.clock()
            self._db.execute("UPDATE holders SET seen_at = ? WHERE holder_id = ?", [now, hid])
            renewed = self._db.fetchall(self._renew_nodes, [now, hid])
            self._core.journal.changed(renewed)  # no event: the images at each graph's last one (rule 13)
            self._db.execute(self._renew_syntheses, [now, hid])
        return {"holder_id": hid, "renewed": len(renewed), "lease_s": self.lease_for(hid)}

    def release_claim(
        self,
        graph_id: str,
        node_id: str,
        worker_id: str,
        error: str,
        *,
        max_failures: int = 3,
        failed: bool = True,
    ) -> ClaimReleased:
        """Give back a claim after a failed attempt, recording why.

        The question reopens for another try; after ``max_failures`` failed
        attempts it is marked ``error`` instead (recoverable with
        ``recover_stuck(include_errors=True)``), so a node that always fails
        never holds the graph open. ``failed=False`` gives it back without
        counting an attempt (the model was unreachable: not the question's fault).
        """
        worker = require_id(worker_id, "worker_id")
        error = require_text(error, "error")
        require_count(max_failures, "max_failures", minimum=1)
        with self._db.write():
            graph = self._core.active_graph(graph_id)
            node = self._core.node(graph.graph_id, node_id)
            if node.status != NodeStatus.CLAIMED or node.owner != worker:
                raise StateError(
                    f"question {node.node_id} is {node.status!r} (owner {node.owner!r}); only the "
                    f"worker holding its claim can release it, not {worker!r}",
                    graph_id=graph.graph_id,
                    node_id=node.node_id,
                )
            meta = node.metadata
            failures = int(meta.get("failures", 0)) + (1 if failed else 0)
            meta.update(failures=failures, last_error=error)
            target = NodeStatus.ERROR if failures >= max_failures else NodeStatus.OPEN
            now = self._core.clock()
            self._core.set_status(
                node,
                target,
                now,
                actor=worker,
                kind="released",
                reason=error if target == NodeStatus.ERROR else None,
                metadata=meta,
                columns=NO_LEASE,
            )
        return {"node_id": node.node_id, "status": target.value, "failures": failures}

    def held(self, holder: HolderArgument) -> HolderInfo | None:
        """Who a claim is for: this store (``"store"``), a client's holder, or nobody (a plain lease)."""
        if holder is None:
            return None
        return self.holder if holder == OWN_HOLDER else parse_holder(holder)

    def lease_for(self, holder_id: str | None) -> float:
        """A claim's lease: the store's own (or a plain lease's), or a short one for another process's holder.

        The short one is renewed by the holder's heartbeat, so a holder that dies anywhere gives its
        claims back within it, on any host (docs/architecture/store.md, rule 5).
        """
        if holder_id is None or holder_id == self.holder["holder_id"]:
            return self.lease_s
        return min(self.lease_s, HOLDER_LEASE_S)

    def register(self, holder: HolderInfo, now: float) -> None:
        """Record a holder once (inside the caller's write transaction)."""
        if holder["holder_id"] in self._db.file.holders:
            return
        self._db.execute(
            "INSERT INTO holders (holder_id, host, pid, proc_start, label, seen_at) "
            "VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (holder_id) DO UPDATE SET seen_at = ?",
            [
                holder["holder_id"],
                holder["host"],
                holder["pid"],
                holder["proc_start"],
                holder["label"],
                now,
                now,
            ],
        )

    def recover_gone(self, graph_id: str, now: float) -> list[str]:
        """Reopen the claims of holders that are gone, drop their syntheses; the reopened ids."""
        gone = [
            h for h, *where in self._db.fetchall(_CLAIM_HOLDERS, [graph_id, graph_id]) if is_gone(h, *where)
        ]
        if not gone:
            return []
        marks = ", ".join("?" for _ in gone)
        nodes = self._core.nodes(
            f"graph_id = ? AND status = 'claimed' AND holder IN ({marks})", [graph_id, *gone]
        )
        self._reopen(nodes, now)
        self._db.execute(
            f"DELETE FROM synthesis_claims WHERE graph_id = ? AND holder IN ({marks})", [graph_id, *gone]
        )
        return [n.node_id for n in nodes]

    def _stuck_claims(
        self, gid: str, now: float, older_than_s: float | None, worker: str | None
    ) -> tuple[str, list[Any]]:
        """The WHERE fragment, and its parameters, of the claims a recovery takes back (see recover_stuck)."""
        where, params = "graph_id = ? AND status = 'claimed'", list[Any]([gid])
        if older_than_s is not None:
            where, params = where + " AND claimed_at <= ?", [*params, now - older_than_s]
            if worker is None:  # never a claim whose holder is known to be alive
                live = [
                    h
                    for h, host, pid, start in self._db.fetchall(_CLAIM_HOLDERS, [gid, gid])
                    if host == self.holder["host"] and not is_gone(h, host, pid, start)
                ]
                if live:
                    marks = ", ".join("?" for _ in live)
                    # a claim with no holder is not a live holder's (NOT IN alone never matches NULL)
                    where = where + f" AND (holder IS NULL OR holder NOT IN ({marks}))"
                    params = [*params, *live]
        elif worker is None:  # default: claims past their own lease
            where, params = where + " AND claimed_at + lease_s <= ?", [*params, now]
        if worker is not None:
            where, params = where + " AND owner = ?", [*params, worker]
        return where, params

    def _reopenable_failures(self, graph_id: str) -> list[NodeRow]:
        """The questions saturated as failed that may reopen: those in no branch still saturated.

        A failed question under a node saturated for another reason (or for a failure
        that is not reopened with it) stays closed: a saturated branch keeps every
        question below it done (rule 4). Taken from the top down, so a failed
        question reopens with the failed question above it.
        """
        failed = self._core.nodes(
            "graph_id = ? AND node_type = 'question' AND status = 'saturated' AND status_reason = ?",
            [graph_id, SaturationReason.ERROR.value],
        )
        if not failed:
            return []
        failed.sort(key=lambda n: (n.depth, n.seq))
        saturated = {
            row[0]
            for row in self._db.fetchall(
                "SELECT node_id FROM nodes WHERE graph_id = ? AND status = 'saturated'", [graph_id]
            )
        }
        above = sorted({a for n in failed for a in n.ancestors})
        marks = ", ".join("?" for _ in above)
        rows = (
            self._db.fetchall(
                f"SELECT node_id, parent_id FROM nodes WHERE graph_id = ? AND node_id IN ({marks})",
                [graph_id, *above],
            )
            if above
            else []
        )
        parent_of: dict[str, str | None] = dict(rows)
        reopened: set[str] = set()
        for question in failed:
            # the chain above: each question on its path, and the node each hangs under
            chain = {*question.ancestors, question.parent_id}
            chain |= {parent_of.get(a) for a in question.ancestors}
            if not any(c in saturated and c not in reopened for c in chain if c is not None):
                reopened.add(question.node_id)
        return [n for n in failed if n.node_id in reopened]

    def _reopen(self, nodes: list[NodeRow], now: float) -> None:
        """Claimed or failed questions back to open, their lease and holder cleared."""
        for node in nodes:
            self._core.set_status(node, NodeStatus.OPEN, now, actor=None, kind="recovered", columns=NO_LEASE)

    def graph_done(self, graph_id: str) -> bool:
        """No question of the graph is open, claimed or gated."""
        row = self._db.fetchone(
            "SELECT count(*) FROM nodes WHERE graph_id = ? AND node_type = 'question' "
            f"AND status IN ({', '.join('?' for _ in PENDING_QUESTION)})",
            [graph_id, *PENDING_QUESTION],
        )
        return row is not None and row[0] == 0
