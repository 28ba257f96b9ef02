"""What the engine hands back: one record per processed node, and the harvest's result."""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..text import clip
from ..text import markdown_escape as _md
from ..vocabulary import DEFAULT_STRATEGY, NODE_ID_PATTERN, GapKind, NodeStatus

if TYPE_CHECKING:  # the store's package loads DuckDB; a result is read without it
    from ..store.records import NodeRecord


@dataclass(frozen=True)
class StepRecord:
    """One run of the recursive primitive on one claimed question (or the seed phase)."""

    node_id: str
    worker: str
    question: str
    answer_id: str | None = None
    sub_questions: tuple[str, ...] = ()
    synthesized: tuple[str, ...] = ()
    links: int = 0
    depth_limited: bool = False
    error: str | None = None
    convergences: tuple[tuple[str, str], ...] = ()  # (its answer, the node it converges with)
    contradictions: tuple[tuple[str, str], ...] = ()
    boundary_questions: int = 0
    saturated: str | None = None  # the worker's saturation verdict, when it saturated the question
    budget_reached: str | None = None  # the node's time limit ended the run (engine/limits.py)
    halted: str | None = None  # the worker halted instead of answering: a HaltKind value ("Halts")
    # a thinkon step: plan, call, return, cut or failed (engine/strategies/thinkon.py)
    thinkon: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the node was answered (an error leaves it recoverable instead)."""
        return self.error is None


@dataclass(frozen=True)
class ChainLink:
    """A synthesized question of the chain from the root down."""

    node_id: str
    depth: int
    question: str
    synthesis: str
    degraded: bool = False  # the model's synthesis failed: the sub-findings joined instead
    weak: tuple[str, ...] = ()  # why it is weak ("failed: n-…"): built on unsound sub-questions


def synthesis_chain(nodes: list[NodeRecord]) -> list[ChainLink]:
    """Synthesized questions in tree order (depth-first from the root)."""
    children: dict[str | None, list[NodeRecord]] = {}
    by_id = {n["node_id"]: n for n in nodes}
    for n in nodes:
        if n["node_type"] == "question":
            parent = by_id.get(n["parent_id"]) if n["parent_id"] else None
            key = parent["parent_id"] if parent and parent["node_type"] == "answer" else n["parent_id"]
            children.setdefault(key, []).append(n)
    chain: list[ChainLink] = []

    def walk(question: NodeRecord) -> None:
        if question["status"] == NodeStatus.SYNTHESIZED or "synthesis" in question["metadata"]:
            chain.append(
                ChainLink(
                    question["node_id"],
                    question["depth"],
                    question["text"],
                    question["metadata"]["synthesis"],
                    degraded=bool(question["metadata"].get("synthesis_failed")),
                    weak=weak_reasons(question),
                )
            )
        for child in children.get(question["node_id"], []):
            walk(child)

    for root in children.get(None, []):
        walk(root)
    return chain


def weak_reasons(node: NodeRecord) -> tuple[str, ...]:
    """Why a question's synthesis is weak, one ``"reason: node_id"`` each (its ``metadata["weak"]``)."""
    return tuple(f"{m.get('reason')}: {m.get('node_id')}" for m in node["metadata"].get("weak") or [])


@dataclass(frozen=True)
class FractalResult:
    """The harvest of an exploration: the root's synthesis, findings, gaps and counts."""

    graph_id: str
    seed: str
    status: str
    summary: str
    """The root's synthesis, built bottom-up from its sub-questions' syntheses (seed 001: the root
    node's synthesis IS the final summary); before the root is synthesized, says so."""
    node_count: int
    edge_count: int
    max_depth: int
    convergence_count: int
    contradiction_count: int
    synthesis_chain: list[ChainLink] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    """The findings: ``finding``, ``confidence``, ``citations`` (as the store checked them), ``support``
    and ``node_id``.

    With sources only supported ones (each rests on verified citations); the others are
    ``unsupported_findings``. Without sources, all of them (``support`` is ``no_sources``).
    ``node_id`` is the question the finding rests on, attached by code (``results/provenance.py``;
    docs/architecture/faces.md, "Evidence in the faces"): a track's finding, its track; a finding
    carrying a citation an answer verified (same source and lines, else overlapping lines),
    that answer's question; else the synthesis-chain question whose question and synthesis share
    the most content words with it (ties: the shallower, then the first); else the root.
    """
    gaps: list[str] = field(default_factory=list)
    depth_limited: list[str] = field(default_factory=list)
    stuck_nodes: list[str] = field(default_factory=list)
    replies: dict[str, int] = field(default_factory=dict)
    """The model's replies: accepted at once, corrected after a round trip, rejected, failed."""
    degraded: bool = False
    """The model could not do the job well: read ``degraded_reasons`` before trusting the result."""
    degraded_reasons: list[str] = field(default_factory=list)
    gap_rows: list[dict[str, Any]] = field(default_factory=list)
    """The gaps one row per question: node_id, depth, kind, question, detail (``Exploration.gaps()``)."""
    saturated: list[dict[str, str | None]] = field(default_factory=list)
    """Questions a worker saturated (node_id, reason, question): the model judged them settled."""
    weak: list[dict[str, Any]] = field(default_factory=list)
    """Weak syntheses (node_id, question, reasons): built on failed, budget-cut or joined sub-questions."""
    claims: list[dict[str, Any]] = field(default_factory=list)
    """The root synthesis's claims: facts (with support and source), assumptions and unknowns, kept apart."""
    has_sources: bool = False
    """The graph has sources: answers gather evidence, and a finding must rest on a verified citation."""
    unsupported_findings: list[dict[str, Any]] = field(default_factory=list)
    """With sources, the harvest's findings whose citations failed or are missing: kept, never findings."""
    support_counts: dict[str, int] = field(default_factory=lambda: {"supported": 0, "unsupported": 0})
    """How many of the harvest's findings are supported and how many unsupported (with sources)."""
    answer_support: dict[str, int] = field(default_factory=dict)
    """The answers by support: ``supported``, ``unsupported``, ``no_sources`` (not the seed's plan)."""
    held: list[dict[str, Any]] = field(default_factory=list)
    """Questions waiting for the person (node_id, question, kind, asks, options): answer with ``choose``."""
    blocked: list[dict[str, Any]] = field(default_factory=list)
    """Questions no worker could answer (node_id, question, blocker, alternatives): gaps of kind blocked."""
    strategy: str = DEFAULT_STRATEGY.value
    """How the graph thinks: ``fractal`` or ``tracks`` (docs/architecture/engine.md, "Tracks")."""
    synthesis: dict[str, Any] | None = None
    """The synthesis object (a tracks graph's, or ``harvest(aggregate=True)``'s): unified, nuances
    (text, tracks), open_questions, confidence, justification; None when there is none."""

    @property
    def weak_count(self) -> int:
        """How many syntheses are weak (docs/architecture/engine.md, "Facts, assumptions, unknowns")."""
        return len(self.weak)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    def to_markdown(self) -> str:
        """The result as Markdown: summary, findings, gaps and the synthesis chain (text escaped)."""
        lines = [
            f"### {_md(self.seed)}",
            "",
            f"**Status:** {self.status} · {self.node_count} nodes · {self.edge_count} edges · "
            f"depth {self.max_depth} · {self.convergence_count} convergences · "
            f"{self.contradiction_count} contradictions",
            "",
        ]
        if self.strategy != DEFAULT_STRATEGY:
            lines += [f"**Strategy:** {_md(self.strategy)}", ""]
        if self.replies:
            lines += [f"**Model replies:** {_replies(self.replies)}", ""]
        if self.degraded:
            lines += ["**Degraded result:** " + "; ".join(_md(r) for r in self.degraded_reasons), ""]
        if self.has_sources:
            lines += [f"**Evidence:** {_evidence(self)}", ""]
        if self.weak:
            lines += [
                f"**Weak syntheses ({self.weak_count}):** " + "; ".join(_md(_weak(w)) for w in self.weak),
                "",
            ]
        lines.append(_md(self.summary))
        if self.synthesis:
            lines += ["", "**Synthesis**", ""] + _synthesis_markdown(self.synthesis)
        if self.findings:
            lines += ["", "**Findings**", ""]
            lines += [
                f"- {_md(f['finding'])} *({f['confidence']}{', weak' if f.get('weak') else ''})*"
                f"{_node_md(f.get('node_id'))}"
                + "".join(f"\n  - {_md(_cited(c))}" for c in f.get("citations") or [])
                for f in self.findings
            ]
        if self.unsupported_findings:
            lines += ["", "**Unsupported findings** (kept apart: no verified citation)", ""]
            lines += [
                f"- {_md(f['finding'])} *(unsupported)*{_node_md(f.get('node_id'))}"
                + "".join(f"\n  - {_md(_cited(c))}" for c in f.get("citations") or [])
                for f in self.unsupported_findings
            ]
        if self.held:
            lines += ["", "**Waiting for your answer** (`ex.choose(node_id, choice)`)", ""]
            lines += [f"- {_md(_held(h))}" for h in self.held]
        if self.blocked:
            lines += ["", "**Blocked**", ""] + [f"- {_md(_blocked(b))}" for b in self.blocked]
        if self.gaps:
            lines += ["", "**Gaps**", ""] + [f"- {_md(g)}" for g in self.gaps]
        if self.synthesis_chain:
            lines += ["", "**Synthesis chain**", ""]
            lines += [
                f"{'  ' * link.depth}- **{_md(link.question)}** "
                f"{'*(degraded)* ' if link.degraded else ''}{'*(weak)* ' if link.weak else ''}"
                f"{_md(link.synthesis)}{_node_md(link.node_id)}"
                for link in self.synthesis_chain
            ]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        chain = "".join(
            f"<li style='margin-left:{link.depth * 1.2:.1f}em'><b>{html.escape(link.question)}</b> "
            f"{'<i>(degraded)</i> ' if link.degraded else ''}{'<i>(weak)</i> ' if link.weak else ''}"
            f"{html.escape(link.synthesis)}{node_link(link.node_id)}</li>"
            for link in self.synthesis_chain
        )
        return (
            f"<div class='fractal-result'><h3>{html.escape(self.seed)}</h3>"
            + _state_html(self)
            + f"<p>{html.escape(self.summary)}</p>"
            + (_synthesis_html(self.synthesis) if self.synthesis else "")
            + (f"<p><b>Evidence:</b> {html.escape(_evidence(self))}</p>" if self.has_sources else "")
            + _findings_html(self)
            + _open_html(self)
            # The chain the conclusion rests on, then what is left open (docs/architecture/faces.md).
            + (
                f"<details class='fractal-chain' open><summary><b>Synthesis chain</b> "
                f"({len(self.synthesis_chain)})</summary><ul>{chain}</ul></details>"
                if chain
                else ""
            )
            + gaps_html(self.gaps)
            + "</div>"
        )

    def __str__(self) -> str:
        return self.to_markdown()


NODE_LINK_STYLE = "color:var(--jp-content-link-color, #0969da);font-size:0.85em;margin-left:4px"


def node_link(
    node_id: object,
    *,
    label: str = "node",
    title: str = "Show this node in the tree",
    style: str = NODE_LINK_STYLE,
) -> str:
    """A small link to a node of the tree ('' without an id): the tree selects and shows the node it names.

    Markup only (the tree's script acts on any ``a.fractal-node-link`` of the page, by its
    ``data-fractal-node``); the id is escaped.

    >>> 'href="#fractal-node-n-1" data-fractal-node="n-1"' in node_link("n-1"), node_link(None)
    (True, '')
    """
    if not isinstance(node_id, str) or not node_id:
        return ""
    at = html.escape(node_id, quote=True)
    return (
        f' <a class="fractal-node-link" href="#fractal-node-{at}" data-fractal-node="{at}" '
        f'title="{html.escape(title, quote=True)}" style="{style}">{html.escape(label)}</a>'
    )


_NODE_ID = re.compile(rf"\b{NODE_ID_PATTERN}\b")


def linked_ids(escaped: str) -> str:
    """Escaped text with each node id in it a :func:`node_link` named by the id.

    >>> linked_ids("weak: n-0123456789abcdef")  # doctest: +ELLIPSIS
    'weak: <a class="fractal-node-link" href="#fractal-node-n-0123456789abcdef" ...>n-0123456789abcdef</a>'
    """
    return _NODE_ID.sub(lambda m: node_link(m[0], label=m[0]).lstrip(), escaped)


def _node_md(node_id: object) -> str:
    """The node a finding (or chain entry) rests on, as the Markdown report names it: its id in brackets."""
    return f" \\[{_md(node_id)}\\]" if isinstance(node_id, str) and node_id else ""


class MarkdownText(str):
    """A string of Markdown that Jupyter renders as Markdown."""

    __slots__ = ()

    def _repr_markdown_(self) -> str:
        return str(self)


def _replies(replies: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in replies.items())


def _weak(row: dict[str, Any]) -> str:
    """A weak synthesis as one line: its question, then what it is built on."""
    return f"{row['question']} (built on {', '.join(row['reasons'])})"


def _cited(citation: dict[str, Any]) -> str:
    """A citation as one line: where, the quoted text (cut), and what the check found when it failed."""
    notes = [str(citation[k]) for k in ("status", "detail") if citation.get(k) and citation[k] != "verified"]
    return (
        f"[{citation['source']}:L{citation['line_start']}-L{citation['line_end']}] "
        f"\u201c{clip(str(citation['quote']), 200)}\u201d" + (f" ({': '.join(notes)})" if notes else "")
    )


def _evidence(result: FractalResult) -> str:
    """The support counts as one line: findings, then answers."""
    answers = result.answer_support
    return (
        f"{result.support_counts.get('supported', 0)} supported finding(s), "
        f"{result.support_counts.get('unsupported', 0)} unsupported; answers: "
        f"{answers.get('supported', 0)} supported, {answers.get('unsupported', 0)} unsupported"
    )


def _held(row: dict[str, Any]) -> str:
    """A held question as one line: the question, what the worker asks, the numbered options."""
    options = "; ".join(f"{i}: {o['option']} ({o['tradeoffs']})" for i, o in enumerate(row["options"]))
    return f"{row['question']} [{row['node_id']}] {row['kind']}: {row['asks']}" + (
        f" Options: {options}" if options else ""
    )


def _blocked(row: dict[str, Any]) -> str:
    """A blocked question as one line: the question, its blocker, the alternatives suggested."""
    return f"{row['question']}: {row['blocker']} (alternatives: {'; '.join(row['alternatives'])})"


def _synthesis_markdown(obj: dict[str, Any]) -> list[str]:
    """The synthesis object as Markdown lines (model text escaped)."""
    lines = [
        f"- **Unified:** {_md(str(obj.get('unified', '')))}",
        f"- **Confidence:** {_md(str(obj.get('confidence', '')))}: {_md(str(obj.get('justification', '')))}",
    ]
    for n in obj.get("nuances") or []:
        named = ", ".join(n.get("tracks") or []) or "no track named"
        lines.append(f"- **Nuance** ({_md(named)}): {_md(str(n.get('text', '')))}")
    lines += [f"- **Open question:** {_md(str(q))}" for q in obj.get("open_questions") or []]
    return lines


def _items(values: list[str]) -> str:
    return "".join(f"<li>{html.escape(v)}</li>" for v in values)


def _state_html(result: FractalResult) -> str:
    """The result's status line, strategy, replies, and why it is degraded or weak, if it is."""
    degraded = "; ".join(linked_ids(html.escape(r)) for r in result.degraded_reasons)
    return (
        f"<p><b>Status:</b> {html.escape(result.status)} · {result.node_count} nodes · "
        f"{result.edge_count} edges · depth {result.max_depth} · {result.convergence_count} "
        f"convergences · {result.contradiction_count} contradictions</p>"
        + (
            f"<p><b>Strategy:</b> {html.escape(result.strategy)}</p>"
            if result.strategy != DEFAULT_STRATEGY
            else ""
        )
        + (f"<p><b>Model replies:</b> {_replies(result.replies)}</p>" if result.replies else "")
        + (
            f"<p class='fractal-degraded' style='border-left:3px solid #c77700;padding-left:.5em'>"
            f"<b>Degraded result:</b> {degraded}</p>"
            if result.degraded
            else ""
        )
        + (
            f"<details class='fractal-weak'><summary><b>Weak syntheses ({result.weak_count})</b>: built "
            "on failed, budget-cut or joined sub-questions</summary><ul>"
            + "".join(f"<li>{html.escape(_weak(w))}{node_link(w.get('node_id'))}</li>" for w in result.weak)
            + "</ul></details>"
            if result.weak
            else ""
        )
    )


def _cited_html(finding: dict[str, Any], note: str) -> str:
    cites = "".join(f"<li>{html.escape(_cited(c))}</li>" for c in finding.get("citations") or [])
    return (
        f"<li>{html.escape(finding['finding'])} ({html.escape(note)})"
        + node_link(finding.get("node_id"))
        + (f"<ul class='fractal-citations'>{cites}</ul>" if cites else "")
        + "</li>"
    )


def _findings_html(result: FractalResult) -> str:
    """The findings, each with its citations, and the unsupported ones kept apart."""
    findings = "".join(
        _cited_html(f, f"{f['confidence']}{', weak' if f.get('weak') else ''}") for f in result.findings
    )
    unsupported = "".join(_cited_html(f, "unsupported") for f in result.unsupported_findings)
    return (f"<p><b>Findings</b></p><ul>{findings}</ul>" if findings else "") + (
        "<p class='fractal-unsupported'><b>Unsupported findings</b> (kept apart: no verified "
        f"citation)</p><ul>{unsupported}</ul>"
        if unsupported
        else ""
    )


def _open_html(result: FractalResult) -> str:
    """Questions waiting for the person and blocked ones (the gaps follow the chain: :func:`gaps_html`)."""
    return (
        f"<p class='fractal-held'><b>Waiting for your answer</b> (<code>ex.choose(node_id, "
        f"choice)</code>)</p><ul>{_items([_held(h) for h in result.held])}</ul>"
        if result.held
        else ""
    ) + (
        "<p class='fractal-blocked'><b>Blocked</b></p>"
        f"<ul>{_items([_blocked(b) for b in result.blocked])}</ul>"
        if result.blocked
        else ""
    )


def gaps_html(gaps: list[str]) -> str:
    """The gaps under their count ('' for none), after the chain: folded, open when a question failed.

    A failed question is a defect of the run the person must see (the result says it
    is degraded); unexplored, pruned and budget-cut ones can be many, and wait folded.

    >>> gaps_html(["<b>x</b>"])
    "<details class='fractal-gaps'><summary><b>Gaps</b> (1)</summary><ul><li>&lt;b&gt;x&lt;/b&gt;</li>..."
    >>> gaps_html(["unexplored: Why?", "failed: How?"]).startswith("<details class='fractal-gaps' open>")
    True
    """
    if not gaps:
        return ""
    shown = " open" if any(gap.startswith(f"{GapKind.FAILED}:") for gap in gaps) else ""
    return (
        f"<details class='fractal-gaps'{shown}><summary><b>Gaps</b> ({len(gaps)})</summary>"
        f"<ul>{_items(gaps)}</ul></details>"
    )


def _synthesis_html(obj: dict[str, Any]) -> str:
    """The synthesis object as an HTML block (model text escaped)."""
    nuances = "".join(
        f"<li>{html.escape(str(n.get('text', '')))} "
        f"<i>({html.escape(', '.join(n.get('tracks') or []))})</i></li>"
        for n in obj.get("nuances") or []
    )
    questions = "".join(f"<li>{html.escape(str(q))}</li>" for q in obj.get("open_questions") or [])
    return (
        "<div class='fractal-synthesis'><p><b>Unified:</b> "
        f"{html.escape(str(obj.get('unified', '')))}</p>"
        f"<p><b>Confidence:</b> {html.escape(str(obj.get('confidence', '')))}: "
        f"{html.escape(str(obj.get('justification', '')))}</p>"
        + (f"<p><b>Nuances</b></p><ul>{nuances}</ul>" if nuances else "")
        + (f"<p><b>Open questions</b></p><ul>{questions}</ul>" if questions else "")
        + "</div>"
    )
