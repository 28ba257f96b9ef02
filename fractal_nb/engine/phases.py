"""The harvest (the result) and the reading of a graph's gaps, for every strategy."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from ..errors import FractalError, LLMError
from ..llm.quality import STORED
from ..llm.schemas import HarvestSummary
from ..results.provenance import with_nodes
from ..results.result import ChainLink, FractalResult, synthesis_chain, weak_reasons
from ..store.citations import support_of
from ..store.records import NodeRecord, Snapshot
from ..text import clip, normalize
from ..vocabulary import (
    PENDING_QUESTION,
    ClaimKind,
    GapKind,
    GraphStatus,
    NodeStatus,
    SaturationReason,
    Support,
    WeakReason,
)
from . import evidence, grounding, synthesis_object
from .primitive import cascade, freeze_unexplored

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

    The synthesis object (docs/architecture.md, "Tracks") is the root's in a
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
        return _stored_result(run, snapshot, made)
    finishing = status in (GraphStatus.ACTIVE, GraphStatus.BUDGET_EXHAUSTED) or (
        status == GraphStatus.PAUSED and finish
    )
    if finishing and status != GraphStatus.ACTIVE:
        store.resume_graph(g)
    if finishing:
        # The budget that stopped the graph (a spend, or the wall time the run recorded), if one did.
        stopped = snapshot["status_reason"] if status == GraphStatus.BUDGET_EXHAUSTED else None
        run.part.finish(run, spent, stopped)
    snapshot = store.get_snapshot(g)
    nodes = current(snapshot["nodes"])
    chain = synthesis_chain(nodes)
    gaps = [gap_text(row) for row in gap_rows(nodes)]
    fallback = (
        chain[0].synthesis
        if chain and not chain[0].degraded
        else "(no summary: the model could not synthesize the root; see the gaps)"
        if chain
        else "(no synthesis yet)"
    )
    summary = HarvestSummary.model_construct(summary=fallback, findings=[], gaps=[])
    try:
        summary = run.part.summary(run, nodes, gaps, spent)
    except LLMError as exc:  # logged; the root's synthesis stands in for the summary
        gaps.append(f"harvest summary failed: {exc}")
    # One gap per question (two alike stay two); the model's own gaps added where they are new.
    summary = summary.model_copy(update={"gaps": gaps + [g_ for g_ in summary.gaps if g_ not in gaps]})
    if (own := run.part.findings(nodes)) is not None:
        summary = summary.model_copy(update={"findings": own})
    synthesis = _synthesis_object(run, nodes, aggregate=aggregate and spent is None)
    if not finishing:  # checked as the store checks them, nothing written
        return _result(run, store.get_snapshot(g), chain, summary, _checked(run, summary), synthesis)
    # Kept with the graph, so a reopened file gives the same result without a model; the store
    # checks every finding's citations and sets its support (docs/architecture.md, "Sources and citations").
    kept = summary.model_dump(mode="json")
    # Each finding names the node it rests on (results/provenance.py): code's, not the model's.
    kept["findings"] = with_nodes(kept["findings"], nodes)
    if synthesis is not None:
        kept["synthesis_object"] = synthesis
    with store.batch():
        store.record_harvest(g, kept)
        store.update_graph_status(g, GraphStatus.COMPLETED, reason="harvested")
        # The turn ends in a head here (docs/architecture.md, "Turns and heads").
        store.end_turn(g, cost=run.limits.cost(store.llm_spend(g)))
    return _stored_result(run, store.get_snapshot(g))


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
        return _stored_result(run, snapshot)
    nodes = current(snapshot["nodes"])
    chain = synthesis_chain(nodes)
    questions = [n for n in nodes if n["node_type"] == "question"]
    done = sum(n["status"] in (NodeStatus.SYNTHESIZED, NodeStatus.SATURATED) for n in questions)
    if chain and chain[0].depth == 0 and not chain[0].degraded:
        text = chain[0].synthesis
    else:
        text = (
            f"(not harvested: {done} of {len(questions)} questions synthesized or saturated; "
            "harvest() writes the summary)"
        )
    summary = HarvestSummary.model_construct(
        summary=text, findings=[], gaps=[gap_text(row) for row in gap_rows(nodes)]
    )
    return _result(run, snapshot, chain, summary, [], _synthesis_object(run, nodes, aggregate=False))


def _stored_result(run: RunState, snapshot: Snapshot, made: dict[str, Any] | None = None) -> FractalResult:
    """A harvested graph's result, read back without the model (``made``: a synthesis object built now)."""
    harvest, sources = snapshot["metadata"]["harvest"], evidence.has_sources(run.local, run.graph_id)
    stored = HarvestSummary.model_validate(harvest, context=STORED)
    # As the store recorded them: each with its checked citations and support (record_harvest).
    findings = [
        {
            **f,
            "citations": list(f.get("citations") or []),
            "support": str(f.get("support") or support_of(f.get("citations") or [], sources)),
        }
        for f in harvest.get("findings") or []
    ]
    made = made or harvest.get("synthesis_object")
    return _result(run, snapshot, synthesis_chain(current(snapshot["nodes"])), stored, findings, made)


def _checked(run: RunState, summary: HarvestSummary) -> list[dict[str, Any]]:
    """The summary's findings with their citations checked by the store (a read), and their support."""
    findings = []
    for finding in summary.findings:
        cited = evidence.raw(finding.citations)
        checked = list(run.local.check_citations(run.graph_id, cited)) if cited else []
        support = support_of(checked, run.has_sources)
        findings.append({**finding.model_dump(mode="json"), "citations": checked, "support": support.value})
    return findings


def _result(
    run: RunState,
    final: Snapshot,
    chain: list[ChainLink],
    summary: HarvestSummary,
    findings: list[dict[str, Any]],
    synthesis: dict[str, Any] | None = None,
) -> FractalResult:
    """The result of a graph as it is; ``summary.gaps`` already holds every gap.

    ``findings`` are the summary's, each with its checked ``citations`` and ``support``:
    with sources only the supported ones are findings of the result, the others
    are kept apart as unsupported (docs/architecture.md, "Sources and citations").
    """
    nodes = current(final["nodes"])
    replies = run.local.count_replies(run.graph_id)
    finished = final["status"] == GraphStatus.COMPLETED
    reasons = _degraded_reasons(nodes, replies, summary.gaps, finished=finished)
    weak_ids = [n["node_id"] for n in nodes if n["node_type"] == "question" and weak_reasons(n)]
    weak = [
        {"node_id": n["node_id"], "question": n["text"], "reasons": list(weak_reasons(n))}
        for n in nodes
        if n["node_id"] in weak_ids
    ]
    # A budget's cut alone is a stop, not a degraded result (README's exit codes): the weak syntheses
    # are listed then, and named among the degraded reasons when a failure or a join lies beneath them.
    failing = {WeakReason.FAILED.value, WeakReason.JOINED.value}
    if any(reason.split(":")[0] in failing for w in weak for reason in w["reasons"]):
        named = ", ".join(weak_ids[:10]) + (" …" if len(weak_ids) > 10 else "")
        reasons.append(
            f"{len(weak)} synthesis(es) are weak, built on failed, budget-cut or joined "
            f"sub-questions: {named}"
        )
    root = next((n for n in nodes if n["node_type"] == "question" and n["depth"] == 0), None)
    root_weak = root is not None and bool(weak_reasons(root))
    # Findings are drawn from the root's synthesis chain: weak with it.
    findings = [{**f, **({"weak": "true"} if root_weak else {})} for f in with_nodes(findings, nodes)]
    sources = evidence.has_sources(run.local, run.graph_id)  # now: sources may have come since the run
    kept = [f for f in findings if not sources or f["support"] == Support.SUPPORTED]
    unsupported = [f for f in findings if sources and f["support"] != Support.SUPPORTED]
    if sources and not kept and (finished or findings):
        reasons.append(
            f"the graph has sources, but none of its {len(findings)} finding(s) rests on a verified "
            "citation: there are no supported findings"
        )
    return FractalResult(
        graph_id=run.graph_id,
        seed=run.seed,
        status=final["status"],
        summary=summary.summary,
        node_count=len(nodes),
        edge_count=len(final["edges"]),
        max_depth=max(n["depth"] for n in nodes),
        convergence_count=run.local.query_convergence(run.graph_id)["count"],
        contradiction_count=run.local.query_contradictions(run.graph_id)["count"],
        synthesis_chain=chain,
        findings=kept,
        gaps=summary.gaps,
        depth_limited=[n["node_id"] for n in nodes if n["metadata"].get("depth_limited")],
        stuck_nodes=[
            n["node_id"]
            for n in nodes
            if n["node_type"] == "question" and n["status"] in ("claimed", "error")
        ],
        replies=replies,
        degraded=bool(reasons),
        degraded_reasons=reasons,
        gap_rows=gap_rows(nodes),
        saturated=[
            {"node_id": n["node_id"], "reason": n["status_reason"], "question": n["text"]}
            for n in nodes
            if n["node_type"] == "question"
            and n["status"] == NodeStatus.SATURATED
            and n["status_reason"] not in ("budget_exhausted", "pruned", "error", "blocked")
        ],
        weak=weak,
        claims=list(root["metadata"].get("claims") or []) if root is not None else [],
        has_sources=sources,
        unsupported_findings=unsupported,
        support_counts={"supported": len(kept) if sources else 0, "unsupported": len(unsupported)},
        answer_support=answer_support(nodes),
        held=held_rows(nodes),
        blocked=blocked_rows(nodes),
        strategy=run.strategy,
        synthesis=synthesis,
    )


def answer_support(nodes: list[NodeRecord]) -> dict[str, int]:
    """How many answers rest on verified citations, how many do not, and how many had no sources to cite.

    The seed's plan (the root's answer) is no answer to a question of the graph and is not counted.
    """
    counts = dict.fromkeys(Support, 0)
    for n in nodes:
        if n["node_type"] == "answer" and "seed_kind" not in n["metadata"]:
            counts[Support(n["metadata"].get("support") or Support.NO_SOURCES)] += 1
    return {kind.value: count for kind, count in counts.items()}


def held_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """Questions a halt holds for the person (docs/architecture.md, "Halts"): what each asks, its options."""
    return [
        {
            "node_id": n["node_id"],
            "question": n["text"],
            "kind": n["metadata"]["halt"].get("kind"),
            "asks": n["metadata"]["halt"].get("question"),
            "options": list(n["metadata"]["halt"].get("options") or []),
        }
        for n in nodes
        if n["status"] == NodeStatus.GATED and isinstance(n["metadata"].get("halt"), dict)
    ]


def blocked_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """Questions a worker could not answer: the blocker and the alternatives it suggests."""
    return [
        {
            "node_id": n["node_id"],
            "question": n["text"],
            "blocker": n["metadata"]["blocked"].get("blocker"),
            "alternatives": list(n["metadata"]["blocked"].get("alternatives") or []),
        }
        for n in nodes
        if n["status_reason"] == SaturationReason.BLOCKED and isinstance(n["metadata"].get("blocked"), dict)
    ]


REFUSED_SHARE = 0.25  # this share of the model's replies refused: the model cannot do the job


def _degraded_reasons(
    nodes: list[NodeRecord], replies: dict[str, int], gaps: list[str], *, finished: bool = True
) -> list[str]:
    """Why a result cannot be trusted as a normal one (README, "Output you can trust"); [] if it can."""
    reasons = []
    questions = [n for n in nodes if n["node_type"] == "question"]
    for n in nodes:
        meta = n["metadata"]
        if n["node_type"] == "answer" and meta.get("seed_questions", 0) < meta.get("seed_minimum", 0):
            reasons.append(
                f"the seed phase posed {meta['seed_questions']} usable questions where the "
                f"intensity asks for at least {meta['seed_minimum']}"
            )
    failed = sum(n["status"] == NodeStatus.ERROR or n["status_reason"] == "error" for n in questions)
    if failed:
        reasons.append(f"{failed} question(s) failed: no usable answer from the model")
    joined = sum(bool(n["metadata"].get("synthesis_failed")) for n in questions)
    if joined:
        reasons.append(f"{joined} synthesis(es) failed and were joined from sub-findings without the model")
    answered = replies.get("accepted", 0) + replies.get("corrected", 0)
    refused = replies.get("rejected", 0)
    if refused and refused >= REFUSED_SHARE * (answered + refused):
        reasons.append(f"{refused} of {answered + refused} model replies were refused as junk or invalid")
    if any(g.startswith("harvest summary failed") for g in gaps):
        reasons.append("the harvest summary failed: the root's synthesis stands in for it")
    root = next((n for n in questions if n["depth"] == 0), None)
    if finished and root is not None and root["status"] != NodeStatus.SYNTHESIZED:
        reasons.append("the root question has no synthesis")
    if root is not None and root["metadata"].get("synthesis_failed"):  # a weak root
        reasons.append("the root's synthesis is not the model's: its sub-findings were joined without it")
    return reasons


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


def current(nodes: list[NodeRecord]) -> list[NodeRecord]:
    """The nodes no later turn superseded: what syntheses, findings and gaps read (store/turns.py)."""
    return [n for n in nodes if n.get("superseded_turn") is None]


GATED_UNEXPLORED = "gated: never approved"
"""``unexplored_reason`` of a question the harvest found behind a gate (a checkpoint, not a budget)."""
HELD_UNEXPLORED = "held: the person never answered"
"""``unexplored_reason`` of a question the harvest found held by a halt (docs/architecture.md, "Halts")."""


def gap_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """Every unexplored, pruned, failed or budget-cut question, and every unknown named (README, "Gaps").

    Read from the graph as it is: a question's status and saturation reason
    decide, so a question a budget once marked unexplored and a resumed run
    then finished is no gap. Rows: ``node_id``, ``depth``, ``kind`` (failed,
    pruned, gated, held — a question to the person —, blocked, unexplored — a
    budget cut it —, waiting, synthesis_failed, unknown), ``question`` and
    ``detail`` (why; for an unknown, what is not known).
    The unknowns come last, one row per text (:func:`unknown_rows`).
    """
    nodes = current(nodes)  # a later turn's superseded nodes are never gaps
    rows = []
    for n in nodes:
        if n["node_type"] != "question":
            continue
        meta, reason, status = n["metadata"], n["status_reason"], n["status"]

        def row(kind: GapKind, detail: str, n: NodeRecord = n) -> None:
            rows.append(
                {
                    "node_id": n["node_id"],
                    "depth": n["depth"],
                    "kind": kind.value,
                    "question": n["text"],
                    "detail": detail,
                }
            )

        budget = "budget_exhausted" + (f": {meta['budget_reason']}" if meta.get("budget_reason") else "")
        if meta.get("synthesis_failed"):
            row(GapKind.SYNTHESIS_FAILED, "the model could not synthesize it: its sub-findings were joined")
        if status == NodeStatus.ERROR or (
            status == NodeStatus.SATURATED and reason == SaturationReason.ERROR
        ):
            row(GapKind.FAILED, str(meta.get("last_error") or reason or "error"))
        elif status == NodeStatus.SATURATED and reason == SaturationReason.PRUNED:
            row(GapKind.PRUNED, f"pruned with {n['inherited_from']}" if n["inherited_from"] else "pruned")
        elif status == NodeStatus.SATURATED and reason == SaturationReason.BLOCKED:
            row(GapKind.BLOCKED, _blocked_detail(meta, n["inherited_from"]))
        elif status == NodeStatus.SATURATED and reason == SaturationReason.BUDGET_EXHAUSTED:
            if meta.get("unexplored_reason") == GATED_UNEXPLORED:
                row(GapKind.GATED, GATED_UNEXPLORED)
            elif meta.get("unexplored_reason") == HELD_UNEXPLORED:
                row(GapKind.HELD, _held_detail(meta, HELD_UNEXPLORED))
            else:
                row(GapKind.UNEXPLORED, budget if meta.get("budget_exhausted") else "budget_exhausted")
        elif status == NodeStatus.GATED and isinstance(meta.get("halt"), dict):
            row(GapKind.HELD, _held_detail(meta, "waiting for your answer"))
        elif status == NodeStatus.GATED:
            row(GapKind.GATED, "gated")
        elif status in PENDING_QUESTION:  # open or claimed: a budget's mark, or work not done yet
            row(GapKind.UNEXPLORED, budget) if meta.get("budget_exhausted") else row(
                GapKind.WAITING, str(status)
            )
    return rows + unknown_rows(nodes)


def _held_detail(meta: dict[str, Any], state: str) -> str:
    """A held question's gap detail: what the worker asks the person, and where it stands."""
    halt = meta.get("halt") or {}
    options = "; ".join(str(o.get("option")) for o in halt.get("options") or [])
    return (
        f"{halt.get('kind', 'held')}: {halt.get('question', '')}"
        + (f" (options: {options})" if options else "")
        + f" [{state}]"
    )


def _blocked_detail(meta: dict[str, Any], inherited_from: str | None) -> str:
    """A blocked question's gap detail: its blocker and the alternatives suggested (or whose block it is)."""
    blocked = meta.get("blocked")
    if not isinstance(blocked, dict):
        return f"blocked with {inherited_from}" if inherited_from else "blocked"
    return f"{blocked.get('blocker', '')} (alternatives: {'; '.join(blocked.get('alternatives') or [])})"


def unknown_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """One gap row per unknown a claim names (docs/architecture.md, "Facts, assumptions, unknowns").

    Answers first, then syntheses (which carry their children's unknowns up), so
    an unknown is listed once, under the question whose answer first named it.
    A pruned question's unknowns are no gaps: a person set the branch aside.
    """
    by_id = {n["node_id"]: n for n in nodes}
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n in sorted(nodes, key=lambda n: n["node_type"] != "answer"):  # stable: creation order within
        question = by_id.get(n["parent_id"] or "") if n["node_type"] == "answer" else n
        if question is None or SaturationReason.PRUNED in (n["status_reason"], question["status_reason"]):
            continue
        for claim in n["metadata"].get("claims") or []:
            key = normalize(str(claim.get("text", "")))
            if claim.get("kind") != ClaimKind.UNKNOWN or not key or key in seen:
                continue
            seen.add(key)
            rows.append(
                {
                    "node_id": question["node_id"],
                    "depth": question["depth"],
                    "kind": GapKind.UNKNOWN.value,
                    "question": question["text"],
                    "detail": str(claim["text"]),
                }
            )
    return rows


def gap_text(row: dict[str, Any]) -> str:
    """A gap row as the one line the result lists, its real reason first (gated, pruned, failed, budget)."""
    question, detail = clip(row["question"], 160), clip(row["detail"], 160)
    texts = {
        GapKind.FAILED: f"failed: {question} ({detail})",
        GapKind.PRUNED: f"pruned: {question}",
        GapKind.GATED: f"waiting (gated): {question}"
        if detail == "gated"
        else f"unexplored ({detail}): {question}",
        GapKind.UNEXPLORED: f"unexplored ({detail}): {question}",
        GapKind.WAITING: f"waiting ({detail}): {question}",
        GapKind.SYNTHESIS_FAILED: f"synthesis failed, sub-findings joined instead: {question}",
        GapKind.HELD: f"held for the person ({detail}): {question}",
        GapKind.BLOCKED: f"blocked: {question} ({detail})",
        GapKind.UNKNOWN: f"unknown: {detail} (under: {question})",
    }
    return texts[GapKind(row["kind"])]
