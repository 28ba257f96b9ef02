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

``down_after=N`` (any mode) answers HTTP 503 to every request after the first N, as a
server whose model died; set ``fake.down_after = None`` to bring it back. ``port`` binds
a given port (a test can start the server where a client already points). ``latency_s``
is the model's time per reply (requests are served in parallel).

A responder takes the request body and returns the answer: a dict (sent as JSON), a
str (sent verbatim as the message content) or None (null content).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from fractal_nb.llm.openai_llm import OpenAILLM

Responder = Callable[[dict[str, Any]], "dict[str, Any] | str | None"]

MODES = ("ok", "llama_cpp", "text_only", "junk", "flaky")
FAULTS = ("rate_limit", "server_error", "slow", "malformed_body", "not_json")

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
        the faults drawn from (any of :data:`FAULTS`).
    slow_s
        How long a ``"slow"`` fault stalls (make it longer than the client's timeout).
    usage
        Whether completions carry a ``usage`` block (some local servers send none).

    Attributes
    ----------
    requests, headers
        Each request's parsed JSON body and its HTTP headers (lower-case names), in order.
    usages
        Per request, the ``usage`` block the server answered with (None: no completion,
        or one sent without usage), in the order of ``requests``.
    faults
        The faults the ``"flaky"`` mode injected, in order.
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
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}, should be one of {MODES}")
        if unknown := set(faults) - set(FAULTS):
            raise ValueError(f"unknown faults {sorted(unknown)}, should be among {FAULTS}")
        self.mode = mode
        self.responder: Responder = responder or schema_responder
        self.failure_rate = failure_rate
        self.fault_kinds = tuple(faults)
        self.slow_s = slow_s
        self.usage = usage
        self.down_after = down_after
        self.latency_s = latency_s
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int] | None] = []
        self.headers: list[dict[str, str]] = []
        self.faults: list[str] = []
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
            fault = None
            if self.mode == "flaky" and self._rng.random() < self.failure_rate:
                fault = self._rng.choice(self.fault_kinds)
                self.faults.append(fault)
            down = self.down_after is not None and len(self.requests) > self.down_after
        if down:
            return _json(503, {"error": {"message": "the model is not loaded", "type": "unavailable"}})
        fmt_type = (body.get("response_format") or {}).get("type")
        if self.mode == "llama_cpp" and fmt_type == "json_schema":
            return _json(500, LLAMA_CPP_500)
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
        if fault == "not_json":
            content: str | None = "I am sorry, I cannot help with that."
        elif isinstance(answer, dict):
            content = _junk(answer) if self.mode == "junk" else json.dumps(answer)
        else:
            content = answer
        completion = _completion(body, content, index + 1)
        if not self.usage:
            del completion["usage"]
        with self._lock:
            self.usages[index] = completion.get("usage")
        return _json(200, completion)


def _completion(body: dict[str, Any], content: str | None, n: int) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4
    completion = len(content or "") // 4
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
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

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                status, headers, payload = _json(404, {"error": {"message": f"no {self.path}"}})
            else:
                status, headers, payload = fake.handle(
                    json.loads(raw), {k.lower(): v for k, v in self.headers.items()}
                )
            try:
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                    self.send_header(name, value)
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
