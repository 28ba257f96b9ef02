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
it has, else 1), each carries a ``max_tokens`` bound and, when given, a ``seed``. Only this
module and those it is built from see ``openai`` (llm/openai_transport.py: the HTTP under the
client; llm/openai_replies.py: what comes back; llm/openai_options.py, llm/openai_tools.py);
its errors leave as :class:`~fractal_nb.errors.LLMError`.

What a server sends back is read as data, never trusted (issue 37): a body over
``max_reply_bytes``, one that is not UTF-8 (or whose text holds a lone surrogate,
which no store can keep), not JSON, or not a chat completion is a bad reply,
corrected and retried as a reply that is not valid against the schema is, then
:class:`~fractal_nb.errors.LLMOutputError`. A usage figure that is not a whole
number of tokens from 0 to :data:`~fractal_nb.llm.protocol.MAX_REPORTED_TOKENS`
(10^12, -10^6, text) is estimated instead and the figure sent kept for the ledger
(``refused_usage``). That reading is llm/openai_replies.py's.

Tool calls (:meth:`OpenAILLM.complete_with_tools`, docs/architecture/engine.md "Tool calls"):
the messages go with ``tools`` and ``tool_choice="auto"``; each tool call the reply
makes is run through the :class:`~fractal_nb.llm.protocol.ToolBox` and its result
appended, until the model answers without a tool call or ``tools.max_calls`` calls
were made. A reply without tool calls that is valid against the schema is the
answer; otherwise the structured answer is asked for with tools off, the tool
exchange in the conversation, through the path above. A server that refuses
``tools`` the first time (HTTP 400, 422 or 500) is remembered as one without them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any, Literal
from urllib.parse import urlsplit

import openai
from pydantic import BaseModel

from ..errors import InvalidInputError, LLMOutputError
from ..loopback import is_loopback
from ..prompts import render
from .openai_options import check_options, checked_sampling, concurrency_bound, max_tokens_per_role
from .openai_replies import (
    REJECTS_OPTION,
    BadBody,
    chat_completion,
    first_message,
    parse_reply,
    rejects_format,
    reply_text,
    reply_tool_calls,
    report_reply_usage,
    translate_error,
)
from .openai_tools import assistant_calls, run_tool, tool_result
from .openai_transport import MAX_REPLY_BYTES, openai_client, server_slots
from .protocol import (
    Message,
    ToolBox,
    estimate_tokens,
    messages_tokens,
    report_retry,
    report_wait,
)
from .quality import ReplyContext, correction, describe
from .retries import FailureCount
from .schemas import role_of

_MODES = ("json_schema", "json_object", "text")
RETRY_TEMPERATURE_STEP = 0.3  # each retry after a refusal samples this much hotter…
MAX_RETRY_TEMPERATURE = 1.0  # …up to this (a higher temperature set by the caller is kept)


class _ToolsRefused(Exception):
    """The server refused a request for its ``tools`` (it has no tool calling)."""


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
        The longest body read from the server (default
        :data:`~fractal_nb.llm.openai_transport.MAX_REPLY_BYTES`); a longer one is refused
        as a bad reply, unread past the bound. Not applied to a pre-built ``client`` (its
        transport is its own).
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
        check_options(output_retries, timeout, seed, tool_calls, max_reply_bytes)
        self.sampling = checked_sampling(sampling)
        if client is None:
            client = openai_client(base_url, api_key, timeout, max_retries, max_reply_bytes)
        self.model = model
        self.base_url = str(client.base_url)
        self.output_retries = output_retries
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens_per_role(max_tokens)
        # "auto" on this machine: 1 until the first call asks the server how many it computes at once.
        self._ask_slots = max_concurrency == "auto" and is_loopback(urlsplit(self.base_url).hostname or "")
        max_concurrency = concurrency_bound(max_concurrency, ask_slots=self._ask_slots)
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
            except BadBody:
                break  # the structured path below asks again, with its own corrections
            if not calls:
                try:  # an answer already: valid, it saves a request
                    return parse_reply(text, schema, ReplyContext.of(convo, schema))
                except ValueError:
                    break
            calls = calls[: tools.max_calls - made]  # the conversation keeps the calls made, no more
            convo = [*convo, assistant_calls(text, calls)]
            for call in calls:
                convo = [*convo, tool_result(call, run_tool(tools, call))]
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
                response = chat_completion(client, self.model, convo, options)
        except openai.APIStatusError as exc:
            if self._tools is None and exc.status_code in REJECTS_OPTION:
                raise _ToolsRefused(str(exc)) from exc
            raise translate_error(exc, self.model, self.base_url) from exc
        except openai.OpenAIError as exc:
            raise translate_error(exc, self.model, self.base_url) from exc
        self._tools = True
        message = first_message(response)
        text, calls = reply_text(message), reply_tool_calls(message)
        report_reply_usage(
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
                if index + 1 == len(_MODES) or not rejects_format(exc):
                    raise translate_error(exc, self.model, self.base_url) from exc
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
            except BadBody as exc:
                problem = str(exc)
                self._refused.failed(prompt)
                continue
            except openai.OpenAIError as exc:
                if probing:
                    raise
                raise translate_error(exc, self.model, self.base_url) from exc
            if self._mode != index:  # the server took this mode: every later call uses it
                with self._probe:
                    self._mode = index
                    self._probe.notify_all()  # the workers waiting for the probe go on
            try:
                result = parse_reply(text, schema, judged)
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
            response = chat_completion(client, self.model, convo, options)
        text = reply_text(first_message(response))
        report_reply_usage(response, messages_tokens(convo), estimate_tokens(text))
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
