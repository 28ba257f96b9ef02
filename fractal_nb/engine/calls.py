"""Every model call goes through here: admitted by the budget, metered, timed, validated and logged.

Before a call, its tokens are reserved against the graph's budgets
(:class:`~.limits.Allowance`); a call the budget refuses is never made. Each call
made is one row of the ledger (``llm_calls``), as the server saw it: ``attempts``
the requests that reached it, tokens as it reported them (``tokens_estimated``
when it reported none and the backend estimated them). A call that fails is a row
too, whatever it raised (a backend's own bug is logged, then raised as it is).

Tokens a backend does not report are estimated here (issue 37): a custom
``complete()`` that reports no usage spends the prompt's and the reply's
characters at :data:`~fractal_nb.llm.protocol.CHARS_PER_TOKEN` a token, marked
estimated, so a token budget holds for it too; a total no call can have (outside
0 to ``vocabulary.MAX_CALL_TOKENS``) is estimated the same way, the figure
reported kept in the row's ``refused_usage``. Budgets settle what the row says.

A call given a :class:`~fractal_nb.llm.protocol.ToolBox` lets a model that takes
tools call them first (docs/architecture/engine.md, "Tool calls"): its reservation
covers every round trip the tools may add, its row counts their tokens, and each
tool call is a row of its own (role ``tool:<name>``, no tokens).

The caller also watches the model's health across the workers of a run: after
``UNAVAILABLE_AFTER`` calls in a row that could not reach it (or
``FAILING_AFTER`` failed calls in a row of any kind) it declares an outage, and
the run stops with the graph paused and resumable instead of burning the rest
of its questions (docs/shell.md, "Exit codes").
"""

from __future__ import annotations

import contextvars
import json
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import FractalError, LLMError, LLMOutputError, LLMUnavailableError, NodeTimeLimitError
from ..llm.protocol import (
    LLM,
    Message,
    ToolBox,
    ToolCall,
    ToolUsingLLM,
    Usage,
    estimate_tokens,
    messages_tokens,
    metered,
    reply_bound,
    reply_rounds,
    reported_tokens,
    uses_tools,
)
from ..llm.quality import ReplyContext
from ..llm.schemas import role_of
from ..store import WorkerStore
from ..store.records import CallRow
from ..vocabulary import CallOutcome
from .limits import Allowance, Limits

T = TypeVar("T", bound=BaseModel)

UNAVAILABLE_AFTER = 3  # calls in a row that could not reach the model (each after the client's retries)
FAILING_AFTER = 8  # failed calls in a row of any kind: the model fails every call
_TOOLS_DONE_TOKENS = 64  # the message asking for the answer once the tools are done (prompts/tools_done.txt)
_REFUSED_ENTRIES = 20  # refused usage figures kept per row: well inside the column's 2,000 characters


class PendingCalls:
    """The ledger rows of one step's model calls until they land: with the step's write, or alone.

    One owner, the step that makes the calls: it opens the log (``with
    run.call.pending() as calls``), passes it to each call (``run.call(...,
    pending=calls)``) and hands the rows to the store write that lands them with its
    node (``with calls.landing() as rows``). Whatever has not landed when the block
    ends, a failed call's row included, is written on its own then.
    """

    def __init__(self, store: WorkerStore) -> None:
        self.rows: list[CallRow] = []
        self._store = store

    def add(self, rows: Sequence[CallRow]) -> None:
        """Keep a call's rows (its tool calls', then its own) until they land."""
        self.rows.extend(rows)

    @contextmanager
    def landing(self) -> Iterator[list[CallRow]]:
        """The rows, for one store write to land: gone once it did, ``discarded`` if the store refused it.

        A refused write (a FractalError, re-raised) leaves the rows to be written on
        their own, the calls that answered marked paid for and not used.
        """
        try:
            yield self.rows
        except FractalError:
            for row in self.rows:
                if row["outcome"] == CallOutcome.OK:
                    row["outcome"] = CallOutcome.DISCARDED.value
            raise
        self.rows.clear()

    def __enter__(self) -> PendingCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.rows:
            self._store.record_llm_calls(self.rows)
            self.rows.clear()


class ModelCaller:
    """Calls one model for one graph and writes a row per call to ``llm_calls``."""

    def __init__(self, llm: LLM, store: WorkerStore, graph_id: str) -> None:
        self.llm = llm
        self.store = store
        self.graph_id = graph_id
        self.outage: str | None = None  # why the model looks down, once it does
        self._failed_in_row = 0
        self._unavailable_in_row = 0
        self._health = threading.Lock()
        self.allowance = Allowance(Limits())  # what the calls may spend (arm() sets the budgets)
        self._deadline = threading.local()  # this worker thread's node time limit, while it holds one
        self._run_deadline: tuple[float, str] | None = None  # every thread's, while a run has a wall budget

    @property
    def model(self) -> str:
        """The model's name, as the ledger and the price table know it."""
        return str(getattr(self.llm, "model", type(self.llm).__name__))

    def pending(self) -> PendingCalls:
        """A step's call log, written with its write or alone when the step ends (:class:`PendingCalls`)."""
        return PendingCalls(self.store)

    def arm(self, limits: Limits, spent: Sequence[Mapping[str, Any]]) -> None:
        """Admit the calls from now on against ``limits``, ``spent`` (the graph's ledger) already spent."""
        self.allowance = Allowance(limits, spent)

    @contextmanager
    def time_limit(self, seconds: float | None) -> Iterator[None]:
        """While the block runs, this thread's model calls end at ``seconds`` from now (None: no limit).

        A call still running then is abandoned (its reply, if it comes, is dropped)
        and raises :class:`NodeTimeLimitError`.
        """
        if seconds is None:
            yield
            return
        self._deadline.at, self._deadline.limit = time.monotonic() + seconds, seconds
        try:
            yield
        finally:
            self._deadline.at = None

    @contextmanager
    def run_time_limit(self, seconds: float | None) -> Iterator[None]:
        """While the block runs, every model call ends ``seconds`` from now at the latest (None: no limit).

        The run's wall-time budget (``max_wall_s``) holds within a call: a call still
        running at the end is abandoned, not waited for (its reply, if it comes, is
        dropped), and raises :class:`NodeTimeLimitError`, which gives its question back
        with its tries and stops the run for the budget (engine/primitive.py).
        """
        if seconds is None:
            yield
            return
        self._run_deadline = (
            time.monotonic() + seconds,
            f"the run's wall-time budget of {seconds:g} s was reached",
        )
        try:
            yield
        finally:
            self._run_deadline = None

    def _ask(self, messages: list[Message], schema: type[BaseModel], tools: ToolBox | None) -> dict[str, Any]:
        if tools is not None and isinstance(self.llm, ToolUsingLLM):
            return self.llm.complete_with_tools(messages, schema, tools)
        return self.llm.complete(messages, schema)

    def _complete(
        self, messages: list[Message], schema: type[BaseModel], tools: ToolBox | None = None
    ) -> dict[str, Any]:
        deadlines = [] if self._run_deadline is None else [self._run_deadline]
        if (node_at := getattr(self._deadline, "at", None)) is not None:
            deadlines.append((node_at, f"the node's time limit of {self._deadline.limit:g} s was reached"))
        if not deadlines:
            return self._ask(messages, schema, tools)
        at, limit = min(deadlines)
        if at <= time.monotonic():
            raise NodeTimeLimitError(limit)
        replies: queue.Queue[tuple[dict[str, Any] | None, BaseException | None]] = queue.Queue(1)
        context = contextvars.copy_context()  # the usage meter of this call

        def call() -> None:
            try:
                replies.put((context.run(self._ask, messages, schema, tools), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting worker
                replies.put((None, exc))

        threading.Thread(target=call, name="fractal-timed-call", daemon=True).start()
        try:
            reply, error = replies.get(timeout=max(0.0, at - time.monotonic()))
        except queue.Empty:
            raise NodeTimeLimitError(limit) from None
        if error is not None:
            raise error
        assert reply is not None
        return reply

    def reset_health(self) -> None:
        """Forget an outage (a new run: the model may be back)."""
        with self._health:
            self.outage, self._failed_in_row, self._unavailable_in_row = None, 0, 0

    def _observe(self, error: LLMError | None) -> None:
        with self._health:
            if error is None:
                self._failed_in_row = self._unavailable_in_row = 0
                return
            self._failed_in_row += 1
            self._unavailable_in_row = (
                self._unavailable_in_row + 1 if isinstance(error, LLMUnavailableError) else 0
            )
            if self.outage is None and self._unavailable_in_row >= UNAVAILABLE_AFTER:
                self.outage = f"model unavailable: {error}"
            elif self.outage is None and self._failed_in_row >= FAILING_AFTER:
                self.outage = (
                    f"model failed {self._failed_in_row} calls in a row; the last: "
                    f"{type(error).__name__}: {error}"
                )

    def __call__(
        self,
        schema: type[T],
        messages: list[Message],
        *,
        node_id: str | None,
        worker: str | None,
        pending: PendingCalls | None = None,
        tools: ToolBox | None = None,
    ) -> T:
        """Return the model's answer as ``schema``; a failure is logged, then raised as LLMError.

        With ``pending``, the call's log rows go there, for the step to write with its
        own transaction (one statement fewer per call); without, they are written now.
        With ``tools``, a model that takes tools (:func:`~fractal_nb.llm.protocol.uses_tools`)
        may call them first; each tool call is logged as a row before the call's own.
        Anything else the backend raises (its bug) is logged as a failed call and raised as it is.
        """
        role, allowance = role_of(schema), self.allowance
        box = tools if uses_tools(self.llm, tools) else None
        # Refused (BudgetExhaustedError) before anything is sent: no request, no row.
        held = allowance.reserve(self.model, *call_bound(self.llm, messages, role, box))
        started = time.perf_counter()
        error: LLMError | None = None
        crash: Exception | None = None
        reply: object = None
        result: T | None = None
        spend = Spend(0, 0, False, 0, [])
        with metered() as usage:
            try:
                reply = self._complete(messages, schema, box)
                result = schema.model_validate(reply, context=ReplyContext.of(messages, schema))
            except ValidationError as exc:  # junk (llm/quality.py) from a backend that does not judge it
                error = LLMOutputError(f"{schema.__name__} reply refused: {exc}")
            except LLMError as exc:
                error = exc
            except Exception as exc:  # noqa: BLE001 - a backend's bug: logged as the call it was, raised below
                crash = exc
            finally:  # what budgets count, known before the row lands
                spend = spent(usage, messages, reply)
                allowance.settle(held, spend.prompt_tokens, spend.completion_tokens, spent=not usage.cached)
        failure = error or crash
        call = self._row(role, node_id, worker, spend, usage, time.perf_counter() - started, failure)
        rows = [*self._tool_rows(usage.tool_calls, node_id, worker, box), call]
        if crash is None:
            self._observe(error)
        if pending is not None:
            pending.add(rows)  # a failed call's row too: written when the step's log closes
        else:
            self.store.record_llm_calls(rows)
        if failure is not None:
            raise failure
        assert result is not None
        return result

    def _row(
        self,
        role: str,
        node_id: str | None,
        worker: str | None,
        spend: Spend,
        usage: Usage,
        latency_s: float,
        failure: Exception | None,
    ) -> CallRow:
        """The ledger's row of one call: its tokens as the server reported them (or marked estimated)."""
        return {
            "graph_id": self.graph_id,
            "node_id": node_id,
            "worker": worker,
            "role": role,
            "model": self.model,
            "prompt_tokens": spend.prompt_tokens,
            "completion_tokens": spend.completion_tokens,
            "tokens_estimated": spend.estimated or usage.cached,
            "attempts": spend.attempts,
            "corrections": max(0, usage.attempts - usage.tool_rounds - 1),  # a tool round trip is none
            "queue_s": usage.queue_s,
            "latency_s": latency_s,
            "mode": usage.mode,
            "outcome": (
                CallOutcome.ERROR if failure else CallOutcome.CACHED if usage.cached else CallOutcome.OK
            ).value,
            "error": None if failure is None else _printable(f"{type(failure).__name__}: {failure}")[:2000],
            "retry_sampling": _retry_sampling(usage.retries),
            "refused_usage": _refused_usage(spend.refused_usage),
        }

    def _tool_rows(
        self, calls: Sequence[ToolCall], node_id: str | None, worker: str | None, box: ToolBox | None
    ) -> list[CallRow]:
        """The ledger rows of a call's tool calls: role ``tool:<name>``, no tokens, no requests.

        A tool the model made up (not one the call offered: a source tool or a caller's
        own) is ``tool:unknown``; the row's ``error`` says which it called.
        """
        offered = {d["function"]["name"] for d in box.definitions()} if box is not None and calls else set()
        return [
            {
                "graph_id": self.graph_id,
                "node_id": node_id,
                "worker": worker,
                "role": f"tool:{c.name if c.name in offered else 'unknown'}",
                "model": self.model,
                "prompt_tokens": 0,  # the tool round trips' tokens are the call's own row's
                "completion_tokens": 0,
                "tokens_estimated": False,
                "attempts": 0,
                "corrections": 0,
                "queue_s": 0.0,
                "latency_s": c.latency_s,
                "mode": None,
                "outcome": (CallOutcome.OK if c.ok else CallOutcome.ERROR).value,
                "error": None if c.error is None else _printable(c.error)[:2000],
                "retry_sampling": None,
                "refused_usage": None,
            }
            for c in calls
        ]


@dataclass(frozen=True)
class Spend:
    """What one call spent, as its ledger row and the budgets count it (:func:`spent`)."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool  # some tokens estimated here or by the backend, not the server's
    attempts: int  # requests that reached the server; a backend that does not count them: its replies
    refused_usage: list[dict[str, object]]  # figures reported that were not taken, as they were sent


def spent(usage: Usage, messages: list[Message], reply: object) -> Spend:
    """What a call spent: the meter's figures, estimated where a backend gave none a call can have.

    A reply came back and the backend reported nothing (a custom ``complete()``):
    the prompt's and the reply's tokens estimated (4 characters a token), one reply.
    A total outside 0 to ``MAX_CALL_TOKENS`` (a backend that reported a negative or
    absurd figure): that figure estimated the same way, the one reported kept.

    >>> quiet = spent(Usage(), [{"role": "user", "content": "x" * 400}], {"answer": "y" * 92})
    >>> quiet.prompt_tokens, quiet.completion_tokens, quiet.estimated, quiet.attempts
    (104, 26, True, 1)
    >>> spent(Usage(prompt_tokens=-5, completion_tokens=7, attempts=1), [], None).refused_usage
    [{'prompt_tokens': -5}]
    """
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    estimated, refused = usage.estimated, list(usage.refused_usage)
    attempts = 0 if usage.cached else usage.attempts if usage.requests is None else usage.requests
    if reply is not None and not usage.attempts:  # a reply, and not a word of what it cost
        prompt, completion = messages_tokens(messages), estimate_tokens(_reply_text(reply))
        return Spend(prompt, completion, True, max(attempts, 1), refused)
    figures = {"prompt_tokens": prompt, "completion_tokens": completion}
    wrong = {name: value for name, value in figures.items() if reported_tokens(value) is None}
    if wrong:
        refused.append(dict(wrong))
        if "prompt_tokens" in wrong:
            prompt = messages_tokens(messages)
        if "completion_tokens" in wrong:
            completion = 0 if reply is None else estimate_tokens(_reply_text(reply))
        estimated = True
    return Spend(prompt, completion, estimated, attempts, refused)


def _reply_text(reply: object) -> str:
    """A reply as text, to estimate its tokens: JSON for a dict, as it is for text.

    >>> loop = {}
    >>> loop["self"] = loop
    >>> _reply_text({"answer": "Yes."}), _reply_text("Yes."), _reply_text(loop)
    ('{"answer": "Yes."}', 'Yes.', "{'self': {...}}")
    """
    if isinstance(reply, str):
        return reply
    try:
        return json.dumps(reply, default=str)
    except ValueError:  # a circular structure
        return str(reply)


def _refused_usage(entries: Sequence[Mapping[str, object]]) -> str | None:
    """The ledger's ``refused_usage``: the figures reported and not taken, as JSON, or None.

    >>> _refused_usage([{"prompt_tokens": 10**12, "completion_tokens": -3}])
    '[{"prompt_tokens": 1000000000000, "completion_tokens": -3}]'
    >>> len(json.loads(_refused_usage([{"prompt_tokens": "9" * 900}] * 5)))  # what fits in the column
    2
    """
    kept = list(entries[:_REFUSED_ENTRIES])
    while kept:
        text = _printable(json.dumps(kept, default=str))
        if len(text) <= 2000 or len(kept) == 1:
            return text[:2000]
        kept.pop()  # the first ones tell the story; the column holds 2,000 characters
    return None


def _retry_sampling(retries: list[tuple[int | None, float | None]]) -> str | None:
    """The ledger's ``retry_sampling``: each retry's seed and temperature as JSON, or None.

    >>> _retry_sampling([(12, 0.5)])
    '[{"seed": 12, "temperature": 0.5}]'
    """
    if not retries:
        return None
    # a call retries a few times; 40 entries stay well inside the column's 2,000 characters
    return json.dumps([{"seed": seed, "temperature": temperature} for seed, temperature in retries[:40]])


def call_bound(
    llm: object, messages: list[Message], role: str, tools: ToolBox | None = None
) -> tuple[int, int]:
    """The most (prompt, completion) tokens one call may spend, to reserve before it is made.

    Every round a backend may make (``reply_rounds``: the first request and its
    corrections, each resending the conversation with the refused reply) at the
    reply's bound; the prompt estimated at 3 characters a token, denser than
    ``messages_tokens``' 4, since a tokenizer may count more than the estimate.

    With ``tools`` (docs/architecture/engine.md, "Tool calls"): up to ``K = tools.max_calls``
    requests offering them (each makes a call, or is the answer) before those rounds,
    each prompt carrying the tool definitions and the exchange so far: each call made
    (its reply within the reply's bound, its result within ``tools.max_result_chars``).
    The k-th of those requests follows at most k - 1 calls (a request with calls makes
    at least one), the rounds after them at most K.

    >>> call_bound(object(), [{"role": "user", "content": "x" * 300}], "connect")
    (104, 320)
    """
    bound, rounds = reply_bound(llm, role), reply_rounds(llm)
    prompt = sum(len(m["content"]) // 3 + 4 for m in messages)
    # round k resends the prompt and the k refused replies before it (each within the bound)
    refused = bound * rounds * (rounds - 1) // 2
    if tools is None:
        return rounds * prompt + refused, rounds * bound
    most = tools.max_calls
    prompt += len(json.dumps(tools.definitions())) // 3 + _TOOLS_DONE_TOKENS
    call = bound + tools.max_result_chars // 3 + 8  # one call in the conversation: its reply and its result
    exchange = call * most * (most - 1) // 2 + rounds * most * call
    return (most + rounds) * prompt + exchange + refused, (most + rounds) * bound


def _printable(text: str) -> str:
    r"""``text`` without control characters (a server's error body may hold NUL, which the ledger refuses).

    >>> _printable("bad\x00 body\x1b[0m, line\nnext")
    'bad body[0m, line\nnext'
    """
    return "".join(c for c in text if c in "\n\t" or c.isprintable())
