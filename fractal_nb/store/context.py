"""A worker's bounded view of the graph around one question: never the whole graph."""

from __future__ import annotations

import json
from typing import Any

from ..checks import require_count, require_id
from .answer_index import AnswerIndex, Fresh
from .base import StoreCore
from .records import Candidate, QuestionBrief, QuestionContext, SubQuestionBrief, SynthesisInputs
from .rows import GraphRow, NodeRow

# A question's view in one query: each part capped, its parameters in order (NodeContext.around).
_COLUMNS = "node_id, text, status, metadata, depth, seq, branch_id, question_id, superseded_turn"
_PARTS = {
    # The questions above it (the path kept on the node), then their current answers.
    "ancestor": "graph_id = ? AND node_id IN ({marks})",
    "ancestor_answer": "graph_id = ? AND node_type = 'answer' AND superseded_turn IS NULL "
    "AND question_id IN ({marks})",
    "sibling": "graph_id = ? AND node_type = 'question' AND question_id = ? AND node_id != ? "
    "AND superseded_turn IS NULL ORDER BY seq LIMIT ?",
    "synthesis": "graph_id = ? AND branch_id IS NOT DISTINCT FROM ? AND node_type = 'question' "
    "AND status = 'synthesized' AND node_id != ? AND superseded_turn IS NULL ORDER BY seq DESC LIMIT ?",
    "sibling_answer": "graph_id = ? AND node_type = 'answer' AND superseded_turn IS NULL AND question_id IN ("
    "SELECT node_id FROM nodes WHERE graph_id = ? AND node_type = 'question' AND question_id = ? "
    "AND node_id != ?) ORDER BY seq LIMIT ?",
    # The answers written since this store last read the graph's, and the current rows of those it
    # ranked for the question from what it had read (store/answer_index.py).
    "new_answer": "graph_id = ? AND node_type = 'answer' AND seq > ?",
    "related": "graph_id = ? AND node_id IN ({related}) AND superseded_turn IS NULL",
}


def _near(parts: list[str], ancestors: int, related: int) -> str:
    """The one query of ``parts`` (names of :data:`_PARTS`), in ``seq`` order."""
    marks, related_marks = ", ".join("?" * ancestors), ", ".join("?" * related)
    selects = [
        f"(SELECT '{part}' AS part, {_COLUMNS} FROM nodes "
        f"WHERE {_PARTS[part].format(marks=marks, related=related_marks)})"
        for part in parts
    ]
    return "SELECT * FROM (" + " UNION ALL ".join(selects) + ") AS near ORDER BY seq"


class NodeContext:
    """Ancestry, siblings, nearby syntheses and link candidates of a question."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db
        self._answers = AnswerIndex()

    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        """What a worker needs to answer ``node_id``, each part capped (rule: bounded prompts).

        ``ancestry``: the questions from the root down to the parent, each with
        its first answer. ``siblings``: other sub-questions of the same parent.
        ``syntheses``: the most recent syntheses in the same branch.
        ``candidates`` (for links, and shown to the answer): the answers of its
        sibling questions, then the answers of other branches most related to the
        question, ranked over the whole graph (:class:`~fractal_nb.store.answer_index.AnswerIndex`),
        ``candidates`` in all, each with its ``relation`` (``sibling`` or
        ``other_branch``) and ``depth``.
        """
        limit, candidates = require_count(limit, "limit"), require_count(candidates, "candidates")
        graph = self._core.known_graph(graph_id)
        question = self._core.question_of(self._core.node(graph.graph_id, node_id))
        return self.around(graph, question, limit=limit, candidates=candidates)

    def around(
        self, graph: GraphRow, question: NodeRow, *, limit: int = 6, candidates: int = 8
    ) -> QuestionContext:
        """:meth:`get_context` of a question row already read (``claim_work(with_context=True)``'s)."""
        # The answers it ranked from what it had read: the one query brings their current rows.
        seen, ranked = self._answers.ranked(question, candidates)
        by_part = self._near(graph.graph_id, question, (limit, candidates), seen, ranked)
        first_answer: dict[str, str] = {}
        for _nid, text, _status, _meta, _depth, _seq, _branch, qid, _superseded in by_part["ancestor_answer"]:
            first_answer.setdefault(qid, text)
        briefs: dict[str, list[QuestionBrief]] = {
            part: [
                {
                    "node_id": nid,
                    "text": text,
                    "status": status,
                    "synthesis": json.loads(meta).get("synthesis"),
                }
                for nid, text, status, meta, *_rest in by_part[part]
            ]
            for part in ("sibling", "synthesis")
        }
        linkable: list[Candidate] = [
            {"node_id": nid, "text": text, "relation": "sibling", "depth": depth}
            for nid, text, _status, _meta, depth, *_rest in by_part["sibling_answer"]
        ]
        # Half at least from the whole graph, by relevance (store/answer_index.py).
        current = {nid: (text, depth) for nid, text, _s, _m, depth, *_rest in by_part["related"]}
        fresh = [
            Fresh(nid, branch, text, int(seq), depth, superseded is None)
            for nid, text, _s, _m, depth, seq, branch, _q, superseded in by_part["new_answer"]
        ]
        wanted = candidates - len(linkable)
        linkable += self._answers.related(question, wanted, ranked, (current, fresh), self._current_answers)
        return {
            "graph_id": graph.graph_id,
            "seed": graph.seed,
            "node": question.to_dict(),
            "ancestry": [
                {"node_id": nid, "depth": depth, "question": text, "answer": first_answer.get(nid)}
                for nid, text, _status, _meta, depth, *_rest in by_part["ancestor"]
            ],
            "siblings": briefs["sibling"],
            "syntheses": briefs["synthesis"],
            "candidates": linkable,
            # Below this depth no sub-question can sit: the intensity's, or a deepened branch's.
            "max_depth": self._core.depth_ceiling(graph, question, question.depth + 1),
        }

    def _near(
        self, g: str, question: NodeRow, caps: tuple[int, int], seen: int, ranked: list[str]
    ) -> dict[str, list[tuple[Any, ...]]]:
        """Each part of :data:`_PARTS` for ``question``, in one query (``caps``: limit and candidates)."""
        (limit, candidates), above = caps, question.ancestors
        params: dict[str, list[object]] = {
            "ancestor": [g, *above],
            "ancestor_answer": [g, *above],
            "sibling": [g, question.question_id, question.node_id, limit],
            "synthesis": [g, question.branch_id, question.node_id, limit],
            "sibling_answer": [g, g, question.question_id, question.node_id, candidates - candidates // 2],
            "new_answer": [g, seen],
            "related": [g, *ranked],
        }
        parts = [p for p in params if (above or not p.startswith("ancestor")) and (ranked or p != "related")]
        sql = _near(parts, len(above), len(ranked))
        rows = self._db.fetchall(sql, [value for part in parts for value in params[part]])
        by_part: dict[str, list[tuple[Any, ...]]] = {part: [] for part in params}
        for row in rows:
            by_part[row[0]].append(row[1:])
        return by_part

    def _current_answers(self, ids: list[str]) -> dict[str, tuple[str, int]]:
        """The text and depth of those of ``ids`` that are current answers (not superseded)."""
        marks = ", ".join("?" * len(ids))
        rows = self._db.fetchall(
            f"SELECT node_id, text, depth FROM nodes WHERE node_id IN ({marks}) AND node_type = 'answer' "
            "AND superseded_turn IS NULL",
            ids,
        )
        return {nid: (text, depth) for nid, text, depth in rows}

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> SynthesisInputs:
        """A question, its answers and its sub-questions with their syntheses: all a synthesis reads."""
        graph = self._core.known_graph(graph_id)
        nid = require_id(node_id, "node_id")
        # The node and what hangs under it, in one read (a synthesis runs on every cascade).
        rows = self._core.nodes(
            "graph_id = ? AND (node_id = ? OR question_id = ?)", [graph.graph_id, nid, nid]
        )
        question = next((r for r in rows if r.node_id == nid), None)
        if question is None or question.node_type != "question":  # unknown id, or an answer
            with self._db.read():
                question = self._core.question_of(self._core.node(graph.graph_id, nid))
                rows = self._core.nodes(
                    "graph_id = ? AND question_id = ?", [graph.graph_id, question.node_id]
                )
        # What is current: a later turn's superseded nodes are kept but never synthesized
        # (store/reopening.py).
        below = [r for r in rows if r.question_id == question.node_id and r.superseded_turn is None]
        return {
            "graph_id": graph.graph_id,
            "node": question.to_dict(),
            "answers": [
                {"node_id": a.node_id, "text": a.text, "claims": list(a.metadata.get("claims") or [])}
                for a in below
                if a.node_type == "answer"
            ],
            "sub_questions": [_sub_question_brief(q) for q in below if q.node_type == "question"],
            "notes": [{"node_id": n.node_id, "text": n.text} for n in below if n.node_type == "note"],
        }


def _sub_question_brief(q: NodeRow) -> SubQuestionBrief:
    """A sub-question as a synthesis reads it; a blocked one with its blocker.

    See docs/architecture/engine.md, "Halts".
    """
    brief: SubQuestionBrief = {
        "node_id": q.node_id,
        "text": q.text,
        "status": q.status,
        "synthesis": q.metadata.get("synthesis"),
        "status_reason": q.status_reason,
        "claims": list(q.metadata.get("claims") or []),
    }
    if isinstance(q.metadata.get("blocked"), dict):
        brief["blocked"] = q.metadata["blocked"]
    return brief
