"""A ledger that cannot lie: each row's ``attempts`` counts the requests the server saw, its tokens
are the server's (or marked estimated), compared with the fake servers' own request logs in every
fault mode: down at the start, a URL that is no URL, dying mid-run, HTTP 500 to json_schema, junk
replies, stalls, a server that reports no usage, and replies no server should send (issue 37).

Covers: engine/calls.py, store/llm_log.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fractal_nb import Exploration
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.store.llm_log import MAX_CALL_TOKENS
from tests.engine.test_openai_runs import FAST, SEED, refused_once_responder, role_responder
from tests.llm.fake_openai import ABSURD_TOKENS, BAD_REPLIES, NEGATIVE_TOKENS, FakeOpenAI
from tests.local_port import free_port


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def run_on(llm: OpenAILLM, path: Path) -> tuple[str, Exploration]:
    ex = Exploration.create(SEED, intensity="pulse", llm=llm, path=path, clock=FAST)
    return str(ex.run(progress=False)), ex


def check_ledger_matches(ex: Exploration, server: FakeOpenAI, *, tokens: bool = True) -> None:
    """The ledger's attempts are the server's requests; its tokens the usage the server answered with."""
    calls = ex.llm_calls()
    assert int(calls["attempts"].sum()) == len(server.requests)
    if tokens:
        reported = [u for u in server.usages if u is not None]
        assert int(calls["prompt_tokens"].sum()) == sum(u["prompt_tokens"] for u in reported)
        assert int(calls["completion_tokens"].sum()) == sum(u["completion_tokens"] for u in reported)
        assert not calls["tokens_estimated"].any()


@pytest.mark.parametrize("url", ["down", "not-a-url"])
def test_a_model_never_reached_is_logged_with_no_request_and_no_tokens(tmp_path: Path, url: str) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1" if url == "down" else url  # nothing listens there
    with OpenAILLM(model="fake", base_url=base_url, api_key="x", max_retries=2) as llm:
        status, ex = run_on(llm, tmp_path / "down.duckdb")
        with ex:
            assert status == "model_unavailable"
            calls = ex.llm_calls()
            assert len(calls) and (calls["outcome"] == "error").all()
            assert (calls["attempts"] == 0).all(), "no request reached a server"
            assert (calls["prompt_tokens"] == 0).all() and (calls["completion_tokens"] == 0).all()
            assert ex.usage()["tokens"] == 0


@pytest.mark.parametrize("retries", [0, 2])
def test_a_model_that_dies_mid_run_is_logged_as_the_server_saw_it(tmp_path: Path, retries: int) -> None:
    with FakeOpenAI(responder=role_responder(), down_after=3) as server:
        status, ex = run_on(server.llm(max_retries=retries), tmp_path / "dies.duckdb")
        with ex:
            assert status == "model_unavailable" and len(server.requests) > 3
            check_ledger_matches(ex, server)


@pytest.mark.parametrize("mode", ["llama_cpp", "junk", "text_only"])
def test_servers_that_refuse_formats_or_send_junk_are_logged_as_they_answered(
    tmp_path: Path, mode: str
) -> None:
    with FakeOpenAI(mode, responder=role_responder()) as server:
        status, ex = run_on(server.llm(), tmp_path / f"{mode}.duckdb")
        with ex:
            assert status == "all_complete"
            check_ledger_matches(ex, server)


def test_stalled_requests_count_as_sent_and_no_tokens_are_invented(tmp_path: Path) -> None:
    with FakeOpenAI(
        "flaky", responder=role_responder(), faults=("slow",), failure_rate=0.3, slow_s=30, seed=3
    ) as server:
        status, ex = run_on(server.llm(timeout=0.3, max_retries=1), tmp_path / "stall.duckdb")
        with ex:
            assert status in ("all_complete", "model_unavailable") and server.faults
            # A stalled request reached the server (it is in its log) though no reply came back.
            check_ledger_matches(ex, server, tokens=False)
            calls = ex.llm_calls()
            stalled = calls[calls["error"].fillna("").str.startswith("LLMTimeoutError")]
            assert len(stalled) and (stalled["prompt_tokens"] == 0).all()


def test_tokens_a_server_does_not_report_are_marked_estimated(tmp_path: Path) -> None:
    with FakeOpenAI(responder=role_responder(), usage=False) as server:
        status, ex = run_on(server.llm(), tmp_path / "no-usage.duckdb")
        with ex:
            assert status == "all_complete"
            check_ledger_matches(ex, server, tokens=False)
            calls = ex.llm_calls()
            assert calls["tokens_estimated"].all() and (calls["prompt_tokens"] > 0).all()


def test_the_ledger_says_how_each_retry_after_a_refusal_was_sampled(tmp_path: Path) -> None:
    with FakeOpenAI("ok", responder=refused_once_responder()) as server:
        status, ex = run_on(server.llm(seed=5), tmp_path / "retries.duckdb")
        with ex:
            assert status == "all_complete"
            calls = ex.llm_calls()
            retried = calls[calls["retry_sampling"].notna()]
            assert len(retried) >= 3, "every answer was refused once and asked again"
            sent = [(r.get("seed"), r.get("temperature")) for r in server.requests]
            for text in retried["retry_sampling"]:
                for entry in json.loads(text):
                    assert (entry["seed"], entry["temperature"]) in sent  # what the server was sent
                    assert entry["seed"] > 5  # never the first request's seed again
            assert calls.loc[calls["corrections"] == 0, "retry_sampling"].isna().all()


@pytest.mark.parametrize("fault", BAD_REPLIES)
def test_replies_a_server_should_never_send_are_logged_as_it_sent_them(tmp_path: Path, fault: str) -> None:
    # Issue 37: absurd or negative usage, bytes that are not UTF-8, a lone surrogate, an over-long
    # body, among good replies. Every request is in the ledger, every figure within its range.
    with FakeOpenAI(
        "flaky", responder=role_responder(), faults=(fault,), failure_rate=0.3, seed=2, huge_bytes=3 << 20
    ) as server:
        status, ex = run_on(server.llm(), tmp_path / f"{fault}.duckdb")
        with ex:
            assert status == "all_complete" and fault in server.faults
            assert ex.harvest().status == "completed"
            check_ledger_matches(ex, server, tokens=False)
            calls = ex.llm_calls()
            assert calls["prompt_tokens"].between(0, MAX_CALL_TOKENS).all()
            assert calls["completion_tokens"].between(0, MAX_CALL_TOKENS).all()
            refused = [json.loads(text) for text in calls["refused_usage"].dropna()]
            counted = ex.sql("SELECT count(*) AS n FROM llm_calls WHERE refused_usage IS NOT NULL")
            assert int(counted["n"][0]) == len(refused), "ex.sql reads the column, all NULL too"
            if fault.endswith("_usage"):  # the server's figures kept, as sent, once per absurd completion
                sent = ABSURD_TOKENS if fault == "absurd_usage" else NEGATIVE_TOKENS
                entries = [entry for row in refused for entry in row]
                assert len(entries) == server.bad_replies.count(fault) > 0
                assert all(e == {"prompt_tokens": sent, "completion_tokens": sent} for e in entries)
                assert calls.loc[calls["refused_usage"].notna(), "tokens_estimated"].all()
                assert int(calls["prompt_tokens"].sum()) < 1_000_000, "no figure taken from the absurd ones"
            else:  # a body that could not be read: refused, asked again, logged with its requests
                assert not refused
                assert (calls["corrections"] > 0).any() or (calls["outcome"] == "error").any()
