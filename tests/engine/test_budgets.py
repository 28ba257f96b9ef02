"""Budgets that hold (docs/notebook.md, "Budgets"): tokens admitted before each call, so a run and its harvest
spend at most one call past the budget, whatever the number of workers; the reason states the spend
the ledger holds; a call the budget refuses is never made and leaves its question open. A model that
reports no usage is counted on estimates (issue 37), marked so in the ledger.

Covers: engine/calls.py, engine/outcome.py, llm/protocol.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine.calls import ModelCaller
from fractal_nb.engine.limits import Allowance, Limits
from fractal_nb.errors import BudgetExhaustedError, LLMOutputError
from fractal_nb.llm.protocol import Message, estimate_tokens, messages_tokens, metered, report_usage
from fractal_nb.llm.schemas import Answer
from tests.engine.test_openai_runs import FAST, refused_once_responder, role_responder
from tests.llm.fake_openai import FakeOpenAI

BUDGET = 6_000
SEED = "Why do rivers meander?"


def ledger(ex: Exploration) -> tuple[int, int, int]:
    """The graph's calls, their tokens, and the most one call took: what the ledger says."""
    calls = ex.llm_calls()
    tokens = calls["prompt_tokens"] + calls["completion_tokens"]
    return len(calls), int(tokens.sum()), int(tokens.max())


def check_budget_held(ex: Exploration, workers: int) -> None:
    report = ex.run(workers, progress=False, max_tokens=BUDGET)
    calls, spent, biggest = ledger(ex)
    assert report == "budget_exhausted"
    assert report.status_reason == f"token budget of {BUDGET:,} reached ({spent:,} spent)", (
        "the ledger's spend"
    )
    assert BUDGET <= spent <= BUDGET + biggest, f"{spent:,} spent on a {BUDGET:,} budget at {workers} workers"
    nodes = ex.nodes()
    assert not (nodes["status"] == "claimed").any(), "a refused call leaves its question open, never claimed"
    assert (nodes.query("status == 'open'")["meta_budget_exhausted"]).all()
    result = ex.harvest(finish=True)  # at a spent budget: no model call, and the result says so
    assert ledger(ex)[:2] == (calls, spent)
    assert any(g.endswith("the harvest made no model calls") for g in result.gaps) and result.degraded


@pytest.mark.parametrize("workers", [1, 8, 15])
def test_a_deep_run_and_its_harvest_stay_within_one_call_of_the_budget(workers: int) -> None:
    with Exploration.create(SEED, intensity="deep", llm=SimulatedLLM(seed=1), clock=FAST) as ex:
        check_budget_held(ex, workers)


@pytest.mark.parametrize("workers", [1, 8, 15])
def test_the_budget_holds_with_a_slow_model_behind_http(workers: int) -> None:
    with FakeOpenAI(responder=role_responder(), latency_s=0.05) as server:
        llm = server.llm(max_concurrency=None)  # every worker's call in flight at once
        with Exploration.create(SEED, intensity="deep", llm=llm, clock=FAST) as ex:
            check_budget_held(ex, workers)
            assert sum(ex.llm_calls()["attempts"]) == len(server.requests)


@pytest.mark.parametrize("workers", [8, 15])
def test_the_budget_holds_when_calls_take_correction_rounds(workers: int) -> None:
    # A call of several requests (its corrections resend the conversation) is reserved whole.
    with FakeOpenAI(responder=refused_once_responder(), latency_s=0.05) as server:
        llm = server.llm(max_concurrency=None, output_retries=2)
        with Exploration.create(SEED, intensity="deep", llm=llm, clock=FAST) as ex:
            check_budget_held(ex, workers)
            assert (ex.llm_calls()["corrections"] > 0).any(), "no call took a correction round"


def test_a_model_without_a_price_is_refused_before_its_first_call() -> None:
    purse = Allowance(Limits.parse(max_cost=1.0, prices={"priced": (1.0, 1.0)}))
    with pytest.raises(BudgetExhaustedError, match="no price for model"):
        purse.reserve("unpriced", 10, 10)
    purse.settle(purse.reserve("priced", 10, 10), 10, 10)


def test_a_model_error_holding_control_characters_is_logged_not_a_crash() -> None:
    class NulErrors(SimulatedLLM):
        def complete(self, messages, schema):  # type: ignore[no-untyped-def]
            if getattr(schema, "role", "") == "synthesize":  # a pulse run makes no connect call
                raise LLMOutputError("the reply held no JSON object: '\x00\x1b[31mjunk'")
            return super().complete(messages, schema)

    with Exploration.create(SEED, intensity="pulse", llm=NulErrors(seed=1), clock=FAST) as ex:
        assert ex.run(progress=False) != "error" and ex.status != "error"
        errors = ex.llm_calls().query("outcome == 'error'")["error"]
        assert len(errors) and all("\x00" not in e and "\x1b" not in e for e in errors)


def test_a_harvest_spends_what_is_left_of_the_budget_and_no_more() -> None:
    with Exploration.create(
        SEED, intensity="deep", llm=SimulatedLLM(seed=1), clock=FAST, max_tokens=BUDGET
    ) as ex:
        ex.step(4)
        calls, before, _ = ledger(ex)
        assert before < BUDGET
        result = ex.harvest(finish=True)
        after_calls, spent, biggest = ledger(ex)
        assert after_calls > calls, "the harvest had budget left and used the model"
        assert spent <= BUDGET + biggest
        assert result.status == "completed"


def test_a_lone_call_is_admitted_while_budget_is_left_and_refused_once_it_is_spent() -> None:
    purse = Allowance(Limits(max_tokens=1_000))
    first = purse.reserve("m", 400, 800)  # larger than the budget, but nothing else is in flight
    purse.settle(first, 300, 200)
    second = purse.reserve("m", 100, 200)  # fits beside nothing: 500 + 300
    third = purse.reserve("m", 50, 100)  # fits beside the second: 500 + 300 + 150
    purse.settle(second, 100, 150)
    purse.settle(third, 60, 240)
    assert purse.reached() == "token budget of 1,000 reached (1,050 spent)"
    with pytest.raises(BudgetExhaustedError, match=r"token budget of 1,000 reached \(1,050 spent\)"):
        purse.reserve("m", 1, 1)


def test_replayed_calls_spend_nothing_and_no_ceiling_holds_nothing() -> None:
    purse = Allowance(Limits(max_tokens=100), [{"model": "m", "prompt_tokens": 60, "completion_tokens": 0}])
    held = purse.reserve("m", 30, 30)
    purse.settle(held, 500, 500, spent=False)
    assert purse.reached() is None
    free = Allowance(Limits())
    free.settle(free.reserve("m", 10**9, 10**9), 10**9, 0)
    assert free.reached() is None


def test_a_cost_budget_is_admitted_before_calls_too() -> None:
    with Exploration.create(SEED, intensity="explore", llm=SimulatedLLM(seed=2), clock=FAST) as ex:
        model = ex.llm.model  # type: ignore[attr-defined]
        report = ex.run(8, progress=False, max_cost=0.01, prices={model: (1.0, 2.0)})
        calls = ex.llm_calls()
        cost = (calls["prompt_tokens"] * 1.0 + calls["completion_tokens"] * 2.0) / 1e6
        assert report == "budget_exhausted"
        assert report.status_reason == f"cost budget of 0.01 reached ({cost.sum():.4f} spent)"
        assert 0.01 <= cost.sum() <= 0.01 + cost.max()


class Quiet:
    """A model of one's own whose complete() reports no usage (the simulator's replies, its meter hidden)."""

    model = "quiet"

    def __init__(self, seed: int = 1) -> None:
        self.inner = SimulatedLLM(seed=seed)

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        with metered():  # what the simulator reports stays in here: the caller sees none
            return self.inner.complete(messages, schema)


@pytest.mark.parametrize("workers", [1, 8])
def test_a_model_that_reports_no_usage_is_held_by_the_budget_on_estimates(workers: int) -> None:
    # Issue 37: a 3,000-token budget ran 114 calls of such a model, 0 tokens in the ledger.
    with Exploration.create(SEED, intensity="deep", llm=Quiet(), clock=FAST) as ex:
        report = ex.run(workers, progress=False, max_tokens=3_000)
        calls, spent, biggest = ledger(ex)
        assert report == "budget_exhausted"
        assert 3_000 <= spent <= 3_000 + biggest
        rows = ex.llm_calls()
        assert rows["tokens_estimated"].all() and (rows["prompt_tokens"] > 0).all()
        assert (rows["attempts"] == 1).all(), "a reply came back from each call"
        assert report.status_reason == f"token budget of 3,000 reached ({spent:,} spent)"


def test_the_estimate_is_the_prompts_and_the_replys_characters_at_four_a_token() -> None:
    messages: list[Message] = [{"role": "user", "content": "Why do rivers meander? " * 40}]
    with Exploration.create(SEED, intensity="pulse", llm=Quiet(), clock=FAST) as ex:
        reply = ModelCaller(Quiet(), ex.store, ex.graph_id)(Answer, messages, node_id=None, worker="w")
        [row] = ex.llm_calls().query("worker == 'w'").to_dict("records")
    assert row["prompt_tokens"] == messages_tokens(messages) == len(messages[0]["content"]) // 4 + 4
    assert row["completion_tokens"] == estimate_tokens(json.dumps(reply.model_dump(mode="json"))) > 0
    assert row["tokens_estimated"] and row["refused_usage"] is None


@pytest.mark.parametrize("figures", [(-5, 10), (10, 10**12), (-(10**6), -(10**6))])
def test_a_backend_reporting_figures_no_call_can_have_is_logged_and_estimated(
    figures: tuple[int, int],
) -> None:
    class Misreporting(Quiet):
        def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
            reply = super().complete(messages, schema)
            report_usage(*figures)
            return reply

    with Exploration.create(SEED, intensity="pulse", llm=Misreporting(), clock=FAST) as ex:
        assert ex.run(progress=False, max_tokens=BUDGET) == "all_complete"
        assert ex.harvest().status == "completed"
        rows = ex.llm_calls()
    wrong = {
        n: v
        for n, v in zip(("prompt_tokens", "completion_tokens"), figures, strict=True)
        if v < 0 or v > 10**7
    }
    assert [json.loads(text) for text in rows["refused_usage"]] == [[wrong]] * len(rows)
    assert rows["tokens_estimated"].all() and rows["prompt_tokens"].between(1, 10**7).all()


def test_a_backends_own_bug_is_logged_as_the_call_it_was_then_raised_as_it_is() -> None:
    class Buggy(SimulatedLLM):
        def complete(self, messages, schema):  # type: ignore[no-untyped-def]
            if getattr(schema, "role", "") == "synthesize":
                raise KeyError("a bug in the backend")
            return super().complete(messages, schema)

    with Exploration.create(SEED, intensity="pulse", llm=Buggy(seed=1), clock=FAST) as ex:
        with pytest.raises(KeyError, match="a bug in the backend"):
            ex.run(progress=False)
        failed = ex.llm_calls().query("outcome == 'error'")
        assert len(failed) and (failed["role"] == "synthesize").all()
        assert failed["error"].str.startswith("KeyError: 'a bug in the backend'").all()
