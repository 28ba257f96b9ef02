"""The dispatcher: up to ``max_agents`` worker threads pulling from the graph, and when to stop.

Workers follow the worker protocol (docs/architecture/engine.md, "The worker
protocol we follow"): claim → primitive → repeat; with nothing to claim but work
in flight they back off 2, 4, 8 s (woken early when new questions land) and exit
after three empty tries; each stops at ``max_depth × 3`` nodes (the circuit
breaker). While they work, a heartbeat renews the leases of the claims they
hold, so a slow model never loses a claim to the lease. When the model is down
(:mod:`.calls`), or a budget (:mod:`.limits`: tokens and cost admitted before
each call, wall time before each claim) is reached, every worker stops. After
they exit: another round for orphaned work, or the run's outcome, decided in
:mod:`.outcome` (the one place that does): model unavailable, paused,
convergence found, budget exhausted, waiting on claims held elsewhere, or done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import StoreUnreachableError
from ..results.result import StepRecord
from ..results.run_report import WorkerReport
from ..vocabulary import CheckpointKind, ExitReason, GraphStatus, RunOutcome
from .outcome import settle
from .primitive import claim_question, leftovers, process

if TYPE_CHECKING:
    from .run_state import RunState

__all__ = ["BACKOFF_S", "Clock", "Dispatcher", "RealClock", "ScaledClock", "WorkerReport", "heartbeat"]

BACKOFF_S = (2.0, 4.0, 8.0)
MAX_ROUNDS = 3  # re-dispatches for orphaned work before the run gives up for now
HEARTBEATS_PER_LEASE = 3  # a live holder renews its claims three times per lease


@contextmanager
def heartbeat(run: RunState, clock: Clock | None = None) -> Iterator[None]:
    """While the block runs, renew the leases of the claims the run's holder has, a few times a lease.

    ``clock`` paces the beats (real time by default): it waits in the store's
    time, the lease's, so a test that moves the store's clock cues each beat
    through it rather than racing a real lease (issue 37).
    """
    store, holder = run.store, run.store.holder["holder_id"]
    pace = clock or RealClock()
    wake = threading.Condition()  # notified when the block ends
    done = threading.Event()

    def beat() -> None:
        # A first beat at once learns the store's lease (a remote server's may be short).
        interval = 0.0
        while True:
            # Checked and waited under the condition's lock: the block's end cannot slip in between.
            with wake:
                if interval and not done.is_set():
                    pace.wait(wake, interval)
                if done.is_set():
                    return
            try:
                interval = float(store.heartbeat(holder)["lease_s"]) / HEARTBEATS_PER_LEASE
            except Exception:  # noqa: BLE001 - a missed beat is retried; the workers see the real error
                interval = store.lease_s / HEARTBEATS_PER_LEASE

    thread = threading.Thread(target=beat, name="fractal-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        with wake:
            done.set()
            wake.notify_all()
        thread.join()


class Clock(Protocol):
    """Time as the engine sees it; tests swap in a faster one."""

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        """Block up to ``seconds`` or until ``condition`` is notified."""
        ...

    def now(self) -> float:
        """Seconds on a monotonic clock (wall-time budgets)."""
        ...


class RealClock:
    """Wall-clock waits."""

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        """Wait on the condition for up to ``seconds``."""
        with condition:
            condition.wait(seconds)

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


@dataclass
class ScaledClock:
    """Waits ``scale`` times as long as asked (``ScaledClock(0.01)`` turns 8 s into 80 ms)."""

    scale: float

    def wait(self, condition: threading.Condition, seconds: float) -> None:
        """Wait on the condition for a scaled ``seconds``."""
        with condition:
            condition.wait(seconds * self.scale)

    def now(self) -> float:
        """Monotonic time, running ``1 / scale`` times as fast."""
        return time.monotonic() / self.scale


class OnStepError(BaseException):
    """What the caller's ``on_step`` raised (``error``), carried out of a worker thread.

    The caller's error, raised as it is by :func:`~fractal_nb.engine.runs.run`: never a worker's crash.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class Dispatcher:
    """Runs the work phase of one graph with threads; ``stop`` asks it to pause."""

    run_state: RunState
    workers: int
    clock: Clock = field(default_factory=RealClock)
    # Paces the heartbeat in the store's time (a lease), apart from ``clock``: a faster
    # engine clock must not beat a real store's lease a thousand times as often.
    heartbeat_clock: Clock | None = None
    on_step: Callable[[StepRecord], None] | None = None
    worker_prefix: str = "worker"
    # Another process may hold claims that add work: keep backing off instead of
    # leaving as soon as nothing is in flight here (remote workers).
    patient: bool = False
    stop: threading.Event = field(default_factory=threading.Event)
    reports: list[WorkerReport] = field(default_factory=list)
    budget_reached: str | None = None  # why the run stopped for a budget (limits.py), once it did
    _started: float = 0.0
    _in_flight: int = 0
    _last_round: int = 0  # how many workers the last round started
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> RunOutcome:
        """Work until done, paused or out of budget; the run's outcome (:func:`.outcome.settle`)."""
        run, store = self.run_state, self.run_state.store
        self._started = self.clock.now()
        store.recover_stuck(run.graph_id)  # claims past their lease or of holders that are gone
        with run.call.run_time_limit(run.limits.max_wall_s):  # calls in flight at the end are abandoned
            self._rounds()
        return self._settle()

    def _rounds(self) -> None:
        """Rounds of workers until the graph is done, paused, out of budget or stopped."""
        run, store = self.run_state, self.run_state.store
        for _ in range(MAX_ROUNDS):
            count = min(self.workers, run.budget.max_agents, store.get_claimable_work(run.graph_id)["count"])
            if count == 0 or self.stop.is_set() or run.call.outage or self._over_budget():
                break
            self.work(count)
            if (
                self.crashed() is not None  # no worker could go on: another round would crash again
                or self.stop.is_set()
                or run.convergence_found.is_set()
                or run.call.outage
                or (self.budget_reached)
                or any(
                    r.exit_reason in (ExitReason.CIRCUIT_BREAKER, ExitReason.CYCLE)
                    for r in self.reports[-count:]
                )
            ):
                break

    def work(self, count: int) -> list[WorkerReport]:
        """One round: ``count`` worker threads each run the worker loop until it exits; their reports.

        (docs/architecture/engine.md, "The engine loop")

        Settles nothing: :meth:`run` decides the graph's status afterwards. A worker that
        crashes is noted in its report (``crashed``, the error in ``detail``) and its claims go
        back; the others finish. What the caller's ``on_step`` raises, or the store's server
        gone, is raised after the join.
        """
        errors: list[BaseException] = []
        self._last_round = count
        reports = [WorkerReport(f"{self.worker_prefix}-{i + 1}") for i in range(count)]
        self.reports.extend(reports)

        def body(report: WorkerReport) -> None:
            try:
                self._work(report)
            except StoreUnreachableError as exc:  # the server is gone: so is every worker here
                errors.append(exc)
                report.exit_reason = ExitReason.STORE_UNREACHABLE
                self.stop.set()
            except BaseException as exc:
                if isinstance(exc, OnStepError) or not isinstance(exc, Exception):  # raised after the join
                    errors.append(exc)
                # A bug, not a model failure: noted in its report, its claims given back; the others
                # finish (docs/architecture/engine.md, "The worker protocol we follow": the error table).
                cause = exc.error if isinstance(exc, OnStepError) else exc
                report.exit_reason = ExitReason.CRASHED
                report.detail = f"{type(cause).__name__}: {cause}"[:500]
                self._give_back(report.worker)

        threads = [
            threading.Thread(target=body, args=(r,), name=f"fractal-{r.worker}", daemon=True) for r in reports
        ]
        unwatch = self.run_state.store.watch(self.run_state.graph_id, self.run_state.work_elsewhere)
        try:
            with heartbeat(self.run_state, self.heartbeat_clock):
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            unwatch()
        if errors:
            raise errors[0]
        return reports

    def _work(self, report: WorkerReport) -> None:
        run = self.run_state
        breaker = run.part.steps_per_worker(run)
        interactive = run.checkpoint.kind == CheckpointKind.INTERACTIVE
        tries = 0
        while True:
            if run.call.outage:  # held_back (engine/outcome.py), as step() checks it
                report.exit_reason, report.detail = ExitReason.MODEL_UNAVAILABLE, run.call.outage
                return
            if self.stop.is_set() or run.convergence_found.is_set():
                report.exit_reason = ExitReason.PAUSED
                return
            if report.answered + report.failures >= breaker:
                report.exit_reason = ExitReason.CIRCUIT_BREAKER
                return
            if self._over_budget():
                report.exit_reason, report.detail = ExitReason.BUDGET, self.budget_reached or ""
                return
            claim = claim_question(run, report.worker)
            if claim["node_id"] is None:
                if claim["graph_done"] or claim["graph_status"] != GraphStatus.ACTIVE:
                    if claim["graph_status"] == GraphStatus.ACTIVE:
                        leftovers(run, report.worker)  # as settle does: a remote worker settles nothing
                    report.exit_reason = ExitReason.GRAPH_DONE
                    return
                if run.synthesis_given_back.is_set():  # no question waits: retry it now
                    run.synthesis_given_back.clear()
                    if leftovers(run, report.worker):
                        continue
                if tries == len(BACKOFF_S) or (self._idle() and not self.patient):
                    report.exit_reason = ExitReason.NO_WORK_AFTER_RETRIES if tries else ExitReason.NO_WORK
                    return
                heard = run.added_elsewhere
                self.clock.wait(run.work_added, BACKOFF_S[tries])
                if run.added_elsewhere == heard:  # news of work elsewhere costs no try (store.watch)
                    tries += 1
                continue
            tries = 0
            with self._lock:
                self._in_flight += 1
            try:
                record = process(run, claim, report.worker)
            finally:
                with self._lock:
                    self._in_flight -= 1
                run.announce_work()
            report.count(record)
            if record.budget_reached and self.budget_reached is None:  # a node's time limit
                self.budget_reached = record.budget_reached
            if self.on_step is not None:  # what it raises is an OnStepError (engine/runs.py)
                self.on_step(record)
            if interactive:
                report.exit_reason = ExitReason.CYCLE
                return

    def _give_back(self, worker: str) -> None:
        """A crashed worker's claims, questions and syntheses, back to open (nothing is left stuck)."""
        try:
            self.run_state.store.recover_stuck(self.run_state.graph_id, worker_id=worker)
        except Exception:  # noqa: BLE001 - a graph no longer active: its claims are recovered on resume
            pass

    def crashed(self) -> str | None:
        """Why no worker could go on: every worker of the last round crashed (their first error), or None."""
        last = self.reports[-self._last_round :] if self._last_round else []
        if last and all(r.exit_reason == ExitReason.CRASHED for r in last):
            return f"every worker crashed: {last[0].detail}"
        return None

    def _over_budget(self) -> bool:
        """Whether a budget of :mod:`.limits` is reached (remembered: the run then stops).

        The spend as the model caller's allowance settled it (no query per claim).
        """
        if self.budget_reached is None:
            self.budget_reached = self.run_state.call.allowance.reached() or self.run_state.limits.reached(
                [], self.clock.now() - self._started
            )
        return self.budget_reached is not None

    def _idle(self) -> bool:
        """No node in flight here: waiting cannot bring new questions from this process."""
        with self._lock:
            return self._in_flight == 0

    def _settle(self) -> RunOutcome:
        return settle(
            self.run_state,
            budget_reached=self.budget_reached,
            stopped=self.stop.is_set(),
            reported=bool(self.reports),
            cascade_worker=f"{self.worker_prefix}-cascade",
            crashed=self.crashed(),
        )
