"""The single strategy: one model call answers the question (docs/architecture/facade.md, "Comparing
strategies").
"""

from __future__ import annotations

from typing import Any

from fractal_nb import Exploration, LLMError, SimulatedLLM
from fractal_nb.llm.protocol import report_usage
from tests.engine.test_runs import FAST

QUESTION = "Should a mid-sized city build a tram line?"


def test_one_call_answers_and_a_second_run_has_nothing_to_do() -> None:
    with Exploration.create(
        QUESTION, intensity="pulse", llm=SimulatedLLM(), strategy="single", clock=FAST
    ) as ex:
        assert ex.run(progress=False) == "all_complete"
        assert ex.run(progress=False) == "all_complete"
        calls = ex.llm_calls()
        assert list(calls.role) == ["single"], "one call, never a second"
        result = ex.harvest()
        assert result.summary.startswith("[simulated]") and len(result.findings) == 2
        assert result.gaps and not result.degraded and result.strategy == "single"


def test_a_failed_call_leaves_the_question_open_and_a_spent_budget_makes_none() -> None:
    class Failing(SimulatedLLM):
        def complete(self, messages: Any, schema: Any) -> dict[str, Any]:
            report_usage(1_000, 10)  # the server counted the request, then the reply was no good
            raise LLMError("boom")

    with Exploration.create(
        QUESTION, intensity="pulse", llm=Failing(), strategy="single", clock=FAST, max_tokens=500
    ) as ex:
        ex.run(progress=False)
        root = ex.nodes().query("depth == 0").iloc[0]
        assert root.status == "open", "resumable with a model that answers"
        rows = len(ex.llm_calls())
        assert rows >= 1 and (ex.llm_calls().outcome == "error").all()
        assert ex.run(progress=False, resume=True) == "budget_exhausted"
        assert len(ex.llm_calls()) == rows, "refused before the call: no request, no row"
