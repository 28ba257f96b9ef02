"""The one seam between the engine and a model: ``complete(messages, schema) -> dict``.

Backends report token usage to the caller's meter (a context variable, so each
worker thread has its own) instead of changing the return type.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel


class Message(TypedDict):
    """A chat message as the OpenAI API takes it."""

    role: str
    content: str


@runtime_checkable
class LLM(Protocol):
    """A model that answers chat messages with a dict valid against a pydantic schema."""

    model: str

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """Return the model's structured answer, validated against ``schema``."""
        ...


@dataclass
class Usage:
    """What one metered call cost; backends add to it through the ``report_*`` functions.

    ``attempts`` counts completions received (a correction round trip is one more);
    ``requests`` the HTTP requests the server was sent (retries and failed ones
    included; 0 where the backend cannot see them); ``queue_s`` the time spent
    waiting for a free slot before the first request; ``mode`` how structured
    output was asked for; ``retries`` the (seed, temperature) each retry after a
    refused reply was sampled with (llm/openai_llm.py varies them).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False
    requests: int = 0
    queue_s: float = 0.0
    mode: str | None = None
    retries: list[tuple[int | None, float | None]] = field(default_factory=list)


_meter: ContextVar[Usage | None] = ContextVar("fractal_nb_llm_meter", default=None)


@contextmanager
def metered() -> Iterator[Usage]:
    """Collect the usage that backends report while the block runs (in this thread)."""
    usage = Usage()
    token = _meter.set(usage)
    try:
        yield usage
    finally:
        _meter.reset(token)


def report_usage(prompt_tokens: int, completion_tokens: int, *, cached: bool = False) -> None:
    """Add one request's tokens to the current meter, if someone is metering."""
    usage = _meter.get()
    if usage is not None:
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.attempts += 1
        usage.cached = usage.cached or cached


def report_request() -> None:
    """Count one HTTP request sent to the server (a transport retry is another)."""
    usage = _meter.get()
    if usage is not None:
        usage.requests += 1


def report_retry(seed: int | None, temperature: float | None) -> None:
    """Record how a retry after a refused reply was sampled (its seed and temperature)."""
    usage = _meter.get()
    if usage is not None:
        usage.retries.append((seed, temperature))


def report_wait(queue_s: float, mode: str | None) -> None:
    """Record the time spent waiting for a slot, and the structured-output mode used."""
    usage = _meter.get()
    if usage is not None:
        usage.queue_s += queue_s
        usage.mode = mode


def estimate_tokens(text: str) -> int:
    """Rough token count (4 characters a token) for backends that report none."""
    return max(1, len(text) // 4)


def messages_tokens(messages: list[Message]) -> int:
    """Estimated prompt tokens of a message list."""
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)
