"""A small graph with every kind of failure the view shows, built through the store's own calls.

The root's first seed question failed three times (status ``error``, still
recoverable); the second failed once and a harvest saturated it as ``error``;
the third was synthesized from its sub-question, but only by joining (the model
could not write its synthesis: a weak synthesis). Model text is hostile, to
show it stays text.
"""

from __future__ import annotations

from typing import TypedDict

from fractal_nb import GraphStore

HOSTILE = '<img src=x onerror="window.__pwned=1">'
RATE_LIMIT = f"RateLimitError: 429 Too Many Requests {HOSTILE}"
TIMEOUT = "APITimeoutError: the model did not answer within 60 s"


class FailingGraph(TypedDict):
    graph_id: str
    root: str
    failed: str  # status error, last_error RATE_LIMIT
    saturated_failed: str  # saturated (error), last_error TIMEOUT
    weak: str  # synthesized by joining (metadata synthesis_failed)


def failing_graph(store: GraphStore) -> FailingGraph:
    g = store.create_graph(f"Why do bridges fail? {HOSTILE}", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    seeds = store.add_answer(
        gid,
        root,
        f"Loads, materials and upkeep. {HOSTILE}",
        sub_questions=["Which loads matter most?", "Which materials age worst?", "Who pays for upkeep?"],
    )["sub_questions"]
    failed, saturated_failed, weak = (q["node_id"] for q in seeds)
    for _ in range(3):
        assert store.claim_work(gid, "w-1", holder=None)["node_id"] == failed
        store.release_claim(gid, failed, "w-1", RATE_LIMIT)
    assert store.claim_work(gid, "w-1", holder=None)["node_id"] == saturated_failed
    store.release_claim(gid, saturated_failed, "w-1", TIMEOUT)
    store.mark_saturated(gid, saturated_failed, "error")
    [below] = store.add_answer(gid, weak, "Owners and towns.", sub_questions=["Do towns pay?"])[
        "sub_questions"
    ]
    store.add_answer(gid, below["node_id"], "Mostly.")
    store.synthesize_node(gid, below["node_id"], "Towns pay most of it.")
    store.update_node(gid, weak, {"synthesis_failed": True})
    store.synthesize_node(gid, weak, "[model synthesis failed; sub-findings joined] Towns pay most of it.")
    return {
        "graph_id": gid,
        "root": root,
        "failed": failed,
        "saturated_failed": saturated_failed,
        "weak": weak,
    }
