"""A graph's gaps, read from the graph as it is (docs/notebook.md, "Gaps").

Every unexplored, pruned, failed or budget-cut question, and every unknown a
claim names; nothing else is a gap.
"""

from __future__ import annotations

from typing import Any

from ..store.records import NodeRecord
from ..text import clip, normalize
from ..vocabulary import PENDING_QUESTION, ClaimKind, GapKind, NodeStatus, SaturationReason


def current(nodes: list[NodeRecord]) -> list[NodeRecord]:
    """The nodes no later turn superseded: what syntheses, findings and gaps read (store/reopening.py)."""
    return [n for n in nodes if n.get("superseded_turn") is None]


GATED_UNEXPLORED = "gated: never approved"
"""``unexplored_reason`` of a question the harvest found behind a gate (a checkpoint, not a budget)."""
HELD_UNEXPLORED = "held: the person never answered"
"""``unexplored_reason`` of a question the harvest found held by a halt.

See docs/architecture/engine.md, "Halts".
"""


def gap_rows(nodes: list[NodeRecord]) -> list[dict[str, Any]]:
    """Every unexplored, pruned, failed or budget-cut question, and every unknown named.

    (docs/notebook.md, "Gaps".) Read from the graph as it is: a question's status and saturation reason
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
    """One gap row per unknown a claim names (docs/architecture/engine.md, "Facts, assumptions, unknowns").

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
