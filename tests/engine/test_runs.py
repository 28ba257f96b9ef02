"""Whole explorations with the simulated model: budgets, protocol, failures, checkpoints."""

from __future__ import annotations

import pytest

from fractal_nb import Exploration, SimulatedLLM, StateError
from fractal_nb.engine.dispatcher import ScaledClock
from fractal_nb.model import BUDGETS, Intensity

FAST = ScaledClock(0.001)  # backoff 2/4/8 s becomes 2/4/8 ms


def explore(intensity: str, llm: SimulatedLLM | None = None, **kw) -> Exploration:
    return Exploration.create(
        "Why do some cities grow faster than others?",
        intensity=intensity,
        llm=llm or SimulatedLLM(seed=3),
        clock=FAST,
        **kw,
    )


def assert_no_double_claims(ex: Exploration) -> None:
    """A question is claimed again only after its claim was released or recovered."""
    holding: dict[str, bool] = {}
    for event in ex.events().itertuples():
        if event.kind == "claimed":
            assert not holding.get(event.node_id), f"{event.node_id} claimed twice at once"
            holding[event.node_id] = True
        elif event.kind in ("released", "recovered"):
            holding[event.node_id] = False


def check_finished_graph(ex: Exploration) -> None:
    """The invariants every harvested run must keep."""
    budget = BUDGETS[Intensity(ex.store.get_snapshot(ex.graph_id)["intensity"])]
    nodes = ex.nodes()
    questions = nodes[nodes["node_type"] == "question"]
    root = questions[questions["depth"] == 0].iloc[0]
    assert root["status"] == "synthesized"
    assert set(questions["status"]) <= {"synthesized", "saturated"}
    assert questions["depth"].max() < budget.max_depth
    assert_no_double_claims(ex)
    claimed = set(ex.events().query("kind == 'claimed'")["node_id"])
    assert root["node_id"] not in claimed, "a worker claimed the root"
    lo, hi = budget.seed_questions
    assert lo <= (questions["depth"] == 1).sum() <= hi


@pytest.mark.parametrize("intensity", ["pulse", "explore", "deep"])
def test_full_run_at_each_intensity(intensity: str) -> None:
    with explore(intensity) as ex:
        status = ex.run(progress=False)
        assert status in ("all_complete", "budget_exhausted")
        result = ex.harvest()
        assert result.status == "completed" and ex.status == "completed"
        check_finished_graph(ex)
        assert result.synthesis_chain[0].depth == 0
        assert result.summary.startswith("[simulated]")
        assert result.node_count == len(ex.nodes()) and result.edge_count == len(ex.edges())
        assert {"seed", "answer", "harvest"} <= set(ex.llm_calls()["role"])


def test_budget_exhaustion_freezes_the_rest_and_still_reaches_the_root() -> None:
    with explore("pulse", SimulatedLLM(seed=1, branching=3)) as ex:
        status = ex.run(max_workers=1, progress=False)
        if status == "budget_exhausted":
            assert ex.status == "budget_exhausted"
            assert ex.nodes().query("status == 'open'")["meta_budget_exhausted"].all()
        result = ex.harvest()
        check_finished_graph(ex)
        assert result.status == "completed"


def test_depth_limited_answers_are_marked() -> None:
    with explore("pulse", SimulatedLLM(seed=2, branching=4)) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert result.depth_limited, "pulse stops sub-questions at depth 1"
        answers = ex.nodes().query("node_type == 'answer' and meta_depth_limited == True")
        assert set(answers["node_id"]) == set(result.depth_limited)


def test_model_failures_are_recorded_and_nothing_is_stuck() -> None:
    with explore("explore", SimulatedLLM(seed=5, failure_rate=0.3)) as ex:
        ex.run(progress=False)
        result = ex.harvest(finish=True)  # a failed synthesis may have paused it: finish it all the same
        check_finished_graph(ex)
        calls = ex.llm_calls()
        failed = calls[calls["outcome"] == "error"]
        assert len(failed) > 0 and failed["error"].str.contains("simulated failure").all()
        assert not result.stuck_nodes
        released = ex.events().query("kind == 'released'")
        if len(released):
            assert "failures" in ex.nodes().columns.str.replace("meta_", "").tolist()


def test_a_seed_that_always_fails_pauses_the_graph_with_the_reason() -> None:
    with explore("pulse", SimulatedLLM(seed=5, failure_rate=1.0)) as ex:
        assert ex.run(progress=False) == "seed_failed"
        graph = ex.store.get_graph(ex.graph_id)
        assert graph["status"] == "paused" and "the seed phase failed" in graph["status_reason"]
        result = ex.preview()  # the state as it stands, not finished
        assert result.status == "paused"
        assert result.gaps == [f"waiting (open): {ex.store.get_graph(ex.graph_id)['seed']}"]
        assert (ex.llm_calls()["outcome"] == "error").all()


def test_step_processes_exactly_n_nodes() -> None:
    with explore("explore") as ex:
        first = ex.step()
        assert len(first) == 1 and first[0].worker == "seed" and len(first[0].sub_questions) >= 5
        records = ex.step(3)
        assert len(records) == 3 and all(r.ok for r in records)
        assert len(ex.events().query("kind == 'claimed'")) == 3
        claimed = [r.node_id for r in records]
        assert (
            ex.nodes()
            .set_index("node_id")
            .loc[claimed, "status"]
            .isin(["answered", "synthesized", "saturated"])
            .all()
        )
        with pytest.raises(ValueError, match="n must be"):
            ex.step(0)


def test_single_worker_runs_repeat_exactly() -> None:
    def texts() -> list[str]:
        with explore("explore", SimulatedLLM(seed=11)) as ex:
            ex.step(12)
            return ex.nodes()["text"].str.replace(r"n-[0-9a-f]{1,16}", "n-ID", regex=True).tolist()

    assert texts() == texts()


def test_prompts_stay_bounded_as_the_graph_grows() -> None:
    with explore("deep", SimulatedLLM(seed=4, branching=2.5)) as ex:
        ex.run(progress=False)
        calls = ex.llm_calls().query("role == 'answer'")
        early, late = calls.head(10)["prompt_tokens"].mean(), calls.tail(10)["prompt_tokens"].mean()
        assert len(ex.nodes()) > 150
        assert late < 2.5 * early, "prompts grow with the graph"
        assert calls["prompt_tokens"].max() < 2500


def test_run_refuses_a_finished_graph_and_bad_arguments() -> None:
    with explore("pulse") as ex:
        with pytest.raises(ValueError, match="max_workers"):
            ex.run(max_workers=0)
        ex.run(progress=False)
        ex.harvest()
        with pytest.raises(StateError, match="finished"):
            ex.run(progress=False)


def test_one_worker_repeats_a_run_exactly_tokens_included() -> None:
    def run_once() -> tuple[list[str], dict[str, list[int]]]:
        with explore("explore", SimulatedLLM(seed=11)) as ex:
            while ex.run(max_workers=1, progress=False, resume=True) == "budget_exhausted":
                pass
            texts = ex.nodes()["text"].str.replace(r"n-[0-9a-f]{1,16}", "n-ID", regex=True).tolist()
            calls = ex.llm_calls().groupby("role")[["prompt_tokens", "completion_tokens"]].sum()
            return texts, {role: [int(v) for v in row] for role, row in calls.iterrows()}

    assert run_once() == run_once()


def test_several_workers_without_links_grow_the_same_graph() -> None:
    def graph() -> list[tuple[str, int, str]]:
        with explore("explore", SimulatedLLM(seed=11, link_rate=0.0)) as ex:
            assert ex.run(progress=False) in ("all_complete", "budget_exhausted")
            nodes = ex.nodes()
            return sorted(zip(nodes["node_type"], nodes["depth"], nodes["text"], strict=True))

    assert graph() == graph()
