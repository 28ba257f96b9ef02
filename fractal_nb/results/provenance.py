"""Which node a finding rests on: provenance attached in code, never asked of the model.

docs/architecture/faces.md, "Evidence in the faces". A harvest's finding is the model's
sentence; the model names no node, and its schema stays as it is. The code gives
each finding a ``node_id``, the question a reader follows it back to:

1. a finding a track documented (the same text, compared by ``text.normalize``)
   rests on that track's question;
2. a finding carrying a citation that an answer's citation verified (the same
   source and lines; else, none being the same, the same source with lines that
   overlap) rests on that answer's question: the finding's first such citation
   decides; verified under several questions, the shallower, then the first in
   tree order;
3. any other finding rests on the question of the synthesis chain whose question
   and synthesis share the most content words (``text.content_words``) with it:
   ties go to the shallower, then the first in tree order. A synthesis joined
   without the model is left out (the harvest never reads it as material);
4. nothing shared, or no chain: the root.

Only nodes no later turn superseded count. A stored ``node_id`` that names one of
them is kept (an outside client may have written another value: it is replaced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..text import content_words, normalize
from ..vocabulary import CitationStatus, track_of
from .result import ChainLink, synthesis_chain

if TYPE_CHECKING:  # the store's package loads DuckDB; provenance is read without it
    from ..store.records import NodeRecord

Span = tuple[str, int, int]


class Provenance:
    """The graph's current nodes, read once, to name the node each finding rests on.

    Examples
    --------
    >>> root = {"node_id": "n-1", "node_type": "question", "depth": 0, "parent_id": None,
    ...         "text": "Why do tides turn?", "status": "synthesized",
    ...         "metadata": {"synthesis": "The moon pulls the oceans."}}
    >>> Provenance([root]).node_of({"finding": "The moon drives tides", "citations": []})
    'n-1'
    """

    def __init__(self, nodes: Iterable[NodeRecord]) -> None:
        self.current = [n for n in nodes if n.get("superseded_turn") is None]
        self.questions = [n for n in self.current if n["node_type"] == "question"]
        self.ids = {n["node_id"] for n in self.questions}
        self.root = next((n["node_id"] for n in self.questions if n["depth"] == 0), None)

    # The indexes below are built when a finding first needs them: findings that already name a
    # current question (a stored harvest, read back on every preview) need none.

    @cached_property
    def _ranked_chain(self) -> tuple[list[ChainLink], dict[str, tuple[int, int]]]:
        """The synthesis chain and each question's rank: (depth, tree order; outside the chain, after it)."""
        chain = synthesis_chain(self.current)
        order = {link.node_id: i for i, link in enumerate(chain)}
        rank = {
            n["node_id"]: (n["depth"], order.get(n["node_id"], len(chain) + i))
            for i, n in enumerate(self.questions)
        }
        return chain, rank

    @cached_property
    def chain(self) -> list[tuple[str, frozenset[str], tuple[int, int]]]:
        """The sound chain's questions, each with its content words and rank."""
        chain, rank = self._ranked_chain
        return [
            (link.node_id, content_words(f"{link.question} {link.synthesis}"), rank[link.node_id])
            for link in chain
            if not link.degraded and link.node_id in rank
        ]

    @cached_property
    def tracks(self) -> dict[str, str]:
        """A track's finding (normalized) → the track's question."""
        tracks: dict[str, str] = {}
        for n in self.questions:
            if track_of(n["metadata"]) is not None:
                for f in _list(n["metadata"].get("findings")):
                    if isinstance(f, Mapping) and isinstance(f.get("finding"), str):
                        tracks.setdefault(normalize(f["finding"]), n["node_id"])
        return tracks

    @cached_property
    def cited(self) -> dict[Span, list[tuple[tuple[int, int], str]]]:
        """A verified citation's span → the (rank, question) of each answer that verified it."""
        rank = self._ranked_chain[1]
        cited: dict[Span, list[tuple[tuple[int, int], str]]] = {}
        for n in self.current:
            question = n["parent_id"]
            if n["node_type"] != "answer" or question not in rank:
                continue
            for c in _list(n["metadata"].get("citations")):
                span = _span(c)
                if span is not None and c.get("status") == CitationStatus.VERIFIED:
                    cited.setdefault(span, []).append((rank[question], question))
        return cited

    def node_of(self, finding: Mapping[str, Any]) -> str | None:
        """The node ``finding`` rests on (the rules of this module); None for a graph with no root."""
        text = str(finding.get("finding") or "")
        track = self.tracks.get(normalize(text))
        if track is not None:
            return track
        spans = [s for s in (_span(c) for c in _list(finding.get("citations"))) if s is not None]
        for same in (_same, _overlaps):
            for span in spans:
                carried = [q for cited, found in self.cited.items() if same(span, cited) for q in found]
                if carried:
                    return min(carried)[1]
        words = content_words(text)
        scored = [(-len(words & linked), rank, node_id) for node_id, linked, rank in self.chain]
        best = min(scored, default=None)
        return best[2] if best is not None and best[0] < 0 else self.root

    def attach(self, findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``findings`` each with a ``node_id``: the stored one if it names a current question, else found."""
        return [
            {**f, "node_id": f["node_id"] if f.get("node_id") in self.ids else self.node_of(f)}
            for f in findings
        ]


def with_nodes(findings: Iterable[Mapping[str, Any]], nodes: Sequence[NodeRecord]) -> list[dict[str, Any]]:
    """``findings`` each with the ``node_id`` it rests on (:class:`Provenance`)."""
    return Provenance(nodes).attach(findings)


def _span(citation: object) -> Span | None:
    """A citation's source and lines, None for an entry that is not a citation (an outside write)."""
    if not isinstance(citation, Mapping) or not isinstance(citation.get("source"), str):
        return None
    start, end = citation.get("line_start"), citation.get("line_end")
    if (
        not isinstance(start, int)
        or not isinstance(end, int)
        or isinstance(start, bool)
        or isinstance(end, bool)
    ):
        return None
    return citation["source"], start, end


def _same(a: Span, b: Span) -> bool:
    return a == b


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] == b[0] and a[1] <= b[2] and b[1] <= a[2]


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
