"""Text forms every layer shares: the key questions are compared by, clipped text for prompts and views.

A leaf module: it imports nothing of the package, so the store, the model layer,
the engine and the views can all use it.
"""

from __future__ import annotations

import html


def normalize(text: str) -> str:
    """The form two texts are compared by: lower case, whitespace collapsed, end punctuation dropped.

    >>> normalize("  What drives   prices? ")
    'what drives prices'
    """
    return " ".join(text.lower().split()).rstrip("?.!: ")


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
