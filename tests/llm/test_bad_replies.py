"""What a server should never send, read as data (issue 37): absurd or negative usage, bytes that are
not UTF-8, a lone surrogate, a body over the bound. Through the real openai client against the local
fake server: the reply is taken or refused as a bad reply (an LLMOutputError after the corrections),
never a raw exception, and every request and figure is reported as the server sent it.

Covers: llm/openai_replies.py, llm/openai_transport.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fractal_nb.errors import InvalidInputError, LLMOutputError
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.llm.openai_transport import MAX_REPLY_BYTES
from fractal_nb.llm.protocol import (
    MAX_REPORTED_TOKENS,
    Usage,
    estimate_tokens,
    messages_tokens,
    metered,
)
from fractal_nb.llm.schemas import Answer

from .fake_openai import ABSURD_TOKENS, NEGATIVE_TOKENS, FakeOpenAI
from .test_openai_llm import MESSAGES

GOOD = {"answer": "Rayleigh scattering makes the short wavelengths scatter most.", "confidence": 0.8}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def ask(server: FakeOpenAI, **options: Any) -> tuple[dict[str, Any] | LLMOutputError, Usage]:
    """One complete() on the server: its answer (or the LLMOutputError it raised) and the meter."""
    llm = server.llm(timeout=5.0, max_retries=0, **options)
    with metered() as usage:
        try:
            return llm.complete(MESSAGES, Answer), usage
        except LLMOutputError as exc:
            return exc, usage


@pytest.mark.parametrize(
    ("mode", "sent"), [("absurd_usage", ABSURD_TOKENS), ("negative_usage", NEGATIVE_TOKENS)]
)
def test_usage_no_completion_can_have_is_estimated_and_kept_as_the_server_sent_it(
    mode: str, sent: int
) -> None:
    with FakeOpenAI(mode, responder=lambda body: GOOD) as server:
        answer, usage = ask(server)
    assert isinstance(answer, dict) and answer["answer"] == GOOD["answer"], "the reply itself is good"
    assert server.usages == [{"prompt_tokens": sent, "completion_tokens": sent, "total_tokens": 2 * sent}]
    assert usage.estimated and usage.attempts == 1 and usage.requests == 1
    assert usage.prompt_tokens == messages_tokens(MESSAGES)
    assert usage.completion_tokens == estimate_tokens(json.dumps(GOOD))
    assert usage.refused_usage == [{"prompt_tokens": sent, "completion_tokens": sent}]


def test_a_figure_of_another_type_is_refused_and_a_sane_one_beside_it_kept() -> None:
    with FakeOpenAI(responder=lambda body: GOOD) as server:
        odd = {"prompt_tokens": "many", "completion_tokens": 12.0, "total_tokens": None}
        rewritten(server, lambda reply, _body: {**reply, "usage": odd})
        answer, usage = ask(server)
    assert isinstance(answer, dict)
    assert usage.completion_tokens == 12, "a whole number sent as 12.0 is the server's figure"
    assert usage.prompt_tokens == messages_tokens(MESSAGES) and usage.estimated
    assert usage.refused_usage == [{"prompt_tokens": "many"}]


def test_the_bound_of_a_usage_figure_is_the_ledgers() -> None:
    from fractal_nb.store.llm_log import MAX_CALL_TOKENS

    assert MAX_REPORTED_TOKENS == MAX_CALL_TOKENS


@pytest.mark.parametrize(
    ("mode", "options", "said"),
    [
        ("not_utf8", {}, "the server's body was not UTF-8"),
        ("lone_surrogate", {}, "the reply's content held a character that is not Unicode text"),
        ("huge_body", {}, f"over the bound of {MAX_REPLY_BYTES:,} (max_reply_bytes)"),
        ("huge_body", {"declare_length": False}, f"passed the bound of {MAX_REPLY_BYTES:,} bytes"),
    ],
)
def test_a_body_that_cannot_be_read_is_a_bad_reply_corrected_then_refused(
    mode: str, options: dict[str, Any], said: str
) -> None:
    with FakeOpenAI(mode, responder=lambda body: GOOD, **options) as server:
        answer, usage = ask(server, output_retries=1)
    assert isinstance(answer, LLMOutputError), answer
    assert said in str(answer) and "in 2 attempts" in str(answer)
    assert len(server.requests) == 2 == usage.requests, "each request counted, the correction's too"
    assert usage.attempts == 0 and usage.prompt_tokens == 0, "no completion was read: no tokens invented"


def test_a_bad_body_among_good_ones_is_asked_again_and_the_good_one_taken() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD) as server:
        handle, calls = server.handle, iter(range(10))

        def first_not_utf8(
            body: dict[str, Any], headers: dict[str, str]
        ) -> tuple[int, dict[str, str], bytes]:
            status, sent_headers, payload = handle(body, headers)
            return (
                status,
                sent_headers,
                payload.replace(b"Rayleigh", b"Rayl\xe9igh") if not next(calls) else payload,
            )

        server.handle = first_not_utf8  # type: ignore[method-assign]
        answer, usage = ask(server, output_retries=1)
    assert isinstance(answer, dict) and answer["answer"] == GOOD["answer"]
    assert usage.requests == 2 and usage.attempts == 1


def test_a_larger_bound_reads_a_longer_body() -> None:
    with FakeOpenAI("huge_body", responder=lambda body: GOOD, huge_bytes=64 << 10) as server:
        refused, _ = ask(server, max_reply_bytes=32 << 10)
        taken, _ = ask(server, max_reply_bytes=128 << 10)
    assert isinstance(refused, LLMOutputError) and isinstance(taken, dict)


@pytest.mark.parametrize("bound", [0, 1023, -5, 2.5, True, "2MB", None])
def test_a_reply_bound_that_is_no_byte_count_is_refused(bound: object) -> None:
    with pytest.raises(InvalidInputError, match=r"max_reply_bytes must be an integer >= 1024"):
        OpenAILLM("fake", base_url="http://127.0.0.1:9/v1", max_reply_bytes=bound)  # type: ignore[arg-type]


def rewritten(server: FakeOpenAI, change: Any) -> None:
    """Have the server's replies pass through ``change(reply, body)`` (a parsed completion) before they go."""
    handle = server.handle

    def handle_changed(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        status, sent_headers, payload = handle(body, headers)
        return status, sent_headers, json.dumps(change(json.loads(payload), body)).encode()

    server.handle = handle_changed  # type: ignore[method-assign]


@pytest.mark.parametrize("content", [42, ["a", "list"], {"answer": "an object"}])
def test_content_that_is_not_text_is_a_bad_reply(content: object) -> None:
    with FakeOpenAI(responder=lambda body: GOOD) as server:
        rewritten(
            server,
            lambda reply, body: {
                **reply,
                "choices": [{**reply["choices"][0], "message": {"role": "assistant", "content": content}}],
            },
        )
        answer, usage = ask(server, output_retries=1)
    assert isinstance(answer, LLMOutputError) and "the reply's content was not text" in str(answer)
    assert usage.requests == 2


def test_tool_calls_of_odd_shapes_are_read_as_text_and_run_or_refused() -> None:
    from fractal_nb.engine.calls import ModelCaller
    from fractal_nb.engine.evidence_tools import SourceTools
    from fractal_nb.store import GraphStore

    from .fake_openai import tool_caller

    def odd_calls(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        message = reply["choices"][0]["message"]
        calls = message.get("tool_calls")
        if calls:  # arguments as an object, not JSON text; then a call with no name and a number for id
            calls[0]["function"]["arguments"] = json.loads(calls[0]["function"]["arguments"])
            calls.append({"id": 7, "type": "function", "function": {"name": None, "arguments": None}})
        return reply

    with GraphStore() as store, FakeOpenAI(responder=tool_caller(lambda body: GOOD, "sky blue")) as server:
        graph = store.create_graph("Why is the sky blue?", "pulse")["graph_id"]
        store.add_sources(
            graph, [{"name": "sky.md", "kind": "snippet", "location": None, "text": "The sky is blue.\n"}]
        )
        rewritten(server, odd_calls)
        result = ModelCaller(server.llm(), store, graph)(
            Answer, MESSAGES, node_id=None, worker="w1", tools=SourceTools(store, graph)
        )
        rows = store.get_llm_calls(graph)["calls"]
    assert result.answer == GOOD["answer"]
    tools = [(r["role"], r["outcome"]) for r in rows if r["role"].startswith("tool:")]
    assert ("tool:search_sources", "ok") in tools, "arguments sent as an object still ran"
    assert ("tool:unknown", "error") in tools, "a call with no name was refused, and the model read why"
