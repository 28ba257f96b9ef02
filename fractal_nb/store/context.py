"""A worker's bounded view of the graph around one question: never the whole graph."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from .base import StoreBase
from .rows import NODE_COLUMNS, NodeRow


class NodeContext(StoreBase):
    """Ancestry, siblings, nearby syntheses and link candidates of a question."""

    def get_context(
        self, graph_id: str, node_id: str, *, limit: int = 6, candidates: int = 8
    ) -> dict[str, Any]:
        """What a worker needs to answer ``node_id``, each part capped (rule: bounded prompts).

        ``ancestry``: the questions from the root down to the parent, each with
        its first answer. ``siblings``: other sub-questions of the same parent.
        ``syntheses``: the most recent syntheses in the same branch.
        ``candidates``: the most recent answers in other branches (for links).
        """
        for name, value in (("limit", limit), ("candidates", candidates)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"{name} must be an integer >= 0, not {value!r}")
        with self._db.read():
            graph = self._graph(graph_id)
            node = self._node(graph.graph_id, node_id)
            question = self._question_of(node)
            chain = self._rows(
                """WITH RECURSIVE up(node_id, hops) AS (
                       SELECT question_id, 1 FROM nodes WHERE node_id = ?
                       UNION ALL
                       SELECT n.question_id, hops + 1 FROM nodes n JOIN up USING (node_id)
                       WHERE n.question_id IS NOT NULL)
                   SELECT {cols} FROM nodes JOIN up USING (node_id) ORDER BY hops DESC""",
                [question.node_id],
            )
            ids = [q.node_id for q in chain]
            answers: dict[str, NodeRow] = {}
            if ids:
                marks = ", ".join("?" for _ in ids)
                for a in self._nodes(f"node_type = 'answer' AND question_id IN ({marks})", ids):
                    answers.setdefault(a.question_id or "", a)
            siblings = self._rows(
                "SELECT {cols} FROM nodes WHERE graph_id = ? AND node_type = 'question' "
                "AND question_id = ? AND node_id != ? ORDER BY seq LIMIT ?",
                [graph.graph_id, question.question_id, question.node_id, limit],
            ) if question.question_id else []
            syntheses = self._rows(
                "SELECT {cols} FROM nodes WHERE graph_id = ? AND branch_id IS NOT DISTINCT FROM ? "
                "AND node_type = 'question' AND status = 'synthesized' AND node_id != ? "
                "ORDER BY seq DESC LIMIT ?",
                [graph.graph_id, question.branch_id, question.node_id, limit],
            )
            others = self._rows(
                "SELECT {cols} FROM nodes WHERE graph_id = ? AND node_type = 'answer' "
                "AND branch_id IS NOT NULL AND branch_id IS DISTINCT FROM ? "
                "ORDER BY seq DESC LIMIT ?",
                [graph.graph_id, question.branch_id, candidates],
            )
        return {
            "graph_id": graph.graph_id,
            "seed": graph.seed,
            "node": question.to_dict(),
            "ancestry": [
                {"node_id": q.node_id, "depth": q.depth, "question": q.text,
                 "answer": answers[q.node_id].text if q.node_id in answers else None}
                for q in chain
            ],
            "siblings": [_brief(s) for s in siblings],
            "syntheses": [_brief(s) for s in reversed(syntheses)],
            "candidates": [{"node_id": a.node_id, "text": a.text} for a in reversed(others)],
        }

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """A question, its answers and its sub-questions with their syntheses: all a synthesis reads."""
        with self._db.read():
            graph = self._graph(graph_id)
            question = self._question_of(self._node(graph.graph_id, node_id))
            below = self._nodes("graph_id = ? AND question_id = ?", [graph.graph_id, question.node_id])
        return {
            "graph_id": graph.graph_id,
            "node": question.to_dict(),
            "answers": [{"node_id": a.node_id, "text": a.text} for a in below
                        if a.node_type == "answer"],
            "sub_questions": [
                {**_brief(q), "status_reason": q.status_reason} for q in below
                if q.node_type == "question"
            ],
        }

    def _rows(self, sql: str, params: list[Any]) -> list[NodeRow]:
        columns = ", ".join(f"nodes.{c.strip()}" for c in NODE_COLUMNS.split(","))
        return [NodeRow(*r) for r in self._db.fetchall(sql.format(cols=columns), params)]


def _brief(node: NodeRow) -> dict[str, Any]:
    return {"node_id": node.node_id, "text": node.text, "status": node.status,
            "synthesis": node.metadata.get("synthesis")}
