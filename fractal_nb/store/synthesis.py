"""Synthesis handed out like claims: one worker composes a ready question's synthesis at a time.

Workers in any number of processes ask :meth:`Synthesis.claim_synthesis`
for the next ready question (deepest first); the store records the hand-out in
``synthesis_claims`` under the write lock, so two workers never pay the model
for the same synthesis. The claim is a lease like a question's, renewed by its
holder's heartbeat and dropped when the holder is gone.

The cascade's next step is handed out inside the write that makes it ready
(:meth:`Synthesis.claim_above`, ``claim_next=True`` on ``submit_answer`` and
``submit_synthesis``): the question above a finished one is claimed for the same
worker in the same transaction when that write finished its last sub-question, so
the hot path never asks the whole graph what is ready (docs/architecture/engine.md,
"The cascade").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..checks import require_flag, require_id, require_ids, require_text
from ..errors import InvalidInputError, StateError
from ..vocabulary import (
    DONE_QUESTION,
    TRACK_KEY,
    GraphStatus,
    NodeStatus,
    NodeType,
    Support,
    WeakReason,
    weakness,
)
from .base import StoreCore, require_claims
from .citations import CitationCheck
from .claim import Claims
from .dialect import Dialect, Per, json_has
from .holders import OWN_HOLDER, HolderArgument
from .llm_log import LLMLog
from .records import CallRows, ClaimRecord, SynthesisClaim, SynthesisReleased, Synthesized, WeakMark
from .rows import NODE_COLUMNS, GraphRow, NodeRow

# Ready to synthesize: answered questions with sub-questions, all of them synthesized or saturated,
# or with a person's note (store/turn_requests.py) and no unfinished sub-question. Parameters:
# graph_id three times (each subquery scoped by graph: a correlated one would read every graph's nodes).
_READY = """graph_id = ? AND node_type = 'question' AND status = 'answered' AND (node_id IN (
               SELECT question_id FROM nodes
               WHERE graph_id = ? AND node_type IN ('question', 'note') AND question_id IS NOT NULL
               GROUP BY question_id
               HAVING bool_and(node_type = 'note' OR status IN ('synthesized', 'saturated')))
           OR ({track} AND node_id NOT IN (SELECT question_id FROM nodes
               WHERE graph_id = ? AND node_type IN ('question', 'note') AND question_id IS NOT NULL)))"""
# Its second branch: a track answered without sub-tracks waits for its findings
# (docs/architecture/engine.md, "Tracks").
READY_WHERE = Per(
    duckdb=_READY.format(track=json_has(Dialect.DUCKDB, "metadata", TRACK_KEY)),
    postgresql=_READY.format(track=json_has(Dialect.POSTGRESQL, "metadata", TRACK_KEY)),
)
READY = READY_WHERE.duckdb  # queries.py's, until it picks READY_WHERE by its dialect
# READY for the question above a sub-question that has just finished: it has that sub-question, so it is
# ready when answered and none of its sub-questions is left unfinished. Parameters: gid, the question's id.
_UNFINISHED_BELOW = (
    "SELECT count(*) FROM nodes WHERE graph_id = ? AND question_id = ? AND node_type = 'question' "
    "AND status NOT IN ('synthesized', 'saturated')"
)

# A synthesis handed out: its row back, none when the question's synthesis is held already. Under the
# write lock it never is (the caller read so); PostgreSQL's key says so too (ON CONFLICT costs DuckDB
# 1 ms a claim, and its key raises instead).
_HAND_OUT = Per(
    duckdb="INSERT INTO synthesis_claims (node_id, graph_id, worker, holder, claimed_at, lease_s) "
    "VALUES (?, ?, ?, ?, ?, ?) RETURNING node_id",
    postgresql="INSERT INTO synthesis_claims (node_id, graph_id, worker, holder, claimed_at, lease_s) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (node_id) DO NOTHING RETURNING node_id",
)


class Synthesis:
    """Claiming, writing, submitting and releasing syntheses of ready questions.

    Its collaborators: the claim step (:class:`~fractal_nb.store.claim.Claims`, whose
    holders and leases a synthesis claim uses too), the citation check a track's
    findings go through, and the call log a submission writes with it.
    """

    def __init__(self, core: StoreCore, claims: Claims, citations: CitationCheck, calls: LLMLog) -> None:
        self._core = core
        self._db = core.db
        self._claims = claims
        self._citations = citations
        self._calls = calls
        self._ready_where = READY_WHERE(self._db.dialect)
        self._hand_out_sql = _HAND_OUT(self._db.dialect)

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderArgument = OWN_HOLDER,
        skip: list[str] | None = None,
    ) -> SynthesisClaim:
        """Hand the deepest ready question no one is synthesizing to ``worker_id``.

        Returns ``{node_id, graph_id, text, depth, lease_s}``, or ``node_id: null``
        when nothing is ready (or the graph is not active: ``graph_status`` says), or
        with ``busy_workers`` when as many other workers as the budget's agents hold
        claims (docs/architecture/store.md, rule 17).
        ``skip`` lists questions this worker failed to synthesize already.
        """
        gid = require_id(graph_id, "graph_id")
        worker = require_id(worker_id, "worker_id")
        held = self._claims.held(holder)
        skipped = require_ids(skip, "skip")
        with self._db.write():
            now = self._core.clock()
            self._db.execute(  # leases run out (an active graph's only: a paused one is left as it is)
                "DELETE FROM synthesis_claims WHERE graph_id = ? AND claimed_at + lease_s <= ? "
                "AND EXISTS (SELECT 1 FROM graphs WHERE graph_id = ? AND status = 'active')",
                [gid, now, gid],
            )
            status, busy, row = self._ready(gid, skipped, worker, now)
            if status == GraphStatus.ACTIVE and row is None and self._claims.recover_gone(gid, now):
                status, busy, row = self._ready(gid, skipped, worker, now)  # a dead worker's come back
            if status != GraphStatus.ACTIVE or row is None:
                return _none(gid, status)
            if (taken := self._claims.seats_taken(gid, worker, now, busy)) is not None:  # rule 17's ceiling
                return {**_none(gid), "busy_workers": taken}
            if held is not None:
                self._claims.register(held, now)
            claim = self._hand_out(NodeRow(*row), worker, held and held["holder_id"], now)
        if held is not None:
            self._db.file.holders.add(held["holder_id"])
        return claim

    def _ready(
        self, graph_id: str, skipped: list[str], worker: str, now: float
    ) -> tuple[str, int, tuple[Any, ...] | None]:
        """The graph's status, the other workers' claims, and its deepest ready question no one holds.

        The count is rule 17's, read in the same query (as a question's pick reads it); the
        row is None when nothing is ready.
        """
        skip = f" AND node_id NOT IN ({', '.join('?' for _ in skipped)})" if skipped else ""
        ready = self._ready_where
        busy_sql, busy_params = self._claims.busy_read(graph_id, worker, now)
        row = self._db.fetchone(
            f"SELECT g.status, ({busy_sql}) AS busy, n.* FROM graphs g LEFT JOIN (SELECT {NODE_COLUMNS} "
            f"FROM nodes WHERE {ready} AND node_id NOT IN (SELECT node_id FROM synthesis_claims "
            f"WHERE graph_id = ?){skip} ORDER BY depth DESC, seq LIMIT 1) n ON TRUE WHERE g.graph_id = ?",
            [*busy_params, graph_id, graph_id, graph_id, graph_id, *skipped, graph_id],
        )
        if row is None:
            return self._core.graph(graph_id).status, 0, None  # NotFoundError
        return str(row[0]), int(row[1]), (row[2:] if row[2] is not None else None)

    def claim_above(
        self, node: NodeRow, worker: str | None, holder: Callable[[], str | None]
    ) -> SynthesisClaim:
        """The cascade's next step, inside the write that finished ``node``: its question's synthesis.

        Claimed for ``worker`` (under ``holder()``, the holder of the claim that
        finished ``node``, asked only when a claim is made) when ``node`` is done and
        was the last unfinished sub-question of an answered question no live claim
        holds: READY's rule for that one question, one count on the miss that most
        writes are. ``node_id`` None otherwise, or without a ``worker`` (the general
        :meth:`claim_synthesis` still hands out whatever else is ready).
        """
        gid, above = node.graph_id, node.question_id
        if worker is None or above is None or node.node_type != NodeType.QUESTION:
            return _none(gid)
        if node.status not in DONE_QUESTION:  # nothing finished: nothing above got closer
            return _none(gid)
        row = self._db.fetchone(_UNFINISHED_BELOW, [gid, above])
        if row is None or row[0]:
            return _none(gid)
        question = self._core.node(gid, above)
        if question.status != NodeStatus.ANSWERED:
            return _none(gid)
        now = self._core.clock()
        held = self._db.fetchone(
            "SELECT claimed_at + lease_s FROM synthesis_claims WHERE node_id = ?", [above]
        )
        if held is not None:
            if held[0] > now:  # another worker composes it
                return _none(gid)
            self._db.execute("DELETE FROM synthesis_claims WHERE node_id = ?", [above])  # its lease ran out
        return self._hand_out(question, worker, holder(), now)

    def _hand_out(self, question: NodeRow, worker: str, holder_id: str | None, now: float) -> SynthesisClaim:
        """Record ``question``'s synthesis as held by ``worker`` (inside the caller's write); the claim."""
        gid = question.graph_id
        lease = self._claims.lease_for(holder_id)
        if not self._db.fetchall(self._hand_out_sql, [question.node_id, gid, worker, holder_id, now, lease]):
            return _none(gid)  # held already (see _HAND_OUT)
        self._core.log(gid, question.node_id, "synthesis_claimed", worker, {"lease_s": lease}, now)
        return {
            "node_id": question.node_id,
            "graph_id": gid,
            "text": question.text,
            "depth": question.depth,
            "lease_s": lease,
            "graph_status": GraphStatus.ACTIVE.value,
        }

    def submit_synthesis(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        worker_id: str,
        calls: CallRows | None = None,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        claim_next: bool = False,
    ) -> Synthesized:
        """Synthesize a question this worker holds the synthesis of, with the calls behind it, at once.

        ``findings`` and ``extra``: as :meth:`synthesize_node` takes them (a track's findings,
        a root's synthesis object).

        Refused (and nothing written) when the worker no longer holds it: its lease
        ran out and another worker took it, or the claim was dropped.

        The claim holds the synthesis against questions added below the node while
        it was being written (docs/architecture/store.md, rule 11): the synthesis lands
        as if written just before them, and they reopen it at once (a
        ``reopened`` event keeps it), so the call behind it is paid once and
        never discarded; the cascade synthesizes the question again once the new
        questions are done.

        ``claim_next=True``: when this synthesis finished the last sub-question of the
        question above, that question's synthesis is claimed for ``worker_id`` in the same
        transaction (the cascade's next step, :meth:`claim_above`) and returned as
        ``next_synthesis`` (a :meth:`claim_synthesis` result; ``node_id`` None when none).
        """
        worker = require_id(worker_id, "worker_id")
        require_flag(claim_next, "claim_next")
        nid = require_id(node_id, "node_id")
        text = require_text(synthesis_text, "synthesis_text")
        carried = require_claims(claims)
        with self._db.write():
            row = self._db.fetchone("SELECT worker, holder FROM synthesis_claims WHERE node_id = ?", [nid])
            if row is None or row[0] != worker:
                holder = f"is held by {row[0]!r}" if row else "is not held by anyone"
                raise StateError(
                    f"the synthesis of {nid} {holder}, not by {worker!r} (a lease that ran out may have "
                    "been taken over); this synthesis is discarded",
                    graph_id=graph_id,
                    node_id=nid,
                )
            graph, node = self._core.active_node(graph_id, nid)
            added = self._added_meanwhile(node)
            if added:
                result = self._synthesize_then_reopen(node, text, worker, added, carried, findings, extra)
            else:
                result = self._write(graph, node, text, carried, findings, extra)
            if calls:
                self._calls.land(calls, graph.graph_id, known=[node.node_id])
            if claim_next:
                after = node if added else replace(node, status=NodeStatus.SYNTHESIZED)
                result = {**result, "next_synthesis": self.claim_above(after, worker, lambda: row[1])}
        return result

    def synthesize_node(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        claims: list[ClaimRecord] | None = None,
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Synthesized:
        """Record an answered question's synthesis (in ``metadata["synthesis"]``), with its ``claims``.

        ``findings`` (a track's ``{finding, confidence, citations}``, docs/architecture/engine.md,
        "Tracks"): each finding's citations are checked and its ``support`` set in
        this transaction; they are kept in ``metadata["findings"]``, and with sources and no supported
        finding the question is weak (``uncited``). ``extra`` is merged into the metadata (its ``weak``
        marks added to the children's).

        Refused while any of its sub-questions is neither synthesized nor
        saturated (docs/architecture/store.md, rule 3). Each write sets or clears the
        weak mark (``metadata["weak"]``, "Facts, assumptions, unknowns"): weak
        when a sub-question failed, was cut by a budget, or its synthesis was
        joined without the model or is weak itself; sound children clear it.
        """
        text = require_text(synthesis_text, "synthesis_text")
        carried = require_claims(claims)
        with self._db.write():
            graph, node = self._core.active_node(graph_id, node_id)
            return self._write(graph, node, text, carried, findings, extra)

    def _write(
        self,
        graph: GraphRow,
        node: NodeRow,
        text: str,
        claims: list[ClaimRecord],
        findings: Sequence[Mapping[str, Any]] | None,
        extra: Mapping[str, Any] | None,
    ) -> Synthesized:
        """:meth:`synthesize_node`'s checks and write, inside the caller's transaction."""
        if node.node_type != NodeType.QUESTION:
            raise InvalidInputError(
                f"node {node.node_id} is an answer; synthesize its question {node.question_id}",
                graph_id=graph.graph_id,
                node_id=node.node_id,
            )
        if node.status in (NodeStatus.OPEN, NodeStatus.CLAIMED):
            raise StateError(
                f"question {node.node_id} is {node.status!r} and has no answer yet; add an "
                "answer before synthesizing it",
                graph_id=graph.graph_id,
                node_id=node.node_id,
            )
        children = self._children(node)
        pending = [c for c in children if c.status not in DONE_QUESTION]
        if pending:
            listed = ", ".join(f"{p.node_id} ({p.status})" for p in pending[:5])
            more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
            raise StateError(
                f"question {node.node_id} has {len(pending)} sub-question(s) not yet "
                f"synthesized or saturated: {listed}{more}",
                graph_id=graph.graph_id,
                node_id=node.node_id,
            )
        self._core.set_status(
            node,
            NodeStatus.SYNTHESIZED,
            self._core.clock(),
            actor=node.owner,
            kind="synthesized",
            metadata=self._metadata(node, text, claims, children, findings, extra),
        )
        self._db.execute("DELETE FROM synthesis_claims WHERE node_id = ?", [node.node_id])
        return {"node_id": node.node_id, "status": NodeStatus.SYNTHESIZED.value}

    def _children(self, node: NodeRow) -> list[NodeRow]:
        """The question's sub-questions, superseded ones included (store/reopening.py)."""
        return self._core.nodes(
            "graph_id = ? AND question_id = ? AND node_type = 'question'", [node.graph_id, node.node_id]
        )

    def _metadata(
        self,
        node: NodeRow,
        text: str,
        claims: list[ClaimRecord],
        children: list[NodeRow],
        findings: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``node``'s metadata with a synthesis written now: text, claims, weak mark (from ``children``)."""
        meta = {k: v for k, v in node.metadata.items() if k not in ("claims", "weak")}
        own_weak = list((extra or {}).get("weak") or [])
        meta.update({k: v for k, v in (extra or {}).items() if k != "weak"})
        if findings is not None:  # checked here, in the write's transaction
            checked = self._citations.checked_findings(node.graph_id, list(findings))
            meta["findings"] = checked
            if self._citations.has_sources(node.graph_id) and not any(
                f["support"] == Support.SUPPORTED for f in checked
            ):
                own_weak.append({"node_id": node.node_id, "reason": WeakReason.UNCITED.value})
        meta["synthesis"] = text
        if claims:
            meta["claims"] = claims
        weak: list[WeakMark] = [
            {"node_id": c.node_id, "reason": reason.value}
            for c in children
            if c.superseded_turn is None  # the current ones: a later turn's superseded nodes are no ground
            and (reason := weakness(c.status, c.status_reason, c.metadata)) is not None
        ] + own_weak
        if weak:
            meta["weak"] = weak
        return meta

    def _added_meanwhile(self, node: NodeRow) -> list[str]:
        """The sub-questions of a held, answered question that changed since its synthesis was claimed.

        Asked below it, reopened, or synthesized again after the claim (when all of
        them were done), finished by now or not: the held synthesis did not see them.
        """
        if node.node_type != NodeType.QUESTION or node.status != NodeStatus.ANSWERED:
            return []
        # Uncorrelated, each subquery scoped by graph (docs/architecture/store.md, "Cost by graph");
        # events are appended in id order, so the events after the claim are found by their row groups'
        # zone maps.
        rows = self._db.fetchall(
            "SELECT node_id FROM nodes WHERE graph_id = ? AND question_id = ? AND node_type = 'question' "
            "AND (status NOT IN (?, ?) OR node_id IN (SELECT node_id FROM events WHERE graph_id = ? "
            "AND node_id IS NOT NULL "
            "AND kind IN ('node_added', 'reopened', 'synthesized', 'saturated', 'status_changed') "
            "AND event_id > (SELECT max(event_id) FROM events WHERE graph_id = ? AND node_id = ? "
            "AND kind = 'synthesis_claimed'))) ORDER BY seq",
            [node.graph_id, node.node_id, *sorted(DONE_QUESTION), node.graph_id, node.graph_id, node.node_id],
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
        now = self._core.clock()
        kept = node.metadata
        self._core.set_status(
            node,
            NodeStatus.SYNTHESIZED,
            now,
            actor=worker,
            kind="synthesized",
            metadata=self._metadata(node, text, claims, self._children(node), findings, extra),
        )
        written = replace(node, status=NodeStatus.SYNTHESIZED.value)
        self._core.set_status(
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


def _none(graph_id: str, status: str = GraphStatus.ACTIVE.value) -> SynthesisClaim:
    """No synthesis handed out (``status``: the graph's)."""
    return {"node_id": None, "graph_id": graph_id, "graph_status": status}
