"""The graph's answers by relevance: which settled answers of other branches bear on a question.

A plain class composed by :class:`~fractal_nb.store.context.NodeContext`
(docs/architecture/engine.md, "Context from the whole graph"). An answer's
context and connect's candidates come from the whole graph, not from the most
recent answers: each store keeps, per graph, the terms of every answer it has
read and a BM25 index over them (``retrieval.TermIndex``, the machinery the
sources use). No SQL here: the context's one query (store/context.py) brings
the answers written since the last read (``seq`` above :meth:`AnswerIndex.ranked`'s
watermark: writes are serialized, so ``seq`` is commit order) and the current
rows of the answers this store ranked for the question before it.

The index covers the graph's first :func:`indexed` answers in ``seq`` order,
the rest wait in a tail ranked by the terms they share with the question; the
index is built again when the count passes the next mark (64, then an eighth
more each time), so a rebuild comes at most once per that many answers and a
step's read stays bounded at any size. The marks depend on the count alone, so
two stores (or one store before and after a read) that have read the same
answers rank alike: ``claim_work(with_context=True)`` equals ``get_context``
right after it. An answer superseded since (a later turn) is never offered:
the query returns current rows only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..retrieval import TermIndex, tokenize
from .records import Candidate
from .rows import NodeRow

REBUILD_SHARE = 0.125
"""The index is built again once the answers past it pass this share of it..."""
REBUILD_MIN = 64
"""...and the first index is built at this many answers: below it, all are ranked by shared terms."""
POOL_FACTOR = 4
"""Answers ranked per one wanted: some may be superseded by the time they are read."""
T = TypeVar("T")
Rows = Mapping[str, tuple[str, int]]
"""Current answers as the store read them: id to (text, depth)."""


def indexed(count: int) -> int:
    """How many of a graph's first ``count`` answers the index covers: the last mark at or below it.

    >>> [indexed(n) for n in (63, 64, 71, 72, 80, 81, 1000)]
    [0, 64, 64, 72, 72, 81, 929]
    """
    mark, upcoming = 0, REBUILD_MIN
    while upcoming <= count:
        mark, upcoming = upcoming, max(upcoming + 1, int(upcoming * (1 + REBUILD_SHARE)))
    return mark


@dataclass(frozen=True)
class Fresh:
    """An answer the context read found above the watermark."""

    node_id: str
    branch_id: str | None
    text: str
    seq: int
    depth: int
    current: bool  # not superseded by a later turn


@dataclass
class _GraphAnswers:
    """One graph's answers as this store has read them: ids, branches and terms, in ``seq`` order."""

    seen: int = 0  # the highest seq read
    ids: list[str] = field(default_factory=list)
    branches: list[str | None] = field(default_factory=list)
    tokens: list[tuple[str, ...]] = field(default_factory=list)  # what the index is built from
    terms: list[frozenset[str]] = field(default_factory=list)
    index: TermIndex = field(default_factory=lambda: TermIndex([]))

    def take(self, fresh: list[Fresh], tokens: list[tuple[str, ...]]) -> list[tuple[str, ...]] | None:
        """Take in the answers above :attr:`seen` with their ``tokens`` (once each: another thread may have).

        Returns what the index should now cover when it is stale (None: it is not): the
        caller builds it outside the lock (:meth:`AnswerIndex.related`).
        """
        for answer, terms in zip(fresh, tokens, strict=True):
            if answer.seq > self.seen:
                self.ids.append(answer.node_id)
                self.branches.append(answer.branch_id)
                self.tokens.append(terms)
                self.terms.append(frozenset(terms))
                self.seen = answer.seq
        mark = indexed(len(self.ids))
        return self.tokens[:mark] if mark > len(self.index) else None

    def pool(self, question: NodeRow, size: int) -> list[str]:
        """Ids of other branches' answers for ``question``: the index's best and the tail's alternately."""
        own = question.branch_id
        found = [p for p, _score in self.index.search(question.text, size) if self.branches[p] != own]
        asked = frozenset(tokenize(question.text))
        shared = {p: overlap(asked, self.terms[p]) for p in range(len(self.index), len(self.ids))}
        ranked = [p for p, score in shared.items() if score > 0 and self.branches[p] != own]
        tail = sorted(ranked, key=lambda p: (-shared[p], p))  # at a tie, the older first
        return [self.ids[p] for p in _alternately(found, tail[:size]) if self.branches[p] is not None][:size]


def overlap(asked: frozenset[str], terms: frozenset[str]) -> float:
    """How related an answer is to a question by shared terms alone (Jaccard): the tail's ranking."""
    return len(asked & terms) / len(asked | terms) if asked & terms else 0.0


class AnswerIndex:
    """Per graph, the answers of other branches most related to a question (BM25 over all answers)."""

    def __init__(self) -> None:
        self._graphs: dict[str, _GraphAnswers] = {}
        self._lock = threading.Lock()  # one thread takes in or ranks a store's answers at a time

    def ranked(self, question: NodeRow, k: int) -> tuple[int, list[str]]:
        """Before the read: the watermark, and the ids the read should bring the current rows of.

        ``k`` times :data:`POOL_FACTOR` at most. A root question (no branch) has
        none: every branch is its own.
        """
        with self._lock:
            answers = self._graphs.setdefault(question.graph_id, _GraphAnswers())
            if question.branch_id is None or k < 1:
                return answers.seen, []
            return answers.seen, answers.pool(question, k * POOL_FACTOR)

    def related(
        self,
        question: NodeRow,
        k: int,
        asked: list[str],
        read: tuple[Rows, list[Fresh]],
        read_more: Callable[[list[str]], Rows],
    ) -> list[Candidate]:
        """After the read: the ``k`` current answers outside its branch that best match it, best first.

        ``asked``: :meth:`ranked`'s ids; ``read``: the current rows among them, and
        the answers above the watermark, taken in here. When taking them in moved
        the pool (a graph's first read, a rebuilt index), the rows the read did
        not bring are read with ``read_more``.
        """
        rows, fresh = read
        tokens = [tuple(tokenize(a.text)) for a in fresh]  # outside the lock: other readers go on
        with self._lock:
            answers = self._graphs.setdefault(question.graph_id, _GraphAnswers())
            covering = answers.take(fresh, tokens)
        built = None if covering is None else TermIndex(covering)  # outside the lock too: readers use the old
        with self._lock:
            if built is not None and len(built) > len(answers.index):
                answers.index = built
            if question.branch_id is None or k < 1:
                return []
            pool = answers.pool(question, k * POOL_FACTOR)
        known = {**rows, **{a.node_id: (a.text, a.depth) for a in fresh if a.current}}
        brought = set(asked) | {a.node_id for a in fresh}
        missing = [nid for nid in pool if nid not in brought]
        if missing:
            known |= read_more(missing)
        kept: list[Candidate] = [
            {"node_id": nid, "text": known[nid][0], "relation": "other_branch", "depth": known[nid][1]}
            for nid in pool
            if nid in known
        ]
        return kept[:k]


def _alternately(first: list[T], second: list[T]) -> list[T]:
    """One of each in turn, then the rest of the longer list.

    >>> _alternately([1, 2, 3], ["a"])
    [1, 'a', 2, 3]
    """
    merged = [item for pair in zip(first, second, strict=False) for item in pair]
    return merged + first[len(second) :] + second[len(first) :]
