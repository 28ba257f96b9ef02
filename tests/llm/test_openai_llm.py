"""OpenAILLM with the real openai client against a local fake OpenAI-compatible server.

Covers: llm/retries.py, llm/openai_options.py, llm/openai_replies.py, llm/openai_transport.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import json_repair
import openai
import pytest

from fractal_nb.errors import (
    InvalidInputError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.llm.openai_options import MAX_TOKENS
from fractal_nb.llm.protocol import LLM, Message, estimate_tokens, messages_tokens, metered
from fractal_nb.llm.schemas import SCHEMAS, Answer, SeedPlan

from .fake_openai import FakeOpenAI, InFlight, _junk, schema_responder

MESSAGES: list[Message] = [
    {"role": "system", "content": "You answer questions."},
    {"role": "user", "content": "Why is the sky blue?"},
]
GOOD = {"answer": "Rayleigh scattering.", "confidence": 0.8}
GOOD_FULL = {**GOOD, "sub_questions": [], "saturation": None, "claims": [], "citations": [], "halt": None}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FRACTAL_NB_MODEL", "OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


def make_llm(server: FakeOpenAI, **kw: Any) -> OpenAILLM:
    return server.llm(**{"timeout": 0.5, "max_retries": 0, **kw})


def formats(server: FakeOpenAI) -> list[str | None]:
    return [(r.get("response_format") or {}).get("type") for r in server.requests]


def scripted(*answers: dict[str, Any] | str | None) -> Any:
    """A responder that gives the answers in order, then repeats the last."""
    queue = list(answers)
    return lambda body: queue.pop(0) if len(queue) > 1 else queue[0]


# --- structured-output modes -------------------------------------------------------------


def test_json_schema_mode_is_sent_first_and_works() -> None:
    with FakeOpenAI("ok") as server:
        llm = make_llm(server)
        result = llm.complete(MESSAGES, Answer)
    assert result == {
        "answer": "fake text for a field",
        "confidence": 0.5,
        "sub_questions": [],
        "saturation": None,
        "claims": [],
        "citations": [],  # with sources, the evidence it rests on (engine/evidence.py)
        "halt": None,
    }
    [body] = server.requests
    assert body["model"] == "fake"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == MAX_TOKENS["answer"] and "seed" not in body
    assert body["messages"] == MESSAGES  # the schema travels in response_format only
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": Answer.model_json_schema(), "strict": False},
    }
    assert isinstance(llm, LLM)


def test_llama_cpp_falls_back_to_json_object_and_remembers() -> None:
    with FakeOpenAI("llama_cpp") as server:
        llm = make_llm(server)
        assert llm.complete(MESSAGES, Answer)["confidence"] == 0.5
        assert llm.complete(MESSAGES, SeedPlan)["seed_kind"] == "question"
    assert formats(server) == ["json_schema", "json_object", "json_object"]
    fallback = server.requests[1]
    assert fallback["response_format"]["schema"] == Answer.model_json_schema()
    # The server enforces the schema by grammar: the prompt does not carry it too.
    assert fallback["messages"] == MESSAGES
    assert llm.mode == "json_object"


def test_server_rejecting_both_formats_falls_to_text() -> None:
    with FakeOpenAI("text_only", responder=lambda body: GOOD) as server:
        llm = make_llm(server)
        assert llm.complete([MESSAGES[1]], Answer) == GOOD_FULL
        assert llm.complete([MESSAGES[1]], Answer) == GOOD_FULL
    assert formats(server) == ["json_schema", "json_object", None, None]
    text_body = server.requests[2]
    assert "response_format" not in text_body
    assert text_body["messages"][0]["role"] == "system"  # a system message is added
    assert "only a JSON object" in text_body["messages"][0]["content"]


def test_concurrent_calls_share_the_remembered_mode() -> None:
    with FakeOpenAI("llama_cpp") as server:
        llm = make_llm(server)
        llm.complete(MESSAGES, Answer)
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(8)))
    assert all(r["confidence"] == 0.5 for r in results)
    assert formats(server)[2:] == ["json_object"] * 8


# --- output repair and correction --------------------------------------------------------


def test_junk_wrapped_json_is_repaired() -> None:
    answer = {
        **GOOD,
        "sub_questions": [{"text": "Why not violet?", "proxy_signal": "alternatives"}],
    }
    junk = _junk(answer)
    assert "```" in junk and ",\n}" in junk
    with pytest.raises(json.JSONDecodeError):
        json.loads(junk)
    with FakeOpenAI("junk", responder=lambda body: answer) as server:
        result = make_llm(server).complete(MESSAGES, Answer)
    assert result == {**answer, "saturation": None, "claims": [], "citations": [], "halt": None}
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("bad", "field"),
    [({"confidence": 0.5}, "answer"), ({"answer": "x", "confidence": 1.7}, "confidence")],
)
def test_invalid_output_is_corrected_then_raises(bad: dict[str, Any], field: str) -> None:
    with FakeOpenAI("ok", responder=lambda body: bad) as server:
        llm = make_llm(server, output_retries=2)
        with pytest.raises(LLMOutputError) as info:
            llm.complete(MESSAGES, Answer)
    assert "Answer" in str(info.value) and field in str(info.value)
    assert len(server.requests) == 3
    *_, reply, correction = server.requests[1]["messages"]
    assert reply == {"role": "assistant", "content": json.dumps(bad)}
    assert correction["role"] == "user" and field in correction["content"]
    assert len(server.requests[2]["messages"]) == len(MESSAGES) + 4


def test_a_corrected_reply_is_accepted() -> None:
    responder = scripted({"answer": "x", "confidence": 7}, GOOD)
    with FakeOpenAI("ok", responder=responder) as server, metered() as usage:
        assert make_llm(server).complete(MESSAGES, Answer) == GOOD_FULL
    assert len(server.requests) == 2
    assert usage.attempts == 2


def test_empty_and_prose_replies_count_as_output_failures() -> None:
    responder = scripted(None, "I'd rather not.", GOOD)
    with FakeOpenAI("ok", responder=responder) as server:
        assert make_llm(server, output_retries=2).complete(MESSAGES, Answer) == GOOD_FULL
    second, third = server.requests[1]["messages"], server.requests[2]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "user"]  # no empty assistant turn
    assert "empty" in second[-1]["content"]
    assert third[-2] == {"role": "assistant", "content": "I'd rather not."}


@pytest.mark.parametrize(
    ("fault", "expected"), [("malformed_body", "not JSON"), ("not_json", "no JSON object")]
)
def test_bodies_that_are_not_completions_raise_output_error(fault: str, expected: str) -> None:
    with FakeOpenAI("flaky", failure_rate=1.0, faults=[fault]) as server:
        with pytest.raises(LLMOutputError, match=expected):
            make_llm(server, output_retries=1).complete(MESSAGES, Answer)
    assert len(server.requests) == 2


def test_output_retries_zero_means_one_attempt() -> None:
    with FakeOpenAI("ok", responder=lambda body: {"answer": ""}) as server:
        with pytest.raises(LLMOutputError, match="1 attempts"):
            make_llm(server, output_retries=0).complete(MESSAGES, Answer)
    assert len(server.requests) == 1


# --- transport errors --------------------------------------------------------------------


def test_flaky_server_gives_valid_answers_or_llm_errors() -> None:
    outcomes: list[dict[str, Any] | LLMError] = []
    with FakeOpenAI("flaky", seed=2, slow_s=1.0) as server:  # seed 2 meets all five faults
        llm = make_llm(server, max_retries=2)
        for _ in range(20):
            try:
                outcomes.append(llm.complete(MESSAGES, Answer))
            except LLMError as exc:
                outcomes.append(exc)
    successes = [o for o in outcomes if isinstance(o, dict)]
    assert all(Answer.model_validate(o) for o in successes)
    assert len(successes) >= 17
    assert len(set(server.faults)) >= 4  # several kinds of fault were met and survived
    assert len(server.requests) > 20  # thanks to retries


def test_timeout_raises_llm_timeout_error() -> None:
    def sleepy(body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(1.0)
        return GOOD

    with FakeOpenAI("ok", responder=sleepy) as server:
        with pytest.raises(LLMTimeoutError, match="timed out") as info:
            make_llm(server, max_retries=0).complete(MESSAGES, Answer)
    assert isinstance(info.value.__cause__, openai.APITimeoutError)
    assert len(server.requests) == 1  # a timeout is not a format rejection


def test_rate_limit_after_client_retries_is_an_llm_error() -> None:
    with FakeOpenAI("flaky", failure_rate=1.0, faults=["rate_limit"]) as server:
        with pytest.raises(LLMError, match="HTTP 429") as info:
            make_llm(server, max_retries=1).complete(MESSAGES, Answer)
    assert type(info.value) is LLMError
    assert isinstance(info.value.__cause__, openai.RateLimitError)
    assert len(server.requests) == 1  # the first call probes the mode, without the client's retries


def test_other_http_errors_do_not_fall_back() -> None:
    with FakeOpenAI("ok") as server:
        with (
            OpenAILLM("fake", server.base_url.replace("/v1", "/nowhere"), "x", max_retries=0) as llm,
            pytest.raises(LLMError, match="HTTP 404"),
        ):
            llm.complete(MESSAGES, Answer)


def test_connection_refused_is_an_llm_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAILLM("fake", f"http://127.0.0.1:{port}/v1", "x", max_retries=0, timeout=0.5)
    with pytest.raises(
        LLMUnavailableError,
        match=f"cannot reach the model server at http://127.0.0.1:{port}/v1"
        r"/?: connection refused",
    ) as info:
        llm.complete(MESSAGES, Answer)
    assert isinstance(info.value, LLMError)
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


# --- usage -------------------------------------------------------------------------------


def test_usage_is_reported_once_per_completion() -> None:
    with FakeOpenAI("llama_cpp") as server, metered() as usage:
        make_llm(server).complete(MESSAGES, Answer)
    assert usage.attempts == 1  # the rejected json_schema request returned no completion
    prompt = sum(len(m["content"]) for m in server.requests[1]["messages"]) // 4
    assert usage.prompt_tokens == prompt
    assert usage.completion_tokens == len(json.dumps(schema_responder(server.requests[1]))) // 4


def test_usage_is_estimated_when_the_server_sends_none() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD, usage=False) as server, metered() as usage:
        make_llm(server).complete(MESSAGES, Answer)
    assert usage.attempts == 1 and usage.estimated
    assert usage.prompt_tokens == messages_tokens(MESSAGES)
    assert usage.completion_tokens == estimate_tokens(json.dumps(GOOD))
    with FakeOpenAI("ok", responder=lambda body: GOOD) as server, metered() as usage:
        make_llm(server).complete(MESSAGES, Answer)
    assert usage.attempts == 1 and not usage.estimated


@pytest.mark.parametrize("url", ["refused", "not-a-url"])
def test_requests_that_never_reach_a_server_count_as_none_and_cost_nothing(url: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1" if url == "refused" else url
    llm = OpenAILLM("fake", base_url, "x", max_retries=2, timeout=0.5)
    for _ in range(2):  # the probe (no retries), then a call with the client's retries
        with metered() as usage, pytest.raises(LLMUnavailableError):
            llm.complete(MESSAGES, Answer)
        assert usage.requests is None and usage.attempts == 0
        assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


def test_a_request_the_server_stalls_on_counts_as_sent() -> None:
    with FakeOpenAI("flaky", faults=("slow",), failure_rate=1.0, slow_s=30) as server:
        llm = make_llm(server, timeout=0.2, max_retries=1)
        for _ in range(2):  # the probe (no retries), then a call and the client's one retry
            before = len(server.requests)
            with metered() as usage, pytest.raises(LLMTimeoutError):
                llm.complete(MESSAGES, Answer)
            assert usage.requests == len(server.requests) - before > 0
            assert (usage.prompt_tokens, usage.attempts) == (0, 0)


# --- configuration -----------------------------------------------------------------------


def test_environment_configures_model_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI("ok") as server:
        monkeypatch.setenv("OPENAI_MODEL", "from-openai-model")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        assert OpenAILLM().model == "from-openai-model"
        monkeypatch.setenv("FRACTAL_NB_MODEL", "from-fractal")
        with OpenAILLM(max_retries=0) as llm:
            assert llm.model == "from-fractal"
            llm.complete(MESSAGES, Answer)
    assert server.requests[0]["model"] == "from-fractal"
    assert server.headers[0]["authorization"] == "Bearer sk-env"


def test_local_server_needs_no_key() -> None:
    with FakeOpenAI("ok") as server:
        with OpenAILLM("fake", server.base_url, max_retries=0) as llm:
            llm.complete(MESSAGES, Answer)
    assert server.headers[0]["authorization"].startswith("Bearer ")


def test_missing_model_or_key_raise_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="FRACTAL_NB_MODEL"):
        OpenAILLM(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(InvalidInputError, match="OPENAI_API_KEY"):
        OpenAILLM("gpt-4o-mini")
    with pytest.raises(InvalidInputError, match="output_retries"):
        OpenAILLM("fake", "http://127.0.0.1:9/v1", output_retries=-1)


def test_a_prebuilt_client_is_used() -> None:
    with FakeOpenAI("ok") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        with client:
            llm = OpenAILLM("fake", client=client, temperature=None)
            assert llm.complete(MESSAGES, Answer)["answer"] == "fake text for a field"
    assert "temperature" not in server.requests[0]
    assert llm.base_url.startswith(server.base_url)


def test_repr_shows_model_and_url_but_never_the_key() -> None:
    llm = OpenAILLM("gpt-4o-mini", "http://127.0.0.1:9/v1", "sk-very-secret")
    text = repr(llm)
    assert "gpt-4o-mini" in text and "127.0.0.1:9" in text
    assert "secret" not in text


# --- the fake itself ---------------------------------------------------------------------


@pytest.mark.parametrize("schema", list(SCHEMAS), ids=lambda s: s.__name__)
def test_schema_responder_builds_valid_instances(schema: Any) -> None:
    for fmt in (
        {"type": "json_schema", "json_schema": {"name": "x", "schema": schema.model_json_schema()}},
        {"type": "json_object", "schema": schema.model_json_schema()},
    ):
        schema.model_validate(schema_responder({"response_format": fmt}))
    with pytest.raises(ValueError, match="no JSON schema"):
        schema_responder({"messages": []})


def test_junk_is_repairable() -> None:
    answer = {"answer": "two\nlines", "confidence": 0.3}
    assert Answer.model_validate(json_repair.loads(_junk(answer))).answer == "two\nlines"


# --- a model the server admits: slots, length bounds, seed, one probe, an honest ledger ----


def test_a_loopback_server_gets_one_request_at_a_time_and_queue_time_is_apart() -> None:
    # One request takes 0.25 s, well inside the 1.5 s timeout however loaded the machine; eight queued
    # at the server (2 s) would time out: the client queues them itself, and the timeout is per request.
    slow = InFlight(GOOD, service_s=0.25)
    with FakeOpenAI("ok", responder=slow) as server:
        llm = make_llm(server, timeout=1.5)
        assert llm.max_concurrency == 1  # 127.0.0.1: one slot unless told
        usages = []

        def one(_: int) -> dict[str, Any]:
            with metered() as usage:
                result = llm.complete(MESSAGES, Answer)
            usages.append(usage)
            return result

        with ThreadPoolExecutor(8) as pool:
            assert all(r == GOOD_FULL for r in pool.map(one, range(8)))
    assert slow.most == 1 and len(server.requests) == 8, "one slot, no request timed out and resent"
    waits = sorted(u.queue_s for u in usages)
    # The last one queued behind the others (the first, which probes the server's mode, aside), each
    # holding the slot at least its 0.25 s: a lower bound a slow machine only raises; the first
    # took the free slot, queueing far less.
    assert waits[-1] >= 6 * slow.service_s and waits[0] * 4 < waits[-1], waits
    assert all(u.requests == 1 and u.mode == "json_schema" for u in usages)


def test_max_concurrency_bounds_requests_in_flight() -> None:
    slow = InFlight(GOOD)
    with FakeOpenAI("ok", responder=slow) as server:
        llm = make_llm(server, max_concurrency=3)
        llm.complete(MESSAGES, Answer)  # the probe
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(12)))
    assert slow.most == 3
    with pytest.raises(InvalidInputError, match="max_concurrency"):
        OpenAILLM("m", "http://127.0.0.1:1/v1", max_concurrency=0)
    assert OpenAILLM("m", "https://api.example.com/v1", api_key="k").max_concurrency is None


def test_every_request_carries_its_roles_length_bound_and_the_seed() -> None:
    with FakeOpenAI("ok") as server:
        llm = make_llm(server, seed=11, max_tokens={"seed": 100})
        llm.complete(MESSAGES, SeedPlan)
        llm.complete(MESSAGES, Answer)
        bounded = make_llm(server, max_tokens=64)
        bounded.complete(MESSAGES, Answer)
    assert [(r["max_tokens"], r.get("seed")) for r in server.requests] == [
        (100, 11),
        (MAX_TOKENS["answer"], 11),
        (64, None),
    ]
    with pytest.raises(InvalidInputError, match="unknown roles"):
        OpenAILLM("m", "http://127.0.0.1:1/v1", max_tokens={"essay": 10})
    with pytest.raises(InvalidInputError, match="seed"):
        OpenAILLM("m", "http://127.0.0.1:1/v1", seed="11")  # type: ignore[arg-type]


def test_the_mode_is_probed_once_by_all_workers_without_retries() -> None:
    with FakeOpenAI("llama_cpp") as server:
        llm = make_llm(server, max_retries=2, max_concurrency=4)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: llm.complete(MESSAGES, Answer), range(8)))
    # One json_schema probe (no client retries of its 500), then json_object for everyone.
    assert formats(server) == ["json_schema"] + ["json_object"] * 8


def test_a_transient_5xx_after_the_mode_is_known_never_downgrades_it() -> None:
    with FakeOpenAI("ok", responder=lambda body: GOOD) as server:
        llm = make_llm(server)
        llm.complete(MESSAGES, Answer)
        server.down_after = len(server.requests)  # now every request gets a 503
        with pytest.raises(LLMUnavailableError, match="HTTP 503"):
            llm.complete(MESSAGES, Answer)
        server.down_after = None
        llm.complete(MESSAGES, Answer)
    assert formats(server) == ["json_schema"] * 3 and llm.mode == "json_schema"


def test_the_ledger_counts_every_request_the_server_saw() -> None:
    with FakeOpenAI("ok", responder=scripted({"answer": "", "confidence": 2}, GOOD)) as server:
        llm = make_llm(server, max_retries=1)
        with metered() as usage:
            llm.complete(MESSAGES, Answer)  # one invalid reply, one correction
        assert (usage.requests, usage.attempts) == (2, 2)
        server.down_after = len(server.requests)
        with metered() as usage, pytest.raises(LLMUnavailableError):
            llm.complete(MESSAGES, Answer)  # a 503 and the client's one retry of it
        assert usage.requests == 2 and usage.attempts == 0
    assert len(server.requests) == 4


# --- issue 24: a retry after a refusal is asked differently, and the ledger says how --------------

JUNK_SYNTHESIS = "value_error: The schema's wording, not content: write your own text"  # the issue's


def test_a_correction_round_trip_takes_the_next_seed_and_a_hotter_temperature() -> None:
    responder = scripted({"answer": JUNK_SYNTHESIS, "confidence": 0.5}, GOOD)
    with FakeOpenAI("ok", responder=responder) as server, metered() as usage:
        assert make_llm(server, seed=11).complete(MESSAGES, Answer) == GOOD_FULL
    first, retry = server.requests
    assert (first["seed"], first["temperature"]) == (11, 0.2)
    assert (retry["seed"], retry["temperature"]) == (12, 0.5)
    assert usage.retries == [(12, 0.5)]  # what the ledger is told


def test_the_same_prompt_asked_again_after_a_refusal_is_sampled_differently() -> None:
    """The engine's own retries (a question released, a synthesis tried again) send the same messages."""
    junk = {"answer": "https://en.wikipedia.org/wiki/\nUrban_growth", "confidence": 0.5}
    with FakeOpenAI("ok", responder=scripted(junk, junk, GOOD)) as server:
        llm = make_llm(server, output_retries=0)
        for _ in range(2):
            with pytest.raises(LLMOutputError, match="holds no words"):
                llm.complete(MESSAGES, Answer)
        with metered() as usage:
            assert llm.complete(MESSAGES, Answer) == GOOD_FULL
        llm.complete(MESSAGES, Answer)  # accepted last time: asked as at first again
    sampling = [(r.get("seed"), r["temperature"]) for r in server.requests]
    assert sampling == [(None, 0.2), (None, 0.5), (None, 0.8), (None, 0.2)]  # no seed was set: none sent
    assert usage.retries == [(None, 0.8)]
    assert [r["messages"] for r in server.requests] == [MESSAGES] * 4


def test_a_retry_never_samples_past_the_bound_nor_below_the_callers_temperature() -> None:
    from fractal_nb.llm.openai_llm import MAX_RETRY_TEMPERATURE, retry_sampling

    assert retry_sampling(7, 0.0, 10) == (17, MAX_RETRY_TEMPERATURE)
    assert retry_sampling(7, 1.5, 1) == (8, 1.5)
    assert retry_sampling(None, None, 3) == (None, None)


def test_a_cached_retry_is_recorded_and_replayed_apart(tmp_path: Any) -> None:
    """Record: the refused first reply stores nothing, the varied retry is kept under its own key;
    replay then fails where the recorded run failed and answers where it answered."""
    from fractal_nb.llm.cache import CachedLLM
    from fractal_nb.store import GraphStore

    junk = {"answer": JUNK_SYNTHESIS, "confidence": 0.5}
    with (
        FakeOpenAI("ok", responder=scripted(junk, GOOD)) as server,
        GraphStore(tmp_path / "c.duckdb") as store,
    ):
        recorder = CachedLLM(make_llm(server, output_retries=0), store, "record")
        with pytest.raises(LLMOutputError):
            recorder.complete(MESSAGES, Answer)
        assert recorder.complete(MESSAGES, Answer) == GOOD_FULL
        assert server.requests[1]["temperature"] > server.requests[0]["temperature"]
        replay = CachedLLM(None, store, "replay")
        with pytest.raises(LLMError, match="no recorded Answer completion"):
            replay.complete(MESSAGES, Answer)
        assert replay.complete(MESSAGES, Answer) == GOOD_FULL  # the retry's own recording
        # A recording is judged like a fresh reply: junk recorded by an older version is refused.
        store.cache_put(recorder._key(MESSAGES, Answer, []), model="fake", role="answer", response=junk)
        with pytest.raises(LLMOutputError, match="recorded Answer reply refused"):
            CachedLLM(None, store, "replay").complete(MESSAGES, Answer)


def test_a_model_that_answers_with_the_correction_leaves_a_degraded_result(tmp_path: Any) -> None:
    """The issue's run: the gates' correction given back as the root synthesis and the summary.

    Refused every time, it is never stored; the root's synthesis is joined visibly and the
    result says it is degraded.
    """
    from fractal_nb import Exploration
    from tests.engine.test_openai_runs import FAST, SEED, role_responder, schema_name

    sensible = role_responder()

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        name = schema_name(body)
        if name == "Synthesis":
            return {"synthesis": JUNK_SYNTHESIS, "tensions": []}
        if name == "HarvestFindings":
            finding = "'A paragraph of your own.' is the schema's wording, not…"
            return {"findings": [{"finding": finding, "confidence": "high"}]}
        return sensible(body)

    with FakeOpenAI("ok", responder=respond) as server:
        llm = server.llm(timeout=5.0, max_retries=0, seed=7)
        with Exploration.create(
            SEED, intensity="pulse", llm=llm, clock=FAST, path=tmp_path / "j.duckdb"
        ) as ex:
            ex.run(progress=False)
            result = ex.harvest(finish=True)
            texts = " ".join(ex.nodes()["text"]) + " ".join(c.synthesis for c in result.synthesis_chain)
            calls = ex.llm_calls()
    assert "value_error" not in texts and "schema's wording" not in result.summary
    assert result.degraded and result.synthesis_chain[0].degraded
    assert any("synthes" in r for r in result.degraded_reasons)
    assert any("no findings were drawn" in r for r in result.degraded_reasons)
    assert result.summary == result.synthesis_chain[0].synthesis and result.findings == []
    refused = calls[calls["role"] == "synthesize"]
    assert (refused["outcome"] == "error").all() and refused["error"].str.contains(
        "repeats the instructions"
    ).all()
    # Each synthesis retried is sampled with a seed of its own: the same prompt never gets the same request.
    synthesize = [r for r in server.requests if schema_name(r) == "Synthesis"]
    assert len({(json.dumps(r["messages"]), r["seed"]) for r in synthesize}) == len(synthesize) > 2


def test_a_proxy_named_by_the_environment_carries_the_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger's counting transport keeps the environment's proxy (HTTP_PROXY, NO_PROXY)."""
    import http.server
    import urllib.request

    with FakeOpenAI("ok") as server:
        target = server.base_url.rsplit("/v1", 1)[0]
        seen: list[str] = []

        class Forwarder(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # a proxy gets the whole URL; it sends the request on to the server
                seen.append(self.path)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                path = "/" + self.path.split("/", 3)[3]
                forward = urllib.request.Request(
                    target + path, data=body, headers={"Content-Type": "application/json"}
                )
                direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # not via itself
                with direct.open(forward, timeout=10) as reply:
                    data = reply.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forwarder)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
            monkeypatch.setenv("NO_PROXY", "")
            llm = OpenAILLM(model="fake", base_url="http://model.invalid/v1", api_key="x")
            with metered() as usage:
                llm.complete(MESSAGES, Answer)
            llm.close()
        finally:
            proxy.shutdown()
            proxy.server_close()
        assert seen == ["http://model.invalid/v1/chat/completions"] and len(server.requests) == 1
        assert usage.requests == 1  # counted as a request the server had
