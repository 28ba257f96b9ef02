"""The run tells the truth: RunReport, statuses that hold, seed 001's resume routing, read-only looks,
budgets, the error status, workers that saturate, and gaps that add up.

Covers: engine/gaps.py, engine/outcome.py, engine/phases.py, exploration/running.py.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.errors import InvalidInputError, InvalidTransitionError, StateError
from fractal_nb.results.run_report import RunReport
from tests.engine.test_runs import FAST

SEED = "Why do some cities grow faster than others?"


def explore(intensity: str = "explore", llm: Any = None, **kw: Any) -> Exploration:
    return Exploration.create(SEED, intensity=intensity, llm=llm or SimulatedLLM(seed=4), clock=FAST, **kw)


# -- RunReport ------------------------------------------------------------------------------


def test_run_returns_a_report_with_the_reference_return_state() -> None:
    with explore() as ex:
        seen: list[Any] = []
        report = ex.run(progress=False, on_step=seen.append)
        assert isinstance(report, RunReport)
        assert report == "all_complete" and report.status == "all_complete" and f"{report}" == "all_complete"
        assert report in ("all_complete", "paused") and {report: 1}["all_complete"] == 1
        assert report.workers_dispatched == len(report.worker_reports) >= 1
        assert (
            report.open_questions_remaining,
            report.claimed_nodes_remaining,
            report.gated_questions_remaining,
        ) == (0, 0, 0)
        assert report.nodes_processed == len(seen)
        calls = ex.llm_calls()
        assert report.model_calls == len(calls)
        assert report.tokens == int(calls["prompt_tokens"].sum() + calls["completion_tokens"].sum())
        assert report.cost is None and report.wall_s > 0
        answered = sum(w.answered for w in report.worker_reports)
        assert answered == sum(r.ok for r in seen) - 1  # the seed phase is no worker's
        mine = {tuple(p) for w in report.worker_reports for p in w.convergences}
        if mine:  # this run's convergence clusters hold its own links
            assert all(set(c["nodes"]) & {n for p in mine for n in p} for c in report.convergence_points)
        data = report.to_dict()
        assert set(data["worker_reports"][0]) >= {
            "worker_id",
            "nodes_answered",
            "nodes_synthesized",
            "sub_questions_generated",
            "convergences",
            "contradictions",
            "saturated_branches",
            "boundary_questions",
            "exit_reason",
        }
        assert "<table>" in report._repr_html_() and "| worker |" in report._repr_markdown_()


@pytest.mark.parametrize("strategy", ["fractal", "tracks", "thinkon", "single"])
def test_the_report_carries_seed_000s_exploration_state_for_every_strategy(strategy: str) -> None:
    """Seed 000's return state: graph_id, root_node_id, intensity, checkpoint, budget, seed_count."""
    with explore("pulse", strategy=strategy) as ex:
        report = ex.run(progress=False)
        graph = ex.store.get_graph(ex.graph_id)
        nodes = ex.nodes()
        seeds = int(((nodes["node_type"] == "question") & (nodes["depth"] == 1)).sum())
        state = report.to_dict()
        assert {
            k: state[k] for k in ("graph_id", "root_node_id", "intensity", "checkpoint", "seed_count")
        } == {
            "graph_id": ex.graph_id,
            "root_node_id": graph["root_node_id"],
            "intensity": "pulse",
            "checkpoint": "autonomous",
            "seed_count": seeds,
        }
        assert state["budget"]["max_agents"] == 3 and state["budget"]["max_depth"] == 2
        if strategy in ("fractal", "tracks"):
            assert report.seed_count >= 1  # a seed plan's questions
        assert f"root {graph['root_node_id']}" in report.to_markdown()


def test_the_report_escapes_what_it_shows() -> None:
    report = RunReport(
        "paused",
        status_reason="<script>alert(1)</script>",
        convergence_points=[{"nodes": ["n-1", "n-2"], "insight": "<b>x</b> **y**"}],
    )
    assert "<script>" not in report._repr_html_() and "&lt;b&gt;" in report._repr_html_()
    assert "<script>" not in report._repr_markdown_() and "\\*\\*y\\*\\*" in report._repr_markdown_()


def test_worker_reports_carry_saturated_branches_and_the_graph_lists_them() -> None:
    with explore() as ex:
        report = ex.run(progress=False)
        saturated = [s for w in report.worker_reports for s in w.saturated]
        assert saturated, "the simulator gives leaves a saturation verdict"
        nodes = ex.nodes().set_index("node_id")
        for s in saturated:
            assert nodes.loc[s["node_id"], "status"] == "saturated"
            assert nodes.loc[s["node_id"], "status_reason"] == s["reason"] in ("actionable", "derivable")
        status = ex.store.get_saturation_status(ex.graph_id)
        assert status["all_complete"] and any(
            b["saturated"] or b["open_questions"] == 0 for b in status["branches"]
        )
        result = ex.harvest()
        assert {s["node_id"] for s in result.saturated} >= {s["node_id"] for s in saturated}
        # A saturated leaf keeps its answer as its synthesis: the parents synthesize from it.
        assert all("synthesis" in ex.inspect(s["node_id"])["node"]["metadata"] for s in saturated)


# -- seed 001's resume routing, case by case --------------------------------------------------


def test_resume_case_a_claimable_work_is_worked() -> None:
    with explore() as ex:
        ex.step(2)  # the seed phase and one question: the rest is claimable
        report = ex.run(progress=False)
        assert report == "all_complete" and report.workers_dispatched >= 1 and report.nodes_processed > 0


def test_resume_case_b_nothing_to_claim_and_the_root_synthesized_returns_at_once() -> None:
    with explore("pulse") as ex:
        assert ex.run(progress=False) == "all_complete"
        calls = len(ex.llm_calls())
        again = ex.run(progress=False)
        assert again == "all_complete" and again.workers_dispatched == 0 and again.model_calls == 0
        assert len(ex.llm_calls()) == calls


def test_resume_case_c_nothing_to_claim_but_the_root_unsynthesized_runs_the_cascade() -> None:
    with explore("pulse") as ex:
        ex.step(1)  # the seed phase only
        g = ex.graph_id
        for node in ex.store.get_open_questions(g)["open_questions"]:  # answered outside the engine
            ex.store.submit_answer(g, node["node_id"], f"An answer to {node['text']}")
        assert ex.store.get_claimable_work(g)["count"] == 0
        assert ex.store.get_ready_to_synthesize(g)["count"] == 1  # the root
        report = ex.run(progress=False)
        assert report == "all_complete" and report.workers_dispatched == 0
        assert ex.nodes().query("depth == 0").iloc[0]["status"] == "synthesized"
        assert list(ex.llm_calls()["role"]) == ["seed", "synthesize"]


def test_resume_case_d_a_finished_graph_is_an_error_to_the_caller() -> None:
    with explore("pulse") as ex:
        ex.run(progress=False)
        ex.harvest()
        with pytest.raises(StateError, match="is 'completed' .*harvest\\(\\) reads it"):
            ex.run(progress=False)
        with pytest.raises(StateError, match="is 'completed'"):
            ex.step()


def test_all_complete_only_when_nothing_is_open_claimed_or_gated() -> None:
    with explore("explore", checkpoint="depth:2") as ex:
        report = ex.run(progress=False)
        assert report == "paused" and report.gated_questions_remaining > 0
        assert "gated question(s) await approval" in (report.status_reason or "")


# -- looking is read-only -----------------------------------------------------------------------


def test_a_report_on_an_active_graph_leaves_it_active_and_steppable() -> None:
    with explore() as ex:
        ex.step(3)
        events, status = len(ex.events()), ex.status
        look = ex.report()
        preview = ex.preview()
        assert status == ex.status == "active" and len(ex.events()) == events
        assert preview.status == "active" and "the root is not synthesized yet" in preview.summary
        assert any(g.startswith("waiting (open)") for g in preview.gaps)
        assert not preview.findings and "waiting (open)" in look
        assert len(ex.step(1)) == 1  # still steppable
        with pytest.raises(StateError, match=r"work left \(\d+ open.*harvest\(finish=True\)"):
            ex.harvest()
        assert ex.status == "active"
        result = ex.harvest(finish=True)
        assert result.status == "completed" and any(g.startswith("unexplored") for g in result.gaps)


# -- budgets ------------------------------------------------------------------------------------


def test_a_token_budget_stops_a_run_mid_way_and_going_on_is_explicit() -> None:
    with explore() as ex:
        report = ex.run(progress=False, max_tokens=8_000)
        assert report == "budget_exhausted"
        assert report.status_reason is not None and report.status_reason.startswith(
            "token budget of 8,000 reached ("
        )
        graph = ex.store.get_graph(ex.graph_id)
        assert graph["status"] == "budget_exhausted" and graph["status_reason"] == report.status_reason
        assert graph["metadata"]["limits"]["max_tokens"] == 8_000  # kept with the graph
        spent, calls = report.tokens, ex.llm_calls()
        biggest = int((calls["prompt_tokens"] + calls["completion_tokens"]).max())
        assert 8_000 <= spent <= 8_000 + biggest, "admitted before each call: at most one call past it"
        assert report.status_reason == f"token budget of 8,000 reached ({spent:,} spent)"
        assert report.open_questions_remaining > 0
        assert any(w.exit_reason == "budget" for w in report.worker_reports)
        # Seed 001: budget_exhausted is terminal for resume (run() and run(resume=True) alike, and the
        # store's resume_graph, MCP fractal_resume_graph); each refusal names the way on and changes nothing.
        events = len(ex.events())
        for refused in (lambda: ex.run(progress=False), lambda: ex.run(progress=False, resume=True)):
            with pytest.raises(StateError, match="budget_exhausted.*new turn with a new budget.*max_tokens"):
                refused()
        with pytest.raises(InvalidTransitionError, match="terminal for a resume.*new turn with a new budget"):
            ex.store.resume_graph(ex.graph_id)
        with pytest.raises(InvalidTransitionError, match="new turn with a new budget"):
            ex.store.update_graph_status(ex.graph_id, "active")
        assert ex.status == "budget_exhausted" and len(ex.events()) == events
        preview = ex.preview()
        assert any("token budget" in g for g in preview.gaps)
        done = ex.run(progress=False, max_tokens=10**9)  # going on: a new turn with a new budget
        assert done == "all_complete"
        turns = ex.store.list_turns(ex.graph_id)
        assert [(t["turn"], t["kind"], t["status"]) for t in turns] == [
            (1, "seed", "budget_exhausted"),  # the turn the budget stopped ended in a head
            (2, "budget", None),
        ]
        assert turns[1]["requests"][0]["arguments"]["limits"]["max_tokens"] == 10**9
        assert ex.harvest().status == "completed"


def test_a_circuit_breaker_stop_goes_on_only_by_new_budget_and_each_refusal_changes_nothing(
    tmp_path: Any,
) -> None:
    with explore(path=tmp_path / "cb.duckdb") as ex:
        assert ex.run(1, progress=False) == "budget_exhausted" and ex.status_reason == "circuit breaker"
        events = len(ex.events())
        refusals = (
            lambda: ex.run(1, progress=False, resume=True),
            lambda: ex.step(),
            lambda: ex.approve(),
        )
        for refused in refusals:
            with pytest.raises(
                StateError, match=r"\(circuit breaker\): it is terminal for resume.*new_budget"
            ):
                refused()
        with pytest.raises(InvalidInputError, match="max_tokens"):
            ex.new_budget(max_tokens=-5)
        assert ex.status == "budget_exhausted" and len(ex.events()) == events, "nothing written"
        assert ex.state().resume_from.endswith(
            "once new_budget() opens a new turn: the graph is budget_exhausted, terminal for resume"
        )
        step = ex.new_budget()  # the same limits: each run has its own circuit breaker
        assert (step.turn, step.kind, step.created) == (2, "budget", ())
        with pytest.raises(
            StateError, match="is 'active': a new budget opens a turn only on a 'budget_exhausted'"
        ):
            ex.new_budget()
        while ex.run(1, progress=False) == "budget_exhausted":
            ex.new_budget()
        turns = ex.turns()
        assert list(turns["kind"]) == ["seed"] + ["budget"] * (len(turns) - 1)
        assert turns["asked"].iloc[1] == "budget(limits={})"
    with Exploration.open(tmp_path / "cb.duckdb", read_only=True) as ro:
        with pytest.raises(StateError, match="read_only"):
            ro.new_budget(max_tokens=10)


def test_a_budget_exhausted_graph_is_harvested_as_it_stands_without_a_resume() -> None:
    with explore("pulse") as ex:
        assert ex.run(progress=False, max_tokens=1_000) == "budget_exhausted"
        with pytest.raises(StateError, match="the new budget is spent already"):
            ex.new_budget(max_tokens=1_000)
        result = ex.harvest()  # not a resume: the harvest's own move, the graph completed
        assert result.status == "completed" and "unexplored" in set(ex.gaps()["kind"])
        assert [(t, s) for t, s in zip(ex.turns()["kind"], ex.turns()["status"], strict=True)] == [
            ("seed", "completed")
        ]


def test_budgets_are_kept_from_create_and_checked_before_anything_changes() -> None:
    with explore("pulse", max_tokens=1_000) as ex:
        assert ex.run(progress=False) == "budget_exhausted"
    for bad, message in [
        ({"max_tokens": 0}, "max_tokens must be an integer > 0"),
        ({"max_tokens": 1.5}, "max_tokens must be an integer"),
        ({"max_wall_s": -1}, "max_wall_s must be a finite number > 0"),
        ({"max_cost": 1.0}, "max_cost needs a price table"),
        ({"max_cost": 1.0, "prices": {"m": (1,)}}, r"prices\['m'\] must be"),
    ]:
        with explore("pulse") as ex:
            events = len(ex.events())
            with pytest.raises(InvalidInputError, match=message):
                ex.run(progress=False, **bad)
            assert len(ex.events()) == events and ex.status == "active"
        with pytest.raises(InvalidInputError, match=message):
            explore("pulse", **bad)


def test_a_cost_budget_with_a_price_table() -> None:
    with explore() as ex:
        model = ex.llm.model  # type: ignore[attr-defined]
        report = ex.run(progress=False, max_cost=0.01, prices={model: (1.0, 2.0)})
        assert report == "budget_exhausted" and "cost budget of 0.01 reached" in (report.status_reason or "")
        assert report.cost is not None and report.cost >= 0.01
        calls = ex.llm_calls()
        usage = ex.usage()  # the graph's whole spend, the run's included (what the panel shows)
        assert usage["calls"] == len(calls) and usage["calls"] >= report.model_calls
        assert usage["tokens"] == int(calls.prompt_tokens.sum() + calls.completion_tokens.sum())
        assert usage["cost"] is not None and usage["cost"] >= report.cost
    with explore() as ex:
        assert ex.usage() == {"calls": 0, "tokens": 0, "cost": None}
        report = ex.run(progress=False, max_cost=5.0, prices={"another-model": (1.0, 2.0)})
        assert report == "budget_exhausted"
        assert "no price for model(s) simulated-4" in (report.status_reason or "")


class TickingClock:
    """A fake clock: each reading is a second later; waits are short."""

    def __init__(self) -> None:
        self.t = 0.0
        self.lock = threading.Lock()

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        with condition:
            condition.wait(seconds / 1000)

    def now(self) -> float:
        with self.lock:
            self.t += 1.0
            return self.t


def test_a_wall_time_budget_on_a_fake_clock() -> None:
    with Exploration.create(SEED, intensity="explore", llm=SimulatedLLM(seed=4), clock=TickingClock()) as ex:
        report = ex.run(max_workers=1, progress=False, max_wall_s=5)
        assert report == "budget_exhausted"
        assert (report.status_reason or "").startswith("wall-time budget of 5 s reached")
        assert 1 <= report.nodes_processed <= 6


class Stalling(SimulatedLLM):
    """The simulator, but every answer stalls until released."""

    def __init__(self) -> None:
        super().__init__(seed=4)
        self.release = threading.Event()

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if getattr(schema, "role", "") == "answer":
            self.release.wait(60)
        return super().complete(messages, schema)


def test_a_node_time_limit_ends_the_run_and_leaves_the_node_recoverable() -> None:
    llm = Stalling()
    try:
        with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
            report = ex.run(max_workers=1, progress=False, node_timeout_s=0.05)
            assert report == "budget_exhausted"
            assert "the node's time limit of 0.05 s was reached (on n-" in (report.status_reason or "")
            nodes = ex.nodes()
            assert not (nodes["status"] == "claimed").any()
            assert not (nodes["status"] == "error").any()  # not the question's fault: no failure counted
            calls = ex.llm_calls()
            assert (calls.query("role == 'answer'")["error"].str.startswith("NodeTimeLimitError")).all()
    finally:
        llm.release.set()


def test_a_wall_time_budget_holds_within_a_call_in_flight() -> None:
    """Issue 40: ``max_wall_s`` ends the run while answers are still being written, never after them.

    Every answer stalls until released (60 s at most); the run returns at its 0.2 s budget with
    the stalled calls abandoned and recorded, their questions given back with their tries.
    """
    llm = Stalling()
    answered = []
    stall = llm.complete

    def counted(messages, schema):  # type: ignore[no-untyped-def]
        reply = stall(messages, schema)
        answered.append(schema)
        return reply

    llm.complete = counted  # type: ignore[method-assign]
    try:
        with Exploration.create(SEED, intensity="pulse", llm=llm) as ex:  # the real clock: real calls
            report = ex.run(max_workers=3, progress=False, max_wall_s=0.2)
            assert [s for s in answered if s.role == "answer"] == [], "the run waited for a stalled call"
            assert report == "budget_exhausted"
            assert "wall-time budget of 0.2 s" in (report.status_reason or ""), report.status_reason
            nodes = ex.nodes()
            assert not (nodes["status"] == "claimed").any() and not (nodes["status"] == "error").any()
            abandoned = ex.llm_calls().query("role == 'answer'")
            assert len(abandoned) and abandoned["error"].str.startswith("NodeTimeLimitError").all()
    finally:
        llm.release.set()


# -- the error status ---------------------------------------------------------------------------


class Broken(SimulatedLLM):
    """A backend with a bug: not a model failure the engine can recover from."""

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if getattr(schema, "role", "") == "answer":
            raise RuntimeError("backend bug")
        return super().complete(messages, schema)


def test_an_error_the_engine_cannot_recover_from_sets_the_graph_to_error() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=Broken(seed=4), clock=FAST) as ex:
        # The bug crashes every worker: each report says so, and with no worker left to go on the graph is
        # 'error'; run() still returns its state (seed 000's error table).
        report = ex.run(progress=False)
        assert report == "error" and report.worker_reports
        assert {w.detail for w in report.worker_reports} == {"RuntimeError: backend bug"}
        graph = ex.store.get_graph(ex.graph_id)
        reason = "every worker crashed: RuntimeError: backend bug"
        assert graph["status"] == "error" and graph["status_reason"] == reason == report.status_reason
        result = ex.harvest()  # the partial result is still harvestable
        assert result.status == "error" and result.node_count > 1
        with pytest.raises(
            StateError, match="is 'error' \\(every worker crashed: RuntimeError: backend bug\\)"
        ):
            ex.run(progress=False)


# -- gaps that add up ---------------------------------------------------------------------------


def test_every_pruned_failed_or_budget_cut_question_is_a_gap_row() -> None:
    with explore() as ex:
        assert ex.run(progress=False, max_tokens=6_000) == "budget_exhausted"
        unfinished = ex.nodes().query("node_type == 'question' and depth == 1 and status == 'answered'")
        assert len(unfinished), "a branch with work below it"
        pruned = ex.prune(unfinished.iloc[0]["node_id"])  # a person's act: the graph stays budget_exhausted
        assert ex.status == "budget_exhausted"  # terminal for resume: only a new budget goes on
        gaps = ex.gaps()
        assert list(gaps.columns) == ["node_id", "depth", "kind", "question", "detail"]
        assert gaps["node_id"].is_unique
        rows = gaps.set_index("node_id")
        for node_id in [pruned["node_id"], *pruned["cascaded"]]:
            assert rows.loc[node_id, "kind"] == "pruned"
        open_now = set(ex.nodes().query("node_type == 'question' and status == 'open'")["node_id"])
        assert open_now <= set(rows.index)
        result = ex.harvest(finish=True)
        assert len(result.gap_rows) == len(result.gaps[: len(result.gap_rows)])
        kinds = {r["kind"] for r in result.gap_rows}
        assert {"pruned", "unexplored"} <= kinds
        unexplored = [r for r in result.gap_rows if r["kind"] == "unexplored"]
        frozen = ex.nodes().query("node_type == 'question' and status_reason == 'budget_exhausted'")
        assert len(unexplored) == len(frozen), "each budget-cut question is its own gap, inherited or not"


# -- faithful connect ---------------------------------------------------------------------------


def test_connect_sees_siblings_and_related_answers_and_places_boundary_questions_as_seed_000() -> None:
    with explore("deep", SimulatedLLM(seed=4, link_rate=0.9)) as ex:
        ex.run(progress=False)
        g = ex.graph_id
        nodes = ex.nodes().set_index("node_id")
        # Candidates of a question: its siblings' answers first, then other branches', bounded.
        # A depth-2 question with a sibling (the tree's shape depends on the threads' order).
        questions = nodes[(nodes["node_type"] == "question") & (nodes["depth"] == 2)]
        deep = questions[questions.duplicated("parent_id", keep=False)].index[0]
        candidates = ex.store.get_context(g, deep)["candidates"]
        assert 0 < len(candidates) <= 8
        relations = [c["relation"] for c in candidates]
        assert relations == sorted(relations, key=lambda r: r != "sibling")
        assert "sibling" in relations
        boundaries = [ex.inspect(n)["node"] for n in nodes.index[nodes["meta_boundary"].eq(True)]]
        assert boundaries, "convergences across branches add boundary questions"
        for question in boundaries:
            new, other = question["metadata"]["converging_nodes"]
            assert {nodes.loc[new, "node_type"], nodes.loc[other, "node_type"]} == {"answer"}
            shallower = other if nodes.loc[other, "depth"] < nodes.loc[new, "depth"] else new
            assert question["parent_id"] == shallower
            assert nodes.loc[new, "branch_id"] != nodes.loc[other, "branch_id"]
        assert ex.harvest(finish=True).status == "completed"


def test_a_run_stopped_at_its_gates_says_so_in_its_headline() -> None:
    with explore("explore", checkpoint="depth:1") as ex:
        report = ex.run(progress=False)
        assert report == "paused" and report.workers_dispatched == 0 and report.gated_questions_remaining
        line = report.headline()
        assert "every question it made waits at a gate, so no worker started" in line
        assert "0 worker(s)" not in line and "model call(s)" in line
        assert "model call" not in report.headline(spend=False)
