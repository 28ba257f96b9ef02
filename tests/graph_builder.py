"""Synthetic graphs of a chosen size, built through the store's public writes (tests and bench)."""

from __future__ import annotations

import random
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


_TOPICS = [
    "fares",
    "ridership",
    "the depot",
    "road space",
    "noise",
    "land values",
    "bus routes",
    "the budget",
    "construction",
    "maintenance",
    "emissions",
    "parking",
    "shops",
    "commuters",
    "the council",
    "tracks",
]
_ASKS = [
    "What does {a} do to {b}?",
    "How would {a} change {b}?",
    "Who decides on {a} and {b}?",
    "Why does {a} matter for {b}?",
    "When would {a} outweigh {b}?",
    "Which data link {a} to {b}?",
]


def run_shaped_graph(
    store: GraphStore, questions: int, *, seeds: int = 12, links: int = 60, seed: int = 0
) -> str:
    """A graph shaped like a deep run of ``questions`` questions: ``seeds`` seed questions, uneven
    branches down to depth 5, sentence-like texts, some questions left open and ``links``
    convergences and contradictions between answers of different branches."""
    rng = random.Random(seed)
    g = store.create_graph("Should a mid-sized city build a tram line?", "deep", "autonomous")
    gid = g["graph_id"]
    asked: set[str] = set()

    def texts(n: int) -> list[str]:
        out: list[str] = []
        while len(out) < n:
            a, b = rng.sample(_TOPICS, 2)
            text = rng.choice(_ASKS).format(a=a, b=b) + f" ({rng.randrange(10_000)})"
            if text not in asked:
                asked.add(text)
                out.append(text)
        return out

    answers: list[str] = []
    with store.batch():
        first = store.add_answer(gid, g["root_node_id"], "The plan.", sub_questions=texts(seeds))
        frontier = [(q["node_id"], 1) for q in first["sub_questions"]]
        count = 1 + seeds
        while count < questions and frontier:
            node, depth = frontier.pop(rng.randrange(len(frontier)))
            want = min(questions - count, rng.choice([0, 1, 2, 2, 3, 3, 4])) if depth < 5 else 0
            written = store.add_answer(gid, node, f"An answer at depth {depth}.", sub_questions=texts(want))
            answers.append(written["answer"]["node_id"])
            frontier += [(q["node_id"], depth + 1) for q in written["sub_questions"]]
            count += len(written["sub_questions"])
        for _ in range(links):
            one, other = rng.sample(answers, 2)
            kind = rng.choice(["convergence", "contradiction"])
            store.update_node(gid, one, {f"{kind}_with": [other]})
    return gid
