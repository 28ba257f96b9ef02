"""Synthetic graphs of a chosen size, built through the store's public writes (tests and bench)."""

from __future__ import annotations

import itertools
import random
from collections import deque
from typing import Any

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


WORDS = ["fares", "ridership", "depot", "noise", "parking", "shops", "commuters", "council", "budget", "bus"]


def filler(i: int) -> str:
    """The ``i``-th filler answer: two of :data:`WORDS`, in a sentence of its own."""
    a, b = WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
    return f"Answer {i}: {a} weighs on {b} more than the timetable does."


def filler_question(i: int) -> str:
    """The ``i``-th filler question: it shares words with some filler answers, as a graph's do."""
    a, b = WORDS[(i * 3) % len(WORDS)], WORDS[(i * 5 + 1) % len(WORDS)]
    return f"Part {i}: how do {a} bear on {b}?"


class Branches:
    """``count`` branches under a root, grown breadth first: ``fanout`` questions an answer above ``levels``.

    Each branch holds 157 answers at ``levels=3``, 341 at ``levels=5, fanout=4``. The texts
    (:func:`filler`, :func:`filler_question`) share words with each other, and none with a question
    about a harbour: the tests plant one that does (tests/store/test_answer_index.py,
    bench/context_bench.py).
    """

    def __init__(self, store: GraphStore, count: int, *, levels: int = 3, fanout: int = 12) -> None:
        self.store = store
        self.levels, self.fanout = levels, fanout
        g = store.create_graph("What sets a port city's growth?", "deep", "autonomous")
        self.graph_id = g["graph_id"]
        written = store.add_answer(
            self.graph_id,
            g["root_node_id"],
            "The root's plan.",
            sub_questions=[f"Branch {b}?" for b in range(count)],
        )
        self.seeds = [q["node_id"] for q in written["sub_questions"]]
        self.open = [deque([(seed, 1)]) for seed in self.seeds]
        self.nodes = (
            2 + count
        )  # the root, its answer, the seeds; each answer adds itself and its sub-questions
        self.numbers = itertools.count()
        self.asked = ""

    def grow(
        self, branch: int, answers: int, *, first: str | None = None, ask: str | None = None
    ) -> list[str]:
        """``answers`` answers in the branch, their ids in order (the first's text ``first`` if given).

        ``ask``: then one more answer, whose only sub-question ``ask`` is left open (:attr:`asked`).
        """
        written = []
        with self.store.batch():
            for i in range(answers):
                text = first if (i == 0 and first) else filler(next(self.numbers))
                written.append(self._answer(branch, text)["answer"]["node_id"])
            if ask:
                self.asked = self._answer(branch, filler(next(self.numbers)), [ask])["sub_questions"][0][
                    "node_id"
                ]
        return written

    def _answer(self, branch: int, text: str, subs: list[str] | None = None) -> dict[str, Any]:
        """Answer the branch's next open question, with :attr:`fanout` sub-questions above :attr:`levels`."""
        question, depth = self.open[branch].popleft()
        grows = subs is None and depth < self.levels
        if grows:
            subs = [filler_question(next(self.numbers)) for _ in range(self.fanout)]
        written = dict(self.store.add_answer(self.graph_id, question, text, sub_questions=subs))
        self.nodes += 1 + len(subs or [])
        if grows:
            self.open[branch].extend((q["node_id"], depth + 1) for q in written["sub_questions"])
        return written

    def candidates(self, question: str, k: int = 8) -> list[dict[str, Any]]:
        return list(self.store.get_context(self.graph_id, question, candidates=k)["candidates"])

    def others(self, question: str) -> list[str]:
        """Ids of the candidates from other branches, in their order."""
        return [c["node_id"] for c in self.candidates(question) if c["relation"] == "other_branch"]
