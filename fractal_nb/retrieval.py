"""Lexical retrieval over a graph's sources and answers: BM25 over their terms.

See docs/architecture/engine.md, "Retrieval".

A leaf module: it imports nothing of the package at run time (``ChunkRecord`` is
only a type here), so the store can build and cache one index per graph.

The library is ``bm25s``, chosen by ``bench/retrieval_bench.py`` (index time,
query time and recall@5 beside ``tantivy`` and a plain term-overlap baseline on
a corpus of more than 10k chunks): pure Python over numpy, no network and no
model download, and its scoring only reads the index's arrays.

Tokens are lower-case words; a code identifier counts whole and in its parts,
split at ``_`` and at camelCase, so "claim_work" and "claimWork" both match a
question about a claim's work. English stopwords (bm25s's list) are left out;
there is no stemming. A chunk is indexed with its source's name, so a file
called ``store/claim.py`` answers to "claim".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN_PLUS

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .store.records import ChunkRecord

DEFAULT_K = 5
K1, B = (
    1.2,
    0.75,
)  # BM25's term-frequency saturation and length normalization: Lucene's (and tantivy's) defaults
STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_WORD = re.compile(r"\w+")
# the parts of an identifier: an acronym before a capitalized word, a (capitalized) word, an acronym, digits
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def tokenize(text: str) -> list[str]:
    """The terms of a text as the index counts them: words lower-cased, identifiers whole and split.

    A term of one character and a stopword are left out; the order of the text is kept.

    >>> tokenize("Do snake_case and camelCase split?")
    ['snake_case', 'snake', 'case', 'camelcase', 'camel', 'case', 'split']
    >>> tokenize("GraphStore.parseHTTPHeader(x)")
    ['graphstore', 'graph', 'store', 'parsehttpheader', 'parse', 'http', 'header']
    """
    return [term for word in _WORD.findall(text) for term in _word_terms(word)]


@functools.lru_cache(maxsize=1 << 16)  # words repeat: a corpus's tokens are mostly a few thousand words
def _word_terms(word: str) -> tuple[str, ...]:
    """One word's terms: itself lower-cased, then its parts when it is an identifier of several."""
    whole = word.lower()
    parts = [part.lower() for part in _PART.findall(word)]
    terms = [whole, *(part for part in parts if part != whole)] if len(parts) > 1 else [whole]
    return tuple(term for term in terms if len(term) > 1 and term not in STOPWORDS)


class TermIndex:
    """BM25 over documents given as their terms; :meth:`search` ranks their positions.

    Built once and only read after, so any number of threads may search it at once.
    The graph's sources (:class:`SourceIndex`) and its answers
    (``store/answer_index.py``) are both searched through one.

    >>> index = TermIndex([tokenize("The river floods in spring."), tokenize("Prices rose.")])
    >>> [(position, score > 0) for position, score in index.search("When does the river flood?")]
    [(0, True)]
    """

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        self._count = len(documents)
        self._bm25: bm25s.BM25 | None = None
        if any(documents):  # no term anywhere (no documents, or stopwords only): nothing can match
            self._bm25 = bm25s.BM25(k1=K1, b=B)
            self._bm25.index([list(terms) for terms in documents], show_progress=False)

    def __len__(self) -> int:
        """How many documents the index holds."""
        return self._count

    def search(self, query: str, k: int = DEFAULT_K) -> list[tuple[int, float]]:
        """The positions of the ``k`` documents that best match ``query``, best first, with scores (> 0).

        A query with no indexed term (empty, stopwords only, words no document has)
        finds nothing. Equal scores keep the documents' order.
        """
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be text, not {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be a whole number, at least 1 (got {k!r})")
        if self._bm25 is None:
            return []
        ids = self._bm25.get_tokens_ids(list(dict.fromkeys(tokenize(query))))
        if not ids:
            return []
        scores = np.asarray(self._bm25.get_scores_from_ids(ids))
        found = np.flatnonzero(scores > 0)
        best = found[np.argsort(-scores[found], kind="stable")][:k]
        return [(int(i), float(scores[i])) for i in best]


class SourceIndex:
    """A BM25 index over chunks, built once; :meth:`search` ranks them for a query.

    The index never changes after it is built, and a search only reads it, so
    any number of threads may search one index at once (the store caches one
    per graph and builds a new one when the graph's sources change).

    >>> chunk = {"chunk_id": "a:1-2", "source_id": "a", "source": "notes.md",
    ...          "line_start": 1, "line_end": 2, "text": "The river floods in spring."}
    >>> other = dict(chunk, chunk_id="a:3-4", line_start=3, line_end=4, text="Prices rose.")
    >>> index = SourceIndex([chunk, other])
    >>> [(hit["chunk_id"], score > 0) for hit, score in index.search("When does the river flood?")]
    [('a:1-2', True)]
    """

    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        self._chunks = list(chunks)
        self._terms = TermIndex(
            [tokenize(chunk["source"]) + tokenize(chunk["text"]) for chunk in self._chunks]
        )

    @property
    def chunks(self) -> Sequence[ChunkRecord]:
        """The chunks the index holds, in the order it was given them (never changed)."""
        return self._chunks

    def __len__(self) -> int:
        """How many chunks the index holds."""
        return len(self._chunks)

    def search(self, query: str, k: int = DEFAULT_K) -> list[tuple[ChunkRecord, float]]:
        """The ``k`` chunks that best match ``query``, best first, each with its BM25 score (> 0).

        A query with no indexed term (empty, stopwords only, words no chunk has)
        finds nothing. Equal scores keep the chunks' order.
        """
        return [(self._chunks[position], score) for position, score in self._terms.search(query, k)]
