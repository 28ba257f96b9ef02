"""Glob and grep over a graph's sources: names by pattern, lines by regular expression.

A plain class composed by :class:`~fractal_nb.store.GraphStore` (docs/architecture/store.md,
"Sources and citations"). Both read the chunks the store already holds for retrieval (the
graph's cached :class:`~fractal_nb.retrieval.SourceIndex`), in Python, so they hold alike
on DuckDB and PostgreSQL and write nothing. A glob is ``fnmatch``-style over the
sources' names (``**/`` also matches no folder at all); a grep is a regular expression
(Python's ``re``, case-insensitive) searched line by line, its hits numbered as
citations number them.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

from ..checks import require_count, require_text, shown
from ..errors import InvalidInputError
from .records import GrepHit

if TYPE_CHECKING:
    from .sources import Sources

MAX_PATTERN_CHARS = 300
MAX_GREP_HITS = 500
MAX_HIT_CHARS = 400  # a matching line longer than this is returned cut


def glob_match(name: str, pattern: str) -> bool:
    """Whether a source's name matches a glob; ``**/`` may stand for no folder, a bare pattern for any.

    >>> glob_match("pkg/store/claim.py", "**/*.py"), glob_match("claim.py", "**/*.py")
    (True, True)
    >>> glob_match("pkg/store/claim.py", "*claim*"), glob_match("pkg/notes.md", "*.py")
    (True, False)
    """
    if fnmatch.fnmatchcase(name, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatchcase(name, pattern[3:]):
        return True
    return "/" not in pattern and fnmatch.fnmatchcase(name.rsplit("/", 1)[-1], pattern)


class SourceGrep:
    """``glob_sources`` and ``grep_sources`` over the chunks that ``Sources`` keeps."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def glob(self, graph_id: str, pattern: object) -> list[str]:
        """The names of the graph's sources matching ``pattern`` (:func:`glob_match`), in the order added."""
        text = require_text(pattern, "pattern")
        if len(text) > MAX_PATTERN_CHARS:
            raise InvalidInputError(f"pattern is {len(text):,} characters; the limit is {MAX_PATTERN_CHARS}")
        return [s["name"] for s in self._sources.listing(graph_id) if glob_match(s["name"], text)]

    def grep(self, graph_id: str, pattern: object, glob: object = None, k: object = 50) -> list[GrepHit]:
        """The lines of the graph's sources matching the regular expression ``pattern``, in source order.

        ``glob``: only the sources whose names match it; ``k``: at most this many hits.
        """
        expression = _compiled(pattern)
        count = require_count(k, "k", minimum=1, maximum=MAX_GREP_HITS)
        names = set(self.glob(graph_id, "*" if glob is None else glob))  # refuses an unknown graph
        hits: list[GrepHit] = []
        for chunk in self._sources.index(graph_id).chunks:
            if chunk["source"] not in names:
                continue
            for number, line in enumerate(chunk["text"].split("\n"), start=chunk["line_start"]):
                if expression.search(line):
                    hits.append({"source": chunk["source"], "line": number, "text": line[:MAX_HIT_CHARS]})
                    if len(hits) >= count:
                        return hits
        return hits


def _compiled(pattern: object) -> re.Pattern[str]:
    text = require_text(pattern, "pattern")
    if len(text) > MAX_PATTERN_CHARS:
        raise InvalidInputError(f"pattern is {len(text):,} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise InvalidInputError(f"pattern {shown(text)} is not a regular expression: {exc}") from None
