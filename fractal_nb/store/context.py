"""A worker's bounded view of the graph around one question: never the whole graph."""

from __future__ import annotations

import json

from ..checks import require_count, require_id
from .answer_index import AnswerIndex
from .base import StoreCore
from .records import Candidate, QuestionBrief, QuestionContext, SubQuestionBrief, SynthesisInputs
from .rows import GraphRow, NodeRow

# Siblings, nearby syntheses and sibling answers of a question: one query, capped parts.
_NEAR = """SELECT * FROM (
    (SELECT 'sibling' AS part, node_id, text, status, metadata, depth, seq FROM nodes
     WHERE graph_id = ? AND node_type = 'question' AND question_id = ?
       AND node_id != ? AND superseded_turn IS NULL ORDER BY seq LIMIT ?)
    UNION ALL
    (SELECT 'synthesis', node_id, text, status, metadata, depth, seq FROM nodes
     WHERE graph_id = ? AND branch_id IS NOT DISTINCT FROM ?
       AND node_type = 'question' AND status = 'synthesized' AND node_id != ?
       AND superseded_turn IS NULL ORDER BY seq DESC LIMIT ?)
    UNION ALL
    (SELECT 'sibling_answer', node_id, text, status, metadata, depth, seq FROM nodes
     WHERE graph_id = ? AND node_type = 'answer' AND superseded_turn IS NULL
       AND question_id IN (
         SELECT node_id FROM nodes WHERE graph_id = ? AND node_type = 'question'
           AND question_id = ? AND node_id != ?)
     ORDER BY seq LIMIT ?)
) AS near ORDER BY seq"""


class NodeContext:
    """Ancestry, siblings, nearby syntheses and link candidates of a question."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db
        self._answers = AnswerIndex(core)

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
        chain = self._ancestry(graph.graph_id, question)
        # Siblings, nearby syntheses and link candidates: one query (_NEAR), its parts' parameters in order.
        g = graph.graph_id
        siblings = [g, question.question_id, question.node_id, limit]
        syntheses = [g, question.branch_id, question.node_id, limit]
        sibling_answers = [g, g, question.question_id, question.node_id, candidates - candidates // 2]
        near = self._db.fetchall(_NEAR, siblings + syntheses + sibling_answers)
        briefs: dict[str, list[QuestionBrief]] = {"sibling": [], "synthesis": []}
        linkable: list[Candidate] = []
        for part, nid, text, status, metadata, depth, _seq in near:
            if part in briefs:
                synthesis = json.loads(metadata).get("synthesis")
                briefs[part].append({"node_id": nid, "text": text, "status": status, "synthesis": synthesis})
            else:
                linkable.append({"node_id": nid, "text": text, "relation": "sibling", "depth": depth})
        # Half at least from the whole graph, by relevance (store/answer_index.py).
        linkable += self._answers.related(g, question, candidates - len(linkable))
        return {
            "graph_id": graph.graph_id,
            "seed": graph.seed,
            "node": question.to_dict(),
            "ancestry": [
                {"node_id": nid, "depth": depth, "question": text, "answer": answer}
                for nid, depth, text, answer in chain
            ],
            "siblings": briefs["sibling"],
            "syntheses": briefs["synthesis"],
            "candidates": linkable,
            # Below this depth no sub-question can sit: the intensity's, or a deepened branch's.
            "max_depth": self._core.depth_ceiling(graph, question, question.depth + 1),
        }

    def _ancestry(self, graph_id: str, question: NodeRow) -> list[tuple[str, int, str, str | None]]:
        """The path down from the root (kept on each node): each question above with its first answer."""
        above = question.ancestors
        chain: list[tuple[str, int, str, str | None]] = []
        if above:
            marks = ", ".join("?" for _ in above)
            rows = self._db.fetchall(
                f"SELECT node_id, node_type, question_id, depth, text FROM nodes WHERE graph_id = ? "
                f"AND (node_id IN ({marks}) OR (node_type = 'answer' AND superseded_turn IS NULL "
                f"AND question_id IN ({marks}))) ORDER BY seq",
                [graph_id, *above, *above],
            )
            first_answer: dict[str, str] = {}
            for _nid, kind, qid, _depth, text in rows:
                if kind == "answer":
                    first_answer.setdefault(qid, text)
            chain = [
                (nid, depth, text, first_answer.get(nid))
                for nid, kind, _qid, depth, text in rows
                if kind == "question"
            ]
        return chain

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
