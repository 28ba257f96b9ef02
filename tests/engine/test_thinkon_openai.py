"""Thinkon chains through the real openai client against local OpenAI-compatible servers (127.0.0.1).

The fake server's model plays Think and Eval as the simulator does, from the prompt it
is sent; the servers misbehave the way real ones do: llama.cpp's HTTP 500 to
``json_schema``, replies wrapped in prose and fences, a flaky transport, a model
whose reply for one sub-goal is never valid, and a server that dies mid-chain.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.llm.schemas import Eval, Think
from tests.engine.chain_script import assert_chain_invariant
from tests.engine.test_openai_runs import FAST, first_user, schema_name
from tests.engine.test_thinkon import events, parents, root_done
from tests.llm.fake_openai import FakeOpenAI

GOAL = "Should a mid-sized city build a tram line?"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


def chain_responder(*, broken: str | None = None, prose: bool = False) -> Any:
    """Think and Eval as the simulator plays them; a sub-goal containing ``broken`` gets an empty reply
    (``prose``: a chatty sentence that holds no JSON at all)."""
    schemas = {"Think": Think, "Eval": Eval}

    def respond(body: dict[str, Any]) -> dict[str, Any] | str:
        prompt = first_user(body)
        if broken is not None and schema_name(body) == "Think" and f"Goal of this level: {broken}" in prompt:
            if prose:
                return "Sure! I would be happy to help with that level of the plan."
            return {"type": "RETURN", "description": ""}  # no words: refused, corrected once, refused again
        return SimulatedLLM(seed=3).complete(
            [{"role": "user", "content": prompt}], schemas[schema_name(body)]
        )

    return respond


def run_chain(server: FakeOpenAI, **options: Any) -> tuple[Exploration, Any]:
    llm = server.llm(**{"timeout": 5.0, "max_retries": 1, **options})
    ex = Exploration.create(GOAL, intensity="explore", llm=llm, strategy="thinkon", clock=FAST)
    return ex, ex.run(progress=False)


def test_a_chain_through_llama_cpp_falls_back_to_json_object_and_finishes() -> None:
    with FakeOpenAI("llama_cpp", responder=chain_responder()) as server:
        ex, status = run_chain(server)
        with ex:
            assert status == "all_complete"
            result = ex.harvest()
            assert not result.degraded and result.findings and result.strategy == "thinkon"
            formats = [(r.get("response_format") or {}).get("type") for r in server.requests]
            assert formats[0] == "json_schema" and set(formats[1:]) == {"json_object"}
            titles = {r["response_format"]["schema"]["title"] for r in server.requests[1:]}
            assert titles == {"Think", "Eval"}
            calls = ex.llm_calls()
            assert set(calls["role"]) == {"think", "eval"} and set(calls["outcome"]) == {"ok"}
            assert calls["attempts"].sum() == len(server.requests)
            assert_chain_invariant(events(ex), parents(ex))


def test_junk_wrapped_replies_are_repaired_and_a_flaky_server_only_slows_the_chain() -> None:
    with FakeOpenAI("junk", responder=chain_responder()) as server:
        ex, status = run_chain(server)
        with ex:
            assert status == "all_complete" and not ex.harvest().degraded
            assert (ex.llm_calls()["attempts"] == 1).all(), "repaired, never sent back"
    with FakeOpenAI("flaky", responder=chain_responder(), seed=5, failure_rate=0.3, slow_s=0.8) as server:
        ex, status = run_chain(server, timeout=0.5, max_retries=3)
        with ex:
            assert status == "all_complete", status
            assert server.faults, "the server did fail some requests"
            assert_chain_invariant(events(ex), parents(ex))


@pytest.mark.parametrize("prose", [False, True], ids=["empty description", "no JSON at all"])
def test_a_reply_never_valid_ends_its_branch_after_one_correction_and_the_chain_goes_on(prose: bool) -> None:
    with FakeOpenAI("ok", responder=chain_responder()) as probe:  # which sub-goals the chain calls
        ex, _ = run_chain(probe)
        with ex:
            goals = [d["goal"] for d in root_done(ex)]
    broken = goals[0]
    with FakeOpenAI("ok", responder=chain_responder(broken=broken, prose=prose)) as server:
        ex, status = run_chain(server, max_retries=0, output_retries=1)
        with ex:
            assert status == "all_complete"
            done = root_done(ex)
            assert done[0]["goal"] == broken and done[0]["outcome"] == "failed"
            assert "LLMOutputError" in done[0]["result"]
            assert any(d["outcome"] == "returned" for d in done[1:]), "the siblings went on"
            calls = ex.llm_calls()
            rejected = calls[calls["error"].fillna("").str.startswith("LLMOutputError")]
            assert len(rejected) >= 1 and (rejected["attempts"] == 2).all(), "one correction round trip"
            result = ex.harvest()
            assert any(broken in g for g in result.gaps)
            assert_chain_invariant(events(ex), parents(ex))


def test_a_server_that_dies_mid_chain_leaves_it_resumable() -> None:
    with FakeOpenAI("ok", responder=chain_responder(), down_after=3) as server:
        ex, status = run_chain(server, max_retries=0)
        with ex:
            assert status == "model_unavailable" and "503" in str(status.status_reason), status
            chain = ex.store.thinkon_chain(ex.graph_id)
            assert chain and chain[-1]["status"] == "open", "the level is given back, not failed"
            assert not any(d["outcome"] == "failed" for level in chain for d in level["done"])
            server.down_after = None  # the model is back
            assert ex.run(progress=False, resume=True) == "all_complete"
            assert not ex.harvest().degraded
            assert_chain_invariant(events(ex), parents(ex))
