"""Citations, support and the synthesis object as HTML: what the Inspector and the exported page share.

docs/architecture/faces.md, "Evidence in the faces". Every string from a model or a
source is escaped here; the only markup is ours. A finding, a track and a cited
answer link to their node in the tree (``results.node_link``). Colours are JupyterLab's theme
variables with light fallbacks (the exported page sets them for its dark theme),
so the same HTML reads in Lab, Voila and the page, light or dark.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ..results.evidence import (
    CHANGED,
    SUPPORT_LABELS,
    CitedLines,
    Evidence,
    FindingShown,
    nuances,
    supported_count,
)
from ..results.result import node_link
from ..vocabulary import CitationStatus, Support
from .lab_link import LabServer

# A badge's text is the theme's own text colour (JupyterLab's success and error colours fall under
# 4.5:1 as text in its light and dark themes); its border carries the status's colour.
OK_STYLE = "border-color:var(--jp-success-color1, #1a7f37)"
BAD_STYLE = "border-color:var(--jp-error-color1, #b42323)"
MUTED = "color:var(--jp-ui-font-color2, #57606a)"
LINK_STYLE = "color:var(--jp-content-link-color, #0969da)"
_BADGE = (
    "display:inline-block;padding:0 6px;margin-left:4px;border:2px solid;border-radius:8px;"
    "color:var(--jp-ui-font-color0, #1b1f24);"
)
_QUOTE = (
    "margin:2px 0 2px 0;padding:1px 8px;border-left:3px solid var(--jp-border-color1, #c4ccd5);"
    "white-space:pre-wrap;color:var(--jp-ui-font-color0, #1b1f24)"
)
_LINES = (
    "margin:2px 0 6px 0;padding:4px 6px;max-height:16em;overflow:auto;white-space:pre-wrap;"
    "background:var(--jp-layout-color2, #eef1f4);color:var(--jp-ui-font-color0, #1b1f24);"
    "border-radius:4px;font-size:12px;line-height:1.4"
)


def badge(text: str, *, bad: bool, css_class: str) -> str:
    """A small outlined label: ``bad`` in the error colour, else the success colour."""
    style = _BADGE + (BAD_STYLE if bad else OK_STYLE)
    return f"<span class='fractal-badge {css_class}' style='{style}'>{html.escape(text)}</span>"


def support_badge(support: str | None) -> str:
    """An answer's or finding's support as a badge ('' when the store never judged it)."""
    if not support:
        return ""
    label = SUPPORT_LABELS.get(support, support)
    if support == Support.NO_SOURCES:
        style = _BADGE + "border-color:var(--jp-border-color1, #c4ccd5)"
        return f"<span class='fractal-badge fractal-no-sources' style='{style}'>{html.escape(label)}</span>"
    bad = support == Support.UNSUPPORTED
    return badge(label, bad=bad, css_class="fractal-unsupported" if bad else "fractal-supported")


def citation_html(citation: CitedLines, server: LabServer | None) -> str:
    """One citation: its name (a JupyterLab link for a file under the server's root), status, quote, lines."""
    href = server.href(citation["location"]) if server and citation["location"] else None
    label = html.escape(citation["label"])
    if href:
        lines = f"lines {citation['line_start']}-{citation['line_end']}"
        title = html.escape(
            f"Open {citation['location']} in JupyterLab (a new tab); Edit → Go to Line… {lines}"
        )
        full = server.absolute(href) if server else None
        on_disk = f" data-lab-href='{html.escape(full)}'" if full else ""  # the exported page's file: case
        name = (
            f"<a class='fractal-cite-link' href='{html.escape(href)}'{on_disk} target='_blank' "
            f"rel='noopener' style='{LINK_STYLE}' "
            f"title='{title}'><code>{label}</code></a>"
        )
    else:
        where = f" title='{html.escape(citation['location'])}'" if citation["location"] else ""
        name = f"<code class='fractal-cite-name'{where}>{label}</code>"
    ok = citation["status"] == CitationStatus.VERIFIED
    parts = [
        f"<div class='fractal-citation' data-status='{html.escape(citation['status'])}' "
        "style='margin:4px 0 4px 1em'>",
        name,
        badge(citation["status_label"], bad=not ok, css_class=f"fractal-cite-{'ok' if ok else 'bad'}"),
    ]
    if citation["changed"]:
        parts.append(badge(CHANGED, bad=True, css_class="fractal-cite-changed"))
    if citation["detail"]:
        parts.append(
            f" <span class='fractal-cite-detail' style='{MUTED}'>{html.escape(citation['detail'])}</span>"
        )
    if citation["quote"]:
        quote = html.escape(citation["quote"])
        parts.append(f"<blockquote class='fractal-quote' style='{_QUOTE}'>{quote}</blockquote>")
    if citation["lines"]:
        width = len(str(citation["line_start"] + len(citation["lines"]) - 1))
        numbered = "\n".join(
            f"{citation['line_start'] + i:>{width}}  {line}" for i, line in enumerate(citation["lines"])
        )
        more = f"\n… {citation['cut']} more line(s)" if citation["cut"] else ""
        parts.append(
            f"<pre class='fractal-lines' style='{_LINES}' aria-label='the stored lines'>"
            f"{html.escape(numbered + more)}</pre>"
        )
    parts.append("</div>")
    return "".join(parts)


def citations_html(citations: list[CitedLines], server: LabServer | None) -> str:
    """A list of citations, each as :func:`citation_html` ('' for none)."""
    return "".join(citation_html(c, server) for c in citations)


def finding_html(finding: FindingShown, server: LabServer | None) -> str:
    """A finding with its confidence, support badge, the link to its node and citations, as a list item."""
    return (
        f"<li class='fractal-finding-item'>{html.escape(finding['finding'])} "
        f"<i>({html.escape(finding['confidence'])})</i>{support_badge(finding['support'])}"
        f"{node_link(finding.get('node_id'))}{citations_html(finding['citations'], server)}</li>"
    )


def synthesis_html(synthesis: Mapping[str, Any]) -> str:
    """The synthesis object: unified, nuances with their tracks, open questions, confidence and why."""
    parts = [
        "<div class='fractal-synthesis-object'>",
        f"<p><b>Unified:</b> {html.escape(str(synthesis.get('unified') or ''))}</p>",
    ]
    found = nuances(synthesis)
    if found:
        items = "".join(
            f"<li>{html.escape(n['text'])} <span style='{MUTED}'>(tracks: "
            f"{html.escape(', '.join(n['tracks']) or 'none named')})</span></li>"
            for n in found
        )
        parts.append(f"<p><b>Nuances</b></p><ul class='fractal-nuances'>{items}</ul>")
    questions = synthesis.get("open_questions")
    if isinstance(questions, list) and questions:
        items = "".join(f"<li>{html.escape(str(q))}</li>" for q in questions)
        parts.append(f"<p><b>Open questions</b></p><ul class='fractal-open-questions'>{items}</ul>")
    confidence = html.escape(str(synthesis.get("confidence") or ""))
    why = html.escape(str(synthesis.get("justification") or ""))
    parts.append(f"<p class='fractal-confidence'><b>Confidence:</b> {confidence} · {why}</p></div>")
    return "".join(parts)


def evidence_html(evidence: Evidence, server: LabServer | None) -> str:
    """A graph's evidence: synthesis object, tracks, findings (the unsupported apart), cited answers.

    '' when there is none. The exported page's Evidence section and the panel's Result tab.
    """
    parts: list[str] = []
    synthesis = evidence["synthesis"]
    if synthesis:
        parts.append(f"<h3>Synthesis of the tracks</h3>{synthesis_html(synthesis)}")
    if evidence["tracks"]:
        items = "".join(
            f"<li class='fractal-track-item'><b>{html.escape(t['name'])}</b> "
            f"<i>({html.escape(t['status'])})</i> {html.escape(t['focus'])}{node_link(t['node_id'])}"
            + (f"<ul>{''.join(finding_html(f, server) for f in t['findings'])}</ul>" if t["findings"] else "")
            + "</li>"
            for t in evidence["tracks"]
        )
        parts.append(f"<h3>Tracks ({len(evidence['tracks'])})</h3><ul class='fractal-tracks'>{items}</ul>")
    findings, unsupported = evidence["findings"], evidence["unsupported_findings"]
    supported = supported_count(findings)
    if supported or unsupported:  # the store judged them: the graph has sources
        parts.append(
            f"<p class='fractal-support-counts'><b>Findings:</b> {supported} supported · "
            f"{len(unsupported)} unsupported</p>"
        )
    if any(f["citations"] for f in findings):
        items = "".join(finding_html(f, server) for f in findings)
        parts.append(f"<h3>Findings with their citations</h3><ul class='fractal-findings'>{items}</ul>")
    if unsupported:
        items = "".join(finding_html(f, server) for f in unsupported)
        parts.append(
            "<h3>Unsupported findings</h3><p>Kept, never part of the result: their citations failed "
            f"the check or are missing.</p><ul class='fractal-unsupported-findings'>{items}</ul>"
        )
    counts = evidence["answer_support"]
    if counts:
        said = " · ".join(f"{n} {html.escape(SUPPORT_LABELS.get(k, k))}" for k, n in counts.items())
        answers = "".join(
            f"<li><b>{html.escape(a['question'])}</b>{node_link(a['question_id'])}<br>{html.escape(a['text'])}"
            f"{support_badge(a['support'])}{citations_html(a['citations'], server)}</li>"
            for a in evidence["answers"]
        )
        parts.append(
            "<h3>Answers and their citations</h3>"
            f"<p class='fractal-answer-support'><b>Answers:</b> {said}</p>"
            f"<ul class='fractal-cited-answers'>{answers}</ul>"
        )
    return "".join(parts)
