"""Evidence before the answer, and what the harvest keeps.

See docs/architecture/store.md, "Sources and citations".

With sources (a graph that has any), a worker retrieves the passages closest to
its question (``store.search_sources``) before it answers; the answer prompt
shows them, each line numbered, and asks for citations ``{source, line_start,
line_end, quote}``. The store checks each citation when the answer is written
and sets the answer's ``support``. The harvest prompt shows the chain's verified
citations so the model can carry them to its findings, which the store checks
again (``record_harvest``). Without sources every prompt is as it was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..llm.protocol import Message
from ..llm.schemas import MAX_CITATIONS, Citation
from ..prompts import render
from ..store import WorkerStore
from ..store.records import ChunkRecord, NodeRecord, SourceHit
from ..text import clip, one_line
from ..vocabulary import CitationStatus

EVIDENCE_K = 5
"""Passages retrieved for each question (the prompt's evidence is bounded by :data:`EVIDENCE_CHARS` too)."""
EVIDENCE_CHARS = 6000
"""The most characters of source lines one answer prompt shows: passages past it are left out."""
LINE_CHARS = 400
"""A source line longer than this is shown cut (a quote of the cut text no longer checks)."""
CHAIN_CITATIONS = 3
"""Verified citations shown per question of the harvest's chain."""
QUOTE_CHARS = 400
"""A citation's quote as the harvest prompt shows it (whitespace collapsed)."""


def has_sources(store: WorkerStore, graph_id: str) -> bool:
    """Whether the graph has sources: then answers gather evidence and findings must cite it."""
    return bool(store.list_sources(graph_id))


def gather(store: WorkerStore, graph_id: str, question: str) -> list[SourceHit]:
    """The passages of the graph's sources closest to ``question``, best first."""
    return store.search_sources(graph_id, question, k=EVIDENCE_K)


def section(hits: Sequence[ChunkRecord]) -> str:
    r"""The answer prompt's evidence section (``prompts/evidence.txt``), opening with a blank line.

    >>> hit = {"source": "notes/a.md", "source_id": "0a1b", "line_start": 7, "line_end": 8,
    ...        "text": "alpha\nbeta"}
    >>> print("\n".join(section([hit]).splitlines()[7:10]))
    [notes/a.md:L7-L8]
    7: alpha
    8: beta
    """
    shown = passages(hits) or "(no passage of the sources matches this question)"
    return "\n\n" + render("evidence", passages=shown, most=MAX_CITATIONS)


def passages(hits: Sequence[ChunkRecord]) -> str:
    r"""The passages fenced as quoted data: each as ``[source:L12-L40]`` then its numbered lines; "" for none.

    The lines shown stay within :data:`EVIDENCE_CHARS`: a passage the bound cuts is
    shown up to its last whole line (its head names the lines shown), and the
    passages after it are left out. The answer's evidence section and a track's
    synthesis (engine/strategies/tracks.py) show evidence this way.

    Source text is data, never the prompt's structure (docs/architecture/engine.md,
    "Evidence in the engine"): every line of it follows its number, with any line
    break inside it a space (``text.one_line``), so none opens a line of its own;
    a source whose name would break its header line is headed by its id (a
    citation may name either); and the passages sit between two fence lines
    whose mark is a digest of what they hold, which no text can contain.

    >>> print(passages([{"source": "a.md", "source_id": "0a1b", "line_start": 3, "line_end": 3,
    ...                  "text": "gamma"}]))
    <evidence e6f9467bba90>
    [a.md:L3-L3]
    3: gamma
    </evidence e6f9467bba90>
    """
    shown: list[str] = []
    left = EVIDENCE_CHARS
    for hit in hits:
        lines: list[str] = []
        for number, line in enumerate(hit["text"].split("\n"), start=hit["line_start"]):
            numbered = f"{number}: {_cut(one_line(line))}"
            if len(numbered) + 1 > left:
                break
            lines.append(numbered)
            left -= len(numbered) + 1
        if not lines:
            break
        last = hit["line_start"] + len(lines) - 1
        name = hit["source"] if one_line(hit["source"]) == hit["source"] else hit["source_id"]
        shown.append("\n".join([f"[{name}:L{hit['line_start']}-L{last}]", *lines]))
        if last < hit["line_end"]:  # the bound cut it
            break
    return fenced("\n\n".join(shown))


def fenced(body: str) -> str:
    r"""``body`` between ``<evidence MARK>`` and ``</evidence MARK>`` lines; "" for an empty body.

    The mark is the first 12 hex of the body's sha256: the same evidence gives the
    same prompt (the completion cache and replays depend on it), and a text cannot
    close its own fence, since it would have to hold its own digest.

    >>> print(fenced("1: x"))
    <evidence e34113172bf7>
    1: x
    </evidence e34113172bf7>
    """
    if not body:
        return ""
    mark = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"<evidence {mark}>\n{body}\n</evidence {mark}>"


def raw(citations: Iterable[Citation]) -> list[dict[str, Any]]:
    """Citations as the store's write paths take them (it checks each and adds its ``status``)."""
    return [c.model_dump(mode="json") for c in citations]


def verified(citations: Iterable[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The citations the store's check verified, in order."""
    return [c for c in citations or [] if c.get("status") == CitationStatus.VERIFIED]


def chain_citations(nodes: Sequence[NodeRecord]) -> dict[str, list[Mapping[str, Any]]]:
    """Per question id, the verified citations of its answers (at most :data:`CHAIN_CITATIONS`), distinct."""
    cited: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        if node["node_type"] != "answer" or node["parent_id"] is None:
            continue
        kept = cited.setdefault(node["parent_id"], [])
        for citation in verified(node["metadata"].get("citations")):
            if len(kept) < CHAIN_CITATIONS and _span(citation) not in {_span(c) for c in kept}:
                kept.append(citation)
    return cited


def cites_lines(citations: Sequence[Mapping[str, Any]], indent: str) -> str:
    """The harvest chain's lines for a question's verified citations, each on its own line.

    >>> print(cites_lines([{"source": "a.md", "line_start": 2, "line_end": 3, "quote": "x  y"}], "  "))
    <BLANKLINE>
      cites [a.md:L2-L3]: "x y"
    """
    return "".join(
        f"\n{indent}cites [{one_line(str(c['source']))}:L{c['line_start']}-L{c['line_end']}]: "
        f'"{clip(str(c["quote"]), QUOTE_CHARS)}"'
        for c in citations
    )


def with_rule(messages: list[Message], *, sources: bool) -> list[Message]:
    """The harvest's messages, its prompt ending with the rule to cite (``prompts/harvest_citing.txt``).

    Without sources, ``messages`` as they are.
    """
    if not sources:
        return messages
    *head, last = messages
    rule = render("harvest_citing", most=MAX_CITATIONS)
    return [*head, Message(role=last["role"], content=f"{last['content']}\n\n{rule}")]


def _span(citation: Mapping[str, Any]) -> tuple[str, int, int]:
    return str(citation["source"]), int(citation["line_start"]), int(citation["line_end"])


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
