"""A worker that crashes is noted, not fatal: its report carries the error, its claims go back, the others
finish and run() returns its state; the graph is ``error`` only when no worker could go on.

Seed 000's error table: "Worker subagent fails entirely: note the failure in worker_reports, continue
with other workers". The crash is a real one: a strategy plugged in from outside the package whose step
has a bug (an exception that is not a model failure), as a fifth strategy would be
(docs/architecture/engine.md, "Strategies").

Covers: engine/dispatcher.py, engine/outcome.py.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.engine import strategies
from fractal_nb.engine.strategies.fractal import Fractal
from fractal_nb.vocabulary import ExitReason
from tests.engine.test_runs import FAST

if TYPE_CHECKING:
    from collections.abc import Callable

    from fractal_nb.engine import StrategyPart
    from fractal_nb.engine.run_state import RunState
    from fractal_nb.results.result import StepRecord
    from fractal_nb.store.records import Claim

SEED = "Why do some cities grow faster than others?"


class BuggyOnce(Fractal):
    """The fractal strategy, but its first step anywhere raises (a bug in a plugged-in part)."""

    name = "buggy_once"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.crashed = False

    def step(self, run: RunState, claim: Claim, worker: str) -> StepRecord:
        with self._lock:
            first, self.crashed = not self.crashed, True
        if first:
            raise ZeroDivisionError("a bug in the buggy_once part")
        return super().step(run, claim, worker)


class AlwaysBuggy(Fractal):
    """The fractal strategy, but every step raises: no worker can go on."""

    name = "always_buggy"

    def step(self, run: RunState, claim: Claim, worker: str) -> StepRecord:
        raise KeyError("a bug on every question")


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Callable[[StrategyPart], None]:
    """Register a part for this test only: the registry lists no test's strategy afterwards."""
    return lambda part: monkeypatch.setitem(strategies._PARTS, part.name, part)


def test_a_crashed_worker_is_noted_its_claim_goes_back_and_the_others_finish(
    registered: Callable[[StrategyPart], None],
) -> None:
    registered(BuggyOnce())
    with Exploration.create(
        SEED, intensity="pulse", llm=SimulatedLLM(seed=4), clock=FAST, strategy="buggy_once"
    ) as ex:
        report = ex.run(progress=False, max_workers=3)
        crashed = [w for w in report.worker_reports if w.exit_reason == ExitReason.CRASHED]
        assert len(crashed) == 1
        assert crashed[0].detail == "ZeroDivisionError: a bug in the buggy_once part"
        assert crashed[0].to_dict()["exit_reason"] == "crashed"
        assert report == "all_complete"  # the question it held went back and was answered by another
        assert (report.open_questions_remaining, report.claimed_nodes_remaining) == (0, 0)
        assert ex.store.get_graph(ex.graph_id)["status"] == "active"
        assert "a bug in the buggy\\_once part" in report.to_markdown()  # escaped


def test_when_every_worker_crashes_the_graph_is_error_and_a_state_is_still_returned(
    registered: Callable[[StrategyPart], None],
) -> None:
    registered(AlwaysBuggy())
    with Exploration.create(
        SEED, intensity="pulse", llm=SimulatedLLM(seed=4), clock=FAST, strategy="always_buggy"
    ) as ex:
        report = ex.run(progress=False, max_workers=2)
        assert report == "error" and report.worker_reports
        assert all(w.exit_reason == ExitReason.CRASHED for w in report.worker_reports)
        assert all(w.detail == "KeyError: 'a bug on every question'" for w in report.worker_reports)
        graph = ex.store.get_graph(ex.graph_id)
        assert graph["status"] == "error" and "every worker crashed" in str(graph["status_reason"])
        assert report.status_reason == graph["status_reason"]
        # Nothing is stuck: every claim went back to open, recoverable by run(resume=True).
        assert report.claimed_nodes_remaining == 0 and report.open_questions_remaining > 0
