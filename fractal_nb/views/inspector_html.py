"""A node's details as the Inspector tab shows them: HTML, every model-written string escaped.

Its heading (type, status, depth) and why it failed or is weak, its text with its
support and citations, a thinkon level's plan and done in place of answers
(docs/architecture/engine.md, "Thinkon"), the track's findings, its sub-questions,
synthesis and links, its metadata and its model calls (docs/architecture/faces.md,
"The live view's protocol" and "Evidence in the faces").
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..exploration.terms import CHAIN_KEY, FAILED, level_state
from ..results.evidence import CitedLines, NodeEvidence
from ..text import clip
from .citations_html import citations_html, finding_html, support_badge
from .lab_link import LabServer, lab_server
from .panel_layout import ERROR_STYLE, MUTED_STYLE
from .question_tree import view_status


def inspector_html(details: dict[str, Any]) -> str:
    """A node's details as HTML, every model-written string escaped."""
    node = details["node"]
    meta = dict(node["metadata"])
    synthesis = meta.pop("synthesis", None)
    level = meta.get(CHAIN_KEY)  # a thinkon level: its plan and done stand for its answer
    evidence: NodeEvidence | None = details.get("evidence")
    server = lab_server() if evidence else None
    rows = _status_rows(node, meta)
    if evidence and evidence["track"]:
        rows.append(f"<p class='fractal-track'><b>Track:</b> {html.escape(evidence['track'])}</p>")
    rows.append(
        f"<p><b>{'Question' if node['node_type'] == 'question' else 'Answer'}:</b> "
        f"{html.escape(node['text'])}{support_badge(evidence['support']) if evidence else ''}</p>"
    )
    if evidence:
        rows.append(_cited(evidence["citations"], server))
    if isinstance(level, dict):
        rows.append(_level_html(level_state(meta)))
    else:
        rows += _answer_rows(details, evidence, server)
    if evidence and evidence["findings"]:
        items = "".join(finding_html(f, server) for f in evidence["findings"])
        rows.append(f"<p><b>Findings of the track</b></p><ul>{items}</ul>")
    rows += _tree_rows(details, synthesis, chained=isinstance(level, dict))
    rows.append(
        f"<details><summary>Metadata</summary><pre>{html.escape(json.dumps(meta, indent=1))}</pre></details>"
    )
    rows.append(_calls_html(details["llm_calls"]))
    rows.append(f"<p style='{MUTED_STYLE}'>{html.escape(node['node_id'])}</p>")
    return "".join(rows)


def _status_rows(node: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The inspector's heading (type, status, depth) and why the node failed or is weak."""
    shown = view_status(node["status"], node["status_reason"])
    rows = [
        f"<h4 style='margin:4px 0'>{html.escape(node['node_type'])} · {html.escape(shown)}"
        f"{' (' + html.escape(node['status_reason']) + ')' if node['status_reason'] else ''}"
        f" · depth {node['depth']}</h4>",
    ]
    if shown == FAILED:
        error = str(meta.get("last_error") or node["status_reason"] or "error")
        rows.append(
            f"<p class='fractal-failed-note' style='{ERROR_STYLE}'><b>Failed:</b> {html.escape(error)}</p>"
        )
    if meta.get("synthesis_failed"):
        rows.append(
            f"<p class='fractal-weak-note' style='{ERROR_STYLE}'><b>Weak synthesis:</b> the model could not "
            "synthesize it; its sub-findings were joined without the model.</p>"
        )
    # The weak mark (docs/architecture/engine.md, "Facts, assumptions, unknowns").
    if isinstance(meta.get("weak"), list) and meta["weak"]:
        built_on = "; ".join(
            f"{m.get('reason')}: {m.get('node_id')}" for m in meta["weak"] if isinstance(m, dict)
        )
        rows.append(
            f"<p class='fractal-weak-note' style='{ERROR_STYLE}'><b>Weak synthesis:</b> built on "
            f"{html.escape(built_on)}; weak until synthesized again on sound sub-questions.</p>"
        )
    return rows


def _answer_rows(
    details: dict[str, Any], evidence: NodeEvidence | None, server: LabServer | None
) -> list[str]:
    """The question's answers, each with its support and citations."""
    rows = []
    for answer in (c for c in details["children"] if c["node_type"] == "answer"):
        cited = evidence["answers"].get(answer["node_id"]) if evidence else None
        rows.append(
            f"<p><b>Answer:</b> {html.escape(answer['text'])}"
            f"{support_badge(cited['support']) if cited else ''}</p>"
        )
        if cited:
            rows.append(_cited(cited["citations"], server))
    return rows


def _tree_rows(details: dict[str, Any], synthesis: object, *, chained: bool) -> list[str]:
    """The node's sub-questions, its synthesis (a level's result) and its links to other branches."""
    rows = []
    subs = [c for c in details["children"] if c["node_type"] == "question"] + details.get("sub_questions", [])
    if subs:
        items = "".join(
            f"<li>{html.escape(c['text'])} <i>({html.escape(c['status'])})</i></li>" for c in subs
        )
        rows.append(f"<p><b>Sub-questions:</b></p><ul>{items}</ul>")
    if synthesis:
        rows.append(f"<p><b>{'Result' if chained else 'Synthesis'}:</b> {html.escape(str(synthesis))}</p>")
    for link in details["links"]:
        note = link["metadata"].get("insight") or link["metadata"].get("tension") or ""
        rows.append(
            f"<p><b>{html.escape(link['edge_type'])}</b> {html.escape(link['from_node'])} — "
            f"{html.escape(link['to_node'])}: {html.escape(note)}</p>"
        )
    return rows


def _calls_html(calls: Any) -> str:
    """The node's model calls as a table (a DataFrame), or a line saying there are none."""
    if not len(calls):
        return "<p><i>No LLM calls logged for this node.</i></p>"
    shown = calls[
        ["role", "worker", "model", "prompt_tokens", "completion_tokens", "latency_s", "outcome", "error"]
    ]
    return (
        f"<details open><summary>LLM calls ({len(calls)})</summary>"
        f"{shown.to_html(index=False, escape=True, float_format='{:.3f}'.format)}</details>"
    )


def _cited(citations: list[CitedLines], server: LabServer | None) -> str:
    """An answer's citations under it, with how many there are ('' for none)."""
    if not citations:
        return ""
    return (
        f"<div class='fractal-citations'><b>Citations ({len(citations)}):</b>"
        f"{citations_html(citations, server)}</div>"
    )


_OUTCOME_MARKS = {
    "failed": f" <b style='{ERROR_STYLE}'>failed</b>",
    "cut": f" <b style='{ERROR_STYLE}'>cut short</b>",
}


def _level_html(level: dict[str, Any]) -> str:
    """A thinkon level's phase, plan and done (docs/architecture/engine.md, "Thinkon"), escaped."""
    plan = level["todo"]
    done = "".join(
        f"<li>{html.escape(str(d.get('goal', '')))}{_OUTCOME_MARKS.get(str(d.get('outcome')), '')}"
        f"<br><span style='{MUTED_STYLE}'>{html.escape(clip(str(d.get('result', '')), 600))}</span></li>"
        for d in level["done"]
    )
    return (
        f"<div class='fractal-level'><p><b>Thinkon level</b> · next: {html.escape(level['phase'])}</p>"
        + (
            f"<p><b>Plan</b> (written by Think):</p><pre class='fractal-plan'>{html.escape(plan)}</pre>"
            if plan
            else ""
        )
        + (f"<p><b>Done</b> ({len(level['done'])}):</p><ol>{done}</ol>" if done else "")
        + "</div>"
    )
