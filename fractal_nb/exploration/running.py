"""The work on a graph under its run lock: run, step, pause, harvest; the status routing every change passes.

The facade's half of docs/architecture/store.md, "The graph contract" (its statuses):
``Exploration`` checks a call's arguments, then hands it here. A run or a step holds the
graph's run lock (refusing, not waiting, while another holds it) on an active graph: a
paused one is resumed first, a finished one refused, an ``error`` one resumed only when
asked, a ``budget_exhausted`` one never: a new budget opens a new turn instead. A failure of
the engine's is recorded on the graph (``error``); the run's
:class:`~fractal_nb.results.run_report.RunReport` says what it did. A change to a file
opened ``read_only`` is refused here, before any model call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import engine
from ..checks import merged_metadata
from ..engine import Clock, Limits, RunState, spend_tokens
from ..errors import StateError
from ..results.result import FractalResult, StepRecord
from ..results.run_report import RunReport, Usage
from ..store import Store
from ..store.records import ModelSpend, TurnRequest
from ..store.stops import refuse_held
from ..vocabulary import (
    TERMINAL_GRAPH,
    GraphStatus,
    NodeStatus,
    NodeType,
    Strategy,
    parse_metadata,
    pending_counts,
)

STEP_WORKER = "stepper"


class Runner:
    """The runs, steps and harvest of one graph; ``Exploration`` holds one and delegates to it."""

    def __init__(
        self, store: Store, graph_id: str, state: RunState, running: threading.Lock, clock: Clock
    ) -> None:
        self._store = store
        self._graph_id = graph_id
        self._state = state
        self._running = running  # one run per graph in this process (store.run_lock)
        self._clock = clock
        self._stop: threading.Event | None = None  # set: the run in progress pauses

    def run(
        self,
        workers: int,
        asked: Limits,
        *,
        progress: bool,
        on_step: Callable[[StepRecord], None] | None,
        resume: bool,
    ) -> RunReport:
        """A run, ``asked`` merged into the graph's limits (arguments checked); see ``Exploration.run``."""
        limits, kept = self._limits_with(asked)
        spent = self._store.llm_spend(self._graph_id)  # the graph's spend before this run
        raised = asked != Limits() and limits.reached(spent, 0.0) is None
        with self.exclusive("pause() it first", revive=resume, budget=asked if raised else None) as opened:
            if asked != Limits() and not opened:  # a new budget's turn has written them
                self._store.update_graph_metadata(self._graph_id, kept)
            started = time.perf_counter()
            ran = self._engine_run(limits, workers, progress, on_step)
            return self._run_report(ran, spent, started)

    def new_budget(self, asked: Limits) -> TurnRequest:
        """A ``budget_exhausted`` graph goes on, ``asked`` merged in; see ``Exploration.new_budget``."""
        refusal = f"graph {self._graph_id} is running in this process; it is not out of budget"
        with holding(self._running, refusal, self._graph_id):
            check_writable(self._store)
            return self._open_budget(asked)

    def step(self, n: int) -> list[StepRecord]:
        """Up to ``n`` nodes in this thread; see ``Exploration.step``."""
        with self.exclusive("pause() it before stepping"):  # a step is an explicit act
            return engine.step(self._state, n, STEP_WORKER)

    def seed(self) -> StepRecord | None:
        """The seed phase alone; see ``Exploration.seed``."""
        with self.exclusive("pause() it before seeding"):
            return engine.seed(self._state)

    def approve(self, node_ids: list[str] | None) -> dict[str, Any]:
        """Open gated questions (all when None), each checked first; see ``Exploration.approve``."""
        for node_id in node_ids or ():
            node = self._store.get_node(self._graph_id, node_id)["node"]
            if node["status"] != NodeStatus.GATED:
                raise StateError(
                    f"node {node['node_id']} is {node['status']!r}, not gated; only gated questions "
                    "can be approved",
                    graph_id=self._graph_id,
                    node_id=node["node_id"],
                )
            refuse_held(node["node_id"], node["metadata"], self._graph_id)  # it needs choose()
        self.activate()  # a budget_exhausted graph: refused, the way on named
        return self._store.approve_gate(self._graph_id, node_ids)

    def pause(self) -> None:
        """Ask the run in progress to stop; see ``Exploration.pause``."""
        if self._stop is not None:
            self._stop.set()

    def harvest(self, *, finish: bool, aggregate: bool) -> FractalResult:
        """Finish the graph (or read a finished one back); see ``Exploration.harvest``."""
        with self._running:
            status = str(self._store.get_graph(self._graph_id)["status"])
            if status != GraphStatus.COMPLETED:  # a completed graph is read back; any other is written
                check_writable(self._store)
            if status in (GraphStatus.ACTIVE, GraphStatus.PAUSED) and not finish:
                left = self._work_left()
                if left:
                    raise StateError(
                        f"graph {self._graph_id} is {status!r} with work left ({left}); harvest(finish=True) "
                        "ends the exploration and lists that work as gaps, report() shows it as it stands"
                    )
            self._state.call.reset_health()  # the model may be back for the summary and syntheses
            self._state.arm(self.limits())  # as the graph keeps them (a new budget over MCP included)
            return engine.harvest(self._state, finish=finish, aggregate=aggregate)

    def limits(self) -> Limits:
        """The graph's limits as it keeps them: a new budget over MCP (``fractal_new_budget``) is seen."""
        return Limits.from_metadata(self._store.get_graph(self._graph_id)["metadata"])

    def usage(self, spend: list[ModelSpend]) -> Usage:
        """What ``spend`` (``store.llm_spend``) comes to: calls, tokens, and cost (None without prices)."""
        return {
            "calls": sum(s["calls"] for s in spend),
            "tokens": spend_tokens(spend),
            "cost": self._state.limits.cost(spend),
        }

    @contextmanager
    def exclusive(self, busy: str, *, revive: bool = False, budget: Limits | None = None) -> Iterator[bool]:
        """Hold the run lock (refusing, not waiting, if taken) on an active graph; yields ``activate``'s."""
        refusal = (
            f"graph {self._graph_id} is already running in this process (in this Exploration or "
            f"another one opened on the same file); {busy}"
        )
        with holding(self._running, refusal, self._graph_id):
            yield self.activate(revive=revive, budget=budget)

    def activate(self, *, revive: bool = False, budget: Limits | None = None) -> bool:
        """Resume a paused graph; refuse a finished one. True if a new ``budget`` opened a turn.

        The resume routing's case d (docs/architecture/engine.md, "The worker protocol
        we follow"): a terminal graph is an error to the caller, but for an ``error``
        graph that ``run(resume=True)`` asks to ``revive``. ``budget_exhausted`` is
        terminal for resume (docs/architecture/store.md, "The graph contract"): refused,
        naming the way on, but with a new ``budget``, which opens a turn of kind ``budget``.
        """
        check_writable(self._store)
        graph = self._store.get_graph(self._graph_id)
        status = graph["status"]
        if status == GraphStatus.ERROR and revive:
            # The explicit resume of a graph an engine failure stopped
            # (docs/architecture/store.md, "The graph contract").
            self._store.update_graph_status(self._graph_id, GraphStatus.ACTIVE, reason="resumed after error")
            return False
        if status == GraphStatus.ERROR:
            raise StateError(
                f"graph {self._graph_id} is 'error' ({graph['status_reason']}): a failure stopped it; once "
                "the cause is gone, run(resume=True) (fractal-nb resume) goes on; harvest() reads it"
            )
        if status in TERMINAL_GRAPH:
            why = f" ({graph['status_reason']})" if graph["status_reason"] else ""
            raise StateError(
                f"graph {self._graph_id} is {status!r}{why}: it is finished; harvest() reads it, and a new "
                "turn (ask, deepen, widen, redecompose or note) reopens it"
            )
        if status == GraphStatus.BUDGET_EXHAUSTED and budget is not None:
            self._open_budget(budget)
            return True
        if status == GraphStatus.BUDGET_EXHAUSTED:
            raise StateError(budget_refusal(self._graph_id, graph["status_reason"]), graph_id=self._graph_id)
        if status != GraphStatus.ACTIVE:
            self._store.resume_graph(self._graph_id)
        return False

    def _open_budget(self, asked: Limits) -> TurnRequest:
        """The store's new budget (a turn of kind ``budget``), refused first if its spend budget is spent."""
        limits = self.limits().merged(asked)
        if self._store.get_graph(self._graph_id)["status"] == GraphStatus.BUDGET_EXHAUSTED and (
            spent := limits.spent(self._store.llm_spend(self._graph_id))
        ):
            raise StateError(
                f"graph {self._graph_id}: the new budget is spent already ({spent}); give a larger "
                "max_tokens or max_cost",
                graph_id=self._graph_id,
            )
        given = {k: v for k, v in asked.to_metadata().items() if v not in (None, {})}
        request = self._store.new_budget(self._graph_id, given)  # any other status: refused there
        self._state.arm(limits)
        return request

    # -- a run's parts ------------------------------------------------------------

    def _limits_with(self, asked: Limits) -> tuple[Limits, dict[str, Any]]:
        """The graph's limits with ``asked`` merged in, and the metadata keeping them (checked, unwritten)."""
        if asked.solve_time_s is not None and self._state.strategy != Strategy.THINKON:
            raise StateError(
                f"graph {self._graph_id} is a {self._state.strategy} graph: solve_time_s bounds a thinkon "
                "sub-goal's Solve, and it has none"
            )
        limits = self.limits().merged(asked)
        kept = {"limits": limits.to_metadata()}
        parse_metadata(kept)
        if asked != Limits():  # checked before the graph moves: a refused run changes nothing
            graph = self._store.get_graph(self._graph_id)
            merged_metadata(graph["metadata"], kept, f"graph {self._graph_id}")
        return limits, kept

    def _engine_run(
        self, limits: Limits, workers: int, progress: bool, on_step: Callable[[StepRecord], None] | None
    ) -> engine.Ran:
        """The engine's run, pausable through ``pause()`` (what ``on_step`` raises is raised as it is)."""
        self._stop = threading.Event()
        try:
            return engine.run(
                self._state,
                limits=limits,
                workers=workers,
                clock=self._clock,
                progress=progress,
                on_step=on_step,
                stop=self._stop,
            )
        finally:
            self._stop = None

    def _run_report(self, ran: engine.Ran, spent: list[ModelSpend], started: float) -> RunReport:
        """The run's :class:`RunReport`: the graph as it is now and what this run did to it."""
        store, g = self._store, self._graph_id
        snapshot = store.get_snapshot(g)
        pending = pending_counts(snapshot["nodes"])
        status, reports, processed = ran.outcome, ran.reports, ran.steps
        mine = {a for r in processed for pair in r.convergences for a in pair}
        answers = {r.answer_id for r in processed if r.answer_id}
        before, after = self.usage(spent), self.usage(store.llm_spend(g))
        return RunReport(
            status=status,
            graph_id=g,
            root_node_id=snapshot["root_node_id"],
            intensity=snapshot["intensity"],
            checkpoint=snapshot["checkpoint_mode"],
            budget=snapshot["budget"],
            seed_count=sum(
                n["node_type"] == NodeType.QUESTION and n["depth"] == 1 and n["superseded_turn"] is None
                for n in snapshot["nodes"]
            ),
            status_reason=snapshot["status_reason"] if snapshot["status"] != GraphStatus.ACTIVE else None,
            workers_dispatched=len(reports),
            open_questions_remaining=pending["open"],
            claimed_nodes_remaining=pending["claimed"],
            gated_questions_remaining=pending["gated"],
            convergence_points=[
                c for c in store.query_convergence(g)["convergence_points"] if mine & set(c["nodes"])
            ],
            contradictions=[
                c for c in store.query_contradictions(g)["contradictions"] if c["nodes"][0] in answers
            ],
            worker_reports=list(reports),
            nodes_processed=len(processed),
            model_calls=after["calls"] - before["calls"],
            tokens=after["tokens"] - before["tokens"],
            cost=None if before["cost"] is None or after["cost"] is None else after["cost"] - before["cost"],
            wall_s=time.perf_counter() - started,
        )

    def _work_left(self) -> str:
        counts = pending_counts(self._store.get_snapshot(self._graph_id)["nodes"])
        counts["ready to synthesize"] = self._store.get_ready_to_synthesize(self._graph_id)["count"]
        return ", ".join(f"{count} {what}" for what, count in counts.items() if count)


@contextmanager
def holding(lock: threading.Lock, refusal: str, graph_id: str) -> Iterator[None]:
    """Hold a graph's run lock for the block, refusing with ``refusal`` (not waiting) while it is taken."""
    if not lock.acquire(blocking=False):
        raise StateError(refusal, graph_id=graph_id)
    try:
        yield
    finally:
        lock.release()


def check_writable(store: Store) -> None:
    """Refuse, before any model call, a change to a file opened ``read_only=True``."""
    if store.read_only:
        raise StateError(
            f"{store.location} was opened read_only=True: it is read, never changed; "
            "Exploration.open(path, llm=...) without read_only runs and changes it"
        )


def budget_refusal(graph_id: str, reason: str | None) -> str:
    """Why a budget_exhausted graph is not resumed, and the way on (docs/architecture/engine.md, "Budgets").

    >>> print(budget_refusal("g1", "circuit breaker"))  # doctest: +ELLIPSIS
    graph g1 is 'budget_exhausted' (circuit breaker): ... harvest() finishes it
    """
    return (
        f"graph {graph_id} is 'budget_exhausted' ({reason}): it is terminal for resume, and going on is "
        "a new turn with a new budget: new_budget(max_tokens=..., max_cost=..., max_wall_s=...) with a "
        "limit it has not reached, or none after a circuit breaker or wall-clock stop, then run(); from "
        "the shell: fractal-nb resume --new-budget [--max-tokens N] [--max-wall-s S]; harvest() finishes it"
    )
