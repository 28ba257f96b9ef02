"""A real, local OpenAI-compatible HTTP server for tests: no network beyond 127.0.0.1.

Usage::

    with FakeOpenAI(mode="llama_cpp") as server:
        llm = OpenAILLM(model="fake", base_url=server.base_url, api_key="x")
        llm.complete(messages, Answer)
        server.requests  # parsed JSON bodies, in arrival order

Modes:

- ``"ok"``: the responder's answer as JSON message content, with a usage block.
- ``"llama_cpp"``: HTTP 500 (llama.cpp's body) to ``response_format.type == "json_schema"``.
- ``"text_only"``: HTTP 400 to any request that has a ``response_format``.
- ``"junk"``: the JSON wrapped in prose and fences, a trailing comma, a raw newline in a string.
- ``"flaky"``: a seeded share of requests fail (see :data:`FAULTS`); the rest are ``"ok"``.
- ``"no_tools"``: HTTP 400 to any request that offers ``tools`` (a server without tool calling).
- ``"absurd_usage"``, ``"negative_usage"``: a good reply whose usage block says 10^12 (or -10^6) tokens.
- ``"not_utf8"``: a good reply whose body holds bytes that are not UTF-8 (a Latin-1 ``é``).
- ``"lone_surrogate"``: a good reply whose content holds ``\\ud800``, half a UTF-16 pair (valid JSON,
  but no UTF-8 text can hold it).
- ``"huge_body"``: a good reply followed by ``huge_bytes`` of blanks (still valid JSON); with
  ``declare_length=False`` its length is not declared (the body ends when the connection closes).

Each of the last five is also a fault the ``"flaky"`` mode can inject (:data:`BAD_REPLIES`,
given in ``faults``), so some replies are bad and the rest good.

``down_after=N`` (any mode) answers HTTP 503 to every request after the first N, as a
server whose model died; set ``fake.down_after = None`` to bring it back. ``port`` binds
a given port (a test can start the server where a client already points). ``latency_s``
is the model's time per reply (requests are served in parallel). ``slots=N`` answers
``GET /props`` as llama.cpp's server does (``{"total_slots": N}``); without it, 404.

A responder takes the request body and returns the answer: a dict (sent as JSON), a
str (sent verbatim as the message content), None (null content), or :class:`ToolCalls`
(a reply that calls tools). :func:`tool_caller` wraps a responder into a model that
searches and reads the sources before it answers, citing what it read;
:func:`endless_tool_caller` one that never stops calling tools.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from fractal_nb.llm.openai_llm import OpenAILLM


@dataclass(frozen=True)
class ToolCalls:
    """A reply that calls tools: ``(name, arguments)`` pairs, sent as the message's ``tool_calls``."""

    calls: tuple[tuple[str, dict[str, Any]], ...]
    content: str | None = None
    raw: dict[int, str] = field(default_factory=dict)  # call index -> its arguments sent verbatim


Responder = Callable[[dict[str, Any]], "dict[str, Any] | str | ToolCalls | None"]

BAD_REPLIES = ("absurd_usage", "negative_usage", "not_utf8", "lone_surrogate", "huge_body")
"""Replies a server should never send, each a mode of its own and a fault ``"flaky"`` may inject."""
MODES = ("ok", "llama_cpp", "text_only", "junk", "flaky", "no_tools", *BAD_REPLIES)
FAULTS = ("rate_limit", "server_error", "slow", "malformed_body", "not_json")
"""The faults ``"flaky"`` draws from by default (any of :data:`BAD_REPLIES` may be given too)."""
ABSURD_TOKENS = 10**12
NEGATIVE_TOKENS = -(10**6)

LLAMA_CPP_500 = {
    "error": {
        "code": 500,
        "message": "JSON schema conversion failed:\nUnrecognized schema: {...}",
        "type": "server_error",
    }
}


def schema_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Build a minimal instance valid against the JSON schema in the request's response_format."""
    fmt = body.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema")
    if schema is None:
        raise ValueError("schema_responder: the request has no JSON schema; pass a responder")
    result = _instance(schema, schema.get("$defs", {}))
    if not isinstance(result, dict):
        raise ValueError(f"schema_responder: the schema is not an object schema: {schema}")
    return result


def _instance(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in schema:
        return _instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _instance(options[0], defs)
    if "allOf" in schema:
        return _instance(schema["allOf"][0], defs)
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _instance(props[name], defs) for name in schema.get("required", [])}
    if kind == "array":
        return [_instance(schema.get("items", {}), defs) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        text = "fake text for a field"
        return text.ljust(schema.get("minLength", 0), "x")[: schema.get("maxLength", len(text))]
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 1))
        value = (low + high) / 2
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    return None


_BLOCK = re.compile(r"^\[(?P<source>[^\]\n]+):L(?P<start>\d+)-L(?P<end>\d+)\]$", re.MULTILINE)
_NUMBERED = re.compile(r"^(\d+): (.*)$")


def _last_tool(body: dict[str, Any]) -> tuple[str, str] | None:
    """The last tool call of the conversation and its result text: (tool name, result), or None."""
    messages = body.get("messages", [])
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant" and message.get("tool_calls"):
            name = message["tool_calls"][-1]["function"]["name"]
            results = [m for m in messages[index + 1 :] if m.get("role") == "tool"]
            return name, str(results[-1]["content"]) if results else ""
    return None


def read_lines(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Each block of lines read_source returned in the conversation: {source, line_start, line_end, lines}."""
    blocks: list[dict[str, Any]] = []
    messages = body.get("messages", [])
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        names = [c["function"]["name"] for c in message["tool_calls"]]
        results = [m for m in messages[index + 1 : index + 1 + len(names)] if m.get("role") == "tool"]
        for name, result in zip(names, results, strict=False):
            text = str(result["content"])
            head = _BLOCK.match(text)
            if name != "read_source" or head is None:
                continue
            lines = [m.group(2) for m in map(_NUMBERED.match, text.splitlines()[1:]) if m]
            blocks.append(
                {
                    "source": head["source"],
                    "line_start": int(head["start"]),
                    "line_end": int(head["end"]),
                    "lines": lines,
                }
            )
    return blocks


def tool_caller(inner: Responder, query: str = "", *, miscite: bool = False) -> Responder:
    """A model that calls the source tools before it answers, citing what it read.

    Offered tools, it first calls ``search_sources(query)`` (the first user message's
    first line when ``query`` is empty), then ``read_source`` on the first passage
    found (its first three lines), then says it is done (text, no tool call). Asked
    for the structured answer, it answers as ``inner`` does, with ``citations``: the
    first non-blank line of each span read (``miscite``: a quote the lines do not hold).
    """

    def respond(body: dict[str, Any]) -> dict[str, Any] | str | ToolCalls | None:
        if body.get("tools"):
            last = _last_tool(body)
            if last is None:
                user = next((str(m["content"]) for m in body["messages"] if m["role"] == "user"), "")
                words = query or (user.strip().splitlines()[-1] if user.strip() else "sources")
                return ToolCalls((("search_sources", {"query": words[:200], "k": 3}),))
            name, result = last
            head = _BLOCK.search(result)
            if name == "search_sources" and head is not None:
                start = int(head["start"])
                end = min(int(head["end"]), start + 2)
                return ToolCalls(
                    (("read_source", {"source": head["source"], "line_start": start, "line_end": end}),)
                )
            return "I have read what I need; my answer follows."
        answer = inner(body)
        if not isinstance(answer, dict):
            return answer
        citations = []
        for block in read_lines(body):
            offset, quote = next(((i, ln) for i, ln in enumerate(block["lines"]) if ln.strip()), (0, ""))
            line = block["line_start"] + offset
            citations.append(
                {
                    "source": block["source"],
                    "line_start": line,
                    "line_end": line,
                    "quote": "words these lines never said" if miscite else quote.strip(),
                }
            )
        return {**answer, "citations": citations}

    return respond


def endless_tool_caller(inner: Responder, query: str = "evidence") -> Responder:
    """A model that calls ``search_sources(query)`` twice per reply whenever tools are offered: only a bound
    stops it."""

    def respond(body: dict[str, Any]) -> dict[str, Any] | str | ToolCalls | None:
        if body.get("tools"):
            turn = sum(1 for m in body["messages"] if m.get("role") == "tool")
            return ToolCalls(
                (
                    ("search_sources", {"query": f"{query} {turn}", "k": 2}),
                    ("search_sources", {"query": f"{query} {turn + 1}", "k": 2}),
                )
            )
        return inner(body)

    return respond


class InFlight:
    """A responder that works ``service_s`` on a request, answers ``reply``, and remembers the most it
    served at once (``most``)."""

    def __init__(self, reply: dict[str, Any], service_s: float = 0.05) -> None:
        self.reply, self.service_s = reply, service_s
        self.now = self.most = 0
        self._guard = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._guard:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.service_s)  # the server's work on the request (the test waits on results)
        with self._guard:
            self.now -= 1
        return self.reply


def _junk(answer: dict[str, Any]) -> str:
    """The answer as sloppy models send it: prose, fences, a trailing comma, a raw newline."""
    answer = dict(answer)
    first_str = next((k for k, v in answer.items() if isinstance(v, str)), None)
    if first_str is not None:
        answer[first_str] += "\n"  # sent raw below; the schema strips it again
    text = json.dumps(answer, indent=2).replace("\\n", "\n")
    text = text[: text.rindex("}")].rstrip() + ",\n}"
    return f"Sure! Here is the JSON you asked for:\n```json\n{text}\n```\nHope this helps."


class FakeOpenAI:
    """A threaded fake of ``POST /v1/chat/completions``, used as a context manager.

    Parameters
    ----------
    mode
        One of :data:`MODES`.
    responder
        Builds the model's answer from the request body; :func:`schema_responder` if None.
    seed, failure_rate, faults
        The ``"flaky"`` mode's random source, the share of requests that fail, and
        the faults drawn from (any of :data:`FAULTS` and :data:`BAD_REPLIES`).
    slow_s
        How long a ``"slow"`` fault stalls (make it longer than the client's timeout).
    usage
        Whether completions carry a ``usage`` block (some local servers send none).
    huge_bytes, declare_length
        How many blanks a ``"huge_body"`` reply carries after its JSON, and whether it
        declares its length (``Content-Length``) or ends by closing the connection.

    Attributes
    ----------
    requests, headers
        Each request's parsed JSON body and its HTTP headers (lower-case names), in order.
    usages
        Per request, the ``usage`` block the server answered with (None: no completion,
        or one sent without usage), in the order of ``requests``.
    faults
        The faults the ``"flaky"`` mode injected, in order.
    bad_replies
        Per request, the bad reply it got (one of :data:`BAD_REPLIES`) or None.
    """

    def __init__(
        self,
        mode: str = "ok",
        responder: Responder | None = None,
        *,
        seed: int = 0,
        failure_rate: float = 0.3,
        faults: Sequence[str] = FAULTS,
        slow_s: float = 2.0,
        usage: bool = True,
        down_after: int | None = None,
        port: int = 0,
        latency_s: float = 0.0,
        huge_bytes: int = 4 << 20,
        declare_length: bool = True,
        slots: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}, should be one of {MODES}")
        if unknown := set(faults) - set(FAULTS) - set(BAD_REPLIES):
            raise ValueError(f"unknown faults {sorted(unknown)}, should be among {FAULTS + BAD_REPLIES}")
        self.mode = mode
        self.responder: Responder = responder or schema_responder
        self.failure_rate = failure_rate
        self.fault_kinds = tuple(faults)
        self.slow_s = slow_s
        self.usage = usage
        self.down_after = down_after
        self.latency_s = latency_s
        self.huge_bytes = huge_bytes
        self.declare_length = declare_length
        self.slots = slots
        self.props_asked = 0  # GET /props requests
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int] | None] = []
        self.headers: list[dict[str, str]] = []
        self.faults: list[str] = []
        self.bad_replies: list[str | None] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._clients: list[OpenAILLM] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ending in ``/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def llm(self, **options: Any) -> OpenAILLM:
        """An ``OpenAILLM`` on this server (model "fake"); closed when the server stops."""
        client = OpenAILLM(model="fake", base_url=self.base_url, api_key="x", **options)
        self._clients.append(client)
        return client

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        while self._clients:  # their pooled connections, before the server goes
            self._clients.pop().close()
        self._closing.set()  # wakes stalled "slow" handlers
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __repr__(self) -> str:
        return f"<FakeOpenAI {self.mode} {self.base_url} requests={len(self.requests)}>"

    def handle(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """Answer one parsed request body with (status, headers, raw body)."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.usages.append(None)
            index = len(self.requests) - 1
            fault = self.mode if self.mode in BAD_REPLIES else None
            if self.mode == "flaky" and self._rng.random() < self.failure_rate:
                fault = self._rng.choice(self.fault_kinds)
                self.faults.append(fault)
            self.bad_replies.append(fault if fault in BAD_REPLIES else None)
            down = self.down_after is not None and len(self.requests) > self.down_after
        if down:
            return _json(503, {"error": {"message": "the model is not loaded", "type": "unavailable"}})
        fmt_type = (body.get("response_format") or {}).get("type")
        if self.mode == "llama_cpp" and fmt_type == "json_schema":
            return _json(500, LLAMA_CPP_500)
        if self.mode == "no_tools" and body.get("tools"):
            message = "tools are not supported by this server"
            return _json(400, {"error": {"message": message, "type": "invalid_request_error"}})
        if self.mode == "text_only" and fmt_type is not None:
            message = f"response_format of type {fmt_type!r} is not supported"
            return _json(400, {"error": {"message": message, "type": "invalid_request_error"}})
        if fault == "rate_limit":
            return _json(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
        if fault == "server_error":
            return _json(500, {"error": {"message": "internal error"}})
        if fault == "malformed_body":
            return 200, {"Content-Type": "application/json"}, b'{"choices": [{"mess'
        if fault == "slow":
            self._closing.wait(self.slow_s)
        elif self.latency_s:
            self._closing.wait(self.latency_s)
        try:
            answer = self.responder(body)
        except ValueError as exc:
            return _json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
        calls: ToolCalls | None = None
        if fault == "not_json":
            content: str | None = "I am sorry, I cannot help with that."
        elif isinstance(answer, ToolCalls):
            content, calls = answer.content, answer
        elif isinstance(answer, dict):
            content = _junk(answer) if self.mode == "junk" else json.dumps(answer)
        else:
            content = answer
        completion = _completion(body, content, index + 1, calls)
        if fault in ("absurd_usage", "negative_usage"):
            tokens = ABSURD_TOKENS if fault == "absurd_usage" else NEGATIVE_TOKENS
            completion["usage"] = {
                "prompt_tokens": tokens,
                "completion_tokens": tokens,
                "total_tokens": 2 * tokens,
            }
        if not self.usage:
            del completion["usage"]
        with self._lock:
            self.usages[index] = completion.get("usage")
        status, headers, payload = _json(200, completion)
        if fault == "not_utf8":  # a Latin-1 é in the message: a byte UTF-8 never starts with
            marker = b'"role": "assistant"'
            payload = payload.replace(marker, b'"role": "assistant", "name": "caf\xe9"', 1)
        elif fault == "lone_surrogate":  # escaped as JSON allows; the text it stands for is not Unicode
            payload = payload.replace(b'"content": "', b'"content": "\\ud800', 1)
        elif fault == "huge_body":
            payload = payload[:-1] + b" " * self.huge_bytes + b"}"
            if not self.declare_length:
                headers = {**headers, "Content-Length": ""}  # none: the body runs until the connection closes
        return status, headers, payload


def _completion(
    body: dict[str, Any], content: str | None, n: int, calls: ToolCalls | None = None
) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = [
            {
                "id": f"call-{n}-{i}",
                "type": "function",
                "function": {"name": name, "arguments": calls.raw.get(i, json.dumps(arguments))},
            }
            for i, (name, arguments) in enumerate(calls.calls)
        ]
    completion = len(content or "") // 4 + len(json.dumps(message.get("tool_calls", []))) // 4
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls is not None else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _json(
    status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return (
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(payload).encode(),
    )


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # headers and body leave in one write: no delayed-ACK stall
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            with fake._lock:
                fake.props_asked += self.path == "/props"
            if self.path == "/props" and fake.slots is not None:
                self._send(*_json(200, {"total_slots": fake.slots, "model_alias": "fake"}))
            else:
                self._send(*_json(404, {"error": {"message": f"no {self.path}"}}))

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                status, headers, payload = _json(404, {"error": {"message": f"no {self.path}"}})
            else:
                status, headers, payload = fake.handle(
                    json.loads(raw), {k.lower(): v for k, v in self.headers.items()}
                )
            self._send(status, headers, payload)

        def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            try:
                self.send_response(status)
                for name, value in {"Content-Length": str(len(payload)), **headers}.items():
                    if value:
                        self.send_header(name, value)
                    else:  # a length not declared: the body ends with the connection
                        self.close_connection = True
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a "slow" fault past its timeout)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    return Handler


# --- a model that cites the evidence it is shown (engine/evidence.py), rightly or not ----------------

MISCITES = ("wrong_lines", "past_the_end", "invented_source", "misquote")
"""How :func:`citing_responder` gets a citation wrong when asked to."""

_PASSAGE = re.compile(r"^\[(.+):L(\d+)-L(\d+)\]$((?:\n\d+: .*)*)", re.MULTILINE)
_CHAIN_CITE = re.compile(r'^\s+cites \[(.+?):L(\d+)-L(\d+)\]: "(.*)"$', re.MULTILINE)


def evidence_lines(prompt: str) -> list[tuple[str, int, str]]:
    """The lines an answer prompt's evidence shows, as (source, line number, text), passage by passage."""
    shown = prompt.split("\nEvidence: ", 1)
    if len(shown) < 2:
        return []
    found = []
    for passage in _PASSAGE.finditer(shown[1]):
        for line in passage.group(4).split("\n")[1:]:
            number, _, text = line.partition(": ")
            found.append((passage.group(1), int(number), text))
    return found


def citing_responder(
    inner: Responder, miscite: Callable[[str], str | None] = lambda prompt: None
) -> Responder:
    """``inner``'s replies, its answers citing the evidence their prompt shows, its findings the chain's.

    An answer cites the first line of evidence that holds a few words, quoting it
    exactly; when ``miscite(prompt)`` names one of :data:`MISCITES` it cites wrongly
    instead: the next line (which does not hold the quote), a line past the source's
    end, a source the graph does not have, or the right line with words it does not
    say. A harvest's findings carry the citations its chain shows (``cites`` lines),
    one each in turn; with ``miscite(prompt)`` set, its last finding cites an
    invented source instead. Prompts without evidence get ``inner``'s reply as it is.
    """

    def respond(body: dict[str, Any]) -> dict[str, Any] | str | None:
        reply = inner(body)
        prompt = next(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        if not isinstance(reply, dict):
            return reply
        if "answer" in reply:
            lines = [line for line in evidence_lines(prompt) if len(line[2].split()) >= 3]
            if lines:
                reply = {**reply, "citations": [_citation(*lines[0], miscite(prompt))]}
        elif "findings" in reply and (cited := _CHAIN_CITE.findall(prompt)):
            carried = [
                {"source": src, "line_start": int(a), "line_end": int(b), "quote": quote}
                for src, a, b, quote in cited
            ]
            findings = [
                {**f, "citations": [carried[i % len(carried)]]} for i, f in enumerate(reply["findings"])
            ]
            if findings and miscite(prompt):
                findings[-1]["citations"] = [_citation("invented/notes.md", 1, "words nobody wrote", None)]
            reply = {**reply, "findings": findings}
        return reply

    return respond


def _citation(source: str, line: int, text: str, miscite: str | None) -> dict[str, Any]:
    if miscite not in (None, *MISCITES):
        raise ValueError(f"unknown miscitation {miscite!r}, should be one of {MISCITES}")
    return {
        "source": "invented/notes.md" if miscite == "invented_source" else source,
        "line_start": line + {"wrong_lines": 1, "past_the_end": 10_000}.get(miscite or "", 0),
        "line_end": line + {"wrong_lines": 1, "past_the_end": 10_000}.get(miscite or "", 0),
        "quote": f"{text} and then some words it never said" if miscite == "misquote" else text,
    }
