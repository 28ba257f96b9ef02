"""A graph's result as the faces show it: summary, findings, gaps, and why it is degraded, if it is.

Built by the harvest and the preview (engine/phases.py) from the graph as it is,
and read back from a harvested graph without the model (:func:`stored_result`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..llm.quality import STORED
from ..llm.schemas import HarvestFindings
from ..results.provenance import with_nodes
from ..results.result import ChainLink, FractalResult, synthesis_chain, weak_reasons
from ..store.citations import support_of
from ..store.records import NodeRecord, Snapshot
from ..vocabulary import GraphStatus, NodeStatus, SaturationReason, Strategy, Support, WeakReason
from . import evidence
from .gaps import current, gap_rows
from .limits import SOLVE_TIME

if TYPE_CHECKING:
    from .run_state import RunState


def stored_result(run: RunState, snapshot: Snapshot, made: dict[str, Any] | None = None) -> FractalResult:
    """A harvested graph's result, read back without the model (``made``: a synthesis object built now)."""
    harvest, sources = snapshot["metadata"]["harvest"], evidence.has_sources(run.local, run.graph_id)
    stored = HarvestFindings.model_validate(harvest, context=STORED)
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
    return result_of(run, snapshot, synthesis_chain(current(snapshot["nodes"])), stored, findings, made)


def checked(run: RunState, harvested: HarvestFindings) -> list[dict[str, Any]]:
    """The harvest's findings with their citations checked by the store (a read), and their support."""
    findings = []
    for finding in harvested.findings:
        cited = evidence.raw(finding.citations)
        checked = list(run.local.check_citations(run.graph_id, cited)) if cited else []
        support = support_of(checked, run.has_sources)
        findings.append({**finding.model_dump(mode="json"), "citations": checked, "support": support.value})
    return findings


def result_of(
    run: RunState,
    final: Snapshot,
    chain: list[ChainLink],
    harvested: HarvestFindings,
    findings: list[dict[str, Any]],
    synthesis: dict[str, Any] | None = None,
) -> FractalResult:
    """The result of a graph as it is; ``harvested.gaps`` already holds every gap.

    Its summary is the root's synthesis (:func:`root_summary`). ``findings`` are the
    harvest's, each with its checked ``citations`` and ``support``:
    with sources only the supported ones are findings of the result, the others
    are kept apart as unsupported (docs/architecture/store.md, "Sources and citations").
    """
    nodes = current(final["nodes"])
    replies = run.local.count_replies(run.graph_id)
    finished = final["status"] == GraphStatus.COMPLETED
    reasons = _degraded_reasons(nodes, replies, harvested.gaps, finished=finished)
    weak = weak_rows(nodes)
    if (why := _weak_reason(weak)) is not None:
        reasons.append(why)
    root = next((n for n in nodes if n["node_type"] == "question" and n["depth"] == 0), None)
    sources = evidence.has_sources(run.local, run.graph_id)  # now: sources may have come since the run
    kept, unsupported = _findings(
        findings, nodes, sources, weak=root is not None and bool(weak_reasons(root))
    )
    reasons += _evidence_reasons(run, sources, len(findings), bool(kept), unsupported, finished=finished)
    return FractalResult(
        graph_id=run.graph_id,
        seed=run.seed,
        status=final["status"],
        summary=root_summary(chain, nodes),
        node_count=len(nodes),
        edge_count=len(final["edges"]),
        max_depth=max(n["depth"] for n in nodes),
        convergence_count=run.local.query_convergence(run.graph_id)["count"],
        contradiction_count=run.local.query_contradictions(run.graph_id)["count"],
        synthesis_chain=chain,
        findings=kept,
        gaps=harvested.gaps,
        depth_limited=[n["node_id"] for n in nodes if n["metadata"].get("depth_limited")],
        stuck_nodes=[n["node_id"] for n in _questions(nodes) if n["status"] in STUCK],
        replies=replies,
        degraded=bool(reasons),
        degraded_reasons=reasons,
        gap_rows=gap_rows(nodes),
        saturated=settled_rows(nodes),
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


def _evidence_reasons(
    run: RunState, sources: bool, found: int, kept: bool, unsupported: list[dict[str, Any]], *, finished: bool
) -> list[str]:
    """Why the findings' evidence degrades the result: uncited tracks, or sources no finding rests on."""
    if not sources and run.part.name == Strategy.TRACKS:
        # Seed 003's evidence-cited law: every track finding cites a file:line. Without sources none can.
        return [
            f"a tracks run without sources: its {found} finding(s) are uncited, no file or line "
            "to check them by (add sources, a folder of files, for cited findings)"
        ]
    if sources and not kept and (finished or unsupported):
        return [
            f"the graph has sources, but none of its {len(unsupported)} finding(s) rests on a verified "
            "citation: there are no supported findings"
        ]
    return []


def root_summary(chain: list[ChainLink], nodes: list[NodeRecord]) -> str:
    """The result's summary: the root's synthesis, built bottom-up (seed 001), or why there is none yet.

    Never a digest written over the graph: a root synthesized without the model
    (joined) is still the summary, and the degraded reasons say so.
    """
    if chain and chain[0].depth == 0:
        return chain[0].synthesis
    questions = _questions(nodes)
    done = sum(n["status"] in (NodeStatus.SYNTHESIZED, NodeStatus.SATURATED) for n in questions)
    return (
        f"(the root is not synthesized yet: {done} of {len(questions)} questions synthesized or "
        "saturated; the harvest synthesizes it)"
    )


HARVEST_FAILED = "harvest call failed"
"""The gap a failed harvest call leaves (its findings are missing; the summary stands)."""
STUCK = (NodeStatus.CLAIMED, NodeStatus.ERROR)
"""Statuses of a question left behind: claimed by a run that is gone, or failed."""
NOT_SETTLED = (
    SaturationReason.BUDGET_EXHAUSTED,
    SaturationReason.PRUNED,
    SaturationReason.ERROR,
    SaturationReason.BLOCKED,
)
"""Saturation reasons that are gaps, not a worker's judgement that the question is settled."""


def _questions(nodes: list[NodeRecord]) -> list[NodeRecord]:
    return [n for n in nodes if n["node_type"] == "question"]


def weak_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """Each weak synthesis: its question and why it is weak (results/result.py ``weak_reasons``)."""
    return [
        {"node_id": n["node_id"], "question": n["text"], "reasons": list(reasons)}
        for n in _questions(nodes)
        if (reasons := weak_reasons(n))
    ]


def _weak_reason(weak: list[dict[str, Any]]) -> str | None:
    """The degraded reason the weak syntheses give, if a failure or a join lies beneath one.

    A budget's cut alone is a stop, not a degraded result (docs/shell.md, "Exit codes"): the weak
    syntheses are listed then, and named among the degraded reasons only past a failure or a join.
    """
    failing = {WeakReason.FAILED.value, WeakReason.JOINED.value}
    if not any(reason.split(":")[0] in failing for w in weak for reason in w["reasons"]):
        return None
    ids = [w["node_id"] for w in weak]
    named = ", ".join(ids[:10]) + (" …" if len(ids) > 10 else "")
    return f"{len(weak)} synthesis(es) are weak, built on failed, budget-cut or joined sub-questions: {named}"


def _findings(
    findings: list[dict[str, Any]], nodes: list[NodeRecord], sources: bool, *, weak: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The findings the result keeps and those it sets apart as unsupported (with sources only).

    Each names the node it rests on (results/provenance.py); drawn from the root's synthesis
    chain, they are weak with a weak root.
    """
    named = [{**f, **({"weak": "true"} if weak else {})} for f in with_nodes(findings, nodes)]
    kept = [f for f in named if not sources or f["support"] == Support.SUPPORTED]
    unsupported = [f for f in named if sources and f["support"] != Support.SUPPORTED]
    return kept, unsupported


def settled_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """The questions a worker saturated as settled (its reason), which are no gaps."""
    return [
        {"node_id": n["node_id"], "reason": n["status_reason"], "question": n["text"]}
        for n in _questions(nodes)
        if n["status"] == NodeStatus.SATURATED and n["status_reason"] not in NOT_SETTLED
    ]


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
    """Questions a halt holds for the person: what each asks, its options.

    See docs/architecture/engine.md, "Halts".
    """
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
    """Why a result cannot be trusted as a normal one; [] if it can.

    See docs/models.md, "Output you can trust".
    """
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
    timed = sum(str(n["metadata"].get("budget_reason") or "").startswith(SOLVE_TIME) for n in questions)
    if (
        timed
    ):  # a thinkon sub-goal past its Solve time returned its partial state (strategies/thinkon_time.py)
        reasons.append(
            f"{timed} sub-goal level(s) ran past the per-Solve time limit and returned a partial state"
        )
    answered = replies.get("accepted", 0) + replies.get("corrected", 0)
    refused = replies.get("rejected", 0)
    if refused and refused >= REFUSED_SHARE * (answered + refused):
        reasons.append(f"{refused} of {answered + refused} model replies were refused as junk or invalid")
    if any(g.startswith((HARVEST_FAILED, "harvest summary failed")) for g in gaps):  # the latter: older files
        reasons.append("the harvest's call failed: no findings were drawn from the synthesis chain")
    root = next((n for n in questions if n["depth"] == 0), None)
    if finished and root is not None and root["status"] != NodeStatus.SYNTHESIZED:
        reasons.append("the root question has no synthesis")
    if root is not None and root["metadata"].get("synthesis_failed"):  # a weak root
        reasons.append("the root's synthesis is not the model's: its sub-findings were joined without it")
    return reasons
