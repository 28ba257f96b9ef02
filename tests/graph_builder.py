"""Synthetic graphs of a chosen size, built through the store's public writes (tests and bench)."""

from __future__ import annotations

from collections import deque

from fractal_nb import GraphStore


def grow_graph(store: GraphStore, n_nodes: int, *, fanout: int = 8, seed: str = "How big can it get?") -> str:
    """A 'deep' graph of at least ``n_nodes`` nodes, breadth first: answer + ``fanout`` sub-questions each."""
    g = store.create_graph(seed, "deep", "autonomous")
    gid = g["graph_id"]
    questions: deque[str] = deque([g["root_node_id"]])
    count = 1
    with store.batch():
        while count < n_nodes:
            question = questions.popleft()
            result = store.add_answer(
                gid,
                question,
                f"answer to question {count}",
                sub_questions=[f"sub-question {count}.{i}" for i in range(fanout)],
            )
            questions.extend(q["node_id"] for q in result["sub_questions"])
            count += 1 + fanout
    return gid
