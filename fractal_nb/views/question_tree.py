"""The graph as a reader sees it: one item per question, its answers and synthesis folded in.

The store keeps questions and answers as separate nodes (question → answer →
sub-questions); a reader thinks in questions. :class:`QuestionTree` folds the
store's feed rows (``GraphStore.get_changes``) into question items, remembering
across deltas which question each answer belongs to, and maps the links between
answers onto their questions. A whole graph comes folded by DuckDB already
(``GraphStore.get_question_items``, store/question_items.py): the tree takes its
items with :meth:`QuestionTree.load`, and the deltas after it fold here. The
view (``static/network.js``) lays the items out as a tree, wraps their labels,
and can unfold them into the full question/answer graph again, since each item
keeps its answers' ids and the answer it hangs under (docs/architecture/faces.md, "The live view's protocol").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import NotRequired, TypedDict

from ..exploration.terms import FAILED, JOINED, PRUNED, TEXT_CHARS, UNSUPPORTED, VIEW_STATUSES
from ..store.records import FeedLink, FeedNode
from ..vocabulary import NodeStatus, SaturationReason


class AnswerItem(TypedDict):
    """An answer folded into its question."""

    id: str
    text: str
    support: NotRequired[str]  # an answer's support (a Support value), where the store judged it


class QuestionItem(TypedDict):
    """One question as the view draws it."""

    id: str
    parent: str | None  # the question above (None: the root)
    via: str | None  # the answer it hangs under (None: the root, or directly under a question)
    depth: int
    seq: int
    text: str  # the view wraps its label (network.js questionLabel)
    status: str  # one of VIEW_STATUSES
    reason: str | None
    error: str | None  # why it failed (a failed question's last error), else None
    weak: bool  # its synthesis was joined without the model, or is built on unsound sub-questions
    weak_reasons: list[str]  # why: "joined without the model", "failed: n-…" (the store's weak mark)
    owner: str | None
    answers: list[AnswerItem]
    notes: list[AnswerItem]  # a person's notes on it (store/turn_requests.py), shown with the question
    synthesis: str | None
    root: bool
    track: str | None  # a track question's name (the tracks strategy), else None
    unsupported: (
        int  # its answers the store found unsupported (docs/architecture/faces.md, "Evidence in the faces")
    )


class LinkItem(TypedDict):
    """A convergence or contradiction, between answers and between their questions."""

    id: str
    type: str
    from_node: str  # the answers (or questions) the store linked
    to_node: str
    from_question: str
    to_question: str
    note: str


def view_status(status: str, reason: str | None) -> str:
    """The status a question shows: ``failed`` for a failure in either form, ``pruned``, else the store's."""
    if status == NodeStatus.ERROR or (status == NodeStatus.SATURATED and reason == SaturationReason.ERROR):
        return FAILED
    if status == NodeStatus.SATURATED and reason == SaturationReason.PRUNED:
        return PRUNED
    return status


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= TEXT_CHARS:
        return text
    return text[: TEXT_CHARS - 1] + "…"


class QuestionTree:
    """Folds feed rows into question items; what it returns is what changed (items to send again)."""

    def __init__(self) -> None:
        self.questions: dict[str, QuestionItem] = {}
        self.answer_of: dict[str, str] = {}  # answer id -> its question id

    def counts(self) -> dict[str, int]:
        """Questions by view status, ``weak``, ``unsupported`` (answers), ``answers``, ``total``."""
        tally = Counter(q["status"] for q in self.questions.values())
        counts = {s: tally.get(s, 0) for s in VIEW_STATUSES}
        counts["weak"] = sum(q["weak"] for q in self.questions.values())
        counts[UNSUPPORTED] = sum(q["unsupported"] for q in self.questions.values())
        counts["answers"] = len(self.answer_of)
        counts["total"] = len(self.questions) + len(self.answer_of)
        return counts

    def load(self, items: Iterable[QuestionItem]) -> None:
        """Take a whole graph's items (``GraphStore.get_question_items``, folded by DuckDB)."""
        self.questions = {q["id"]: q for q in items}
        self.answer_of = {a["id"]: q["id"] for q in self.questions.values() for a in q["answers"]}

    def fold(self, rows: Iterable[FeedNode]) -> list[QuestionItem]:
        """Take feed rows (creation order); the question items they changed, in creation order.

        A row's parent is folded already (earlier in ``rows`` or before): the store
        reads each delta in one transaction, in creation order.
        """
        changed: dict[str, QuestionItem] = {}
        for row in rows:
            parent = row["parent_id"]
            if row["node_type"] == "note":  # part of its question: a note's text never changes
                question = self.questions[parent or ""]
                if all(n["id"] != row["node_id"] for n in question["notes"]):
                    question["notes"] = [
                        *question["notes"],
                        {"id": row["node_id"], "text": _clip(row["text"]) or ""},
                    ]
                changed[question["id"]] = question
            elif row["node_type"] == "answer":
                question = self.questions[parent or ""]
                if row["node_id"] not in self.answer_of:  # an answer's text never changes
                    self.answer_of[row["node_id"]] = question["id"]
                    answer: AnswerItem = {"id": row["node_id"], "text": _clip(row["text"]) or ""}
                    if row["support"]:  # only where the store judged it: older messages stay as they were
                        answer["support"] = row["support"]
                    question["answers"] = [*question["answers"], answer]
                    question["unsupported"] += row["support"] == UNSUPPORTED
                changed[question["id"]] = question
            else:
                via = parent if parent is not None and parent in self.answer_of else None
                item = self._question(row, self.answer_of[via] if via else parent, via)
                changed[item["id"]] = item
        return sorted(changed.values(), key=lambda q: q["seq"])

    def _question(self, row: FeedNode, parent: str | None, via: str | None) -> QuestionItem:
        known = self.questions.get(row["node_id"])
        status = view_status(row["status"], row["status_reason"])
        item: QuestionItem = {
            "id": row["node_id"],
            "parent": parent,
            "via": via,
            "depth": row["depth"],
            "seq": row["seq"],
            "text": row["text"],
            "status": status,
            "reason": row["status_reason"],
            "error": _clip(row["last_error"] or row["status_reason"] or "error")
            if status == FAILED
            else None,
            "weak": bool(row["synthesis_failed"] or row["weak"]),
            "weak_reasons": ([JOINED] if row["synthesis_failed"] else [])
            + [f"{m['reason'].replace('_', ' ')}: {m['node_id']}" for m in row["weak"]],
            "owner": row["owner"],
            "answers": known["answers"] if known else [],
            "notes": known["notes"] if known else [],
            "synthesis": _clip(row["synthesis"]),
            "root": parent is None,
            "track": row["track"],
            "unsupported": known["unsupported"] if known else 0,
        }
        self.questions[item["id"]] = item
        return item

    def links(self, rows: Iterable[FeedLink]) -> list[LinkItem]:
        """The links between answers, each with the questions it joins in the tree view."""
        items: list[LinkItem] = []
        for link in rows:
            meta = link["metadata"]
            items.append(
                {
                    "id": f"{link['from_node']}|{link['to_node']}|{link['edge_type']}",
                    "type": link["edge_type"],
                    "from_node": link["from_node"],
                    "to_node": link["to_node"],
                    "from_question": self.answer_of.get(link["from_node"], link["from_node"]),
                    "to_question": self.answer_of.get(link["to_node"], link["to_node"]),
                    "note": str(meta.get("insight") or meta.get("tension") or ""),
                }
            )
        return items
