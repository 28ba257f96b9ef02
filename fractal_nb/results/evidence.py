"""What the faces show of a graph's evidence: checked citations with their lines, support, tracks, synthesis.

docs/architecture/faces.md, "Evidence in the faces": the Inspector, the exported page and
``fractal-nb report`` read the formats the store keeps (an answer's ``citations``
and ``support``, a finding's, a track question's ``track``, the harvest's
``synthesis_object``) through this one module, so the three say the same thing.
Everything here is read from the store; nothing is written. The metadata may come
from an outside client (MCP), so each value is read defensively: an entry that is
not a citation is left out, never an error.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any, TypedDict

from ..errors import FractalError
from ..store import Store
from ..store.citations import file_hash
from ..store.records import NodeRecord
from ..text import markdown_escape
from ..vocabulary import CitationStatus, Support, track_name, track_of
from .provenance import Provenance

UNCHECKED = "unchecked"
"""The status of a citation stored without the store's check (an older file, an outside write)."""
STATUS_LABELS = {
    CitationStatus.VERIFIED.value: "verified",
    CitationStatus.MISQUOTED.value: "misquoted",
    CitationStatus.NO_SUCH_LINES.value: "no such lines",
    CitationStatus.NO_SUCH_SOURCE.value: "no such source",
    UNCHECKED: "not checked",
}
"""A citation's status as a reader reads it."""
SUPPORT_LABELS = {
    Support.SUPPORTED.value: "supported",
    Support.UNSUPPORTED.value: "unsupported",
    Support.NO_SOURCES.value: "no sources",
}
CHANGED = "the file changed since it was added"
MAX_LINES = 40  # of a citation's stored lines shown; a longer span is cut, and says so


class CitedLines(TypedDict):
    """One citation as the faces show it."""

    source: str
    line_start: int
    line_end: int
    label: str  # "name:L12-L14"
    quote: str
    status: str  # a CitationStatus value, or UNCHECKED
    status_label: str  # STATUS_LABELS
    detail: str  # the check's: why it failed, or that the file had changed then; "" when nothing
    changed: bool  # the source is a file whose content on disk is no longer what was added
    lines: list[str]  # the source's stored lines it names ([] when the store cannot read them)
    cut: int  # stored lines left out of ``lines`` (MAX_LINES)
    location: str | None  # the file on disk, for a file source (a link opens it), else None


class FindingShown(TypedDict):
    """A finding (harvest or track) with its checked citations."""

    finding: str
    confidence: str
    support: str | None  # a Support value; None when the store never judged it
    citations: list[CitedLines]
    # the question it rests on (results/provenance.py; a track's: the track); None: unknown
    node_id: str | None


class AnswerEvidence(TypedDict):
    """An answer and what supports it."""

    node_id: str
    question_id: str | None
    question: str
    text: str
    support: str | None
    citations: list[CitedLines]


class TrackShown(TypedDict):
    """A track question (the tracks strategy) and its cited findings."""

    node_id: str
    name: str
    focus: str
    deliverable: str
    status: str
    findings: list[FindingShown]


class NodeEvidence(TypedDict):
    """What the Inspector shows of one node's evidence."""

    support: str | None  # the node's own (an answer's)
    citations: list[CitedLines]  # the node's own
    answers: dict[str, AnswerEvidence]  # its answers' (a question's), by answer id
    findings: list[FindingShown]  # a track question's cited findings
    track: str | None  # a track question's name


class Evidence(TypedDict):
    """A graph's evidence: answers and their support, the harvest's findings, tracks, synthesis object."""

    answers: list[AnswerEvidence]  # answers that carry citations or a support value
    answer_support: dict[str, int]  # answers by support value
    findings: list[FindingShown]  # the harvest's findings that are not unsupported
    unsupported_findings: list[FindingShown]
    tracks: list[TrackShown]
    synthesis: dict[str, Any] | None  # the harvest's synthesis object, as stored


def citation_label(source: str, line_start: int, line_end: int) -> str:
    """How a citation is named: ``name:L12-L14`` (one line: ``name:L12``).

    >>> citation_label("notes/a.md", 12, 14), citation_label("a.md", 3, 3)
    ('notes/a.md:L12-L14', 'a.md:L3')
    """
    span = f"L{line_start}" if line_start == line_end else f"L{line_start}-L{line_end}"
    return f"{source}:{span}"


def sources_of(store: Any, graph_id: str) -> dict[str, dict[str, Any]]:
    """The graph's sources by name ({} when the store keeps none, or has no sources part)."""
    listing = getattr(store, "list_sources", None)
    if listing is None:
        return {}
    return {str(s["name"]): dict(s) for s in listing(graph_id)}


def cited_lines(
    store: Any,
    graph_id: str,
    raw: Any,
    sources: Mapping[str, Mapping[str, Any]],
) -> list[CitedLines]:
    """Stored citations (metadata ``citations``) as the faces show them, each with its stored lines.

    A file source whose file on disk no longer hashes as it did when it was added
    is marked ``changed`` (its lines are still the ones added: those are checked).
    """
    shown: list[CitedLines] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("source"), str):
            continue
        start, end = _line(entry.get("line_start")), _line(entry.get("line_end"))
        if start is None or end is None:
            continue
        name = entry["source"]
        status = str(entry.get("status") or UNCHECKED)
        source = sources.get(name)
        is_file = source is not None and source.get("kind") == "file" and bool(source.get("location"))
        lines = _stored_lines(store, graph_id, name, start, end) if source is not None else []
        detail = str(entry.get("detail") or "")
        was_changed = is_file and source is not None and _changed_on_disk(source)
        shown.append(
            {
                "source": name,
                "line_start": start,
                "line_end": end,
                "label": citation_label(name, start, end),
                "quote": str(entry.get("quote") or ""),
                "status": status,
                "status_label": STATUS_LABELS.get(status, status.replace("_", " ")),
                "detail": detail,
                "changed": was_changed,
                "lines": lines[:MAX_LINES],
                "cut": max(0, len(lines) - MAX_LINES),
                "location": str(source["location"]) if is_file and source is not None else None,
            }
        )
    return shown


def findings_shown(
    store: Any,
    graph_id: str,
    raw: Any,
    sources: Mapping[str, Mapping[str, Any]],
    node_id: str | None = None,
) -> list[FindingShown]:
    """Stored findings (``{finding, confidence, citations, support, node_id}``) with their citations shown.

    ``node_id``: the node they all rest on (a track's findings: the track), else each finding's own.
    """
    return [
        {
            "finding": str(f.get("finding") or ""),
            "confidence": str(f.get("confidence") or ""),
            "support": _support(f.get("support")),
            "citations": cited_lines(store, graph_id, f.get("citations"), sources),
            "node_id": node_id or _support(f.get("node_id")),
        }
        for f in (raw if isinstance(raw, list) else [])
        if isinstance(f, Mapping) and f.get("finding")
    ]


def answer_evidence(
    store: Any,
    graph_id: str,
    answer: NodeRecord,
    question: NodeRecord | None,
    sources: Mapping[str, Mapping[str, Any]],
) -> AnswerEvidence:
    """One answer's citations and support."""
    meta = answer["metadata"]
    return {
        "node_id": answer["node_id"],
        "question_id": question["node_id"] if question else None,
        "question": question["text"] if question else "",
        "text": answer["text"],
        "support": _support(meta.get("support")),
        "citations": cited_lines(store, graph_id, meta.get("citations"), sources),
    }


def node_evidence(store: Any, graph_id: str, node: NodeRecord, children: list[NodeRecord]) -> NodeEvidence:
    """One node's evidence for the Inspector: its own citations, its answers', a track's findings."""
    sources = sources_of(store, graph_id)
    meta = node["metadata"]
    answers = {
        child["node_id"]: answer_evidence(store, graph_id, child, node, sources)
        for child in children
        if child["node_type"] == "answer"
    }
    return {
        "support": _support(meta.get("support")),
        "citations": cited_lines(store, graph_id, meta.get("citations"), sources),
        "answers": answers,
        "findings": findings_shown(store, graph_id, meta.get("findings"), sources, node["node_id"]),
        "track": track_name(meta),
    }


def evidence_of(store: Store, graph_id: str, *, cited: bool | None = None) -> Evidence:
    """The graph's evidence as the exported page and ``fractal-nb report`` show it.

    The nodes' metadata is read (one snapshot) only when some answer carries a
    support value or some question a track (``cited``: what the caller's
    ``get_question_items`` said, else read here), so a graph without evidence
    costs no more.
    """
    if cited is None:
        cited = store.carries_evidence(graph_id)
    snapshot = store.get_snapshot(graph_id) if cited else None
    metadata = snapshot["metadata"] if snapshot is not None else store.get_graph(graph_id)["metadata"]
    harvest = metadata.get("harvest")
    harvest = harvest if isinstance(harvest, Mapping) else {}
    kept, apart = (
        [dict(f) for f in _list(harvest.get(key)) if isinstance(f, Mapping)]
        for key in ("findings", "unsupported_findings")
    )
    # A harvest written before findings named their node (results/provenance.py) needs the nodes to name it.
    if snapshot is None and any(not isinstance(f.get("node_id"), str) for f in kept + apart):
        snapshot = store.get_snapshot(graph_id)
    graph_nodes: list[NodeRecord] = snapshot["nodes"] if snapshot is not None else []
    if snapshot is not None:
        provenance = Provenance(graph_nodes)
        kept, apart = provenance.attach(kept), provenance.attach(apart)
    sources = sources_of(store, graph_id)
    now = [n for n in graph_nodes if n.get("superseded_turn") is None]  # a later turn's replaced ones: gone
    answers = _answers(store, graph_id, now, {n["node_id"]: n for n in graph_nodes}, sources)
    tracks = [_track(store, graph_id, node, sources) for node in now if _named_track(node)]
    findings = findings_shown(store, graph_id, kept, sources)
    unsupported = [f for f in findings if f["support"] == Support.UNSUPPORTED]
    unsupported += findings_shown(store, graph_id, apart, sources)
    synthesis = harvest.get("synthesis_object")
    return {
        "answers": answers,
        "answer_support": dict(Counter(a["support"] for a in answers if a["support"])),
        "findings": [f for f in findings if f["support"] != Support.UNSUPPORTED],
        "unsupported_findings": unsupported,
        "tracks": tracks,
        "synthesis": dict(synthesis) if isinstance(synthesis, Mapping) else None,
    }


def _answers(
    store: Store,
    graph_id: str,
    nodes: list[NodeRecord],
    by_id: Mapping[str, NodeRecord],
    sources: Mapping[str, Mapping[str, Any]],
) -> list[AnswerEvidence]:
    """Each answer that cites or was judged, with its question (``by_id``: every node of the graph)."""
    return [
        answer_evidence(store, graph_id, node, by_id.get(node["parent_id"] or ""), sources)
        for node in nodes
        if node["node_type"] == "answer"
        and ("citations" in node["metadata"] or "support" in node["metadata"])
    ]


def _named_track(node: NodeRecord) -> bool:
    return node["node_type"] == "question" and track_name(node["metadata"]) is not None


def _track(
    store: Store, graph_id: str, node: NodeRecord, sources: Mapping[str, Mapping[str, Any]]
) -> TrackShown:
    """A track question as the faces show it: its name, focus, deliverable, status and findings."""
    meta = node["metadata"]
    track = track_of(meta) or {}
    return {
        "node_id": node["node_id"],
        "name": str(track["name"]),
        "focus": str(track.get("focus") or ""),
        "deliverable": str(track.get("deliverable") or ""),
        "status": node["status"],
        "findings": findings_shown(store, graph_id, meta.get("findings"), sources, node["node_id"]),
    }


def evidence_lines(evidence: Evidence) -> list[str]:
    """The evidence as Markdown lines (``fractal-nb report``), every model and source text escaped."""
    lines: list[str] = []
    counts = evidence["answer_support"]
    if counts:
        lines += ["## Evidence", "", "Answers: " + ", ".join(f"{n} {_said(k)}" for k, n in counts.items())]
        for answer in evidence["answers"]:
            if not answer["citations"] and answer["support"] != Support.UNSUPPORTED:
                continue
            lines.append(f"- \\[{_said(answer['support'])}\\] {_md(answer['question'] or answer['text'])}")
            lines += [f"    {c}" for c in _citation_lines(answer["citations"])]
    findings, unsupported = evidence["findings"], evidence["unsupported_findings"]
    if supported_count(findings) or unsupported:
        lines += ["", f"Findings: {supported_count(findings)} supported, {len(unsupported)} unsupported"]
        for heading, group in (("Findings with their citations", findings), ("Unsupported", unsupported)):
            if group:
                lines += ["", f"### {heading}"]
                for finding in group:
                    lines.append(f"- {_md(finding['finding'])} ({finding['confidence']})")
                    lines += [f"    {c}" for c in _citation_lines(finding["citations"])]
    if evidence["tracks"]:
        lines += ["", "### Tracks"]
        lines += [f"- {_md(t['name'])} ({t['status']}): {_md(t['focus'])}" for t in evidence["tracks"]]
    synthesis = evidence["synthesis"]
    if synthesis:
        lines += ["", "### Synthesis", "", f"Unified: {_md(str(synthesis.get('unified') or ''))}"]
        for nuance in nuances(synthesis):
            lines.append(f"- Nuance ({_md(', '.join(nuance['tracks']))}): {_md(nuance['text'])}")
        lines += [f"- Open question: {_md(str(q))}" for q in _list(synthesis.get("open_questions"))]
        why = _md(str(synthesis.get("justification") or ""))
        lines.append(f"Confidence: {_md(str(synthesis.get('confidence') or ''))}: {why}")
    return lines


def supported_count(findings: list[FindingShown]) -> int:
    """Findings the store found supported (a graph without sources has none: nothing could be cited)."""
    return sum(f["support"] == Support.SUPPORTED for f in findings)


def nuances(synthesis: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The synthesis object's nuances as ``{text, tracks}``, entries of another shape left out."""
    return [
        {"text": str(n.get("text") or ""), "tracks": [str(t) for t in _list(n.get("tracks"))]}
        for n in _list(synthesis.get("nuances"))
        if isinstance(n, Mapping)
    ]


def _citation_lines(citations: list[CitedLines]) -> list[str]:
    out = []
    for c in citations:
        detail = f" ({_md(c['detail'])})" if c["detail"] else ""
        if c["changed"]:
            detail += f" ({CHANGED})"
        out.append(f'{_md(c["label"])} \\[{c["status_label"]}\\]{detail}: "{_md(c["quote"])}"')
    return out


def _said(support: str | None) -> str:
    return SUPPORT_LABELS.get(support or "", support or "not judged")


def _stored_lines(store: Any, graph_id: str, source: str, start: int, end: int) -> list[str]:
    """The source's stored lines ``start``..``end`` (``store.read_source``), [] when it cannot give them."""
    read = getattr(store, "read_source", None)
    if read is None:
        return []
    try:
        return [str(line) for line in read(graph_id, source, start, end)["lines"]]
    except FractalError:  # lines the source does not have: the citation's status says so
        return []


def _changed_on_disk(source: Mapping[str, Any]) -> bool:
    """Whether a file source's file no longer hashes as the text added (gone or unreadable counts)."""
    location = str(source["location"])
    try:
        stat = os.stat(location)
    except OSError:
        return True
    return _hash_of(location, stat.st_mtime_ns, stat.st_size) != source.get("content_hash")


@functools.lru_cache(maxsize=256)
def _hash_of(location: str, _mtime_ns: int, _size: int) -> str | None:
    """``store.citations.file_hash``, once per version of a file (its time and size are the key)."""
    return file_hash(location)


def _line(value: Any) -> int | None:
    """A line number as stored (an int, or digits an outside client wrote as text), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _support(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _md(text: str) -> str:
    """Model or source text on one Markdown line (``text.markdown_escape``)."""
    return markdown_escape(text)
