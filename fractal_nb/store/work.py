"""The work queue: atomic claims with leases and branch affinity, synthesis, recovery."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidInputError, StateError
from ..model import (
    DONE_QUESTION,
    TERMINAL_GRAPH,
    GraphStatus,
    NodeStatus,
    NodeType,
    check_question_transition,
)
from .base import StoreBase, optional_name, require_id, require_text
from .rows import NODE_COLUMNS, NodeRow

# Claimable: an open question below the root, or a claim whose lease ran out
# (rule 5). Affinity first (branches this worker has owned nodes in), then
# creation order. Parameters: graph_id, (graph_id for _IF_ACTIVE), now, graph_id, worker_id.
_CLAIMABLE = f"""
    SELECT {NODE_COLUMNS} FROM nodes
    WHERE graph_id = ? AND node_type = 'question' AND depth > 0 {{active}}
      AND (status = 'open' OR (status = 'claimed' AND claimed_at + lease_s <= ?))
    ORDER BY (branch_id IN (
                SELECT DISTINCT branch_id FROM nodes
                WHERE graph_id = ? AND owner = ? AND branch_id IS NOT NULL)) IS TRUE DESC,
             seq
"""
_IF_ACTIVE = "AND EXISTS (SELECT 1 FROM graphs WHERE graph_id = ? AND status = 'active')"


class WorkQueue(StoreBase):
    """Claiming questions, synthesizing them, and getting stuck claims back."""

    def claim_work(self, graph_id: str, worker_id: str) -> dict[str, Any]:
        """Atomically claim the next question for ``worker_id`` (rule 1).

        Returns the claimed node, or ``node_id: null`` with ``graph_done`` (no
        question open, claimed or gated; on a graph that is not active, true only
        when it is terminal) and ``graph_status``.
        """
        gid = require_id(graph_id, "graph_id")
        worker = require_id(worker_id, "worker_id")
        with self._db.write():
            now = self.clock()
            # The hot path asks once: a candidate, only if the graph is active.
            row = self._db.fetchone(_CLAIMABLE.format(active=_IF_ACTIVE) + " LIMIT 1",
                                    [gid, gid, now, gid, worker])
            if row is None:
                graph = self._graph(gid)
                if graph.status != GraphStatus.ACTIVE:
                    return {"node_id": None, "graph_done": graph.status in TERMINAL_GRAPH,
                            "graph_status": graph.status}
                return {"node_id": None, "graph_done": self._graph_done(gid),
                        "graph_status": graph.status}
            node = NodeRow(*row)
            # The guard on status/claimed_at keeps the update honest even if the
            # candidate changed; under the write lock it cannot have.
            self._db.execute(
                "UPDATE nodes SET status = 'claimed', owner = ?, claimed_at = ?, lease_s = ?, "
                "updated_at = ? WHERE node_id = ? AND status = ? "
                "AND claimed_at IS NOT DISTINCT FROM ?",
                [worker, now, self.lease_s, now, node.node_id, node.status, node.claimed_at],
            )
            payload: dict[str, Any] = {"from": node.status, "to": "claimed", "lease_s": self.lease_s}
            if node.status == NodeStatus.CLAIMED:
                payload["lease_expired_for"] = node.owner
            self._log(gid, node.node_id, "claimed", worker, payload, now)
        return {
            "node_id": node.node_id,
            "graph_id": gid,
            "text": node.text,
            "depth": node.depth,
            "parent_id": node.parent_id,
            "metadata": node.metadata,
            "lease_s": self.lease_s,
            "graph_done": False,
            "graph_status": GraphStatus.ACTIVE.value,
        }

    def synthesize_node(self, graph_id: str, node_id: str, synthesis_text: str) -> dict[str, Any]:
        """Record an answered question's synthesis (in ``metadata["synthesis"]``).

        Refused while any of its sub-questions is neither synthesized nor
        saturated (rule 3).
        """
        text = require_text(synthesis_text, "synthesis_text")
        with self._db.write():
            graph, node = self._active_node(graph_id, node_id)
            if node.node_type != NodeType.QUESTION:
                raise InvalidInputError(
                    f"node {node.node_id} is an answer; synthesize its question {node.question_id}",
                    graph_id=graph.graph_id, node_id=node.node_id,
                )
            if node.status in (NodeStatus.OPEN, NodeStatus.CLAIMED):
                raise StateError(
                    f"question {node.node_id} is {node.status!r} and has no answer yet; add an "
                    "answer before synthesizing it",
                    graph_id=graph.graph_id, node_id=node.node_id,
                )
            check_question_transition(node.node_id, node.status, NodeStatus.SYNTHESIZED)
            pending = self._nodes(
                "question_id = ? AND node_type = 'question' AND status NOT IN (?, ?)",
                [node.node_id, *sorted(DONE_QUESTION)],
            )
            if pending:
                listed = ", ".join(f"{p.node_id} ({p.status})" for p in pending[:5])
                more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
                raise StateError(
                    f"question {node.node_id} has {len(pending)} sub-question(s) not yet "
                    f"synthesized or saturated: {listed}{more}",
                    graph_id=graph.graph_id, node_id=node.node_id,
                )
            self._set_status(node, NodeStatus.SYNTHESIZED, self.clock(), actor=node.owner,
                             kind="synthesized", metadata={**node.metadata, "synthesis": text})
        return {"node_id": node.node_id, "status": NodeStatus.SYNTHESIZED.value}

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> dict[str, Any]:
        """Return claims at least ``older_than_s`` old (default: past their lease) to open.

        ``include_errors`` also reopens questions marked ``error``;
        ``worker_id`` limits recovery to that worker's claims and, without
        ``older_than_s``, takes all of them whatever their lease (a worker that crashed).
        """
        if older_than_s is not None and (
            isinstance(older_than_s, bool) or not isinstance(older_than_s, int | float)
            or older_than_s < 0
        ):
            raise InvalidInputError(f"older_than_s must be a number >= 0 or null, not {older_than_s!r}")
        worker = optional_name(worker_id, "worker_id")
        with self._db.write():
            graph = self._graph(graph_id)
            if graph.status in TERMINAL_GRAPH:
                raise StateError(
                    f"graph {graph.graph_id} is {graph.status!r} (terminal); nothing to recover",
                    graph_id=graph.graph_id,
                )
            now = self.clock()
            where = "graph_id = ? AND status = 'claimed'"
            params: list[Any] = [graph.graph_id]
            if older_than_s is not None:
                where, params = where + " AND claimed_at <= ?", [*params, now - older_than_s]
            elif worker is None:  # default: claims past their own lease
                where, params = where + " AND claimed_at + lease_s <= ?", [*params, now]
            if worker is not None:
                where, params = where + " AND owner = ?", [*params, worker]
            stuck = self._nodes(where, params)
            if include_errors:
                stuck += self._nodes("graph_id = ? AND status = 'error'", [graph.graph_id])
            for node in stuck:
                self._db.execute("UPDATE nodes SET claimed_at = NULL, lease_s = NULL WHERE node_id = ?",
                                 [node.node_id])
                self._set_status(node, NodeStatus.OPEN, now, actor=None, kind="recovered")
        recovered = [n.node_id for n in stuck]
        return {"graph_id": graph.graph_id, "recovered": recovered, "count": len(recovered)}

    def release_claim(
        self, graph_id: str, node_id: str, worker_id: str, error: str, *, max_failures: int = 3
    ) -> dict[str, Any]:
        """Give back a claim after a failed attempt, recording why.

        The question reopens for another try; after ``max_failures`` failed
        attempts it is marked ``error`` instead (recoverable with
        ``recover_stuck(include_errors=True)``), so a node that always fails
        never holds the graph open.
        """
        worker = require_id(worker_id, "worker_id")
        error = require_text(error, "error")
        with self._db.write():
            graph = self._active_graph(graph_id)
            node = self._node(graph.graph_id, node_id)
            if node.status != NodeStatus.CLAIMED or node.owner != worker:
                raise StateError(
                    f"question {node.node_id} is {node.status!r} (owner {node.owner!r}); only the "
                    f"worker holding its claim can release it, not {worker!r}",
                    graph_id=graph.graph_id, node_id=node.node_id,
                )
            meta = node.metadata
            failures = int(meta.get("failures", 0)) + 1
            meta.update(failures=failures, last_error=error)
            target = NodeStatus.ERROR if failures >= max_failures else NodeStatus.OPEN
            now = self.clock()
            self._db.execute(
                "UPDATE nodes SET metadata = ?, claimed_at = NULL, lease_s = NULL WHERE node_id = ?",
                [json.dumps(meta), node.node_id],
            )
            self._set_status(node, target, now, actor=worker, kind="released",
                             reason=error if target == NodeStatus.ERROR else None)
        return {"node_id": node.node_id, "status": target.value, "failures": failures}

    def _graph_done(self, graph_id: str) -> bool:
        row = self._db.fetchone(
            "SELECT count(*) FROM nodes WHERE graph_id = ? AND node_type = 'question' "
            "AND status IN ('open', 'claimed', 'gated')",
            [graph_id],
        )
        return row is not None and row[0] == 0
