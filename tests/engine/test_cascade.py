"""The synthesis cascade climbs with the claims its writes make (docs/architecture/engine.md, "The cascade").

Covers: engine/primitive.py.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine.primitive import cascade
from fractal_nb.errors import LLMOutputError
from tests.conftest import Backend
from tests.engine.test_runs import FAST, assert_no_double_claims

pytestmark = pytest.mark.both_backends

SEED = "Why do some cities grow faster than others?"


def counting_ready_queries(ex: Exploration) -> list[str]:
    """The whole-graph hand-outs (``claim_synthesis``) the run asks for, by worker."""
    asked: list[str] = []
    whole_graph = ex.store.claim_synthesis

    def claim_synthesis(graph_id: str, worker_id: str, **kw: Any) -> Any:
        asked.append(worker_id)
        return whole_graph(graph_id, worker_id, **kw)

    ex.store.claim_synthesis = claim_synthesis  # type: ignore[method-assign]
    return asked


@pytest.mark.parametrize("workers", [1, 4])
def test_a_run_climbs_and_asks_the_whole_graph_only_at_its_end(backend: Backend, workers: int) -> None:
    with Exploration.create(
        SEED, intensity="explore", llm=SimulatedLLM(seed=5), clock=FAST, path=backend.target
    ) as ex:
        asked = counting_ready_queries(ex)
        report, runs = ex.run(max_workers=workers, progress=False), 1
        while report == "budget_exhausted":  # the circuit breaker: each run is a new round of workers
            ex.new_budget()  # budget_exhausted is terminal for resume: a new turn goes on
            report, runs = ex.run(max_workers=workers, progress=False), runs + 1
        assert report == "all_complete"
        events = ex.events()
        syntheses = len(events.query("kind == 'synthesis_claimed'"))
        assert syntheses > 5, "the tree's questions were synthesized through claims"
        # Before the climb every leaf's answer asked the whole graph; now the workers leaving a
        # finished graph and the settling cascade do, once each per run.
        assert len(asked) <= runs * (workers + 1), (len(asked), runs, syntheses)
        assert_no_double_claims(ex)
        snapshot = ex.store.get_snapshot(ex.graph_id)
        assert all(
            n["status"] in ("synthesized", "saturated")
            for n in snapshot["nodes"]
            if n["node_type"] == "question"
        )


class GivesBackSyntheses(SimulatedLLM):
    """The simulator, but the first ``failures`` synthesis calls fail (their syntheses are given back)."""

    def __init__(self, failures: int) -> None:
        super().__init__(seed=5)
        self.failures = failures

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if getattr(schema, "role", "") == "synthesize" and self.failures > 0:
            self.failures -= 1
            raise LLMOutputError("the reply held no synthesis")
        return super().complete(messages, schema)


def given_back_then_done(ex: Exploration) -> None:
    calls = ex.llm_calls()
    synth = calls[calls["role"] == "synthesize"]
    failed = set(synth[synth["outcome"] == "error"]["node_id"])
    assert failed, "some synthesis failed"
    ok = set(synth[synth["outcome"] == "ok"]["node_id"])
    assert failed <= ok, f"given back and never retried: {failed - ok}"


@pytest.mark.parametrize("workers", [1, 3])
def test_a_synthesis_given_back_is_synthesized_in_the_same_run(backend: Backend, workers: int) -> None:
    with Exploration.create(
        SEED, intensity="explore", llm=GivesBackSyntheses(3), clock=FAST, path=backend.target
    ) as ex:
        report = ex.run(max_workers=workers, progress=False)
        while report == "budget_exhausted":
            ex.new_budget()
            report = ex.run(max_workers=workers, progress=False)
        assert report == "all_complete"
        given_back_then_done(ex)


def test_stepping_retries_a_synthesis_given_back_when_no_question_is_left(backend: Backend) -> None:
    with Exploration.create(
        SEED, intensity="pulse", llm=GivesBackSyntheses(2), clock=FAST, path=backend.target
    ) as ex:
        while ex.step(5):
            pass
        given_back_then_done(ex)
        root = ex.store.get_node(ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"])["node"]
        assert root["status"] == "synthesized"


@pytest.mark.parametrize("workers", [1, 3])
def test_a_worker_claims_and_reads_in_one_call(backend: Backend, workers: int) -> None:
    """docs/architecture/engine.md, "A worker's round trips": no separate read per question or synthesis."""
    with Exploration.create(
        SEED, intensity="explore", llm=SimulatedLLM(seed=5), clock=FAST, path=backend.target
    ) as ex:
        reads: list[str] = []
        for name in ("get_context", "get_synthesis_inputs"):
            separate = getattr(ex.store, name)

            def read(graph_id: str, node_id: str, _read: Any = separate, _name: str = name, **kw: Any) -> Any:
                reads.append(f"{_name} from {sys._getframe(1).f_code.co_name}")
                return _read(graph_id, node_id, **kw)

            setattr(ex.store, name, read)
        if ex.run(max_workers=workers, progress=False) == "budget_exhausted":
            ex.new_budget()  # the circuit breaker: terminal for resume, a new turn goes on
        ex.step(2)
        events = ex.events()
        assert len(events.query("kind == 'claimed'")) > 5
        assert len(events.query("kind == 'synthesis_claimed'")) > 3
        # A run's start and end read the root (the seed phase, the settle); a step reads nothing apart.
        assert not [r for r in reads if r.endswith(("from process", "from synthesize"))], reads


def test_a_climb_that_meets_an_outage_gives_its_synthesis_back(backend: Backend) -> None:
    """The answer's write claimed the synthesis above; the model went down before the climb began.

    The run pauses, and the held synthesis goes back at once: the next run (or another
    worker) takes it, where a lease held by this live process would have kept it.
    """
    with Exploration.create(
        SEED, intensity="pulse", llm=SimulatedLLM(seed=5), clock=FAST, path=backend.target
    ) as ex:
        store, g, root = ex.store, ex.graph_id, ex.store.get_graph(ex.graph_id)["root_node_id"]
        answer = store.add_node(g, root, "answer", "Jobs and trade.")["node_id"]
        leaf = store.add_node(g, answer, "question", "Which jobs?")["node_id"]
        assert store.claim_work(g, "w1")["node_id"] == leaf
        written = store.submit_answer(g, leaf, "Trade jobs.", owner="w1", claim_next=True)
        assert written["next_synthesis"]["node_id"] == root
        ex._state.call.outage = "model unavailable: test"
        assert cascade(ex._state, "w1", written["next_synthesis"]) == ()
        assert store.claim_synthesis(g, "w2")["node_id"] == root
