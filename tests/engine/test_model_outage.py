"""A model that is down, or dies mid-run, pauses the run with the reason; when it is back the graph runs on.

Through the real openai client: a closed port on 127.0.0.1 (nothing listens), then
the local fake server started on that very port; and a fake server whose model
answers HTTP 503 after some requests, then recovers.

Covers: wire.py, engine/calls.py, engine/outcome.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fractal_nb import Exploration, LLMError, LLMOutputError, LLMUnavailableError, SimulatedLLM, StateError
from fractal_nb.engine.calls import FAILING_AFTER, UNAVAILABLE_AFTER, ModelCaller
from fractal_nb.llm.openai_llm import OpenAILLM
from fractal_nb.store import GraphStore
from tests.engine.test_openai_runs import FAST, SEED, role_responder
from tests.llm.fake_openai import BAD_REPLIES, FakeOpenAI
from tests.local_port import free_port


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def paused_reason(ex: Exploration) -> str:
    graph = ex.store.get_graph(ex.graph_id)
    assert graph["status"] == "paused", graph
    return str(graph["status_reason"])


def test_a_model_that_is_down_pauses_the_graph_and_it_runs_on_when_the_model_is_back(
    tmp_path: Path,
) -> None:
    port = free_port()
    llm = OpenAILLM(model="fake", base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    with (
        llm,
        Exploration.create(SEED, intensity="pulse", llm=llm, path=tmp_path / "down.duckdb", clock=FAST) as ex,
    ):
        assert ex.run(progress=False) == "model_unavailable"
        reason = paused_reason(ex)
        assert reason.startswith(
            f"model unavailable: cannot reach the model server at http://127.0.0.1:{port}/v1"
        ) and reason.endswith("connection refused")
        calls = ex.llm_calls()
        assert len(calls) == UNAVAILABLE_AFTER and (calls["outcome"] == "error").all()
        assert calls["error"].str.startswith("LLMUnavailableError: cannot reach").all()
        assert len(ex.nodes()) == 1  # nothing harvested, nothing frozen: the root waits, open
        assert ex.nodes()["status"].tolist() == ["open"]
        with FakeOpenAI(responder=role_responder(), port=port):  # the model is back, same address
            assert ex.run(progress=False) == "all_complete"
            result = ex.harvest()
        assert result.status == "completed" and not result.gaps


@contextmanager
def dying_model(path: Path) -> Iterator[tuple[FakeOpenAI, Exploration]]:
    """An explore run on a fake server whose model answers 503 after 12 requests (``down_after``)."""
    with FakeOpenAI(responder=role_responder(), down_after=12) as server:
        llm = server.llm(max_retries=0)
        with Exploration.create(SEED, intensity="explore", llm=llm, path=path, clock=FAST) as ex:
            yield server, ex


def test_a_model_that_dies_mid_run_is_reported_as_such_not_as_a_budget(tmp_path: Path) -> None:
    with dying_model(tmp_path / "dies.duckdb") as (server, ex):
        assert ex.run(progress=False) == "model_unavailable"
        assert paused_reason(ex).startswith("model unavailable: the model server at ")
        assert "HTTP 503" in paused_reason(ex)
        nodes = ex.nodes()
        questions = nodes[nodes["node_type"] == "question"]
        assert (questions["status"] != "claimed").all()  # every claim given back
        assert not (questions["status"] == "error").any()  # the outage is not the questions' fault
        assert "meta_failures" not in nodes or nodes["meta_failures"].fillna(0).eq(0).all()
        assert ex.events().query("kind == 'graph_status_changed'")["payload"].map(
            lambda p: p["to"]
        ).tolist() == ["paused"]
        server.down_after = None  # back
        assert ex.run(progress=False) == "all_complete"
        assert ex.harvest().status == "completed"


def test_the_caller_declares_an_outage_after_failures_in_a_row_and_a_success_resets_it() -> None:
    store = GraphStore()
    caller = ModelCaller(SimulatedLLM(), store, "g-none")
    for _ in range(UNAVAILABLE_AFTER - 1):
        caller._observe(LLMUnavailableError("cannot reach"))
    caller._observe(None)  # one call got through
    for _ in range(UNAVAILABLE_AFTER - 1):
        caller._observe(LLMUnavailableError("cannot reach"))
    assert caller.outage is None
    caller._observe(LLMUnavailableError("cannot reach the model server at X: connection refused"))
    assert caller.outage == "model unavailable: cannot reach the model server at X: connection refused"
    caller.reset_health()
    assert caller.outage is None
    for _ in range(FAILING_AFTER - 1):
        caller._observe(LLMOutputError("junk"))
    assert caller.outage is None
    caller._observe(LLMError("HTTP 400"))
    assert caller.outage is not None
    assert caller.outage.startswith(f"model failed {FAILING_AFTER} calls in a row")
    store.close()


def test_step_stops_where_a_run_would_when_the_model_dies(tmp_path: Path) -> None:
    # step() goes through the dispatcher's checks (engine/outcome.py, held_back): once the model
    # is down it claims no more, rather than failing every open question one by one.
    with dying_model(tmp_path / "steps.duckdb") as (server, ex):
        records = ex.step(200)
        open_left = ex.nodes().query("node_type == 'question' and status == 'open'")
        assert len(records) < 200 and len(open_left) > 0
        failed_in_a_row = [r for r in records if not r.ok]
        assert len(failed_in_a_row) <= UNAVAILABLE_AFTER
        calls_before = len(ex.llm_calls())
        server.down_after = None  # back: the next step tries again
        more = ex.step(2)
        assert len(more) == 2 and all(r.ok for r in more)
        assert len(ex.llm_calls()) > calls_before


def test_a_step_at_a_spent_budget_is_refused() -> None:
    with Exploration.create(SEED, intensity="explore", llm=SimulatedLLM(seed=2), clock=FAST) as ex:
        assert ex.run(progress=False, max_tokens=4_000) == "budget_exhausted"
        spent = len(ex.llm_calls())
        with pytest.raises(StateError, match="terminal for resume.*new_budget"):  # seed 001: no silent resume
            ex.step(50)
        assert len(ex.llm_calls()) == spent  # nothing more paid for


@pytest.mark.parametrize("fault", BAD_REPLIES)
def test_a_server_whose_every_reply_is_bad_never_crashes_the_run_nor_leaves_it_active(
    tmp_path: Path, fault: str
) -> None:
    # Issue 37: run() returns a report (never a raw exception), the graph goes on or pauses with the
    # reason, and harvest() works; the ledger holds every request the server saw.
    with FakeOpenAI(fault, responder=role_responder(), huge_bytes=3 << 20) as server:
        llm = server.llm(max_retries=0)
        with Exploration.create(
            SEED, intensity="pulse", llm=llm, path=tmp_path / "bad.duckdb", clock=FAST
        ) as ex:
            report = ex.run(progress=False)
            assert int(ex.llm_calls()["attempts"].sum()) == len(server.requests) > 0
            if fault.endswith(
                "_usage"
            ):  # only the accounting was wrong: the work is done, the figures estimated
                assert report == "all_complete"
                assert ex.harvest().status == "completed"
                assert ex.llm_calls()["refused_usage"].notna().all()
                return
            assert report in ("seed_failed", "model_unavailable"), report
            said = {
                "not_utf8": "not UTF-8",
                "lone_surrogate": "not Unicode text",
                "huge_body": "max_reply_bytes",
            }
            assert said[fault] in paused_reason(ex)
            result = ex.harvest(finish=True)
            assert result.status == "completed" and result.degraded
            assert ex.status == "completed"
