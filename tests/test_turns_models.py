"""Widen against a real local OpenAI-compatible server through OpenAILLM (model-facing).

Covers: engine/widening.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, LLMOutputError, StateError
from fractal_nb.errors import BudgetExhaustedError
from tests.engine.test_openai_runs import FAST, SEED, first_user, role_responder, schema_name
from tests.llm.fake_openai import FakeOpenAI


def test_widen_asks_the_server_for_new_seed_questions_and_runs_them() -> None:
    with FakeOpenAI("ok", responder=role_responder()) as server:
        llm = server.llm(timeout=5.0, max_retries=1)
        with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
            assert ex.run(progress=False) == "all_complete"
            ex.harvest()
            seeds = ex.nodes().query("depth == 1 and node_type == 'question'")["text"].tolist()
            step = ex.widen(2)
            assert step.turn == 2 and step.kind == "widen" and len(step.created) == 2
            asked = [b for b in server.requests if schema_name(b) == "WidenPlan"]
            assert len(asked) == 1
            prompt = first_user(asked[0])
            assert "exactly 2 new seed questions" in prompt and all(s in prompt for s in seeds)
            widen_calls = ex.llm_calls().query("role == 'widen'")
            assert widen_calls["outcome"].tolist() == ["ok"] and widen_calls["model"].tolist() == ["fake"]
            assert (widen_calls["prompt_tokens"] > 0).all()
            assert ex.run(progress=False) == "all_complete"
            result = ex.harvest()
            chain = {link.node_id for link in result.synthesis_chain}
            assert set(step.created) <= chain
            assert ex.heads()["kind"].tolist() == ["seed", "widen"]


def test_widen_holds_the_token_budget_before_calling() -> None:
    with FakeOpenAI("ok", responder=role_responder()) as server:
        llm = server.llm(timeout=5.0, max_retries=1)
        with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
            assert ex.run(progress=False, max_tokens=100) == "budget_exhausted"
            ex.harvest()
            sent, turns = len(server.requests), ex.turns().to_json()
            with pytest.raises(BudgetExhaustedError, match="token"):
                ex.widen(1)
            assert len(server.requests) == sent and ex.turns().to_json() == turns
            assert ex.status == "completed"


def test_widen_refuses_when_the_model_only_repeats_the_graph() -> None:
    good = role_responder()

    def repeats(body: dict[str, Any]) -> dict[str, Any]:
        if schema_name(body) != "WidenPlan":
            return dict(good(body))
        listed = first_user(body).split("Existing seed questions:", 1)[1].split("\n\n", 1)[0]
        questions = [line[2:] for line in listed.strip().splitlines()]
        return {"rationale": "These cover the same ground once more, as it happens.", "questions": questions}

    with FakeOpenAI("ok", responder=repeats) as server:
        with Exploration.create(SEED, intensity="pulse", llm=server.llm(timeout=5.0), clock=FAST) as ex:
            with pytest.raises(StateError, match="no seed plan yet"):
                ex.widen(1)
            assert ex.run(progress=False) == "all_complete"
            ex.harvest()
            turns = ex.turns().to_json()
            with pytest.raises(LLMOutputError, match="copies the prompt"):  # the gates refuse copies
                ex.widen(2)
            assert ex.turns().to_json() == turns and ex.status == "completed"
            assert ex.llm_calls().query("role == 'widen'")["outcome"].tolist() == ["error"]  # in the ledger
