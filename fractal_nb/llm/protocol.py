"""The one seam between the engine and a model: ``complete(messages, schema) -> dict``.

Backends report token usage to the caller's meter (a context variable, so each
worker thread has its own) instead of changing the return type. Budgets reserve
a call's tokens before it is made (engine/limits.py): :func:`reply_bound` says how
long its reply may be.

A model that can call tools (OpenAI tool calling) also offers
``complete_with_tools(messages, schema, tools)`` (:class:`ToolUsingLLM`): it may
call the :class:`ToolBox`'s tools, at most ``tools.max_calls`` times, before its
structured answer; each call is reported to the meter (:func:`report_tool_call`)
and logged as its own ledger row (docs/architecture/engine.md, "Tool calls").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

from ..vocabulary import MAX_CALL_TOKENS


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


class ToolBox(Protocol):
    """Tools a model may call before it answers (docs/architecture/engine.md, "Tool calls").

    ``definitions()`` are OpenAI tool definitions (``{"type": "function", "function":
    {name, description, parameters}}``); ``run(name, arguments)`` returns the result as
    text for the model, or raises :class:`~fractal_nb.errors.FractalError` whose message
    the model reads instead (an unknown source, a bad argument). ``max_calls`` bounds the
    tool calls of one model call; ``max_result_chars`` each result's length (a longer one
    is cut), so a budget can reserve the round trips before the call is made.
    """

    max_calls: int
    max_result_chars: int

    def definitions(self) -> list[dict[str, Any]]:
        """The tools, as the OpenAI API's ``tools`` parameter takes them."""
        ...

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call; its result as text (FractalError: a refusal the model reads)."""
        ...


@runtime_checkable
class ToolUsingLLM(LLM, Protocol):
    """A model that may call tools before its structured answer.

    ``takes_tools`` is False when it will not call them now (turned off, or its
    server refused them once): callers then use :meth:`LLM.complete` and reserve no
    round trips for tools.
    """

    @property
    def takes_tools(self) -> bool:
        """Whether a call with tools will offer them to the model."""
        ...

    def complete_with_tools(
        self, messages: list[Message], schema: type[BaseModel], tools: ToolBox
    ) -> dict[str, Any]:
        """Like :meth:`LLM.complete`, the model calling ``tools`` (at most ``tools.max_calls``) first."""
        ...


def uses_tools(llm: object, tools: ToolBox | None) -> bool:
    """Whether a call of ``llm`` with ``tools`` goes through :meth:`ToolUsingLLM.complete_with_tools`.

    >>> uses_tools(object(), None)
    False
    """
    return tools is not None and isinstance(llm, ToolUsingLLM) and llm.takes_tools


@dataclass(frozen=True)
class ToolCall:
    """One tool call a model made: the tool, its arguments, and how it went.

    ``ok`` False: the tool refused (``error`` says why, and the model read it);
    ``result_chars`` the length of the text the model got back; ``latency_s`` the
    time the tool took.
    """

    name: str
    arguments: dict[str, Any]
    ok: bool
    error: str | None = None
    result_chars: int = 0
    latency_s: float = 0.0


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
    (llm/openai_llm.py varies them; the ledger's ``retry_sampling``); ``tool_calls``
    the tool calls the model made, in order (each a ledger row of its own);
    ``tool_rounds`` the completions that offered tools (among ``attempts``: not corrections);
    ``refused_usage`` the usage figures a server reported that were not taken (not a whole
    number of tokens from 0 to :data:`MAX_REPORTED_TOKENS`: estimated instead), one entry per
    completion, as the server sent them (the ledger's ``refused_usage``).
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
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_rounds: int = 0
    refused_usage: list[dict[str, object]] = field(default_factory=list)


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
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached: bool = False,
    estimated: bool = False,
    tool_round: bool = False,
    refused: Mapping[str, object] | None = None,
) -> None:
    """Add one completion's tokens to the current meter, if someone is metering.

    ``estimated``: the server reported no usage (or figures no completion can have), so
    the backend estimated the tokens; ``tool_round``: a completion of a request that
    offered tools (not a correction); ``refused``: the figures the server reported that
    were not taken (:func:`reported_tokens` refused them), by name, as it sent them.
    """
    usage = _meter.get()
    if usage is not None:
        if refused:
            usage.refused_usage.append(dict(refused))
        usage.tool_rounds += tool_round
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


def report_tool_call(call: ToolCall) -> None:
    """Record one tool call the model made (the engine logs it as a ledger row)."""
    usage = _meter.get()
    if usage is not None:
        usage.tool_calls.append(call)


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
    # the tracks strategy (engine/strategies/tracks.py): cited findings take room
    "tracks_seed": 768,
    "track_synthesis": 1024,
    "aggregate": 768,
    # the thinkon strategy (engine/strategies/thinkon.py): a plan, a sub-goal or a level's result
    "think": 768,
    "eval": 768,
    # the baseline and the judge of compare() (fractal_nb/exploration/comparison.py)
    "single": 1024,
    "judge": 320,
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


CHARS_PER_TOKEN = 4
"""The estimate's ratio: about 4 characters a token, as OpenAI's tokenizers count English."""
MAX_REPORTED_TOKENS = MAX_CALL_TOKENS
"""The most tokens (prompt or completion) one completion's usage may report: the ledger's bound
on a call (``vocabulary.MAX_CALL_TOKENS``), far past any model's context."""


def estimate_tokens(text: str) -> int:
    """Rough token count (:data:`CHARS_PER_TOKEN` characters a token) for backends that report none.

    >>> estimate_tokens("Why is the sky blue?")
    5
    """
    return max(1, len(text) // CHARS_PER_TOKEN)


def reported_tokens(value: object) -> int | None:
    """A server's token figure as the ledger takes it, or None when no completion can have it.

    A whole number from 0 to :data:`MAX_REPORTED_TOKENS` (``12.0`` is 12); anything
    else (negative, absurd, fractional, text, a boolean, missing) is None, and the
    backend estimates the tokens instead.

    >>> reported_tokens(512), reported_tokens(12.0), reported_tokens(10**12), reported_tokens(-3)
    (512, 12, None, None)
    >>> reported_tokens(True), reported_tokens("12"), reported_tokens(None)
    (None, None, None)
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPORTED_TOKENS:
        return None
    return value


def messages_tokens(messages: list[Message]) -> int:
    """Estimated prompt tokens of a message list."""
    return sum(estimate_tokens(m["content"] or "") + 4 for m in messages)


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
