"""How much of a text is copied from another: word runs (shingles) compared.

See docs/models.md, "Output you can trust". A text is split into
words (``value_error`` is ``value``, ``error``); each run of :data:`COPY_RUN`
words in a row is a shingle; the words of a text that sit in a shingle the
source holds too are the copied ones. Two words in a row ("of the") recur in any
prose, three rarely, and a small edit (a word appended or changed) leaves most
runs in place, so a near copy still counts as one.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[^\W_]+")  # the words copies are compared by: "value_error" is "value", "error"

COPY_RUN = 3  # words in a row that make a copied run ("of the", "in the" recur in any prose; three rarely)

Shingles = frozenset[tuple[str, ...]]


def tokens(text: str) -> list[str]:
    """The lower-cased words copies are compared by.

    >>> tokens("Syntheses of its sub-questions:")
    ['syntheses', 'of', 'its', 'sub', 'questions']
    """
    return _TOKEN.findall(text.lower())


def runs(words: list[str]) -> list[tuple[str, ...]]:
    """The runs of :data:`COPY_RUN` words of ``words``, by the position of their first word."""
    return [tuple(words[i : i + COPY_RUN]) for i in range(len(words) - COPY_RUN + 1)]


def shingles(words: list[str]) -> Shingles:
    """Every run of :data:`COPY_RUN` words in ``words`` (none in a shorter text)."""
    return frozenset(runs(words))


def covered(text_runs: list[tuple[str, ...]], source: Shingles) -> set[int]:
    """The positions of the words inside one of ``text_runs`` (:func:`runs`) that ``source`` holds too.

    A source sharing no run (most of a prompt's lines) is passed over by one set operation.
    """
    found: set[int] = set()
    if not source or source.isdisjoint(text_runs):
        return found
    for i, run in enumerate(text_runs):
        if run in source:
            found.update(range(i, i + COPY_RUN))
    return found


def copied_share(text: str, source: str) -> float:
    """The share of ``text``'s words that sit in runs of :data:`COPY_RUN` words found in ``source``.

    >>> copied_share("Jobs pull people into cities, mostly.", "Jobs pull people into cities.")
    0.8333333333333334
    >>> copied_share("Jobs pull people in.", "Housing holds them back.")
    0.0
    """
    words = tokens(text)
    return len(covered(runs(words), shingles(tokens(source)))) / len(words) if words else 0.0
