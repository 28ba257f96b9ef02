"""A graph with citations of every status, tracks and a synthesis object, written through the store.

The root's answer cites a real file four ways: right (verified), with a quote the
lines do not hold (misquoted, and hostile), past the file's end (no such lines),
and a source the graph does not have (no such source, its name hostile). A second
answer cites nothing while the graph has sources: unsupported. Two seed questions
are tracks; the harvest holds a supported and an unsupported finding and the
synthesis object. The file is the graph's source and every citation goes through
the store's check (docs/architecture/store.md, "Sources and citations"): the statuses
the faces show are the ones the store gave.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from fractal_nb import GraphStore

HOSTILE = '<img src=x onerror="window.__pwned=1">'
NOTES = "notes/bridges.md"
LINES = [
    "# Why bridges fail",
    "Most failures start at the bearings,",
    "where water collects and steel rusts.",
    "Overloads matter less than upkeep.",
]
VERIFIED_QUOTE = "Most failures start at the bearings, where water collects"
MISQUOTE = f"Bridges never fail {HOSTILE}"
BAD_SOURCE = f"{HOSTILE}.md"


class CitedGraph(TypedDict):
    graph_id: str
    root: str
    cited_answer: str  # four citations, one of each status
    bare_question: str  # its answer cites nothing: unsupported
    bare_answer: str
    track: str  # a track question with a cited finding
    file: Path  # the cited file on disk


def citation(source: str, start: int, end: int, quote: str) -> dict[str, Any]:
    """A citation as a writer passes it; the store checks it and adds ``status`` (and ``detail``)."""
    return {"source": source, "line_start": start, "line_end": end, "quote": quote}


VERIFIED = citation(NOTES, 2, 3, VERIFIED_QUOTE)
CITATIONS = [
    VERIFIED,
    citation(NOTES, 4, 4, MISQUOTE),
    citation(NOTES, 90, 95, "anything at all here"),
    citation(BAD_SOURCE, 1, 1, "anything at all here"),
]
STATUSES = ["verified", "misquoted", "no_such_lines", "no_such_source"]


def cited_graph(store: GraphStore, root_dir: Path) -> CitedGraph:
    """The graph, its cited file written under ``root_dir`` and added as the graph's source."""
    file = root_dir / NOTES
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    g = store.create_graph(f"Why do bridges fail? {HOSTILE}", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    store.add_sources(
        gid,
        [{"name": NOTES, "kind": "file", "location": str(file), "text": file.read_text(encoding="utf-8")}],
    )
    written = store.add_answer(
        gid,
        root,
        f"Bearings and upkeep. {HOSTILE}",
        metadata={"citations": CITATIONS},
        sub_questions=[
            {
                "text": "Which loads matter most?",
                "metadata": {"track": {"name": f"Loads {HOSTILE}", "focus": "traffic", "deliverable": "x"}},
            },
            {"text": "Who pays for upkeep?", "metadata": {"track": {"name": "Upkeep", "focus": "money"}}},
        ],
    )
    track, bare = (q["node_id"] for q in written["sub_questions"])
    bare_answer = store.add_answer(gid, bare, "Towns, mostly.")  # no citations while the graph has sources
    finding = {"finding": "Bearings fail first.", "confidence": "high", "citations": [VERIFIED]}
    store.update_node(
        gid,
        track,
        {
            "findings": [
                {**finding, "citations": store.check_citations(gid, [VERIFIED]), "support": "supported"}
            ]
        },
    )
    store.record_harvest(
        gid,
        {
            "summary": "Bridges fail at the bearings.",
            "findings": [
                finding,
                {
                    "finding": f"Bridges never fail. {HOSTILE}",
                    "confidence": "low",
                    "citations": [CITATIONS[1]],
                },
            ],
            "gaps": [],
            "synthesis_object": {
                "unified": "Upkeep decides, not loads.",
                "nuances": [{"text": f"Loads matter on old spans {HOSTILE}", "tracks": ["Loads", "Upkeep"]}],
                "open_questions": ["Who inspects the bearings?"],
                "confidence": "medium",
                "justification": "the tracks differ on old spans",
            },
        },
    )
    return {
        "graph_id": gid,
        "root": root,
        "cited_answer": written["answer"]["node_id"],
        "bare_question": bare,
        "bare_answer": bare_answer["answer"]["node_id"],
        "track": track,
        "file": file,
    }
