"""The server used as it is (issue 40): its slots learned from it, the probe letting workers go, its sampling.

Each against a real HTTP server on 127.0.0.1 (tests/llm/fake_openai.py) through the ``openai`` client.

Covers: llm/openai_options.py, llm/openai_transport.py.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fractal_nb.errors import InvalidInputError
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.llm.openai_transport import server_slots
from fractal_nb.llm.protocol import Message
from fractal_nb.llm.schemas import Answer

from .fake_openai import FakeOpenAI, InFlight

MESSAGES: list[Message] = [{"role": "user", "content": "Why is the sky blue?"}]
GOOD = {"answer": "Rayleigh scattering.", "confidence": 0.8}


def test_a_server_that_says_it_has_two_slots_gets_two_requests_at_once() -> None:
    slow = InFlight(GOOD, service_s=0.2)
    with FakeOpenAI("ok", responder=slow, slots=2) as server:
        llm = server.llm(timeout=5)
        assert llm.max_concurrency == 1  # until the first call asks
        llm.complete(MESSAGES, Answer)
        assert llm.max_concurrency == 2 and server.props_asked == 1
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(8)))
    assert slow.most == 2, "both slots kept busy, never a third request queued at the server"
    assert server.props_asked == 1  # asked once


@pytest.mark.parametrize("slots", [None, 1])
def test_a_server_that_does_not_say_or_has_one_slot_gets_one_request_at_a_time(slots: int | None) -> None:
    slow = InFlight(GOOD, service_s=0.2)
    with FakeOpenAI("ok", responder=slow, slots=slots) as server:
        llm = server.llm(timeout=5)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(4)))
    assert slow.most == 1 and llm.max_concurrency == 1 and server.props_asked == 1


def test_slots_are_asked_only_where_auto_on_this_machine_asks() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD, slots=4) as server:
        told = server.llm(max_concurrency=3)
        told.complete(MESSAGES, Answer)
        assert told.max_concurrency == 3 and server.props_asked == 0  # the caller said
    remote = OpenAILLM("m", "https://api.example.com/v1", api_key="k")
    assert remote.max_concurrency is None and not remote._ask_slots  # never a request before a call


def test_server_slots_reads_only_a_llama_cpp_answer() -> None:
    with FakeOpenAI("ok", slots=3) as server:
        assert server_slots(server.base_url) == 3
    with FakeOpenAI("ok") as server:
        assert server_slots(server.base_url) is None  # 404
    assert server_slots("https://api.example.com/v1") is None  # not asked: only plain HTTP here
    assert server_slots("http://127.0.0.1:1/v1", timeout=0.5) is None  # nothing listens


def test_the_mode_probe_lets_the_other_workers_go_as_soon_as_the_mode_is_known() -> None:
    """The probe's correction round trip (minutes on a small model) holds no other worker."""
    others = threading.Event()
    waited: list[bool] = []
    count = itertools.count()

    def respond(body: dict[str, Any]) -> dict[str, Any] | str:
        if next(count) == 0:
            return "}, {"  # the probe's first reply: refused, so a correction follows
        if body["messages"][-1]["content"].startswith("That reply was not"):
            waited.append(others.wait(10))  # the correction is answered once another worker asked
            return GOOD
        others.set()
        return GOOD

    with FakeOpenAI("ok", responder=respond) as server:
        llm = server.llm(timeout=20, max_concurrency=4)
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(3)))
    assert [r["answer"] for r in results] == ["Rayleigh scattering."] * 3
    assert waited == [True], "the other workers waited for the probe's correction round trip"


def test_a_failed_probe_hands_the_probe_to_the_next_worker() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD, down_after=0) as server:
        llm = server.llm(timeout=5, max_retries=0, max_concurrency=2)
        with pytest.raises(Exception, match="503"):
            llm.complete(MESSAGES, Answer)
        assert llm.mode is None
        server.down_after = None
        assert llm.complete(MESSAGES, Answer)["answer"] == "Rayleigh scattering."
        assert llm.mode == "json_schema"


def test_sampling_settings_travel_with_every_request() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD) as server:
        llm = server.llm(sampling={"repeat_penalty": 1.15, "top_k": 40})
        llm.complete(MESSAGES, Answer)
        plain = server.llm()
        plain.complete(MESSAGES, Answer)
    sent, unsent = server.requests
    assert sent["repeat_penalty"] == 1.15 and sent["top_k"] == 40
    assert "repeat_penalty" not in unsent and "top_k" not in unsent


@pytest.mark.parametrize(
    ("sampling", "why"),
    [
        ({"temperature": 0.9}, "cannot set temperature"),
        ({"seed": 1, "max_tokens": 5}, "cannot set max_tokens, seed"),
        ({"repeat_penalty": float("nan")}, "JSON values"),
        ({"x": object()}, "JSON values"),
        ({"": 1}, "setting names"),
        ([("repeat_penalty", 1.1)], "setting names"),
    ],
)
def test_bad_sampling_settings_are_refused_up_front(sampling: Any, why: str) -> None:
    with pytest.raises(InvalidInputError, match=why):
        OpenAILLM("m", "http://127.0.0.1:1/v1", sampling=sampling)
