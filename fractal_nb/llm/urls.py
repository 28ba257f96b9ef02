"""URLs in a model's prose, found even where its line wrapping cut them.

See docs/models.md, "Output you can trust": a text that is mostly a
link is not prose, and the words of a URL are not the text's own words.
"""

from __future__ import annotations

import re

_URL_START = re.compile(r"(?:h\s*t\s*t\s*p\s*s?\s*:\s*/\s*/|www\s*\.|(?:[\w-]+\.)+[a-z]{2,}/)", re.IGNORECASE)
_URL_PIECE = re.compile(r"(\s*)(\S+)")
_URLISH = re.compile(r"[/_=&%#]|\w\.\w")  # a piece of a path, a query or a domain
_JOINS_BEFORE = "/-_=?&#%~+"  # a piece that ends so goes on after a break
_JOINS_AFTER = "/.-_=?&#%~+:"  # a piece that starts so went on before one


def urls(text: str) -> tuple[int, str]:
    r"""The visible characters of the URLs in ``text``, and the text without them.

    A URL cut by a line break or spaces (a model's line wrapping) goes on past the
    break when the piece before ends like a path (``/``, ``-``, ``_``…) or the piece
    after starts like one or holds a path, a query or a domain.

    >>> urls("See https://en.wikipedia.org/wiki/\nUrban_growth for more")
    (42, 'See   for more')
    """
    spans: list[tuple[int, int]] = []
    at = 0
    while start := _URL_START.search(text, at):
        end = start.end()
        while piece := _URL_PIECE.match(text, end):
            gap, chunk = piece.group(1), piece.group(2)
            joined = (
                not gap
                or text[end - 1] in _JOINS_BEFORE
                or chunk[0] in _JOINS_AFTER
                or _URLISH.search(chunk) is not None
            )
            if not joined:
                break
            end = piece.end()
        spans.append((start.start(), end))
        at = end
    rest, linked, last = [], 0, 0
    for begin, end in spans:
        rest.append(text[last:begin])
        linked += sum(not ch.isspace() for ch in text[begin:end])
        last = end
    rest.append(text[last:])
    return linked, " ".join(rest)
