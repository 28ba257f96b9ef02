"""The graph's answers by relevance: which settled answers of other branches bear on a question.

A plain class composed by :class:`~fractal_nb.store.context.NodeContext`
(docs/architecture/engine.md, "Context from the whole graph"). An answer's
context and connect's candidates come from the whole graph, not from the most
recent answers: each store keeps, per graph, the terms of every answer it has
read and a BM25 index over them (``retrieval.TermIndex``, the machinery the
sources use). A context read reads only the answers written since the last read
(``seq`` above the last one seen: writes are serialized, so ``seq`` is commit
order); those wait in a tail, ranked by the terms they share with the question,
until the tail passes :data:`REBUILD_SHARE` of the index and the index is built
again over all of them. The index is built at most once per that many answers,
so a step's read stays bounded at any size; the rows it names are read again by
id, so an answer superseded since (a later turn) is never offered.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..retrieval import TermIndex, tokenize
from .base import StoreCore
from .records import Candidate
from .rows import NodeRow

REBUILD_SHARE = 0.125
"""The index is built again once the answers written since it was built pass this share of it..."""
REBUILD_MIN = 64
"""...and this many: below it, they are ranked in the tail by shared terms."""
POOL_FACTOR = 4
"""Answers ranked per one wanted: those of the question's own branch are dropped after ranking."""


@dataclass
class _GraphAnswers:
    """One graph's answers as this store has read them: ids, branches and terms, in ``seq`` order."""

    seen: int = 0  # the highest seq read
    ids: list[str] = field(default_factory=list)
    branches: list[str | None] = field(default_factory=list)
    terms: list[tuple[str, ...]] = field(default_factory=list)
    index: TermIndex = field(default_factory=lambda: TermIndex([]))

    @property
    def tail(self) -> range:
        """Positions of the answers read since the index was built."""
        return range(len(self.index), len(self.ids))

    def stale(self) -> bool:
        """Whether the tail has grown past what shared-term ranking should carry."""
        waiting = len(self.ids) - len(self.index)
        return waiting > max(REBUILD_MIN, REBUILD_SHARE * len(self.index))


class AnswerIndex:
    """Per graph, the answers of other branches most related to a question (BM25 over all answers)."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db
        self._graphs: dict[str, _GraphAnswers] = {}
        self._lock = threading.Lock()  # one reader catches up a graph at a time

    def related(self, graph_id: str, question: NodeRow, k: int) -> list[Candidate]:
        """The ``k`` current answers outside ``question``'s branch that best match its text, best first.

        Each is a :class:`Candidate` with ``relation`` ``other_branch``. A root
        question (no branch) has none: every branch is its own.
        """
        if question.branch_id is None or k < 1:
            return []
        with self._lock:
            answers = self._caught_up(graph_id)
            ranked = self._ranked(answers, question, k * POOL_FACTOR)
        return self._current(graph_id, ranked, k)

    def _caught_up(self, graph_id: str) -> _GraphAnswers:
        """The graph's answers with those written since the last read, the index built again when stale."""
        answers = self._graphs.setdefault(graph_id, _GraphAnswers())
        rows = self._db.fetchall(
            "SELECT node_id, branch_id, text, seq FROM nodes WHERE graph_id = ? AND node_type = 'answer' "
            "AND seq > ? ORDER BY seq",
            [graph_id, answers.seen],
        )
        for node_id, branch_id, text, seq in rows:
            answers.ids.append(node_id)
            answers.branches.append(branch_id)
            answers.terms.append(tuple(tokenize(text)))
            answers.seen = int(seq)
        if answers.stale():
            answers.index = TermIndex(answers.terms)
        return answers

    @staticmethod
    def _ranked(answers: _GraphAnswers, question: NodeRow, pool: int) -> list[str]:
        """Ids of other branches' answers, the index's best and the tail's alternately, at most ``pool``."""
        own = question.branch_id
        indexed = [p for p, _score in answers.index.search(question.text, pool) if answers.branches[p] != own]
        asked = set(tokenize(question.text))
        tail = sorted(
            (p for p in answers.tail if answers.branches[p] not in (own, None) and asked & set(answers.terms[p])),
            key=lambda p: -len(asked & set(answers.terms[p])) / len(asked | set(answers.terms[p])),
        )
        merged = [p for pair in zip(indexed, tail) for p in pair]
        merged += indexed[len(tail) :] + tail[len(indexed) :]
        return [answers.ids[p] for p in merged if answers.branches[p] is not None][:pool]

    def _current(self, graph_id: str, ranked: list[str], k: int) -> list[Candidate]:
        """The ranked answers still current (not superseded by a later turn), in rank order, ``k`` at most."""
        if not ranked:
            return []
        marks = ", ".join("?" for _ in ranked)
        rows = self._db.fetchall(
            f"SELECT node_id, text, depth FROM nodes WHERE graph_id = ? AND node_id IN ({marks}) "
            "AND superseded_turn IS NULL",
            [graph_id, *ranked],
        )
        found = {nid: (text, depth) for nid, text, depth in rows}
        return [
            {"node_id": nid, "text": found[nid][0], "relation": "other_branch", "depth": found[nid][1]}
            for nid in ranked
            if nid in found
        ][:k]
