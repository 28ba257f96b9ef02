"""The dispatcher's termination protocol: backoff 2/4/8 s through the injected clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.engine.dispatcher import BACKOFF_S, Dispatcher, ScaledClock


@dataclass
class RecordingClock:
    """Waits a thousandth of what it is asked, and remembers what it was asked."""

    asked: list[float] = field(default_factory=list)

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        self.asked.append(seconds)
        with condition:
            condition.wait(seconds / 1000)

    def now(self) -> float:
        return 0.0  # no wall-time budget in these tests


class SlowOnOneQuestion(SimulatedLLM):
    """The simulator, but an answer mentioning "slow" lands only once ``until()`` holds."""

    until: Callable[[], bool] = staticmethod(lambda: True)

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        asked = messages[-1]["content"].split("Question to answer now", 1)[-1].split("\n")[1]
        if schema.role == "answer" and "slow" in asked:
            waiting = threading.Event()
            while not self.until():
                waiting.wait(0.005)  # a condition, polled: no fixed sleep
        return super().complete(messages, schema)


def test_idle_workers_back_off_2_4_8_while_work_is_in_flight() -> None:
    clock = RecordingClock()
    # Two questions, two workers: the fast one's worker finds nothing to claim while
    # the slow one is in flight, so it backs off (2, 4, 8 s, scaled) instead of leaving.
    llm = SlowOnOneQuestion(branching=0)
    with Exploration.create("Two questions?", intensity="pulse", llm=llm, clock=clock) as ex:
        g, root = ex.graph_id, ex.store.get_snapshot(ex.graph_id)["root_node_id"]
        ex.store.add_answer(g, root, "Two sides.", sub_questions=["A fast question?", "A slow question?"])
        dispatcher = Dispatcher(ex._state, workers=2, clock=clock)
        # The slow answer lands once the other worker has backed off three times and left.
        llm.until = lambda: any(r.exit_reason for r in dispatcher.reports)
        assert dispatcher.run() == "all_complete"
        # The scaled waits (2, 4, 8 ms) run out long before the slow answer lands.
        assert clock.asked == [2.0, 4.0, 8.0] == list(BACKOFF_S)
        reasons = sorted(r.exit_reason for r in dispatcher.reports)
        assert reasons == ["graph_done", "no_work_after_retries"]
        assert ex.nodes().query("depth == 0").iloc[0]["status"] == "synthesized"


def test_a_worker_with_nothing_in_flight_anywhere_exits_at_once() -> None:
    clock = RecordingClock()
    with Exploration.create(
        "Gated?", intensity="pulse", checkpoint="depth:1", llm=SimulatedLLM(seed=1), clock=clock
    ) as ex:
        assert ex.run(progress=False) == "paused"
        assert clock.asked == [], "workers waited although no node was in flight"


def test_the_heartbeat_keeps_claims_a_slow_model_holds_past_the_lease() -> None:
    """Lease 0.3 s, model 0.6 s a call: only the run's heartbeat keeps its claims from being taken over."""
    with GraphStore(lease_s=0.3) as store:
        ex = Exploration(
            store,
            store.create_graph("Why?", "pulse", "autonomous")["graph_id"],
            SimulatedLLM(seed=1, latency_s=0.6),
            clock=ScaledClock(0.001),
        )
        assert ex.run(max_workers=3, progress=False) == "all_complete"
        claims = ex.events().query("kind == 'claimed'")
        taken_over = [p for p in claims["payload"] if "lease_expired_for" in p]
        assert taken_over == [] and claims["node_id"].is_unique
        assert (ex.llm_calls()["outcome"] == "ok").all()
