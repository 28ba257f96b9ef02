"""Whole explorations with the simulated model: budgets, protocol, failures, checkpoints.

Covers: engine/seeding.py, engine/strategies/fractal.py, exploration/exploration.py.
"""

from __future__ import annotations

import pytest

from fractal_nb import Exploration, InvalidInputError, NotFoundError, SimulatedLLM, StateError
from fractal_nb.engine.dispatcher import ScaledClock
from fractal_nb.vocabulary import BUDGETS, Intensity

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
            while ex.run(max_workers=1, progress=False) == "budget_exhausted":
                ex.new_budget()  # the circuit breaker: a new turn, the same limits (seed 001)
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


# -- a bad call changes nothing; only the engine's own failure sets `error` (issue 24) --------------


def paused_at_gates() -> Exploration:
    """A pulse graph paused at its depth-1 gates: a call that went ahead would resume it."""
    ex = explore("pulse", checkpoint="depth:1")
    assert ex.run(progress=False) == "paused" and ex.status == "paused"
    return ex


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"on_step": 5}, "on_step"),
        ({"on_step": "print"}, "on_step"),
        ({"progress": "yes"}, "progress"),
        ({"resume": 1}, "resume"),
        ({"max_workers": 0}, "max_workers"),
        ({"max_workers": 2.5}, "max_workers"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 10.5}, "max_tokens"),
        ({"max_wall_s": float("inf")}, "max_wall_s"),
        ({"max_wall_s": float("nan")}, "max_wall_s"),
        ({"node_timeout_s": float("inf")}, "node_timeout_s"),
        ({"max_cost": float("inf"), "prices": {"m": (1.0, 1.0)}}, "max_cost"),
        ({"max_cost": 1.0, "prices": {"m": (float("inf"), 1.0)}}, "prices"),
        ({"max_cost": 1.0}, "price table"),
    ],
)
def test_a_refused_run_changes_nothing(kwargs: dict[str, object], named: str) -> None:
    with paused_at_gates() as ex:
        events, graph = len(ex.events()), ex.store.get_graph(ex.graph_id)
        with pytest.raises(InvalidInputError, match=named):
            ex.run(**kwargs)  # type: ignore[arg-type]
        assert ex.store.get_graph(ex.graph_id) == graph  # still paused, same metadata and limits
        assert len(ex.events()) == events
        ex.approve()
        assert ex.run(progress=False) == "all_complete"  # and it runs on as if nothing was asked


def test_step_and_harvest_refuse_bad_arguments_and_change_nothing() -> None:
    with paused_at_gates() as ex:
        events = len(ex.events())
        for n in (0, -1, 1.0, True, "2"):
            with pytest.raises(InvalidInputError, match="n must be an integer"):
                ex.step(n)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="finish must be True or False"):
            ex.harvest(finish="no")  # type: ignore[arg-type]
        assert ex.status == "paused" and len(ex.events()) == events


def test_an_on_step_that_raises_stops_the_run_but_is_not_the_engines_failure() -> None:
    seen: list[object] = []

    def fails(record: object) -> None:  # past the seed phase: in a worker thread of the dispatcher
        seen.append(record)
        if len(seen) == 3:
            raise KeyError("the caller's bug")

    with explore("pulse") as ex:
        with pytest.raises(KeyError, match="the caller's bug"):
            ex.run(progress=False, on_step=fails)
        assert len(seen) >= 3 and ex.status == "active" and ex.status_reason is None
        assert ex.run(progress=False) == "all_complete"  # no resume needed: nothing was marked
        assert ex.harvest().status == "completed"
        check_finished_graph(ex)


class FixableBackend(SimulatedLLM):
    """A model backend with a bug in its answers until it is fixed: a failure inside the engine."""

    fixed = False

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if not self.fixed and getattr(schema, "role", "") == "answer":
            raise RuntimeError("backend bug")
        return super().complete(messages, schema)


def test_an_error_graph_runs_again_only_when_resumed_explicitly() -> None:
    llm = FixableBackend(seed=3)
    with explore("pulse", llm) as ex:
        # Every worker crashed on the bug: noted in their reports, the graph 'error' (no worker could go on).
        assert ex.run(progress=False) == "error"
        assert ex.status == "error" and ex.status_reason == "every worker crashed: RuntimeError: backend bug"
        for refused in (lambda: ex.run(progress=False), lambda: ex.step()):
            with pytest.raises(
                StateError,
                match=r"is 'error' \(every worker crashed: RuntimeError: backend bug\).*run\(resume=True\)",
            ):
                refused()
        assert ex.status == "error"
        llm.fixed = True  # the cause is gone
        assert ex.run(progress=False, resume=True) == "all_complete"
        assert ex.harvest().status == "completed"
        check_finished_graph(ex)
        kinds = ex.events().query("kind == 'graph_status_changed'")["payload"].tolist()
        assert [(k["from"], k["to"]) for k in kinds][:2] == [("active", "error"), ("error", "active")]


def test_a_refused_approve_or_prune_leaves_a_paused_graph_paused() -> None:
    with paused_at_gates() as ex:
        nodes = ex.nodes()
        root = nodes.query("depth == 0 and node_type == 'question'")["node_id"].iloc[0]
        root_answer = nodes.query("depth == 0 and node_type == 'answer'")["node_id"].iloc[0]
        gated = ex.gates["node_id"].tolist()
        events = len(ex.events())
        for refused, error in [
            (lambda: ex.approve(["n-0000000000000000"]), NotFoundError),
            (lambda: ex.approve([root]), StateError),
            (lambda: ex.approve([gated[0], root]), StateError),  # all or nothing
            (lambda: ex.approve("n-1"), InvalidInputError),  # type: ignore[arg-type]
            (lambda: ex.prune("n-0000000000000000"), NotFoundError),
            (lambda: ex.prune(root), InvalidInputError),
            (lambda: ex.prune(root_answer), InvalidInputError),
        ]:
            with pytest.raises(error):
                refused()
            assert ex.status == "paused" and len(ex.events()) == events
        ex.prune(gated[0])
        assert ex.approve()["count"] == len(gated) - 1
        with pytest.raises(StateError, match="cannot become 'saturated'"):
            ex.prune(gated[0])  # pruned already


def test_a_run_whose_budget_cannot_be_kept_leaves_a_stopped_graph_as_it_was() -> None:
    with explore("pulse", SimulatedLLM(seed=3)) as ex:
        ex.store.update_graph_metadata(ex.graph_id, {"notes": "x" * 998_000})  # near the limit
        assert ex.run(progress=False, max_tokens=1_000) == "budget_exhausted"
        prices = {f"model-{i}": (1.0, 1.0) for i in range(200)}  # kept with the graph: past the limit
        with pytest.raises(InvalidInputError, match="the limit is 1,000,000"):
            ex.run(progress=False, max_cost=1.0, prices=prices)
        assert ex.status == "budget_exhausted"
