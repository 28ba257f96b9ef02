"""The live view's feed: snapshots and deltas read from the store's event log.

The feed remembers the last event id it has sent, so each ``delta()`` holds
only the questions (answers folded in, :mod:`.question_tree`) and links touched
since, in their current state. A view that opens late asks for ``snapshot()``,
the whole graph folded by DuckDB (``GraphStore.get_question_items``); both carry the event id they reach
(``seq``), so a view can tell a gap and ask again. :func:`snapshot_at` builds
the same ``snapshot`` message from the graph as it was at an event (the history
slider's, docs/architecture/faces.md "The live view's protocol"), marked ``past``.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Literal, TypedDict

from ..exploration.terms import FAILED
from ..store import Store
from ..store.records import Changes, FeedLink, FeedNode, NodeRecord, QuestionItems, SnapshotAt
from ..vocabulary import EdgeType, NodeStatus, track_name
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
    past: str | None  # a snapshot of the past (the history slider): what it shows; None: the live graph


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


def snapshot_of(changes: Changes, *, past: str | None = None) -> SnapshotMessage:
    """A full ``get_changes`` result folded in Python as a ``snapshot`` message (the past's, and tests')."""
    return {"type": "snapshot", "past": past, **_body(changes, QuestionTree())}


def snapshot_message(items: QuestionItems, tree: QuestionTree | None = None) -> SnapshotMessage:
    """A whole graph's items (``GraphStore.get_question_items``) as a ``snapshot`` message of the live graph.

    ``tree``: the one that takes the items, so the deltas after them fold onto it.
    """
    questions: list[QuestionItem] = json.loads(items["questions"])
    (tree or QuestionTree()).load(questions)
    return {
        "type": "snapshot",
        "past": None,
        "seq": items["last_event_id"],
        "status": items["status"],
        "questions": questions,
        "links": json.loads(items["links"]),
        "counts": items["counts"],
    }


def snapshot_at(state: SnapshotAt, past: str) -> SnapshotMessage:
    """The graph as it was at an event (``store.get_state_at``) as a ``snapshot`` message marked ``past``.

    Its rows are shaped as ``get_changes`` gives them, so the same :class:`QuestionTree`
    folds them: the view draws the past with the code that draws the present.
    """
    changes: Changes = {
        "graph_id": state["graph_id"],
        "status": state["status"],
        "root_node_id": state["root_node_id"],
        "since": 0,
        "last_event_id": state["event_id"],
        "nodes": [_feed_node(n) for n in state["nodes"]],
        "links": [
            FeedLink(
                from_node=e["from_node"],
                to_node=e["to_node"],
                edge_type=e["edge_type"],
                metadata=e["metadata"],
            )
            for e in state["edges"]
            if e["edge_type"] != EdgeType.PARENT_CHILD
        ],
    }
    return snapshot_of(changes, past=past)


def _feed_node(node: NodeRecord) -> FeedNode:
    """A node record as the feed carries it (what ``get_changes`` pulls out of the metadata in SQL)."""
    meta = node["metadata"]
    return FeedNode(
        node_id=node["node_id"],
        parent_id=node["parent_id"],
        node_type=node["node_type"],
        text=node["text"],
        depth=node["depth"],
        status=node["status"],
        status_reason=node["status_reason"],
        owner=node["owner"],
        seq=node["seq"],
        synthesis=_text(meta.get("synthesis")),
        last_error=_text(meta.get("last_error")),
        synthesis_failed=meta.get("synthesis_failed") is True,
        weak=[  # the weak mark as the feed's SQL reads it (store/queries.py)
            {"node_id": str(m.get("node_id")), "reason": str(m.get("reason"))}
            for m in _marks(meta.get("weak"))
            if isinstance(m, dict)
        ],
        support=_text(meta.get("support")),
        track=track_name(meta),
    )


def _marks(value: Any) -> list[Any]:
    """The weak mark's entries, [] when there is none (or it is not a list)."""
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    """A metadata value as ``json_extract_string`` reads it: a string, other JSON as text, or None.

    >>> _text("timeout"), _text(None), _text({"code": 429})
    ('timeout', None, '{"code": 429}')
    """
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


class GraphFeed:
    """Deltas of one graph for the live view, from its event log (folded by a :class:`QuestionTree`)."""

    def __init__(self, store: Store, graph_id: str) -> None:
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

    def failed(self) -> list[QuestionItem]:
        """Failed questions (either form of a failure) in creation order, as of the last snapshot or delta."""
        with self._lock:
            return [q for q in self.tree.questions.values() if q["status"] == FAILED]

    def snapshot(self) -> SnapshotMessage:
        """The whole graph as a ``snapshot`` message."""
        with self._lock:
            items = self.store.get_question_items(self.graph_id)
            self.tree = QuestionTree()
            message = snapshot_message(items, self.tree)
            self.seq, self.status = items["last_event_id"], items["status"]
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
