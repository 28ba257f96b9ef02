"""The harvest and the preview: a graph's result, for every strategy (engine/result_of.py builds it)."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ..errors import FractalError, LLMError
from ..llm.schemas import HarvestFindings
from ..results.provenance import with_nodes
from ..results.result import FractalResult, synthesis_chain
from ..store.records import NodeRecord, Snapshot
from ..text import clip
from ..vocabulary import (
    PENDING_QUESTION,
    GraphStatus,
    NodeStatus,
    SaturationReason,
)
from . import grounding, synthesis_object
from .gaps import GATED_UNEXPLORED, HELD_UNEXPLORED, current, gap_rows, gap_text
from .primitive import cascade, freeze_unexplored
from .result_of import HARVEST_FAILED, checked, result_of, stored_result

if TYPE_CHECKING:
    from .run_state import RunState

HARVEST_PASSES = 3


def harvest(run: RunState, *, finish: bool = True, aggregate: bool = False) -> FractalResult:
    """Finish the graph and build its result.

    On an active or budget-exhausted graph (a paused one too with ``finish``),
    questions nobody will explore now are saturated as ``budget_exhausted``,
    answered leaves left behind get their answer as synthesis, the cascade runs
    to the root, and the graph moves to ``completed``. A paused graph without
    ``finish``, or one in error, is summarised as it stands.

    Its model calls count against the graph's budgets (engine/limits.py): at a
    spent budget it makes none, joins the syntheses left and says so in a gap.

    The synthesis object (docs/architecture/engine.md, "Tracks") is the root's in a
    tracks graph; ``aggregate=True`` builds one for a fractal graph from its
    depth-1 questions' syntheses (one more model call). Either is kept in the
    harvest as ``synthesis_object``.
    """
    store, g = run.local, run.graph_id
    run.arm()  # its calls are admitted against the ledger as it is now
    spent = run.call.allowance.reached()
    snapshot = store.get_snapshot(g)
    status = snapshot["status"]
    if "harvest" in snapshot["metadata"] and status == GraphStatus.COMPLETED:  # harvested before
        made = None
        if aggregate and not snapshot["metadata"]["harvest"].get("synthesis_object") and spent is None:
            # Built and returned, not kept: a finished graph takes no writes.
            made = _aggregate_fractal(run, current(snapshot["nodes"]))
        return stored_result(run, snapshot, made)
    finishing = status in (GraphStatus.ACTIVE, GraphStatus.BUDGET_EXHAUSTED) or (
        status == GraphStatus.PAUSED and finish
    )
    if finishing and status != GraphStatus.ACTIVE:
        # The harvest's own move, not a resume: budget_exhausted is terminal for resume
        # (docs/architecture/store.md, "The graph contract"); a failure puts the status back.
        store.start_harvest(g)
        try:
            return _finished(run, snapshot, spent, aggregate=aggregate)
        except BaseException:
            with suppress(FractalError):
                if store.get_graph(g)["status"] == GraphStatus.ACTIVE:
                    store.update_graph_status(g, status, reason=snapshot["status_reason"])
            raise
    return (
        _finished(run, snapshot, spent, aggregate=aggregate)
        if finishing
        else _summarised(run, spent, aggregate)
    )


def _summarised(run: RunState, spent: str | None, aggregate: bool) -> FractalResult:
    """A graph left as it stands (paused without ``finish``, or in error): its result, nothing written."""
    store, g = run.local, run.graph_id
    nodes = current(store.get_snapshot(g)["nodes"])
    harvested = _harvested(run, nodes, spent)
    synthesis = _synthesis_object(run, nodes, aggregate=aggregate and spent is None)
    chain = synthesis_chain(nodes)
    return result_of(run, store.get_snapshot(g), chain, harvested, checked(run, harvested), synthesis)


def _finished(run: RunState, snapshot: Snapshot, spent: str | None, *, aggregate: bool) -> FractalResult:
    """Finish an active graph: freeze, cascade, the harvest kept, the graph completed, the turn's head."""
    store, g = run.local, run.graph_id
    # The budget that stopped the graph (a spend, or the wall time the run recorded), if one did.
    stopped = snapshot["status_reason"] if snapshot["status"] == GraphStatus.BUDGET_EXHAUSTED else None
    run.part.finish(run, spent, stopped)
    nodes = current(store.get_snapshot(g)["nodes"])
    harvested = _harvested(run, nodes, spent)
    synthesis = _synthesis_object(run, nodes, aggregate=aggregate and spent is None)
    # Kept with the graph, so a reopened file gives the same result without a model; the store
    # checks every finding's citations and sets its support (docs/architecture/store.md,
    # "Sources and citations").
    kept = harvested.model_dump(mode="json")
    # Each finding names the node it rests on (results/provenance.py): code's, not the model's.
    kept["findings"] = with_nodes(kept["findings"], nodes)
    if synthesis is not None:
        kept["synthesis_object"] = synthesis
    with store.batch():
        store.record_harvest(g, kept)
        store.update_graph_status(g, GraphStatus.COMPLETED, reason="harvested")
        # The turn ends in a head here (docs/architecture/store.md, "Turns and heads").
        store.end_turn(g, cost=run.limits.cost(store.llm_spend(g)))
    return stored_result(run, store.get_snapshot(g))


def _harvested(run: RunState, nodes: list[NodeRecord], spent: str | None) -> HarvestFindings:
    """The strategy's findings, with every gap of the graph first; none when its call fails."""
    gaps = [gap_text(row) for row in gap_rows(nodes)]
    harvested = HarvestFindings.model_construct(findings=[], gaps=[])
    try:
        harvested = run.part.harvested(run, nodes, gaps, spent)
    except LLMError as exc:  # logged; the result is the root's synthesis, without findings
        gaps.append(f"{HARVEST_FAILED}: {exc}")
    # One gap per question (two alike stay two); the model's own gaps added once each, where they are new.
    named = [g for g in dict.fromkeys(harvested.gaps) if g not in gaps]
    harvested = harvested.model_copy(update={"gaps": gaps + named})
    if (own := run.part.findings(nodes)) is not None:
        harvested = harvested.model_copy(update={"findings": own})
    return harvested


def _synthesis_object(run: RunState, nodes: list[NodeRecord], *, aggregate: bool) -> dict[str, Any] | None:
    """The synthesis object of the harvest: the root's (a tracks graph), or built now (``aggregate``)."""
    root = next((n for n in nodes if n["node_type"] == "question" and n["depth"] == 0), None)
    made = root["metadata"].get("synthesis_object") if root is not None else None
    if isinstance(made, dict):
        return made
    return _aggregate_fractal(run, nodes) if aggregate else None


def _aggregate_fractal(run: RunState, nodes: list[NodeRecord]) -> dict[str, Any] | None:
    """A fractal graph's synthesis object from its depth-1 questions' syntheses and gaps; None if it fails.

    Each seed question stands for a track: its synthesis is its conclusions, the
    gaps under its branch its gaps (a fractal graph's findings are not cited).
    """
    by_id = {n["node_id"]: n for n in nodes}

    def branch(node: NodeRecord) -> str | None:
        while node["depth"] > 1 and node["parent_id"] in by_id:
            node = by_id[node["parent_id"]]
        return node["node_id"] if node["depth"] == 1 else None

    gaps: dict[str, list[str]] = {}
    for row in gap_rows(nodes):
        at = by_id.get(row["node_id"])
        if at is not None and (b := branch(at)) is not None:
            gaps.setdefault(b, []).append(gap_text(row))
    seeds = [n for n in nodes if n["node_type"] == "question" and n["depth"] == 1]
    briefs = [
        {
            "name": clip(n["text"], 80),
            "findings": [],
            "conclusions": n["metadata"].get("synthesis") or f"(not synthesized: {n['status']})",
            "gaps": gaps.get(n["node_id"], []),
        }
        for n in seeds
    ]
    if not briefs:
        return None
    try:
        return synthesis_object.aggregate(run, briefs, node_id=run.root_id, worker=None, calls=None)
    except LLMError:  # logged; the harvest stands without it
        return None


def preview(run: RunState) -> FractalResult:
    """The result as the graph stands, read-only: no model call, no write (``Exploration.preview``)."""
    snapshot = run.local.get_snapshot(run.graph_id)
    if "harvest" in snapshot["metadata"] and snapshot["status"] == GraphStatus.COMPLETED:
        return stored_result(run, snapshot)
    nodes = current(snapshot["nodes"])
    gaps = HarvestFindings.model_construct(findings=[], gaps=[gap_text(row) for row in gap_rows(nodes)])
    synthesis = _synthesis_object(run, nodes, aggregate=False)
    return result_of(run, snapshot, synthesis_chain(nodes), gaps, [], synthesis)


def freeze_and_repair(run: RunState, *, model: bool = True) -> None:
    """Freeze what is left, then synthesize up to the root: with the model, else (or when it fails) joined."""
    store, g = run.local, run.graph_id
    for node in store.get_snapshot(g)["nodes"]:
        if node["node_type"] != "question" or node["depth"] == 0:
            continue
        if node["status"] in PENDING_QUESTION:
            with suppress(FractalError):  # already saturated by an ancestor's cascade
                freeze_unexplored(store, g, node["node_id"])
                if node["status"] == NodeStatus.GATED:  # a gate or a halt held it, not a budget (gap_rows)
                    held = "halt" in node["metadata"]
                    why = HELD_UNEXPLORED if held else GATED_UNEXPLORED
                    store.update_node(g, node["node_id"], {"unexplored_reason": why})
                store.mark_saturated(g, node["node_id"], SaturationReason.BUDGET_EXHAUSTED)
        elif node["status"] == NodeStatus.ERROR:
            with suppress(FractalError):  # already saturated by an ancestor's cascade
                store.mark_saturated(g, node["node_id"], SaturationReason.ERROR)
    for node in store.get_snapshot(g)["nodes"]:
        if node["node_type"] == "question" and node["status"] == NodeStatus.ANSWERED:
            inputs = store.get_synthesis_inputs(g, node["node_id"])
            # An answered leaf left behind (one with a person's note is the cascade's: it reads the note;
            # a track's is too: its synthesis is its findings, engine/strategies/tracks.py).
            leaf = not inputs["sub_questions"] and inputs["answers"] and not inputs["notes"]
            if leaf and run.part.answer_is_synthesis(node["metadata"]):
                answer = inputs["answers"][0]
                claims = grounding.joined(grounding.sources({**inputs, "answers": [answer]}))
                store.synthesize_node(g, node["node_id"], answer["text"], claims=claims)
    for _ in range(HARVEST_PASSES if model else 0):  # a failed synthesis call may succeed on another try
        cascade(run, worker="harvest")
        if not store.get_ready_to_synthesize(g)["count"]:
            return
    # Degrade visibly: join the children's syntheses, marked as such.
    while ready := store.get_ready_to_synthesize(g)["ready_nodes"]:
        node = ready[0]  # deepest first; its parent may become ready next
        inputs = store.get_synthesis_inputs(g, node["node_id"])
        joined = " | ".join(
            [c["synthesis"] or f"({c['status_reason']})" for c in inputs["sub_questions"]]
            + [f"(note) {n['text']}" for n in inputs["notes"]]
            # A track answered without sub-tracks: its answer is all there is to join.
            + ([f"(answer) {a['text']}" for a in inputs["answers"]] if not inputs["sub_questions"] else [])
        )
        store.update_node(g, node["node_id"], {"synthesis_failed": True})
        store.synthesize_node(
            g,
            node["node_id"],
            f"[model synthesis failed; sub-findings joined] {joined}",
            claims=grounding.joined(grounding.sources(inputs)),
        )
