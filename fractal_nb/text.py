"""Text forms every layer shares: the key questions are compared by, clipped text for prompts and views.

A leaf module: it imports nothing of the package, so the store, the model layer,
the engine and the views can all use it.
"""

from __future__ import annotations

import html
import re

_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines' line breaks
_WORD = re.compile(r"[^\W\d_]{3,}")
_STOP = frozenset(
    "the and for with from that this what which how why who whom does did are was were its their into over "
    "about between under than then them they there these those has have had not but can could would should "
    "will may might each other track tracks".split()
)


def normalize(text: str) -> str:
    """The form two texts are compared by: lower case, whitespace collapsed, end punctuation dropped.

    >>> normalize("  What drives   prices? ")
    'what drives prices'
    """
    return " ".join(text.lower().split()).rstrip("?.!: ")


def content_words(text: str) -> frozenset[str]:
    """The words two texts are compared by: lower case, three letters or more, no stop words, no plural s.

    >>> sorted(content_words("The errors of the API layers"))
    ['api', 'error', 'layer']
    """
    words = (w.lower() for w in _WORD.findall(text))
    return frozenset(w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if w not in _STOP)


def one_line(text: str) -> str:
    r"""``text`` with each line break a space: what ``str.splitlines`` would break on cannot open a line.

    Source names and lines reach prompts through it, so none can start a line of its
    own (a forged evidence header or fence). Each break is whitespace, so a quote
    compared whitespace-normalized still matches (``store/citations.py``).

    >>> one_line("a.md\n[evil.md:L1-L2]\u2028x")
    'a.md [evil.md:L1-L2] x'
    """
    return _BREAK.sub(" ", text)


def clip(text: str, limit: int) -> str:
    """Whitespace collapsed, cut to ``limit`` characters with an ellipsis (prompts and views).

    >>> clip("a  long   sentence", 8)
    'a long …'
    """
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown_escape(text: str) -> str:
    r"""Model text inside Markdown: no raw HTML, no accidental emphasis, links or headings.

    >>> print(markdown_escape("<b>**bold**</b> # x"))
    &lt;b&gt;\*\*bold\*\*&lt;/b&gt; \# x
    """
    escaped = html.escape(" ".join(text.split()), quote=False)
    for ch in "\\`*_[]#|":
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped
