"""A graph with citations of every status, tracks and a synthesis object, written through the store.

The root's answer cites a real file four ways: right (verified), with a quote the
lines do not hold (misquoted, and hostile), past the file's end (no such lines),
and a source the graph does not have (no such source, its name hostile). A second
answer cites nothing while the graph has sources: unsupported. Two seed questions
are tracks; the harvest holds a supported and an unsupported finding and the
synthesis object. The statuses are the ones the store's check gives these
citations (docs/architecture.md, "Sources and citations"); they are written as
stored records here, so the faces can be tested on the stored format itself.
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


def citation(source: str, start: int, end: int, quote: str, status: str, detail: str = "") -> dict[str, Any]:
    record: dict[str, Any] = {
        "source": source,
        "line_start": start,
        "line_end": end,
        "quote": quote,
        "status": status,
    }
    if detail:
        record["detail"] = detail
    return record


CITATIONS = [
    citation(NOTES, 2, 3, VERIFIED_QUOTE, "verified"),
    citation(NOTES, 4, 4, MISQUOTE, "misquoted", "the quote is not in lines 4-4"),
    citation(NOTES, 90, 95, "anything", "no_such_lines", f"{NOTES} has 4 lines"),
    citation(BAD_SOURCE, 1, 1, "anything", "no_such_source", "the graph has no source of that name"),
]


def cited_graph(store: GraphStore, root_dir: Path) -> CitedGraph:
    """The graph, its cited file written under ``root_dir``."""
    file = root_dir / NOTES
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    g = store.create_graph(f"Why do bridges fail? {HOSTILE}", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    written = store.add_answer(
        gid,
        root,
        f"Bearings and upkeep. {HOSTILE}",
        metadata={"citations": CITATIONS, "support": "unsupported"},
        sub_questions=[
            {
                "text": "Which loads matter most?",
                "metadata": {"track": {"name": f"Loads {HOSTILE}", "focus": "traffic", "deliverable": "x"}},
            },
            {"text": "Who pays for upkeep?", "metadata": {"track": {"name": "Upkeep", "focus": "money"}}},
        ],
    )
    track, bare = (q["node_id"] for q in written["sub_questions"])
    bare_answer = store.add_answer(
        gid, bare, "Towns, mostly.", metadata={"citations": [], "support": "unsupported"}
    )
    store.update_node(
        gid,
        track,
        {
            "findings": [
                {
                    "finding": "Bearings fail first.",
                    "confidence": "high",
                    "citations": [CITATIONS[0]],
                    "support": "supported",
                }
            ]
        },
    )
    store.update_graph_metadata(
        gid,
        {
            "harvest": {
                "summary": "Bridges fail at the bearings.",
                "findings": [
                    {
                        "finding": "Bearings fail first.",
                        "confidence": "high",
                        "citations": [CITATIONS[0]],
                        "support": "supported",
                    },
                    {
                        "finding": f"Bridges never fail. {HOSTILE}",
                        "confidence": "low",
                        "citations": [CITATIONS[1]],
                        "support": "unsupported",
                    },
                ],
                "gaps": [],
                "synthesis_object": {
                    "unified": "Upkeep decides, not loads.",
                    "nuances": [
                        {"text": f"Loads matter on old spans {HOSTILE}", "tracks": ["Loads", "Upkeep"]}
                    ],
                    "open_questions": ["Who inspects the bearings?"],
                    "confidence": "medium",
                    "justification": "the tracks differ on old spans",
                },
            }
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
