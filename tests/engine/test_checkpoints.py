"""Checkpoints are persistent gates and pauses: depth:N, convergence, interactive, pause().

Covers: engine/phases.py.
"""

from __future__ import annotations

import threading

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.errors import StateError
from tests.engine.test_runs import FAST, check_finished_graph

SEED = "Should our team move its services to a monorepo?"


def test_depth_gate_pauses_then_approve_continues(tmp_path) -> None:
    with Exploration.create(
        SEED,
        intensity="pulse",
        checkpoint="depth:1",
        llm=SimulatedLLM(seed=1),
        path=tmp_path / "g.duckdb",
        clock=FAST,
    ) as ex:
        assert ex.run(progress=False) == "paused"
        assert ex.status == "paused"
        gates = ex.gates
        assert 3 <= len(gates) <= 4 and set(gates["depth"]) == {1}
        assert len(ex.events().query("kind == 'claimed'")) == 0, "gated questions were claimed"
        approved = ex.approve()
        assert approved["count"] == len(gates) and ex.status == "active"
        assert ex.run(progress=False) == "all_complete"
        assert ex.harvest().status == "completed"
        check_finished_graph(ex)


def test_prune_a_gated_branch_and_the_parent_still_synthesizes() -> None:
    with Exploration.create(
        SEED, intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=2), clock=FAST
    ) as ex:
        ex.run(progress=False)
        first, *rest = ex.gates["node_id"].tolist()
        pruned = ex.prune(first)
        assert pruned["reason"] == "pruned"
        ex.approve(rest)
        assert ex.run(progress=False) == "all_complete"
        nodes = ex.nodes().set_index("node_id")
        assert nodes.loc[first, "status"] == "saturated" and nodes.loc[first, "status_reason"] == "pruned"
        root = nodes[nodes["depth"] == 0].iloc[0]
        assert root["status"] == "synthesized"
        result = ex.harvest()
        assert result.synthesis_chain[0].depth == 0


def test_gates_survive_closing_and_reopening_the_file(tmp_path) -> None:
    path = tmp_path / "gates.duckdb"
    with Exploration.create(
        SEED, intensity="explore", checkpoint="depth:2", llm=SimulatedLLM(seed=3), path=path, clock=FAST
    ) as ex:
        assert ex.run(progress=False) == "paused"
        gated = set(ex.gates["node_id"])
        graph_id = ex.graph_id
    assert gated, "depth:2 on explore gates level-2 questions"
    with Exploration.open(path, graph_id, llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        assert set(ex.gates["node_id"]) == gated
        assert set(ex.gates["depth"]) == {2}
        ex.approve()
        status = ex.run(progress=False)
        assert status in ("all_complete", "budget_exhausted", "paused")
        ex.harvest(finish=True)  # gates below may be waiting again: the rest as gaps
        check_finished_graph(ex)


def test_convergence_checkpoint_pauses_on_a_new_convergence() -> None:
    with Exploration.create(
        SEED,
        intensity="explore",
        checkpoint="convergence",
        llm=SimulatedLLM(seed=4, link_rate=0.9),
        clock=FAST,
    ) as ex:
        assert ex.run(progress=False) == "convergence_detected"
        assert ex.status == "paused"
        assert len(ex.edges().query("edge_type == 'convergence'")) >= 1
        before = len(ex.nodes())
        ex.run(progress=False)
        assert len(ex.nodes()) > before, "run() resumes after a convergence pause"


def test_interactive_checkpoint_pauses_after_each_cycle() -> None:
    with Exploration.create(
        SEED, intensity="pulse", checkpoint="interactive", llm=SimulatedLLM(seed=5), clock=FAST
    ) as ex:
        assert ex.run(max_workers=2, progress=False) == "paused"
        assert len(ex.events().query("kind == 'claimed'")) == 2  # one node per worker
        statuses = []
        for _ in range(10):
            statuses.append(ex.run(max_workers=2, progress=False))
            if statuses[-1] != "paused":
                break
        assert statuses[-1] == "all_complete"


def test_pause_lets_nodes_in_flight_finish() -> None:
    with Exploration.create(
        SEED, intensity="deep", llm=SimulatedLLM(seed=6, latency_s=0.05), clock=FAST
    ) as ex:
        seen = threading.Event()
        outcome: list[str] = []

        def pause_after_some(record) -> None:
            if len(ex.events().query("kind == 'claimed'")) >= 6:
                seen.set()

        worker = threading.Thread(
            target=lambda: outcome.append(ex.run(progress=False, on_step=pause_after_some))
        )
        worker.start()
        assert seen.wait(60)
        ex.pause()
        worker.join(60)
        assert outcome == ["paused"] and ex.status == "paused"
        assert not (ex.nodes()["status"] == "claimed").any(), "a claim was left behind"
        claimed_then = len(ex.events().query("kind == 'claimed'"))
        assert ex.run(max_workers=4, progress=False) in ("all_complete", "budget_exhausted")
        assert len(ex.events().query("kind == 'claimed'")) > claimed_then


def test_a_paused_graph_is_harvested_only_when_asked_and_previewed_as_it_stands() -> None:
    with Exploration.create(
        SEED, intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=7), clock=FAST
    ) as ex:
        ex.run(progress=False)
        events = len(ex.events())
        with pytest.raises(StateError, match=r"with work left \(\d+ gated\); harvest\(finish=True\)"):
            ex.harvest()
        result = ex.preview()
        assert result.status == "paused" and ex.status == "paused" and len(ex.events()) == events
        assert sum(gap.startswith("waiting (gated)") for gap in result.gaps) == len(ex.gates)
        ex.approve()
        ex.run(progress=False)
        assert ex.harvest().status == "completed"
