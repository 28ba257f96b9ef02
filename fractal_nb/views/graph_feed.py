"""The live view's feed: snapshots and deltas read from the store's event log.

The feed remembers the last event id it has sent, so each ``delta()`` holds
only the questions (answers folded in, :mod:`.question_tree`) and links touched
since, in their current state. A view that
opens late asks for ``snapshot()``; both carry the event id they reach
(``seq``), so a view can tell a gap and ask again.
"""

from __future__ import annotations

import threading
from typing import Literal, TypedDict

from ..model import NodeStatus
from ..store import GraphStore
from ..store.records import Changes
from .question_tree import LinkItem, QuestionItem, QuestionTree


class _FeedBody(TypedDict):
    seq: int  # the last event id it covers
    status: str  # the graph's
    questions: list[QuestionItem]
    links: list[LinkItem]
    counts: dict[str, int]


class SnapshotMessage(_FeedBody):
    """The whole graph, for a view that opens or lost a delta: question items and links."""

    type: Literal["snapshot"]


class DeltaMessage(_FeedBody):
    """What changed after event ``since``, up to ``seq``: question items in their current state."""

    type: Literal["delta"]
    since: int


def _body(changes: Changes, tree: QuestionTree) -> _FeedBody:
    """``changes`` folded into ``tree``: the items it changed, the links, the counts after."""
    questions = tree.fold(changes["nodes"])
    return {
        "seq": changes["last_event_id"],
        "status": changes["status"],
        "questions": questions,
        "links": tree.links(changes["links"]),
        "counts": tree.counts(),
    }


def snapshot_of(changes: Changes, tree: QuestionTree | None = None) -> SnapshotMessage:
    """A full ``get_changes`` result as a ``snapshot`` message (``tree``: the one to fold it into)."""
    return {"type": "snapshot", **_body(changes, tree or QuestionTree())}


class GraphFeed:
    """Deltas of one graph for the live view, from its event log (folded by a :class:`QuestionTree`)."""

    def __init__(self, store: GraphStore, graph_id: str) -> None:
        self.store = store
        self.graph_id = graph_id
        self.seq = 0
        self.status = ""
        self.tree = QuestionTree()
        self._lock = threading.Lock()

    def counts(self) -> dict[str, int]:
        """Questions by status (zeros included), then ``answers`` and ``total`` nodes."""
        with self._lock:
            return self.tree.counts()

    def gated(self) -> dict[str, str]:
        """Gated questions (id → text) in creation order, as of the last snapshot or delta."""
        with self._lock:
            return {
                q["id"]: q["text"] for q in self.tree.questions.values() if q["status"] == NodeStatus.GATED
            }

    def snapshot(self) -> SnapshotMessage:
        """The whole graph as a ``snapshot`` message."""
        with self._lock:
            changes = self.store.get_changes(self.graph_id)
            self.tree = QuestionTree()
            message = snapshot_of(changes, self.tree)
            self.seq, self.status = changes["last_event_id"], changes["status"]
        return message

    def delta(self) -> DeltaMessage | None:
        """A ``delta`` message of what changed since the last one, or None when nothing did."""
        with self._lock:
            since = self.seq
            changes = self.store.get_changes(self.graph_id, since=since)
            if changes["last_event_id"] == since and changes["status"] == self.status:
                return None
            body = _body(changes, self.tree)
            self.seq, self.status = changes["last_event_id"], changes["status"]
        return {"type": "delta", "since": since, **body}
