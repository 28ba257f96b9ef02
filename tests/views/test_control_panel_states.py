"""Stuck, paused, budget-cut and failed states say why and what to do next, and offer it (issue 38).

Driven as a person drives the panel: buttons clicked, the status line read. The model
is a local fake OpenAI-compatible server, reached through the real ``openai`` client,
that cannot answer one question of its own seed plan (its text is hostile, to show it
stays text) until the test fixes it.

Covers: views/status_rows.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.views import ExplorationView
from tests.engine.test_openai_runs import POISON, answer, first_user, role_responder, schema_name
from tests.engine.test_runs import FAST
from tests.llm.fake_openai import FakeOpenAI
from tests.views.test_control_panel import settle

HOSTILE_QUESTION = f"<script>window.__pwned = 1</script> Which {POISON} question breaks every model?"
SEED = "Why do some cities grow faster than others?"


class PoisonedModel:
    """The fake model of tests/engine/test_openai_runs.py, its seed plan posing :data:`HOSTILE_QUESTION`.

    Its answers to that question are invalid however often corrected, until ``fixed``.
    """

    def __init__(self) -> None:
        self.fixed = False
        self._replies = role_responder(poison=True)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        name = schema_name(body)
        if self.fixed and name in ("Answer", "LeafAnswer"):
            return answer(first_user(body).replace(POISON, "hard"))
        reply = dict(self._replies(body))
        if name == "SeedPlan":
            reply["questions"] = [HOSTILE_QUESTION if POISON in q else q for q in reply["questions"]]
        return reply


def stuck_run(server: FakeOpenAI) -> Exploration:
    """A pulse graph whose Run ended with the hostile seed question failed and the root waiting for it."""
    ex = Exploration.create(SEED, intensity="pulse", llm=server.llm(timeout=5.0, max_retries=1), clock=FAST)
    assert ex.run(progress=False) == "all_complete", "nothing left that Run can do"
    return ex


@pytest.fixture
def stuck() -> Iterator[tuple[Exploration, PoisonedModel]]:
    model = PoisonedModel()
    with FakeOpenAI(responder=model) as server, stuck_run(server) as ex:
        yield ex, model


def shown(button: Any) -> bool:
    return button.layout.display != "none"


def failed_id(ex: Exploration) -> str:
    return str(ex.nodes().query("text == @HOSTILE_QUESTION")["node_id"].iloc[0])


def assert_stuck(view: ExplorationView, ex: Exploration) -> None:
    """What the panel shows once Run could do no more: why, the question as a link, the two ways on."""
    guide = view.status_rows.guide.value
    assert "Stuck:</b> 1 question(s) wait for their synthesis, blocked by 1 failed question: " in guide
    assert f'data-fractal-node="{failed_id(ex)}"' in guide, "the failed question is a link to it"
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt; Which unanswerable question" in guide
    assert "(LLMOutputError: fake gave no valid LeafAnswer in 2 attempts" in guide, "why it failed"
    assert "Recover failed to try it again, or Finish &amp; harvest to conclude with it as a gap." in guide
    assert "<script>" not in guide and "Ready" not in guide
    assert view.run_button.disabled and view.step_button.disabled, "Run would end at once, doing nothing"
    assert shown(view.status_rows.recover_button) and shown(view.status_rows.finish_button)
    assert not shown(view.harvest_button), "one Finish & harvest, beside the line that offers it"
    assert not view.status_rows.recover_button.disabled and not view.status_rows.finish_button.disabled


def test_a_run_stuck_behind_a_failed_question_says_so_and_recover_failed_mends_it(
    stuck: tuple[Exploration, PoisonedModel],
) -> None:
    ex, model = stuck
    view = ex.view()
    assert ex.status == "active" and ex.gaps()["question"].tolist() == [HOSTILE_QUESTION]
    assert_stuck(view, ex)
    model.fixed = True  # the model can answer it now: Recover failed, then Run
    view.status_rows.recover_button.click()
    settle(view)
    assert "recovered 1 question(s): open again, Step or Run tries them again" in view.message.value
    assert (
        "Ready: 1 open question(s)." in view.status_rows.guide.value
        and "Stuck" not in view.status_rows.guide.value
    )
    assert not shown(view.status_rows.recover_button) and not shown(view.status_rows.finish_button)
    assert not view.run_button.disabled
    view.run_button.click()
    settle(view)
    assert "run: all_complete" in view.message.value
    status = ex.nodes().set_index("node_id").status
    root = ex.store.get_graph(ex.graph_id)["root_node_id"]
    assert status[failed_id(ex)] == status[root] == "synthesized", "answered at last, the root synthesized"
    assert "Nothing is left to explore: Harvest" in view.status_rows.guide.value
    view.harvest_button.click()
    settle(view)
    # Whole: nothing failed is left (the replies the model got wrong stay on the record, and say so).
    assert ex.status == "completed" and "failed" not in set(ex.gaps()["kind"])
    assert all("model replies were refused" in reason for reason in ex.preview().degraded_reasons)
    assert (
        "Redecompose" not in view.warning.value
        and "This exploration is completed" in view.status_rows.guide.value
    )
    view.close()


def test_finish_and_harvest_concludes_a_stuck_run_with_the_failed_question_as_a_gap(
    stuck: tuple[Exploration, PoisonedModel],
) -> None:
    ex, model = stuck
    view = ex.view()
    assert_stuck(view, ex)
    view.status_rows.finish_button.click()
    settle(view)
    assert ex.status == "completed" and "the result is in the Result tab (degraded" in view.message.value
    assert "This exploration is completed" in view.status_rows.guide.value
    assert not shown(view.status_rows.recover_button) and not shown(view.status_rows.finish_button)
    assert ex.gaps().query("kind == 'failed'")["question"].tolist() == [HOSTILE_QUESTION]
    # The degraded result says what mends it: a new turn on the failed question, named as a link.
    warning = view.warning.value
    assert "Degraded result:" in warning and f'data-fractal-node="{failed_id(ex)}"' in warning
    assert "again, select it and Redecompose it (Inspector)" in warning and "<script>" not in warning
    view.network.selected = failed_id(ex)  # what the link does in the page: the tree selects it
    view.refresh()
    assert view.tabs.selected_index == view.tabs.titles.index("Inspector")
    assert "question · failed" in view.inspector.value
    model.fixed = True
    view.steering.redecompose_button.click()
    settle(view)
    assert ex.status == "active" and "redecompose: turn 2" in view.message.value
    view.run_button.click()
    settle(view)
    view.harvest_button.click()
    settle(view)
    assert ex.status == "completed" and "failed" not in set(ex.gaps()["kind"])
    assert "Redecompose" not in view.warning.value
    view.close()


def test_a_failed_question_with_work_left_is_named_with_recover_failed_beside_it(
    stuck: tuple[Exploration, PoisonedModel],
) -> None:
    ex, _ = stuck
    ex.ask("What do ports add?")  # a person's question: Run has work again
    view = ex.view()
    guide = view.status_rows.guide.value
    assert "Ready: 1 open question(s)." in guide and "Stuck" not in guide
    assert "1 failed question: “<a class=" in guide and f'data-fractal-node="{failed_id(ex)}"' in guide
    assert "Recover failed tries it again." in guide and "<script>" not in guide
    assert (
        shown(view.status_rows.recover_button)
        and not shown(view.status_rows.finish_button)
        and not view.run_button.disabled
    )
    view.status_rows.recover_button.click()
    settle(view)
    assert (
        "Ready: 2 open question(s)." in view.status_rows.guide.value
        and "failed question" not in view.status_rows.guide.value
    )
    view.close()


def test_recover_failed_while_a_job_runs_is_refused_and_changes_nothing(
    stuck: tuple[Exploration, PoisonedModel],
) -> None:
    ex, _ = stuck
    view = ex.view()
    entered, release = threading.Event(), threading.Event()
    harvest = ex.harvest

    def held_harvest(**options: Any) -> Any:
        entered.set()
        release.wait(30)
        return harvest(**options)

    ex.harvest = held_harvest  # type: ignore[method-assign]
    view.status_rows.finish_button.click()
    assert entered.wait(30), "the harvest is under way"
    view.refresh()
    assert (
        "Working…" in view.status_rows.guide.value
        and not shown(view.status_rows.recover_button)
        and not shown(view.status_rows.finish_button)
    )
    view.status_rows.recover_button.click()  # a click that got through all the same
    view.refresh()
    assert "busy: pause the harvest first" in view.message.value
    assert ex.nodes().set_index("node_id").status[failed_id(ex)] == "error", "nothing was reopened"
    release.set()
    settle(view)
    assert ex.status == "completed" and ex.gaps().query("kind == 'failed'")["question"].tolist() == [
        HOSTILE_QUESTION
    ]
    view.close()


def test_recover_failed_on_a_file_opened_read_only_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    path, model = tmp_path / "stuck.duckdb", PoisonedModel()
    with FakeOpenAI(responder=model) as server:
        llm = server.llm(timeout=5.0, max_retries=1)
        with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST, path=path) as ex:
            assert ex.run(progress=False) == "all_complete"
            graph_id = ex.graph_id
    with Exploration.open(path, graph_id, llm=SimulatedLLM(), read_only=True) as ex:
        view = ex.view()
        before = ex.nodes()
        assert "Stuck:</b>" in view.status_rows.guide.value and shown(view.status_rows.recover_button)
        view.status_rows.recover_button.click()
        view.refresh()
        assert "error: StateError: " in view.message.value and "read_only=True" in view.message.value
        assert ex.nodes().equals(before), "nothing was reopened"
        view.close()


def test_a_graph_paused_by_a_model_outage_says_run_resumes_when_the_model_is_back(tmp_path: Path) -> None:
    from fractal_nb import OpenAILLM
    from tests.local_port import free_port

    path = tmp_path / "outage.duckdb"

    def down() -> OpenAILLM:  # a model server that is not there: connection refused
        return OpenAILLM("m", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="x", max_retries=0)

    with (llm := down()), Exploration.create("Why?", intensity="pulse", llm=llm, path=path, clock=FAST) as ex:
        assert ex.run(progress=False) == "model_unavailable"  # down before the seed's plan
        graph_id = ex.graph_id
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        view = ex.view()
        guide = view.status_rows.guide.value
        assert "Paused (model unavailable: cannot reach the model server at http://127.0.0.1:" in guide
        assert "connection refused): Run resumes when the model is back; Step seeds the exploration" in guide
        assert not view.run_button.disabled and not shown(view.status_rows.finish_button), (
            "nothing to finish yet"
        )
        view.step_button.click()  # the model is back (here, another one): the seed's plan is written
        settle(view)
        posed = (ex.nodes().query("node_type == 'question'")["status"] == "open").sum()
        assert (
            ex.status == "active"
            and posed >= 3
            and f"Ready: {posed} open question(s)." in view.status_rows.guide.value
        )
        view.close()
    with (llm := down()), Exploration.open(path, graph_id, llm=llm, clock=FAST) as ex:
        assert ex.run(progress=False) == "model_unavailable"  # down again, with work left
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        view = ex.view()
        guide = view.status_rows.guide.value
        assert "Paused (model unavailable: cannot reach the model server at http://127.0.0.1:" in guide
        still = (ex.nodes().query("node_type == 'question'")["status"] == "open").sum()
        assert (
            f"connection refused): {still} open question(s). Run resumes when the model is back (Step "
            in guide
        )
        assert "processes one); Finish &amp; harvest concludes with the work left as gaps." in guide
        assert (
            shown(view.status_rows.finish_button)
            and not shown(view.status_rows.recover_button)
            and not view.run_button.disabled
        )
        view.run_button.click()
        settle(view)
        assert "run: all_complete" in view.message.value and not shown(view.status_rows.finish_button)
        view.close()


def test_a_pause_by_the_person_says_run_goes_on_and_finish_and_harvest_ends_it() -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        ex.step(1)
        ex.store.update_graph_status(ex.graph_id, "paused", reason="paused")  # as pause() stores it
        view = ex.view()
        still = (ex.nodes().query("node_type == 'question'")["status"] == "open").sum()
        assert f"Paused (paused): {still} open question(s). Run goes on (Step processes one); Finish" in (
            view.status_rows.guide.value
        )
        view.status_rows.finish_button.click()
        settle(view)
        assert ex.status == "completed" and len(ex.gaps().query("kind == 'unexplored'")) == still
        view.close()


def test_a_pause_for_syntheses_the_model_failed_says_run_goes_on() -> None:
    from tests.engine.test_cascade import GivesBackSyntheses

    llm = GivesBackSyntheses(
        failures=20
    )  # more than a run retries: the run pauses with the root unsynthesized
    with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
        assert ex.run(progress=False) == "synthesis_failed"
        view = ex.view()
        assert (
            "Paused (1 question(s) ready to synthesize could not be synthesized (the model failed): run() "
            "again to retry, or harvest()): 1 question(s) wait for their synthesis. Run goes on (Step "
            "processes one); Finish &amp; harvest concludes with the work left as gaps."
        ) in view.status_rows.guide.value
        assert (
            shown(view.status_rows.finish_button)
            and not shown(view.status_rows.recover_button)
            and not view.run_button.disabled
        )
        llm.failures = 0  # the model synthesizes again
        view.run_button.click()
        settle(view)
        assert (
            "run: all_complete" in view.message.value
            and "Nothing is left to explore" in view.status_rows.guide.value
        )
        view.close()


def test_a_spent_budget_offers_finish_and_harvest_beside_its_reason() -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        ex.run(progress=False, max_tokens=1_000)
        view = ex.view()
        assert "token budget of 1,000 reached" in view.status_rows.guide.value and view.run_button.disabled
        assert "Finish &amp; harvest concludes with the work left as gaps." in view.status_rows.guide.value
        assert shown(view.status_rows.finish_button) and not shown(view.status_rows.recover_button)
        view.status_rows.finish_button.click()
        settle(view)
        assert ex.status == "completed" and "unexplored" in set(ex.gaps()["kind"])
        view.close()


def test_a_spent_budget_names_the_new_budget_and_run_does_not_resume_it() -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        ex.run(progress=False, max_tokens=1_000)
        view = ex.view()
        guide = view.status_rows.guide.value
        assert "give it a new budget in code (e.g. ex.new_budget(max_tokens=...), then Run)" in guide
        assert view.run_button.disabled and view.step_button.disabled, "budget_exhausted: no silent resume"
        view.close()
        assert ex.status == "budget_exhausted" and list(ex.turns()["kind"]) == ["seed"]
