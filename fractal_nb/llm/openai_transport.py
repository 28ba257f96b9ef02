"""The HTTP under ``OpenAILLM``'s ``openai`` client: each request counted, each body bounded.

docs/architecture/models.md, "A server's reply is data", and
docs/architecture/engine.md, "A worker's round trips" (the ledger): the client is
built on a transport of our own that counts each request the server received
(transport retries too) and reads a body only up to ``max_reply_bytes``; the
proxy the environment names is handed to it. :func:`server_slots` asks a local
server (llama.cpp's ``/props``) how many requests it computes at once.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import urlsplit

import openai

from ..errors import InvalidInputError
from .protocol import report_request

MAX_REPLY_BYTES = 2 << 20
"""The longest body read from the server by default (2 MiB): a reply of the longest default
bound (1,024 tokens) takes a few kilobytes, and this leaves room for any ``max_tokens`` a model
takes, escaped; past it the reply is refused unread (``max_reply_bytes``)."""
_PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key, the client insists on one
# The HTTP library the installed openai client is built on (httpx; httpx2 in newer releases).
_HTTP: Any = sys.modules[
    next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client").__module__.partition(".")[0]
]


class ReplyTooLarge(Exception):
    """The server's body passed ``max_reply_bytes`` (raised by :class:`_CountingTransport` as it reads)."""


def openai_client(
    base_url: str | None, api_key: str | None, timeout: float, max_retries: int, max_reply_bytes: int
) -> openai.OpenAI:
    """The ``openai`` client for ``base_url`` (or OpenAI's), its replies counted and bounded."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and base_url is None:
        raise InvalidInputError(
            "OpenAILLM needs an API key for OpenAI: pass api_key=... or set "
            "OPENAI_API_KEY (or pass base_url=... for a local server, which needs none)"
        )
    return openai.OpenAI(
        api_key=api_key or _PLACEHOLDER_KEY,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        http_client=openai.DefaultHttpxClient(
            transport=cast("Any", _CountingTransport(_environment_proxy(base_url), max_reply_bytes))
        ),
    )


def _environment_proxy(base_url: str | None) -> str | None:
    """The proxy the environment names for the model's URL (``HTTPS_PROXY``, ``NO_PROXY``, …), or None.

    A transport of our own turns off the HTTP library's reading of those
    variables, so :class:`_CountingTransport` is given the proxy this way.
    """
    url = urlsplit(base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(url.scheme) or proxies.get("all")


class _CountingTransport:
    """HTTP transport (the client's default one, wrapped) that counts each request the server received.

    A request counts once a reply came back, or when the reply timed out after the
    request was sent (a stalled server has it); a connection refused, a bad URL or
    a connection dropped before any reply counts as none (the ledger's ``attempts``,
    docs/architecture/engine.md, "A worker's round trips"). Transport retries are requests too.

    A body is read up to ``max_reply_bytes``: one that says it is longer, or grows
    past it, raises :class:`ReplyTooLarge` (its connection is closed, not read on).
    """

    def __init__(self, proxy: str | None = None, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        # openai's own pool limits (DefaultHttpxClient applies them to its default transport only).
        limits = _HTTP.Limits(max_connections=1000, max_keepalive_connections=100, keepalive_expiry=5.0)
        self._inner: Any = _HTTP.HTTPTransport(limits=limits, proxy=proxy)
        self._most = max_reply_bytes

    def handle_request(self, request: Any) -> Any:
        """Send ``request``; count it when it reached the server; its body bounded."""
        try:
            response = self._inner.handle_request(request)
        except _HTTP.ReadTimeout:
            report_request()
            raise
        report_request()
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._most:
            response.close()
            raise ReplyTooLarge(
                f"the server's body was {int(declared):,} bytes, "
                f"over the bound of {self._most:,} (max_reply_bytes)"
            )
        return _HTTP.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_BoundedStream(response.stream, self._most),
            extensions=response.extensions,
        )

    def __enter__(self) -> _CountingTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(*exc)

    def close(self) -> None:
        """Close the pooled connections."""
        self._inner.close()


class _Bounded:
    """A response body's stream that raises :class:`ReplyTooLarge` once it passes ``most`` bytes."""

    def __init__(self, stream: Any, most: int) -> None:
        self._stream = stream
        self._most = most

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self._stream:
            read += len(chunk)
            if read > self._most:
                raise ReplyTooLarge(
                    f"the server's body passed the bound of {self._most:,} bytes (max_reply_bytes)"
                )
            yield chunk

    def close(self) -> None:
        """Close the connection's stream."""
        self._stream.close()


# The HTTP library checks a response's stream is its SyncByteStream (a class mypy sees as Any here).
_BoundedStream: Any = type("_BoundedStream", (_Bounded, _HTTP.SyncByteStream), {})


def server_slots(base_url: str, timeout: float = 2.0) -> int | None:
    """How many requests a server computes at once, where it says: ``total_slots`` of llama.cpp's ``/props``.

    None when it does not say (another server, an error, a body that is not that).
    Asked once, by :class:`OpenAILLM` with ``max_concurrency="auto"`` on this machine,
    of the server it was given.
    """
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        connection.request("GET", "/props")
        response = connection.getresponse()
        body = json.loads(response.read(1 << 20)) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()
    slots = body.get("total_slots") if isinstance(body, dict) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and 1 <= slots <= 512 else None
