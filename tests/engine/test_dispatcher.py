"""The dispatcher's termination protocol: backoff 2/4/8 s through the injected clock; the heartbeat
against a lease on the store's fake clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.engine.dispatcher import BACKOFF_S, Dispatcher
from tests.conftest import Backend, FakeClock

pytestmark = pytest.mark.both_backends


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


def test_idle_workers_back_off_2_4_8_while_work_is_in_flight(backend: Backend) -> None:
    clock = RecordingClock()
    # Two questions, two workers: the fast one's worker finds nothing to claim while
    # the slow one is in flight, so it backs off (2, 4, 8 s, scaled) instead of leaving.
    llm = SlowOnOneQuestion(branching=0)
    with Exploration.create(
        "Two questions?", intensity="pulse", llm=llm, clock=clock, path=backend.target
    ) as ex:
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


def test_a_worker_with_nothing_in_flight_anywhere_exits_at_once(backend: Backend) -> None:
    clock = RecordingClock()
    with Exploration.create(
        "Gated?",
        intensity="pulse",
        checkpoint="depth:1",
        llm=SimulatedLLM(seed=1),
        clock=clock,
        path=backend.target,
    ) as ex:
        assert ex.run(progress=False) == "paused"
        assert clock.asked == [], "workers waited although no node was in flight"


@dataclass
class CuedBeats:
    """The heartbeat's clock in the test's hands: after the first beat, each beat waits for :meth:`beat`.

    No real lease runs out: the store's clock moves only when the test moves it, and
    the heartbeat beats only when cued, so the test holds on a machine of any speed.
    """

    waits: int = 0  # waits the heartbeat began: one after each beat
    waiting: bool = False
    cued: bool = False
    wake: threading.Condition | None = None
    started: threading.Event = field(default_factory=threading.Event)

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        with condition:  # the heartbeat holds it already: nothing slips in before the wait
            self.wake, self.waits, self.waiting = condition, self.waits + 1, True
            self.started.set()
            condition.notify_all()  # a beat() waiting for the heartbeat to be between beats
            if not self.cued:
                condition.wait()  # until cued, or until the heartbeat's block ends
            self.cued = self.waiting = False

    def now(self) -> float:
        return 0.0

    def beat(self) -> None:
        """Cue one beat and return once it is written (the heartbeat waits again)."""
        assert self.started.wait(60), "the heartbeat never waited on its clock"
        assert self.wake is not None
        with self.wake:
            assert self.wake.wait_for(lambda: self.waiting, 60), "the heartbeat never came back to wait"
            waits, self.cued = self.waits, True
            self.wake.notify_all()
            assert self.wake.wait_for(lambda: self.waits > waits, 60), "the cued beat never came"


class SlowOnTheStoresClock(SimulatedLLM):
    """The simulator, but each answer takes 120 s of the store's clock (a lease is 60 s), in three
    steps of 40 s with a heartbeat cued after each; it notes what was claimable meanwhile."""

    def __init__(self, store: GraphStore, clock: FakeClock, beats: CuedBeats, graph_id: str) -> None:
        super().__init__(seed=1, branching=0)
        self.store, self.clock, self.beats, self.graph_id = store, clock, beats, graph_id
        self.held: list[set[str]] = []  # the claims in flight, at each step of each answer
        self.claimable: list[set[str]] = []  # what another worker could have claimed then

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if schema.role == "answer":
            for _ in range(3):
                self.clock.advance(40)
                self.beats.beat()
                nodes = self.store.get_snapshot(self.graph_id)["nodes"]
                self.held.append({n["node_id"] for n in nodes if n["status"] == "claimed"})
                listed = self.store.get_claimable_work(self.graph_id)["claimable"]
                self.claimable.append({n["node_id"] for n in listed})
        return super().complete(messages, schema)


def test_the_heartbeat_keeps_claims_a_slow_model_holds_past_the_lease(
    backend: Backend, clock: FakeClock
) -> None:
    """Lease 60 s, an answer 120 s of the store's clock: only the heartbeat keeps its claim from being
    taken over. The store's clock is a fake one and each beat is cued: no real lease can run out."""
    beats = CuedBeats()
    with backend.open(clock=clock, lease_s=60) as store:
        g = store.create_graph("Why?", "pulse", "autonomous")
        store.add_answer(g["graph_id"], g["root_node_id"], "Two sides.", sub_questions=["A?", "B?"])
        llm = SlowOnTheStoresClock(store, clock, beats, g["graph_id"])
        ex = Exploration(store, g["graph_id"], llm)
        assert Dispatcher(ex._state, workers=1, heartbeat_clock=beats).run() == "all_complete"
        assert len(llm.held) == 6 and all(len(held) == 1 for held in llm.held), "one claim in flight"
        for held, claimable in zip(llm.held, llm.claimable, strict=True):
            assert not held & claimable, "a claim in flight was claimable: its lease ran out"
        claims = ex.events().query("kind == 'claimed'")
        taken_over = [p for p in claims["payload"] if "lease_expired_for" in p]
        assert taken_over == [] and claims["node_id"].is_unique
        assert (ex.llm_calls()["outcome"] == "ok").all()
