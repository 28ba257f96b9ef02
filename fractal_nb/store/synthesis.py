"""Synthesis handed out like claims: one worker composes a ready question's synthesis at a time.

Workers in any number of processes ask :meth:`SynthesisQueue.claim_synthesis`
for the next ready question (deepest first); the store records the hand-out in
``synthesis_claims`` under the write lock, so two workers never pay the model
for the same synthesis. The claim is a lease like a question's, renewed by its
holder's heartbeat and dropped when the holder is gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import StateError
from ..model import DONE_QUESTION, GraphStatus, NodeStatus, NodeType
from .base import require_claims, require_id, require_ids, require_text
from .holders import HolderInfo
from .llm_log import LLMLog
from .records import ClaimRecord, SynthesisClaim, SynthesisReleased, Synthesized
from .rows import NODE_COLUMNS, NodeRow
from .work import READY, WorkQueue


class SynthesisQueue(WorkQueue, LLMLog):
    """Claiming, submitting and releasing syntheses of ready questions."""

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | str | None = "store",
        skip: list[str] | None = None,
    ) -> SynthesisClaim:
        """Hand the deepest ready question no one is synthesizing to ``worker_id``.

        Returns ``{node_id, graph_id, text, depth, lease_s}``, or ``node_id: null``
        when nothing is ready (or the graph is not active: ``graph_status`` says).
        ``skip`` lists questions this worker failed to synthesize already.
        """
        gid = require_id(graph_id, "graph_id")
        worker = require_id(worker_id, "worker_id")
        held = self._held(holder)
        skipped = require_ids(skip, "skip")
        with self._db.write():
            graph = self._graph(gid)
            if graph.status != GraphStatus.ACTIVE:
                return {"node_id": None, "graph_id": gid, "graph_status": graph.status}
            now = self.clock()
            self._db.execute(
                "DELETE FROM synthesis_claims WHERE graph_id = ? AND claimed_at + lease_s <= ?", [gid, now]
            )
            where = READY + " AND node_id NOT IN (SELECT node_id FROM synthesis_claims WHERE graph_id = ?)"
            params: list[Any] = [gid, gid, gid]
            if skipped:
                where += f" AND node_id NOT IN ({', '.join('?' for _ in skipped)})"
                params += skipped
            deepest = f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} ORDER BY depth DESC, seq LIMIT 1"
            row = self._db.fetchone(deepest, params)
            if row is None and self._recover_gone(gid, now):  # a dead worker's syntheses come back
                row = self._db.fetchone(deepest, params)
            if row is None:
                return {"node_id": None, "graph_id": gid, "graph_status": graph.status}
            node = NodeRow(*row)
            if held is not None:
                self._register(held, now)
            lease = self._lease_for(held and held["holder_id"])
            self._db.execute(
                "INSERT INTO synthesis_claims VALUES (?, ?, ?, ?, ?, ?)",
                [node.node_id, gid, worker, held and held["holder_id"], now, lease],
            )
            self._log(gid, node.node_id, "synthesis_claimed", worker, {"lease_s": lease}, now)
        if held is not None:
            self._db.file.holders.add(held["holder_id"])
        return {
            "node_id": node.node_id,
            "graph_id": gid,
            "text": node.text,
            "depth": node.depth,
            "lease_s": lease,
            "graph_status": graph.status,
        }

    def submit_synthesis(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        worker_id: str,
        calls: list[dict[str, Any]] | None = None,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Synthesized:
        """Synthesize a question this worker holds the synthesis of, with the calls behind it, at once.

        ``findings`` and ``extra``: as :meth:`synthesize_node` takes them (a track's findings,
        a root's synthesis object).

        Refused (and nothing written) when the worker no longer holds it: its lease
        ran out and another worker took it, or the claim was dropped.

        The claim holds the synthesis against questions added below the node while
        it was being written (docs/architecture.md, rule 11): the synthesis lands
        as if written just before them, and they reopen it at once (a
        ``reopened`` event keeps it), so the call behind it is paid once and
        never discarded; the cascade synthesizes the question again once the new
        questions are done.
        """
        worker = require_id(worker_id, "worker_id")
        nid = require_id(node_id, "node_id")
        text = require_text(synthesis_text, "synthesis_text")
        carried = require_claims(claims)
        with self._db.write():
            row = self._db.fetchone("SELECT worker FROM synthesis_claims WHERE node_id = ?", [nid])
            if row is None or row[0] != worker:
                holder = f"is held by {row[0]!r}" if row else "is not held by anyone"
                raise StateError(
                    f"the synthesis of {nid} {holder}, not by {worker!r} (a lease that ran out may have "
                    "been taken over); this synthesis is discarded",
                    graph_id=graph_id,
                    node_id=nid,
                )
            graph, node = self._active_node(graph_id, nid)
            added = self._added_meanwhile(node)
            if added:
                result = self._synthesize_then_reopen(node, text, worker, added, carried, findings, extra)
            else:
                result = self.synthesize_node(
                    graph.graph_id, nid, text, claims=carried, findings=findings, extra=extra
                )
            if calls:
                self.record_llm_calls(calls)
        return result

    def _added_meanwhile(self, node: NodeRow) -> list[str]:
        """The sub-questions of a held, answered question that changed since its synthesis was claimed.

        Asked below it, reopened, or synthesized again after the claim (when all of
        them were done), finished by now or not: the held synthesis did not see them.
        """
        if node.node_type != NodeType.QUESTION or node.status != NodeStatus.ANSWERED:
            return []
        rows = self._db.fetchall(
            "SELECT n.node_id FROM nodes n WHERE n.graph_id = ? AND n.question_id = ? "
            "AND n.node_type = 'question' AND (n.status NOT IN (?, ?) OR EXISTS (SELECT 1 FROM events e "
            "WHERE e.graph_id = n.graph_id AND e.node_id = n.node_id "
            "AND e.kind IN ('node_added', 'reopened', 'synthesized', 'saturated', 'status_changed') "
            "AND e.event_id > (SELECT max(event_id) FROM events WHERE graph_id = n.graph_id AND node_id = ? "
            "AND kind = 'synthesis_claimed'))) ORDER BY n.seq",
            [node.graph_id, node.node_id, *sorted(DONE_QUESTION), node.node_id],
        )
        return [r[0] for r in rows]

    def _synthesize_then_reopen(
        self,
        node: NodeRow,
        text: str,
        worker: str,
        added: list[str],
        claims: list[ClaimRecord],
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Synthesized:
        """Write a held synthesis, then reopen it for the questions ``added`` below meanwhile (rule 11)."""
        now = self.clock()
        kept = node.metadata
        self._set_status(
            node,
            NodeStatus.SYNTHESIZED,
            now,
            actor=worker,
            kind="synthesized",
            metadata=self._synthesis_metadata(node, text, claims, findings, extra),
        )
        written = replace(node, status=NodeStatus.SYNTHESIZED.value)
        self._set_status(
            written,
            NodeStatus.ANSWERED,
            now,
            actor=worker,
            kind="reopened",
            metadata=kept,
            payload={"synthesis": text, "asked_meanwhile": added},
        )
        self._db.execute("DELETE FROM synthesis_claims WHERE node_id = ?", [node.node_id])
        return {"node_id": node.node_id, "status": NodeStatus.ANSWERED.value}

    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> SynthesisReleased:
        """Give back a synthesis claim (after a failed call), so another worker may take it."""
        gid, nid = require_id(graph_id, "graph_id"), require_id(node_id, "node_id")
        worker = require_id(worker_id, "worker_id")
        with self._db.write():
            row = self._db.fetchone(
                "SELECT worker FROM synthesis_claims WHERE node_id = ? AND graph_id = ?", [nid, gid]
            )
            released = row is not None and row[0] == worker
            if released:
                self._db.execute("DELETE FROM synthesis_claims WHERE node_id = ?", [nid])
        return {"node_id": nid, "released": released}
