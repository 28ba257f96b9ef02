"""``OpenAILLM``: the OpenAI API, or any OpenAI-compatible server (llama.cpp, vLLM, Ollama).

Structured output: the first call probes, once per instance and without retries,
three modes in turn and remembers the first one the server accepts:

1. ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, Ollama);
2. ``response_format={"type": "json_object", "schema": ...}`` (llama.cpp's server,
   which answers HTTP 500 to ``json_schema`` and enforces this schema by grammar);
3. no ``response_format``: the schema described in the system message (the only mode
   where the server does not enforce it), the reply parsed as text.

Every reply is repaired with ``json_repair`` and validated against the schema; a bad
reply is sent back with a correction, ``output_retries`` times. A retry after a refused
reply (a correction, or the same prompt asked again after one) is sampled differently:
the next ``seed`` and a higher temperature (:func:`retry_sampling`), reported to the
meter. Transport retries (429, 5xx, timeouts) are the client's own ``max_retries``. Requests
in flight are bounded by ``max_concurrency`` (for a server on this machine, the slots it says
it has, else 1), each carries a ``max_tokens`` bound and, when given, a ``seed``. This is
the only module that sees ``openai``; its errors leave as :class:`~fractal_nb.errors.LLMError`.

What a server sends back is read as data, never trusted (issue 37): a body over
``max_reply_bytes``, one that is not UTF-8 (or whose text holds a lone surrogate,
which no store can keep), not JSON, or not a chat completion is a bad reply,
corrected and retried as a reply that is not valid against the schema is, then
:class:`~fractal_nb.errors.LLMOutputError`. A usage figure that is not a whole
number of tokens from 0 to :data:`~fractal_nb.llm.protocol.MAX_REPORTED_TOKENS`
(10^12, -10^6, text) is estimated instead and the figure sent kept for the ledger
(``refused_usage``).

Tool calls (:meth:`OpenAILLM.complete_with_tools`, docs/architecture.md "Tool calls"):
the messages go with ``tools`` and ``tool_choice="auto"``; each tool call the reply
makes is run through the :class:`~fractal_nb.llm.protocol.ToolBox` and its result
appended, until the model answers without a tool call or ``tools.max_calls`` calls
were made. A reply without tool calls that is valid against the schema is the
answer; otherwise the structured answer is asked for with tools off, the tool
exchange in the conversation, through the path above. A server that refuses
``tools`` the first time (HTTP 400, 422 or 500) is remembered as one without them.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import math
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import json_repair
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import BaseModel

from ..errors import (
    FractalError,
    InvalidInputError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from ..loopback import is_loopback
from ..prompts import render
from .protocol import (
    REPLY_BOUNDS,
    Message,
    ToolBox,
    ToolCall,
    estimate_tokens,
    messages_tokens,
    report_request,
    report_retry,
    report_tool_call,
    report_usage,
    report_wait,
    reported_tokens,
)
from .quality import ReplyContext, correction, describe
from .retries import FailureCount
from .schemas import role_of

_MODES = ("json_schema", "json_object", "text")
MAX_TOKENS = REPLY_BOUNDS  # the default reply length bounds per role (tokens)
_REJECTS_FORMAT = {400, 422, 500}  # what servers answer to a response_format they lack
_REJECTS_TOOLS = {400, 422, 500}  # …and to ``tools`` they lack
_CUT = " …[cut]"  # ends a tool result longer than the tool box allows
_PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key, the client insists on one
_SNIPPET = 300
MAX_REPLY_BYTES = 2 << 20
"""The longest body read from the server by default (2 MiB): a reply of the longest default
bound (1,024 tokens) takes a few kilobytes, and this leaves room for any ``max_tokens`` a model
takes, escaped; past it the reply is refused unread (``max_reply_bytes``)."""
# The HTTP library the installed openai client is built on (httpx; httpx2 in newer releases).
_HTTP: Any = sys.modules[
    next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client").__module__.partition(".")[0]
]
RETRY_TEMPERATURE_STEP = 0.3  # each retry after a refusal samples this much hotter…
MAX_RETRY_TEMPERATURE = 1.0  # …up to this (a higher temperature set by the caller is kept)


class _BadBody(Exception):
    """The server answered 200 with something that is not a chat completion."""


class _ToolsRefused(Exception):
    """The server refused a request for its ``tools`` (it has no tool calling)."""


class _ReplyTooLarge(Exception):
    """The server's body passed ``max_reply_bytes`` (raised by :class:`_CountingTransport` as it reads)."""


def _check_options(
    output_retries: int, timeout: float, seed: int | None, tool_calls: object, max_reply_bytes: int
) -> None:
    """Refuse an option :class:`OpenAILLM` cannot work with, naming it, before a client is built."""
    if output_retries < 0:
        raise InvalidInputError(f"output_retries must be 0 or more, not {output_retries}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidInputError(f"seed must be an integer or None, not {seed!r}")
    if tool_calls not in (True, False, "auto") or (tool_calls != "auto" and not isinstance(tool_calls, bool)):
        raise InvalidInputError(f"tool_calls must be True, False or 'auto', not {tool_calls!r}")
    if isinstance(max_reply_bytes, bool) or not isinstance(max_reply_bytes, int) or max_reply_bytes < 1024:
        raise InvalidInputError(
            f"max_reply_bytes must be an integer >= 1024 (bytes), not {max_reply_bytes!r}"
        )


def _client(
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


def _concurrency(value: object, *, ask_slots: bool) -> int | None:
    """Requests in flight at once (None: no bound); ``"auto"``: 1 until the server is asked, else none."""
    if value == "auto":
        return 1 if ask_slots else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidInputError(f"max_concurrency must be an integer >= 1 or None, not {value!r}")
    return value


class OpenAILLM:
    """A model behind the OpenAI chat completions API.

    Parameters
    ----------
    model
        Model name; else ``FRACTAL_NB_MODEL``, then ``OPENAI_MODEL``.
    base_url
        Server URL, e.g. ``"http://localhost:8080/v1"``; else ``OPENAI_BASE_URL``, else OpenAI.
    api_key
        Else ``OPENAI_API_KEY``; with a ``base_url`` and no key, a placeholder is sent.
    client
        A pre-built ``openai.OpenAI`` (tests, custom transports); then ``base_url``,
        ``api_key``, ``timeout`` and ``max_retries`` are the client's own, and its
        HTTP requests are not counted one by one (the ledger counts the replies).
    timeout
        Seconds per HTTP request, counted from when it is sent (a request waiting
        for a slot is not timing out).
    max_retries
        The client's retries of 429, 5xx and timeouts, with backoff (never on the
        one-time probe of the structured-output mode).
    output_retries
        Correction round trips after a reply that is not valid against the schema.
    temperature
        Sampling temperature; None leaves it out (some reasoning models reject it).
    seed
        Sent as ``seed`` with every request, for servers that sample reproducibly.
    max_tokens
        The length bound of each reply, per role (``seed``, ``answer``, ``connect``,
        ``synthesize``, ``harvest``) or one number for all; every request carries one.
    max_concurrency
        Requests in flight at once from this model object (all workers share it);
        the rest wait for a slot. By default, for a server on this machine, as many
        as it says it computes at once (``total_slots`` of llama.cpp's ``/props``,
        asked once at the first call) and else 1 (a local server computes few at a
        time, and a request queued there would time out while the server still
        works for it); unbounded for a remote API. None: unbounded.
    tool_calls
        Whether :meth:`complete_with_tools` offers the tools to the model: ``"auto"``
        (the default) offers them and, when the server refuses ``tools`` on the
        first try (HTTP 400, 422 or 500), goes on without them from then on;
        ``True`` offers them and a refusal is an error; ``False`` never offers them.
    max_reply_bytes
        The longest body read from the server (default :data:`MAX_REPLY_BYTES`); a longer
        one is refused as a bad reply, unread past the bound. Not applied to a pre-built
        ``client`` (its transport is its own).
    sampling
        Sampling settings beyond OpenAI's, sent with every request as the server names
        them: ``{"repeat_penalty": 1.15}`` for llama.cpp's server (what
        :class:`~fractal_nb.llm.local_server.LocalModelServer` sends: a small model
        caught in a loop repeats a sentence until its reply is cut), ``{"top_k": 40}``.
        The fields this class sets itself (``temperature``, ``seed``, ``max_tokens``,
        ``response_format``, ``tools`` …) cannot be given here.

    Examples
    --------
    >>> llm = OpenAILLM("qwen2.5-7b", base_url="http://localhost:8080/v1", seed=11)  # doctest: +SKIP
    >>> llm.complete([{"role": "user", "content": "Why?"}], Answer)  # doctest: +SKIP
    {'answer': '...', 'confidence': 0.7, 'sub_questions': [], 'saturation': None}
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        client: openai.OpenAI | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        output_retries: int = 1,
        temperature: float | None = 0.2,
        seed: int | None = None,
        max_tokens: int | Mapping[str, int] | None = None,
        max_concurrency: int | None | Literal["auto"] = "auto",
        tool_calls: bool | Literal["auto"] = "auto",
        max_reply_bytes: int = MAX_REPLY_BYTES,
        sampling: Mapping[str, object] | None = None,
    ) -> None:
        model = model or os.environ.get("FRACTAL_NB_MODEL") or os.environ.get("OPENAI_MODEL")
        if not model:
            raise InvalidInputError(
                "OpenAILLM needs a model: pass model=... or set FRACTAL_NB_MODEL (or OPENAI_MODEL)"
            )
        _check_options(output_retries, timeout, seed, tool_calls, max_reply_bytes)
        self.sampling = _sampling(sampling)
        if client is None:
            client = _client(base_url, api_key, timeout, max_retries, max_reply_bytes)
        self.model = model
        self.base_url = str(client.base_url)
        self.output_retries = output_retries
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = _max_tokens(max_tokens)
        # "auto" on this machine: 1 until the first call asks the server how many it computes at once.
        self._ask_slots = max_concurrency == "auto" and is_loopback(urlsplit(self.base_url).hostname or "")
        max_concurrency = _concurrency(max_concurrency, ask_slots=self._ask_slots)
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self._client = client
        self._mode: int | None = None  # index into _MODES, once the probe found what the server takes
        self._probe = threading.Condition()  # the workers waiting while one finds the mode
        self._probing = False
        self._refused = FailureCount()  # per prompt: replies refused since its last accepted one
        self.tool_calls = tool_calls
        # Whether the server takes ``tools``: None until a request with them was answered.
        self._tools: bool | None = None if tool_calls == "auto" else tool_calls

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def mode(self) -> str | None:
        """The structured-output mode the server accepted (None until the first call found it)."""
        return None if self._mode is None else _MODES[self._mode]

    @property
    def takes_tools(self) -> bool:
        """Whether :meth:`complete_with_tools` offers tools (False: turned off, or the server refused)."""
        return self._tools is not False

    def close(self) -> None:
        """Close the HTTP connections the client keeps open (idempotent)."""
        self._client.close()

    def __enter__(self) -> OpenAILLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """Return the model's answer to ``messages`` as a dict valid against ``schema``.

        The first call finds the structured-output mode (one probe per object, shared
        by every worker, without the client's retries); later calls use that mode, and
        a later 5xx is an error, never a reason to change it.

        Raises
        ------
        LLMTimeoutError
            The request timed out, after the client's retries.
        LLMUnavailableError
            The server cannot be reached, refuses the key, lacks the model, or fails (5xx).
        LLMOutputError
            No schema-valid reply after repair and ``output_retries`` corrections.
        LLMError
            Any other failure of the server or the connection.
        """
        role = role_of(schema)
        if self._mode is None and self._take_probe():
            try:
                return self._probe_mode(messages, schema, role)
            finally:
                with self._probe:
                    self._probing = False
                    self._probe.notify_all()
        assert self._mode is not None  # _take_probe returns False only once it is known
        return self._complete_in(self._mode, messages, schema, role, self._client)

    def _take_probe(self) -> bool:
        """Whether this worker finds the mode: the first does, the others wait until the mode is known.

        They are let go as soon as the server took a mode, not after the probe's
        correction round trips (a small model's take minutes); a probe that failed
        hands the probe to the next.
        """
        with self._probe:
            while self._mode is None and self._probing:
                self._probe.wait()
            if self._mode is not None:
                return False
            self._probing = True
            return True

    def complete_with_tools(
        self, messages: list[Message], schema: type[BaseModel], tools: ToolBox
    ) -> dict[str, Any]:
        """Like :meth:`complete`, the model calling ``tools`` first (at most ``tools.max_calls`` calls).

        Each call is run through ``tools`` and reported to the meter
        (:func:`~fractal_nb.llm.protocol.report_tool_call`); a refusal by the tool
        (a :class:`~fractal_nb.errors.FractalError`) is the result the model reads.
        Raises as :meth:`complete` does.
        """
        if not self.takes_tools:
            return self.complete(messages, schema)
        role = role_of(schema)
        convo: list[Message] = list(messages)
        made = 0
        while made < tools.max_calls:
            try:
                text, calls = self._tool_request(convo, role, tools)
            except _ToolsRefused:  # the server has no tool calling: the rest of the calls go without
                self._tools = False
                return self.complete(messages, schema)
            except _BadBody:
                break  # the structured path below asks again, with its own corrections
            if not calls:
                try:  # an answer already: valid, it saves a request
                    return _parse(text, schema, ReplyContext.of(convo, schema))
                except ValueError:
                    break
            calls = calls[: tools.max_calls - made]  # the conversation keeps the calls made, no more
            convo = [*convo, _assistant_calls(text, calls)]
            for call in calls:
                convo = [*convo, _tool_result(call, _run_tool(tools, call))]
            made += len(calls)
        if made:
            convo = [*convo, {"role": "user", "content": render("tools_done")}]
        return self.complete(convo, schema)

    def _tool_request(
        self, convo: list[Message], role: str, tools: ToolBox
    ) -> tuple[str, list[dict[str, Any]]]:
        """One request offering the tools: the reply's text and its tool calls ({id, name, arguments})."""
        client = self._client if self._tools else self._client.with_options(max_retries=0)  # a probe
        options: dict[str, Any] = {
            "max_tokens": self.max_tokens[role],
            "tools": tools.definitions(),
            "tool_choice": "auto",
            **self._extra(),
        }
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.seed is not None:
            options["seed"] = self.seed
        waited = time.perf_counter()
        try:
            with self._slot():
                report_wait(time.perf_counter() - waited, "tools")
                response = _completion(client, self.model, convo, options)
        except openai.APIStatusError as exc:
            if self._tools is None and exc.status_code in _REJECTS_TOOLS:
                raise _ToolsRefused(str(exc)) from exc
            raise _translate(exc, self.model, self.base_url) from exc
        except openai.OpenAIError as exc:
            raise _translate(exc, self.model, self.base_url) from exc
        self._tools = True
        message = _message(response)
        text, calls = _text(message), _tool_calls(message)
        _report_usage(
            response, messages_tokens(convo), estimate_tokens(text + json.dumps(calls)), tool_round=True
        )
        return text, calls

    def _probe_mode(self, messages: list[Message], schema: type[BaseModel], role: str) -> dict[str, Any]:
        """Ask in each mode in turn, without retries, until the server takes one; remember it."""
        if self._ask_slots:  # once: the slots the server has, before the first request takes one
            self._ask_slots = False
            if (slots := server_slots(self.base_url)) and slots > 1:
                self.max_concurrency = slots
                self._slots = threading.BoundedSemaphore(slots)
        probe = self._client.with_options(max_retries=0)
        for index in range(len(_MODES)):
            try:
                return self._complete_in(index, messages, schema, role, probe, probing=True)
            except openai.OpenAIError as exc:
                if index + 1 == len(_MODES) or not _rejects_format(exc):
                    raise _translate(exc, self.model, self.base_url) from exc
        raise AssertionError("unreachable: the last mode raises")  # pragma: no cover

    def _complete_in(
        self,
        index: int,
        messages: list[Message],
        schema: type[BaseModel],
        role: str,
        client: openai.OpenAI,
        *,
        probing: bool = False,
    ) -> dict[str, Any]:
        """Ask in one structured-output mode, correcting bad replies; openai errors propagate when probing."""
        mode = _MODES[index]
        convo = _with_schema_note(messages, schema) if mode == "text" else list(messages)
        judged = ReplyContext.of(convo, schema)  # against the prompt as sent, then the corrections too
        prompt = _prompt_key(messages, schema)
        problem = ""
        for _ in range(self.output_retries + 1):
            try:
                text = self._request(mode, convo, schema, role, client, self._refused[prompt])
            except _BadBody as exc:
                problem = str(exc)
                self._refused.failed(prompt)
                continue
            except openai.OpenAIError as exc:
                if probing:
                    raise
                raise _translate(exc, self.model, self.base_url) from exc
            if self._mode != index:  # the server took this mode: every later call uses it
                with self._probe:
                    self._mode = index
                    self._probe.notify_all()  # the workers waiting for the probe go on
            try:
                result = _parse(text, schema, judged)
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                self._refused.failed(prompt)
                message, wording = correction(schema, exc)
                problem = describe(exc)
                judged = judged.after(wording)  # a reply that copies the correction is no answer
                if text:
                    convo = [*convo, {"role": "assistant", "content": text}]
                convo = [*convo, {"role": "user", "content": message}]
            else:
                self._refused.succeeded(prompt)
                return result
        raise LLMOutputError(
            f"{self.model} gave no valid {schema.__name__} in {self.output_retries + 1} "
            f"attempts ({mode} mode); last error: {problem}"
        )

    def _request(
        self,
        mode: str,
        convo: list[Message],
        schema: type[BaseModel],
        role: str,
        client: openai.OpenAI,
        refused: int = 0,
    ) -> str:
        """Send one chat completion request (after waiting for a slot) and return the reply text.

        After ``refused`` refused replies to the same prompt, it is sampled as :func:`retry_sampling` says.
        """
        options: dict[str, Any] = {"max_tokens": self.max_tokens[role], **self._extra()}
        seed, temperature = retry_sampling(self.seed, self.temperature, refused)
        if temperature is not None:
            options["temperature"] = temperature
        if seed is not None:
            options["seed"] = seed
        if refused:
            report_retry(seed, temperature)
        json_schema = _json_schema(schema)
        if mode == "json_schema":
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False},
            }
        elif mode == "json_object":
            options["response_format"] = {"type": "json_object", "schema": json_schema}
        waited = time.perf_counter()
        with self._slot():
            report_wait(time.perf_counter() - waited, mode)
            response = _completion(client, self.model, convo, options)
        text = _text(_message(response))
        _report_usage(response, messages_tokens(convo), estimate_tokens(text))
        return text

    def _extra(self) -> dict[str, Any]:
        """The ``sampling`` settings as the openai client sends fields it does not know."""
        return {"extra_body": dict(self.sampling)} if self.sampling else {}

    @contextmanager
    def _slot(self) -> Iterator[None]:
        """Hold one of ``max_concurrency`` slots while a request is in flight."""
        if self._slots is None:
            yield
            return
        with self._slots:
            yield


def _run_tool(tools: ToolBox, call: dict[str, Any]) -> str:
    """Run one tool call; the text the model reads back (a refusal's message too), cut to the box's bound."""
    started = time.perf_counter()
    arguments: Any = None
    error: str | None
    try:
        arguments = json.loads(call["arguments"] or "{}")
        if not isinstance(arguments, dict):
            raise InvalidInputError(f"the arguments of {call['name']} must be a JSON object")
        text, error = tools.run(call["name"], arguments), None
    except json.JSONDecodeError as exc:
        text = error = f"the arguments of {call['name']} were not JSON: {exc}"
    except FractalError as exc:
        text = error = f"error: {exc}"
    if len(text) > tools.max_result_chars:
        text = text[: max(0, tools.max_result_chars - len(_CUT))] + _CUT
    report_tool_call(
        ToolCall(
            name=str(call["name"])[:100],
            arguments=arguments if isinstance(arguments, dict) else {"raw": str(call["arguments"])[:500]},
            ok=error is None,
            error=error,
            result_chars=len(text),
            latency_s=time.perf_counter() - started,
        )
    )
    return text


def _assistant_calls(text: str, calls: list[dict[str, Any]]) -> Message:
    """The model's reply that made ``calls``, as the conversation resends it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }
    return cast(Message, message)


def _tool_result(call: dict[str, Any], text: str) -> Message:
    """A tool call's result, as the conversation carries it back to the model."""
    return cast(Message, {"role": "tool", "tool_call_id": call["id"], "content": text})


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


_OWN_FIELDS = frozenset(
    "model messages max_tokens max_completion_tokens temperature seed response_format tools tool_choice "
    "stream n".split()
)


def _sampling(sampling: Mapping[str, object] | None) -> dict[str, object]:
    """``sampling`` checked: setting names mapped to JSON values, none a field OpenAILLM sets itself."""
    if sampling is None:
        return {}
    if not isinstance(sampling, Mapping) or not all(isinstance(k, str) and k for k in sampling):
        raise InvalidInputError(f"sampling must map setting names to values, not {sampling!r}")
    if own := sorted(_OWN_FIELDS & set(sampling)):
        raise InvalidInputError(f"sampling cannot set {', '.join(own)}: OpenAILLM sets them itself")
    try:
        json.dumps(dict(sampling), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"sampling must hold JSON values: {exc}") from exc
    return dict(sampling)


def _completion(
    client: openai.OpenAI, model: str, convo: list[Message], options: Mapping[str, Any]
) -> ChatCompletion:
    """Send one request; the reply, or :class:`_BadBody` when the body is no chat completion we can read.

    The openai client parses a 200 body without wrapping its errors: bytes that are not
    UTF-8 raise UnicodeDecodeError, text that is not JSON JSONDecodeError, and a body
    with another content type comes back as a str. Its own errors propagate.
    """
    try:
        response = client.chat.completions.create(
            model=model, messages=cast("list[ChatCompletionMessageParam]", convo), **options
        )
    except UnicodeDecodeError as exc:
        raise _BadBody(f"the server's body was not UTF-8 ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise _BadBody(f"the server's body was not JSON ({exc})") from exc
    except _ReplyTooLarge as exc:
        raise _BadBody(str(exc)) from exc
    if not isinstance(response, ChatCompletion):
        raise _BadBody(f"the server's body was not a chat completion: {_short(response)}")
    return response


def _message(response: ChatCompletion) -> object:
    """The first choice's message (None when the reply has no choice)."""
    choices = getattr(response, "choices", None)
    first = choices[0] if isinstance(choices, list) and choices else None
    return getattr(first, "message", None)


def _text(message: object) -> str:
    """The message's text ("" for none); :class:`_BadBody` when it is not text a store can keep."""
    content = getattr(message, "content", None)
    if content is None:
        return ""
    if not isinstance(content, str):
        raise _BadBody(f"the reply's content was not text but {type(content).__name__}: {_short(content)}")
    return _storable(content, "the reply's content")


def _storable(text: str, what: str) -> str:
    """``text`` when it encodes as UTF-8; a lone surrogate (a JSON escape of half a pair) is a bad body."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _BadBody(f"{what} held a character that is not Unicode text ({exc.reason})") from None
    return text


def _tool_calls(message: object) -> list[dict[str, Any]]:
    """The message's tool calls as {id, name, arguments}, each text (arguments as the server sent them)."""
    calls = getattr(message, "tool_calls", None)
    if not isinstance(calls, list):
        return []
    found = []
    for index, call in enumerate(calls):
        function = getattr(call, "function", None)
        if function is None:
            continue
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        found.append(
            {
                "id": _storable(str(getattr(call, "id", None) or f"call-{index}"), "a tool call's id"),
                "name": _storable(str(name or ""), "a tool call's name"),
                "arguments": _storable(
                    arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
                    "a tool call's arguments",
                ),
            }
        )
    return found


def _report_usage(
    response: ChatCompletion, prompt_estimate: int, completion_estimate: int, *, tool_round: bool = False
) -> None:
    """Report one completion's tokens: the server's figures where it sent ones a completion can have.

    A figure it did not send is estimated; one it sent that no completion can have
    (:func:`~fractal_nb.llm.protocol.reported_tokens`: 10^12, -10^6, text) is estimated
    too, and what it sent is kept for the ledger's ``refused_usage``.
    """
    usage = getattr(response, "usage", None)
    sent = {name: getattr(usage, name, None) for name in ("prompt_tokens", "completion_tokens")}
    taken = {name: reported_tokens(value) for name, value in sent.items()}
    prompt, completion = taken["prompt_tokens"], taken["completion_tokens"]
    refused = {name: _as_sent(sent[name]) for name in sent if sent[name] is not None and taken[name] is None}
    report_usage(
        prompt_estimate if prompt is None else prompt,
        completion_estimate if completion is None else completion,
        estimated=prompt is None or completion is None,
        tool_round=tool_round,
        refused=refused,
    )


def _as_sent(value: object) -> object:
    """A usage figure as the server sent it, for the ledger: a number as it is, anything else as short text.

    >>> _as_sent(10**12), _as_sent(-3), _as_sent({"a": 1}), _as_sent(float("nan"))
    (1000000000000, -3, "{'a': 1}", 'nan')
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return _short(value)[:40]
    return value


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
    docs/architecture.md "The ledger"). Transport retries are requests too.

    A body is read up to ``max_reply_bytes``: one that says it is longer, or grows
    past it, raises :class:`_ReplyTooLarge` (its connection is closed, not read on).
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
            raise _ReplyTooLarge(
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
    """A response body's stream that raises :class:`_ReplyTooLarge` once it passes ``most`` bytes."""

    def __init__(self, stream: Any, most: int) -> None:
        self._stream = stream
        self._most = most

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self._stream:
            read += len(chunk)
            if read > self._most:
                raise _ReplyTooLarge(
                    f"the server's body passed the bound of {self._most:,} bytes (max_reply_bytes)"
                )
            yield chunk

    def close(self) -> None:
        """Close the connection's stream."""
        self._stream.close()


# The HTTP library checks a response's stream is its SyncByteStream (a class mypy sees as Any here).
_BoundedStream: Any = type("_BoundedStream", (_Bounded, _HTTP.SyncByteStream), {})


def retry_sampling(
    seed: int | None, temperature: float | None, refused: int
) -> tuple[int | None, float | None]:
    """The seed and temperature of a request after ``refused`` refused replies to its prompt.

    The same request with the same seed gets the same reply: each retry takes the
    next seed and samples hotter, by :data:`RETRY_TEMPERATURE_STEP` up to
    :data:`MAX_RETRY_TEMPERATURE`. What the caller left out (None) stays out.

    >>> retry_sampling(11, 0.2, 0), retry_sampling(11, 0.2, 1), retry_sampling(11, 0.2, 5)
    ((11, 0.2), (12, 0.5), (16, 1.0))
    >>> retry_sampling(None, 1.3, 2)
    (None, 1.3)
    """
    if not refused:
        return seed, temperature
    if temperature is not None:
        temperature = max(
            temperature, min(MAX_RETRY_TEMPERATURE, round(temperature + RETRY_TEMPERATURE_STEP * refused, 2))
        )
    return (None if seed is None else seed + refused), temperature


def _prompt_key(messages: list[Message], schema: type[BaseModel]) -> str:
    """What tells one prompt from another: the schema and every message."""
    text = json.dumps([schema.__name__, [[m["role"], m["content"]] for m in messages]])
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A schema class's JSON schema, built once (it is sent with every request)."""
    return schema.model_json_schema()


def _max_tokens(value: int | Mapping[str, int] | None) -> dict[str, int]:
    """Every role's reply bound: the defaults, overridden by one number or per role."""
    bounds = dict(MAX_TOKENS)
    if isinstance(value, int) and not isinstance(value, bool):
        bounds = dict.fromkeys(bounds, value)
    elif isinstance(value, Mapping):
        unknown = set(value) - set(bounds)
        if unknown:
            raise InvalidInputError(
                f"max_tokens names unknown roles {sorted(unknown)}; roles: {', '.join(sorted(bounds))}"
            )
        bounds.update(value)
    elif value is not None:
        raise InvalidInputError(
            f"max_tokens must be an integer, a dict of role -> integer, or None, not {value!r}"
        )
    for role, bound in bounds.items():
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 16:
            raise InvalidInputError(f"max_tokens for {role} must be an integer >= 16, not {bound!r}")
    return bounds


def _with_schema_note(messages: list[Message], schema: type[BaseModel]) -> list[Message]:
    """Describe the schema in the system message, for servers that cannot enforce it."""
    note = (
        "Reply with only a JSON object, no prose and no code fences, valid against this "
        f"JSON schema:\n{json.dumps(schema.model_json_schema())}"
    )
    if messages and messages[0]["role"] == "system":
        first = messages[0]["content"] + "\n\n" + note
        return [{"role": "system", "content": first}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _parse(text: str, schema: type[BaseModel], context: ReplyContext) -> dict[str, Any]:
    """Repair the reply's JSON (prose, fences, trailing commas, raw newlines), validate and judge it."""
    if not text.strip():
        raise ValueError("the reply was empty")
    data = json_repair.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"the reply held no JSON object: {_short(text)}")
    return schema.model_validate(data, context=context).model_dump(mode="json")


def _rejects_format(exc: openai.OpenAIError) -> bool:
    """Whether the server refused the request for its response_format (so fall back)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    return exc.status_code in _REJECTS_FORMAT or "response_format" in f"{exc.message} {exc.body}"


def _translate(exc: openai.OpenAIError, model: str, base_url: str) -> LLMError:
    """Our error for an openai one, in plain words: timeout, unreachable or refusing server, HTTP error."""
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeoutError(f"{model}: the request to {base_url} timed out, after the client's retries")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailableError(f"cannot reach the model server at {base_url}: {connection_problem(exc)}")
    if isinstance(exc, openai.APIStatusError):
        body = _short(exc.body if exc.body is not None else exc.message)
        status = exc.status_code
        if status in (401, 403):
            return LLMUnavailableError(
                f"the model server at {base_url} refused the API key (HTTP {status}): {body}"
            )
        if status == 404:
            return LLMUnavailableError(
                f"the model server at {base_url} has no model {model!r} (HTTP 404): {body}"
            )
        if status >= 500:
            return LLMUnavailableError(
                f"the model server at {base_url} failed (HTTP {status}, after the client's retries): {body}"
            )
        return LLMError(f"{model}: HTTP {status}: {body}")
    return LLMError(f"{model}: {type(exc).__name__}: {_short(exc)}")


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
    return _short(seen[-1]) or type(seen[-1]).__name__


def _short(value: object) -> str:
    """``value`` as one line of at most a few hundred characters."""
    text = " ".join(str(value).split())
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"
