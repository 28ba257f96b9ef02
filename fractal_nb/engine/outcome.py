"""How a run ends: the one place that decides its :class:`~fractal_nb.vocabulary.RunOutcome`.

Two moments decide it, both here: right after the seed phase (:func:`after_seed`:
the budget refused the seed plan's call, or there is nothing to work on) and once
the dispatcher's workers are out (:func:`settle`). Each outcome that stops short
of the end sets the graph's status and its reason to match (the budget protocol
of docs/architecture/engine.md, "The worker protocol we follow", freezes the open
questions as unexplored), so the store says why a run stopped, whoever reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import StoreUnreachableError
from ..results.result import StepRecord
from ..vocabulary import CheckpointKind, GraphStatus, NodeStatus, RunOutcome, pending_counts
from .primitive import freeze_unexplored, leftovers

if TYPE_CHECKING:
    from .run_state import RunState

SETTLE_ROUNDS = 3
"""Rounds of the settling cascade when nothing else is left: a synthesis that failed is asked again
(the next request seed, a hotter temperature: llm/openai_llm.py), so a small model's failed root
synthesis does not pause a finished tree (docs/architecture/models.md, "Small models")."""


def held_back(run: RunState) -> str | None:
    """Why no node should be claimed now (the model is down, a spend budget is reached), or None.

    What every worker checks before a claim, the dispatcher's and ``step()``'s alike.
    """
    return run.call.outage or run.call.allowance.reached()


def failed(run: RunState, exc: BaseException) -> None:
    """A failure the engine cannot recover from sets the graph to ``error`` (the caller then raises it).

    See docs/architecture/engine.md, "The worker protocol we follow". A store whose server
    is gone, or a person's interrupt, records nothing here.
    """
    if isinstance(exc, StoreUnreachableError | KeyboardInterrupt):
        return
    try:
        if run.local.get_graph(run.graph_id)["status"] == GraphStatus.ACTIVE:
            run.local.update_graph_status(
                run.graph_id, GraphStatus.ERROR, reason=f"{type(exc).__name__}: {exc}"[:500]
            )
    except Exception:  # noqa: BLE001 - the original error is the one to raise
        pass


def after_seed(run: RunState, first: StepRecord) -> RunOutcome | None:
    """The run's outcome when its seed phase leaves nothing to do; None when the workers go on."""
    store, g = run.local, run.graph_id
    if first.budget_reached:  # the budget refused the seed plan's call: nothing was sent
        store.update_graph_status(g, GraphStatus.BUDGET_EXHAUSTED, reason=first.budget_reached)
        return RunOutcome.BUDGET_EXHAUSTED
    if not first.ok:  # nothing to work on: paused with the reason, resumable
        outage = run.call.outage
        store.update_graph_status(
            g, GraphStatus.PAUSED, reason=outage or f"the seed phase failed: {first.error}"
        )
        return RunOutcome.MODEL_UNAVAILABLE if outage else RunOutcome.SEED_FAILED
    return None


def settle(
    run: RunState,
    *,
    budget_reached: str | None,
    stopped: bool,
    reported: bool,
    cascade_worker: str,
    crashed: str | None = None,
) -> RunOutcome:
    """The outcome once the workers are out: what the graph holds, the model's health and the budgets.

    ``budget_reached``: the budget a worker met (None: none); ``stopped``: pause()
    was asked; ``reported``: a worker reported (an interactive checkpoint stops after
    one); ``cascade_worker``: the name the last synthesis cascade works under; ``crashed``:
    why no worker could go on (every worker crashed), which sets the graph to ``error``.
    """
    store, g = run.local, run.graph_id
    snapshot = store.get_snapshot(g)
    if snapshot["status"] != GraphStatus.ACTIVE:  # another process paused, harvested or failed it
        return RunOutcome(snapshot["status"])
    if crashed is not None:  # no worker could go on: the error table's failure the engine cannot recover from
        store.update_graph_status(g, GraphStatus.ERROR, reason=crashed[:500])
        return RunOutcome.ERROR
    pending = pending_counts(snapshot["nodes"])
    claimable = store.get_claimable_work(g)["count"]
    if run.call.outage:  # not finished, not a budget: resumable when the model is back
        store.update_graph_status(g, GraphStatus.PAUSED, reason=run.call.outage)
        return RunOutcome.MODEL_UNAVAILABLE
    spent = ledger_reason(run, budget_reached)
    if spent and (any(pending.values()) or claimable):
        freeze_open(run, spent)
        return RunOutcome.BUDGET_EXHAUSTED
    if not any(pending.values()):
        # The resume routing's case c (docs/architecture/engine.md, "The worker protocol we follow"):
        # nothing to claim, the root not synthesized; the cascade reaches every ready question before the
        # run calls itself complete.
        for _ in range(SETTLE_ROUNDS):  # each round asks a failed synthesis again, sampled anew
            leftovers(run, cascade_worker)
            left = store.get_ready_to_synthesize(g)["count"]
            if not left or run.call.outage or run.call.allowance.reached():
                break
        if not left:
            return RunOutcome.ALL_COMPLETE
        if spent := ledger_reason(run, run.call.allowance.reached()):  # the budget refused syntheses
            store.update_graph_status(g, GraphStatus.BUDGET_EXHAUSTED, reason=spent)
            return RunOutcome.BUDGET_EXHAUSTED
        reason = (
            f"{left} question(s) ready to synthesize could not be synthesized "
            "(the model failed): run() again to retry, or harvest()"
        )
        store.update_graph_status(g, GraphStatus.PAUSED, reason=reason)
        return RunOutcome.SYNTHESIS_FAILED
    if run.convergence_found.is_set():
        outcome, reason = RunOutcome.CONVERGENCE_DETECTED, "convergence checkpoint"
    elif stopped:
        outcome, reason = RunOutcome.PAUSED, "paused"
    elif run.checkpoint.kind == CheckpointKind.INTERACTIVE and reported:
        outcome, reason = RunOutcome.PAUSED, "interactive checkpoint"
    elif claimable:  # breakers fired (or rounds ran out) with work left: the budget protocol
        freeze_open(run, "circuit breaker")
        return RunOutcome.BUDGET_EXHAUSTED
    elif pending["gated"] and not pending["claimed"]:
        outcome, reason = RunOutcome.PAUSED, gates_reason(snapshot["nodes"], pending["gated"])
    else:  # only claims held by other workers (another process, an MCP client)
        return RunOutcome.WAITING_ON_CLAIMS
    store.update_graph_status(g, GraphStatus.PAUSED, reason=reason)
    return outcome


def ledger_reason(run: RunState, reached: str | None) -> str | None:
    """A budget's ``reached`` reason restated with the spend the ledger holds (the workers are out)."""
    if reached is None:
        return None
    return run.limits.spent(run.local.llm_spend(run.graph_id)) or reached


def freeze_open(run: RunState, reason: str) -> None:
    """The budget protocol: open questions marked unexplored, the graph too.

    See docs/architecture/engine.md, "The worker protocol we follow": the error table.
    """
    store, g = run.local, run.graph_id
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
