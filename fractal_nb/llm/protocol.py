"""The one seam between the engine and a model: ``complete(messages, schema) -> dict``.

Backends report token usage to the caller's meter (a context variable, so each
worker thread has its own) instead of changing the return type. Budgets reserve
a call's tokens before it is made (engine/limits.py): :func:`reply_bound` says how
long its reply may be.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
    ``requests`` the HTTP requests that reached the server (retries and failed ones
    included; a connection refused is none; None where the backend does not count
    them); ``estimated`` whether some tokens were estimated here because the server
    reported none; ``queue_s`` the time spent waiting for a free slot before the
    first request; ``mode`` how structured output was asked for; ``retries`` the
    (seed, temperature) each retry after a refused reply was sampled with
    (llm/openai_llm.py varies them; the ledger's ``retry_sampling``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False
    requests: int | None = None
    estimated: bool = False
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


def report_usage(
    prompt_tokens: int, completion_tokens: int, *, cached: bool = False, estimated: bool = False
) -> None:
    """Add one completion's tokens to the current meter, if someone is metering.

    ``estimated``: the server reported no usage, so the backend estimated the tokens.
    """
    usage = _meter.get()
    if usage is not None:
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.attempts += 1
        usage.cached = usage.cached or cached
        usage.estimated = usage.estimated or estimated


def report_request() -> None:
    """Count one HTTP request that reached the server (a transport retry is another)."""
    usage = _meter.get()
    if usage is not None:
        usage.requests = (usage.requests or 0) + 1


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


REPLY_BOUNDS = {
    "seed": 768,
    "answer": 640,
    "connect": 320,
    "synthesize": 512,
    "harvest": 768,
    "widen": 512,
    # the tracks strategy (engine/tracks.py): cited findings take room
    "tracks_seed": 768,
    "track_synthesis": 1024,
    "aggregate": 768,
}
"""Reply length bounds per role (tokens): enough for the schema's fields, never unbounded."""


def reply_bound(llm: object, role: str) -> int:
    """The most completion tokens one reply of ``role`` may take, for reserving a budget before a call.

    The backend's own bound when it has one (``max_tokens``: role -> tokens, as
    :class:`~fractal_nb.llm.openai_llm.OpenAILLM` keeps it, looked up through a
    wrapper's ``inner`` model), else :data:`REPLY_BOUNDS`.

    >>> reply_bound(object(), "connect"), reply_bound(object(), "other")
    (320, 768)
    """
    model: object = llm
    while model is not None:
        bounds = getattr(model, "max_tokens", None)
        if isinstance(bounds, Mapping) and isinstance(bounds.get(role), int):
            return int(bounds[role])
        model = getattr(model, "inner", None)
    return REPLY_BOUNDS.get(role, max(REPLY_BOUNDS.values()))


def estimate_tokens(text: str) -> int:
    """Rough token count (4 characters a token) for backends that report none."""
    return max(1, len(text) // 4)


def messages_tokens(messages: list[Message]) -> int:
    """Estimated prompt tokens of a message list."""
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)


def reply_rounds(llm: object) -> int:
    """How many requests one call of ``llm`` may make: its first, then ``output_retries`` corrections.

    A correction resends the conversation with the refused reply in it, so a
    budget reserves every round (engine/limits.py). Looked up through a wrapper's
    ``inner`` model; 1 for a backend without corrections.

    >>> reply_rounds(object())
    1
    """
    model: object = llm
    while model is not None:
        retries = getattr(model, "output_retries", None)
        if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0:
            return retries + 1
        model = getattr(model, "inner", None)
    return 1
