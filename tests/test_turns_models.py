"""Widen against a real local OpenAI-compatible server through OpenAILLM (model-facing)."""

from __future__ import annotations

import pytest

from fractal_nb import Exploration
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
