"""What a turn reopens: a finished question revived, a question redone, the syntheses above them.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md, "Turns
and heads"), given the store's core; the steering requests (store/turn_requests.py) call it
inside their transactions. Redoing a question supersedes what hangs under it (its own notes
kept) and sends it back to open; reviving one sends it back to answered so new material below
it is synthesized. Its moves are a turn's alone (``vocabulary.TURN_TRANSITIONS``: ``turn=True``).
"""

from __future__ import annotations

from typing import Any

from ..errors import StateError
from ..vocabulary import DONE_QUESTION, NodeStatus, NodeType, SaturationReason
from .base import StoreCore
from .rows import NodeRow

# A question whose saturation is a person's or a turn's: no turn reopens it (prune is the person's "no").
_CLOSED = (SaturationReason.PRUNED, SaturationReason.SUPERSEDED)


class Reopening:
    """The reopenings of a turn's requests, in the graphs of one store."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db

    def current_below(self, question: NodeRow) -> list[NodeRow]:
        """The nodes under ``question`` no turn has superseded."""
        ids = self._core.descendants(question.graph_id, question.node_id)
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        return self._core.nodes(
            f"graph_id = ? AND node_id IN ({marks}) AND superseded_turn IS NULL", [question.graph_id, *ids]
        )

    def revive(self, question: NodeRow, turn: int) -> list[str]:
        """Reopen a finished question (and the syntheses above it) so new material below it is synthesized.

        A synthesized question goes back to answered (rule 11's path); one a worker
        saturated with a verdict goes back to answered too (a turn's move).
        """
        if question.status == NodeStatus.SYNTHESIZED:
            self._core.reopen_synthesis(question, None, self._core.clock())
            return [question.node_id]
        if question.status == NodeStatus.SATURATED and question.status_reason not in (
            *_CLOSED,
            SaturationReason.BUDGET_EXHAUSTED,
            SaturationReason.ERROR,
        ):
            meta = question.metadata
            stale = meta.pop("synthesis", None)
            self._core.set_status(
                question,
                NodeStatus.ANSWERED,
                self._core.clock(),
                actor=None,
                kind="reopened",
                metadata=meta,
                payload={"synthesis": stale, "turn": turn},
                turn=True,
            )
            self._reopen_above(question)
            return [question.node_id]
        if question.status == NodeStatus.SATURATED:
            raise StateError(
                f"question {question.node_id} is saturated ({question.status_reason}); redecompose() "
                "it first",
                graph_id=question.graph_id,
                node_id=question.node_id,
            )
        return []

    def _reopen_above(self, question: NodeRow) -> None:
        if question.question_id is None:
            return
        parent = self._core.node(question.graph_id, question.question_id)
        if parent.status == NodeStatus.SYNTHESIZED:
            self._core.reopen_synthesis(parent, None, self._core.clock())

    def redo(self, question: NodeRow, turn: int, marks: dict[str, Any]) -> None:
        """Supersede what hangs under ``question`` (its own notes kept) and send it back to open."""
        now = self._core.clock()
        below = [
            n
            for n in self.current_below(question)
            if not (n.node_type == NodeType.NOTE and n.parent_id == question.node_id)
        ]
        moved = [
            n
            for n in below
            if (n.node_type == NodeType.QUESTION and n.status not in DONE_QUESTION)
            or (n.node_type != NodeType.QUESTION and n.status == NodeStatus.ANSWERED)
        ]
        self._core.set_statuses(
            moved,
            NodeStatus.SATURATED,
            now,
            reason=SaturationReason.SUPERSEDED,
            inherited_from=question.node_id,
            kind="superseded",
            payload={"turn": turn},
        )
        # Finished ones keep their status; the mark is an event all the same.
        moved_ids = {n.node_id for n in moved}
        kept: list[tuple[str | None, str, str | None, dict[str, Any]]] = [
            (n.node_id, "superseded", None, {"turn": turn, "status": n.status})
            for n in below
            if n.node_id not in moved_ids
        ]
        self._core.log_many(question.graph_id, kept, now)
        if below:
            ids = [n.node_id for n in below]
            placeholders = ", ".join("?" for _ in ids)
            self._db.execute(
                f"UPDATE nodes SET superseded_turn = ? WHERE graph_id = ? AND node_id IN ({placeholders})",
                [turn, question.graph_id, *ids],
            )
            self._db.execute(
                f"DELETE FROM synthesis_claims WHERE graph_id = ? AND node_id IN ({placeholders})",
                [question.graph_id, *ids],
            )
        meta = {
            k: v
            for k, v in question.metadata.items()
            if k not in ("synthesis", "saturation_reason", "redecompose")
        }
        stale = question.metadata.get("synthesis")
        self._core.set_status(
            question,
            NodeStatus.OPEN,
            now,
            actor=None,
            kind="reopened",
            metadata={**meta, **marks},
            columns={"owner": None, "claimed_at": None, "lease_s": None, "holder": None},
            payload={"synthesis": stale, "turn": turn, "superseded": [n.node_id for n in below]},
            turn=True,
        )
        self._reopen_above(question)
