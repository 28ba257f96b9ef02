"""The dispatcher: up to ``max_agents`` worker threads pulling from the graph, and when to stop.

Workers follow the worker protocol (docs/architecture.md): claim → primitive →
repeat; with nothing to claim but work in flight they back off 2, 4, 8 s
(woken early when new questions land) and exit after three empty tries; each
stops at ``max_depth × 3`` nodes (the circuit breaker). While they work, a
heartbeat renews the leases of the claims they hold, so a slow model never
loses a claim to the lease. When the model is down (:mod:`.calls`), or a
budget (:mod:`.limits`: tokens and cost admitted before each call, wall time
before each claim) is reached, every worker stops. After they exit, the
dispatcher decides: model unavailable (the graph paused with the reason,
resumable), paused (asked to, a checkpoint, or only gated work left),
convergence found, budget exhausted (a budget reached, or breakers fired with
work left), another round for orphaned work, or done (the synthesis cascade
run to every ready question first).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import StoreUnreachableError
from ..model import GraphStatus, NodeStatus, Strategy, pending_counts
from ..results import StepRecord
from ..run_report import WorkerReport
from .primitive import RunState, cascade, freeze_unexplored, process
from .thinkon import MAX_CHAIN_STEPS

__all__ = ["BACKOFF_S", "Clock", "Dispatcher", "RealClock", "ScaledClock", "WorkerReport", "heartbeat"]

BACKOFF_S = (2.0, 4.0, 8.0)
MAX_ROUNDS = 3  # re-dispatches for orphaned work before the run gives up for now
HEARTBEATS_PER_LEASE = 3  # a live holder renews its claims three times per lease


@contextmanager
def heartbeat(run: RunState) -> Iterator[None]:
    """While the block runs, renew the leases of the claims the run's holder has, a few times a lease."""
    store, holder = run.store, run.store.holder["holder_id"]
    done = threading.Event()

    def beat() -> None:
        # A first beat at once learns the store's lease (a remote server's may be short).
        interval = 0.0
        while not done.wait(interval):
            try:
                interval = float(store.heartbeat(holder)["lease_s"]) / HEARTBEATS_PER_LEASE
            except Exception:  # noqa: BLE001 - a missed beat is retried; the workers see the real error
                interval = store.lease_s / HEARTBEATS_PER_LEASE

    thread = threading.Thread(target=beat, name="fractal-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
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


@dataclass
class Dispatcher:
    """Runs the work phase of one graph with threads; ``stop`` asks it to pause."""

    run_state: RunState
    workers: int
    clock: Clock = field(default_factory=RealClock)
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
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> str:
        """Work until done, paused or out of budget; returns the run's status.

        ``all_complete``, ``paused``, ``convergence_detected`` or ``budget_exhausted``.
        The graph's status follows (paused / budget_exhausted).
        """
        run, store = self.run_state, self.run_state.store
        self._started = self.clock.now()
        store.recover_stuck(run.graph_id)  # claims past their lease or of holders that are gone
        for _ in range(MAX_ROUNDS):
            count = min(self.workers, run.budget.max_agents, store.get_claimable_work(run.graph_id)["count"])
            if count == 0 or self.stop.is_set() or run.call.outage or self._over_budget():
                break
            self.work(count)
            if (
                self.stop.is_set()
                or run.convergence_found.is_set()
                or run.call.outage
                or (self.budget_reached)
                or any(r.exit_reason in ("circuit_breaker", "cycle") for r in self.reports[-count:])
            ):
                break
        return self._settle()

    def work(self, count: int) -> list[WorkerReport]:
        """One round: ``count`` worker threads each run the worker loop until it exits; their reports.

        (docs/architecture.md, "The engine loop")

        Settles nothing: :meth:`run` decides the graph's status afterwards.
        """
        errors: list[BaseException] = []
        reports = [WorkerReport(f"{self.worker_prefix}-{i + 1}") for i in range(count)]
        self.reports.extend(reports)

        def body(report: WorkerReport) -> None:
            try:
                self._work(report)
            except StoreUnreachableError as exc:  # the server is gone: so is every worker here
                errors.append(exc)
                report.exit_reason = "store_unreachable"
                self.stop.set()
            except BaseException as exc:  # a bug, not a model failure: surface it after the join
                errors.append(exc)
                report.exit_reason = "crashed"
                self.run_state.store.recover_stuck(self.run_state.graph_id, worker_id=report.worker)

        threads = [
            threading.Thread(target=body, args=(r,), name=f"fractal-{r.worker}", daemon=True) for r in reports
        ]
        with heartbeat(self.run_state):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        return reports

    def _work(self, report: WorkerReport) -> None:
        run = self.run_state
        # A thinkon chain is one level after another: its own limits bound it (engine/thinkon.py).
        breaker = run.budget.max_depth * 3 if run.strategy != Strategy.THINKON else MAX_CHAIN_STEPS
        interactive = run.checkpoint.kind == "interactive"
        tries = 0
        while True:
            if run.call.outage:
                report.exit_reason, report.detail = "model_unavailable", run.call.outage
                return
            if self.stop.is_set() or run.convergence_found.is_set():
                report.exit_reason = "paused"
                return
            if report.answered + report.failures >= breaker:
                report.exit_reason = "circuit_breaker"
                return
            if self._over_budget():
                report.exit_reason, report.detail = "budget", self.budget_reached or ""
                return
            claim = run.store.claim_work(run.graph_id, report.worker)
            if claim["node_id"] is None:
                if claim["graph_done"] or claim["graph_status"] != GraphStatus.ACTIVE:
                    report.exit_reason = "graph_done"
                    return
                if tries == len(BACKOFF_S) or (self._idle() and not self.patient):
                    report.exit_reason = "no_work_after_retries" if tries else "no_work"
                    return
                self.clock.wait(run.work_added, BACKOFF_S[tries])
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
            if self.on_step is not None:
                self.on_step(record)
            if interactive:
                report.exit_reason = "cycle"
                return

    def _over_budget(self) -> bool:
        """Whether a budget of :mod:`.limits` is reached (remembered: the run then stops).

        The spend as the model caller's allowance settled it (no query per claim).
        """
        if self.budget_reached is None:
            self.budget_reached = self.run_state.call.allowance.reached() or self.run_state.limits.reached(
                [], self.clock.now() - self._started
            )
        return self.budget_reached is not None

    def _ledger_reason(self, reached: str | None) -> str | None:
        """A budget's ``reached`` reason restated with the spend the ledger holds (the workers are out)."""
        if reached is None:
            return None
        run = self.run_state
        return run.limits.spent(run.local.llm_spend(run.graph_id)) or reached

    def _idle(self) -> bool:
        """No node in flight here: waiting cannot bring new questions from this process."""
        with self._lock:
            return self._in_flight == 0

    def _settle(self) -> str:
        run, store, g = self.run_state, self.run_state.local, self.run_state.graph_id
        snapshot = store.get_snapshot(g)
        if snapshot["status"] != GraphStatus.ACTIVE:
            return str(snapshot["status"])
        pending = pending_counts(snapshot["nodes"])
        claimable = store.get_claimable_work(g)["count"]
        if run.call.outage:  # not finished, not a budget: resumable when the model is back
            store.update_graph_status(g, GraphStatus.PAUSED, reason=run.call.outage)
            return "model_unavailable"
        spent = self._ledger_reason(self.budget_reached)
        if spent and (any(pending.values()) or claimable):
            self._freeze_open(spent)
            return "budget_exhausted"
        if not any(pending.values()):
            # The resume routing's case c (docs/architecture.md): nothing to claim, the root
            # not synthesized; the cascade reaches every ready question before the run calls itself complete.
            cascade(run, worker=f"{self.worker_prefix}-cascade")
            left = store.get_ready_to_synthesize(g)["count"]
            if not left:
                return "all_complete"
            if spent := self._ledger_reason(run.call.allowance.reached()):  # the budget refused syntheses
                store.update_graph_status(g, GraphStatus.BUDGET_EXHAUSTED, reason=spent)
                return "budget_exhausted"
            outcome, reason = (
                "paused",
                (
                    f"{left} question(s) ready to synthesize could not be synthesized "
                    "(the model failed): run() again to retry, or harvest()"
                ),
            )
            store.update_graph_status(g, GraphStatus.PAUSED, reason=reason)
            return outcome
        if run.convergence_found.is_set():
            outcome, reason = "convergence_detected", "convergence checkpoint"
        elif self.stop.is_set():
            outcome, reason = "paused", "paused"
        elif run.checkpoint.kind == "interactive" and self.reports:
            outcome, reason = "paused", "interactive checkpoint"
        elif claimable:  # breakers fired (or rounds ran out) with work left: the budget protocol
            self._freeze_open("circuit breaker")
            return "budget_exhausted"
        elif pending["gated"] and not pending["claimed"]:
            outcome, reason = "paused", gates_reason(snapshot["nodes"], pending["gated"])
        else:  # only claims held by other workers (another process, an MCP client)
            return "waiting_on_claims"
        store.update_graph_status(g, GraphStatus.PAUSED, reason=reason)
        return outcome

    def _freeze_open(self, reason: str) -> None:
        """The budget protocol (docs/architecture.md): open questions marked unexplored, the graph too."""
        store, g = self.run_state.local, self.run_state.graph_id
        with store.batch():
            for node in store.get_open_questions(g)["open_questions"]:
                freeze_unexplored(store, g, node["node_id"], reason)
            store.update_graph_status(g, GraphStatus.BUDGET_EXHAUSTED, reason=reason)


def gates_reason(nodes: Iterable[Mapping[str, Any]], gated: int) -> str:
    """Why a run stopped at its gates: questions awaiting approval, and those held for the person's answer.

    >>> gates_reason([{"status": "gated", "metadata": {"halt": {"kind": "confusion"}}}], 1)
    '1 question(s) held for your answer (ex.choose)'
    """
    held = sum(n["status"] == NodeStatus.GATED and "halt" in n["metadata"] for n in nodes)
    parts = [f"{gated - held} gated question(s) await approval"] if gated > held else []
    if held:
        parts.append(f"{held} question(s) held for your answer (ex.choose)")
    return "; ".join(parts)
