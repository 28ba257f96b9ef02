"""What went wrong on the wire, in plain words: a model server's or an MCP server's connection failing.

A leaf: the model clients (llm/openai_replies.py) and the remote store
(mcp/remote/store.py) both say why a connection failed the same way.
"""

from __future__ import annotations

import errno

from .text import clip

SNIPPET = 300
"""The most of an error's own words a message carries."""


def connection_problem(exc: BaseException) -> str:
    """What went wrong on the wire, in plain words ("connection refused", "host not found", …)."""
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
            continue
        cause = cause.__cause__ or cause.__context__
    refused = (errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH)
    for error in seen:
        if isinstance(error, OSError) and error.errno in refused:
            return {
                errno.ECONNREFUSED: "connection refused",
                errno.ECONNRESET: "connection reset",
                errno.EHOSTUNREACH: "host unreachable",
            }[error.errno]
    text = " ".join(str(e) for e in seen).lower()
    for needle, words in (
        ("refused", "connection refused"),
        ("name or service not known", "host not found"),
        ("nodename nor servname", "host not found"),
        ("temporary failure in name", "host not found"),
        ("timed out", "connection timed out"),
        ("unreachable", "network unreachable"),
        ("reset by peer", "connection reset"),
        ("disconnected", "server disconnected"),
        ("connection closed", "connection closed"),
    ):
        if needle in text:
            return words
    return clip(str(seen[-1]), SNIPPET) or type(seen[-1]).__name__
