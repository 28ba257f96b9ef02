"""The engine's entry points: a run of a graph and a step of it, from the seed to the outcome.

The facade's ``run()`` and ``step()`` and the remote worker call these
(docs/architecture/engine.md, "The engine loop"); each owns the limits it arms, the
seed phase, the dispatch of workers and the outcome, so no caller repeats them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from ..results.result import StepRecord
from ..results.run_report import WorkerReport
from ..vocabulary import RunOutcome
from .dispatcher import Clock, Dispatcher, OnStepError, heartbeat
from .outcome import after_seed, failed, held_back
from .primitive import claim_question, leftovers, process

if TYPE_CHECKING:
    from .limits import Limits
    from .run_state import RunState

LEFTOVERS = "(syntheses the climbs left)"
"""The ``question`` of the one record a step returns for the syntheses it made with no question left."""


@dataclass(frozen=True)
class Ran:
    """What one run did: its outcome, its workers' reports and the steps it made, in order."""

    outcome: RunOutcome
    reports: list[WorkerReport]
    steps: list[StepRecord]


def run(
    state: RunState,
    *,
    limits: Limits,
    workers: int,
    clock: Clock | None = None,
    progress: bool = False,
    on_step: Callable[[StepRecord], None] | None = None,
    stop: threading.Event | None = None,
) -> Ran:
    """Seed if needed, then work with up to ``workers`` threads until done, stopped or out of budget.

    ``limits`` are armed for the run's calls; ``on_step`` is called after each
    step, from the worker's thread (if it raises, ``stop`` is set and the error is
    raised from here as it is: the caller's, not the engine's); setting ``stop``
    pauses the run. Any other error is a failure the engine cannot recover from:
    the graph records it (:func:`.outcome.failed`), then it is raised. ``clock`` (None: the
    state's) becomes the run's: the dispatcher's waits and the thinkon levels' steps are timed by it.
    """
    state.clock = clock or state.clock
    state.arm(limits)
    state.convergence_found.clear()
    state.call.reset_health()  # the model may be back
    stop = stop or threading.Event()
    steps: list[StepRecord] = []
    with tqdm(desc="fractal", unit="node", disable=not progress, leave=True) as bar:

        def stepped(record: StepRecord) -> None:
            steps.append(record)
            bar.update(1)
            if on_step is not None:
                try:
                    on_step(record)
                except BaseException as exc:
                    stop.set()
                    raise OnStepError(exc) from exc

        try:
            first = state.part.seed(state)
            if first is not None:
                stepped(first)
                if (ended := after_seed(state, first)) is not None:
                    return Ran(ended, [], steps)
            dispatcher = Dispatcher(
                state,
                workers=min(workers, state.budget.max_agents),
                clock=state.clock,
                on_step=stepped,
                stop=stop,
            )
            return Ran(dispatcher.run(), dispatcher.reports, steps)
        except OnStepError as theirs:
            error = theirs.error
        except BaseException as exc:  # a bug or a store gone: recorded on the graph, then raised
            failed(state, exc)
            raise
    raise error


def step(state: RunState, n: int, worker: str) -> list[StepRecord]:
    """Up to ``n`` steps in this thread (the seed phase counts as one), as ``worker``; the records.

    Stops early when nothing is claimable, and, as a run's workers do, when the
    model is down or a spend budget is reached (:func:`.outcome.held_back`). With
    no question left, the syntheses the climbs left are made (or tried) and
    returned as one record whose ``question`` is :data:`LEFTOVERS`.
    """
    records: list[StepRecord] = []
    state.call.reset_health()  # the model may be back
    state.refresh_sources()  # sources added since the last run count (engine/evidence.py)
    first = state.part.seed(state)
    if first is not None:
        records.append(first)
    with heartbeat(state):  # a slow model keeps its claim past the lease
        while len(records) < n and held_back(state) is None:
            if records and records[-1].budget_reached:  # a node's time limit: the last step
                break
            claim = claim_question(state, worker)
            if claim["node_id"] is None:  # as a run's workers do: what the climbs left
                given_back: list[str] = []
                if done := leftovers(state, worker, given_back=given_back):
                    records.append(StepRecord(done[-1], worker, LEFTOVERS, synthesized=done))
                elif given_back:  # worked and failed: the next step tries it again
                    error = f"the synthesis of {', '.join(given_back)} failed and was given back"
                    records.append(StepRecord(given_back[-1], worker, LEFTOVERS, error=error))
                break
            records.append(process(state, claim, worker))
    return records


def seed(state: RunState) -> StepRecord | None:
    """The seed phase alone: the root's plan and its questions, for workers elsewhere to claim.

    None when the graph is seeded already; a record with ``error`` when the model
    failed it (the root stays open for the next try). docs/architecture/engine.md, "The engine loop".
    """
    state.call.reset_health()  # the model may be back
    state.refresh_sources()
    return state.part.seed(state)


def work(
    state: RunState, *, threads: int, worker_prefix: str, clock: Clock | None = None
) -> list[WorkerReport]:
    """Work a graph another process seeded and settles, with ``threads`` patient workers; their reports.

    No more threads than the graph's ``max_agents`` start (as a run's); across processes the
    store's ceiling holds (docs/architecture/store.md, rule 17).
    """
    threads = min(threads, state.budget.max_agents)
    state.clock = clock or state.clock  # the run's clock, as run()'s
    dispatcher = Dispatcher(
        state, workers=threads, clock=state.clock, worker_prefix=worker_prefix, patient=True
    )
    return dispatcher.work(threads)
