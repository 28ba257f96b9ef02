"""The whole graph informs each answer: connect's candidates and the answer's view of other branches.

Issue 42, point 3: candidates came from the 200 most recent answers, so an answer
written early in the first branch was never offered to a question of the last.
They now come from the whole graph by relevance (BM25 over every answer), the
index built again only as the graph grows (docs/architecture/engine.md, "Context
from the whole graph").

Covers: store/answer_index.py, retrieval.py.
"""

from __future__ import annotations

from fractal_nb import GraphStore
from fractal_nb.store.answer_index import REBUILD_MIN
from tests.conftest import Backend
from tests.graph_builder import Branches, filler

PLANTED = "Dredging the harbour channel every spring sets how much freight the port can take."
ASKED = "How does the harbour dredging schedule limit freight?"


def test_a_convergence_between_the_first_and_the_last_branch_is_offered(fresh_store: GraphStore) -> None:
    graph = Branches(fresh_store, 12)
    planted = graph.grow(0, 4, first=PLANTED)[0]
    for branch in range(1, 11):  # 300 answers after it: past the old pool of the 200 most recent
        graph.grow(branch, 30)
    graph.grow(11, 3, ask=ASKED)
    # The most related of all, however old; the others share no word with the question.
    assert graph.candidates(graph.asked) == [
        {"node_id": planted, "text": PLANTED, "relation": "other_branch", "depth": 1}
    ]


def test_its_own_branch_is_left_out_and_its_siblings_come_first(fresh_store: GraphStore) -> None:
    store, graph = fresh_store, Branches(fresh_store, 3)
    g = graph.graph_id
    planted = graph.grow(0, 1, first=PLANTED)[0]
    deep, asked = (
        q["node_id"]
        for q in store.add_answer(g, graph.seeds[1], "Two ways in.", sub_questions=["Deep one?", ASKED])[
            "sub_questions"
        ]
    )
    deeper = store.add_answer(g, deep, "Dredging freight sibling answer.", sub_questions=["Deeper?"])
    cousin = store.add_answer(
        g, deeper["sub_questions"][0]["node_id"], "Harbour dredging limits freight here."
    )
    offered = {c["node_id"]: c["relation"] for c in graph.candidates(asked)}
    assert offered == {deeper["answer"]["node_id"]: "sibling", planted: "other_branch"}
    assert cousin["answer"]["node_id"] not in offered  # its own branch, not a sibling: not a convergence


def test_siblings_take_half_the_candidates_at_most(fresh_store: GraphStore) -> None:
    store, graph = fresh_store, Branches(fresh_store, 2)
    others = graph.grow(0, 6, first=PLANTED)
    below = store.add_answer(
        graph.graph_id,
        graph.seeds[1],
        "Eleven ways in.",
        sub_questions=[ASKED] + [f"Sibling {i}?" for i in range(10)],
    )["sub_questions"]
    siblings = [
        store.add_answer(graph.graph_id, q["node_id"], filler(i))["answer"]["node_id"]
        for i, q in enumerate(below[1:])
    ]
    offered = graph.candidates(below[0]["node_id"], k=8)
    assert [c["relation"] for c in offered] == ["sibling"] * 4 + ["other_branch"]
    assert {c["node_id"] for c in offered[:4]} <= set(siblings) and offered[4]["node_id"] == others[0]


def test_answers_written_after_the_index_was_built_are_found_and_the_index_catches_up(
    fresh_store: GraphStore,
) -> None:
    graph = Branches(fresh_store, 3)
    graph.grow(0, 5)
    graph.grow(2, 1, ask=ASKED)
    assert PLANTED not in {c["text"] for c in graph.candidates(graph.asked)}
    planted = graph.grow(1, 1, first=PLANTED)[0]  # after the first read: in the tail
    assert graph.others(graph.asked)[0] == planted
    graph.grow(0, REBUILD_MIN + 10)  # the tail passes the rebuild's mark: the index takes them all
    assert graph.others(graph.asked)[0] == planted
    indexed = fresh_store._context._answers._graphs[graph.graph_id].index  # type: ignore[attr-defined]
    assert len(indexed) >= REBUILD_MIN + 10


def test_an_answer_a_later_turn_superseded_is_never_offered(fresh_store: GraphStore) -> None:
    graph = Branches(fresh_store, 3)
    planted = graph.grow(0, 2, first=PLANTED)[0]
    graph.grow(2, 1, ask=ASKED)
    assert graph.others(graph.asked)[0] == planted
    fresh_store.redecompose(graph.graph_id, graph.seeds[0], "Look at money.")
    assert planted not in graph.others(graph.asked)


def test_a_root_question_has_no_other_branch(fresh_store: GraphStore) -> None:
    graph = Branches(fresh_store, 2)
    graph.grow(0, 3, first=PLANTED)
    root = fresh_store.get_graph(graph.graph_id)["root_node_id"]
    assert graph.candidates(root) == []


def test_stores_that_read_at_different_times_offer_the_same_answers(backend: Backend) -> None:
    """The index's marks depend on the count of answers alone: when a store read them does not matter."""
    with backend.open(backend.lasting) as early, backend.open(backend.lasting) as late:
        graph = Branches(early, 4)
        graph.grow(3, 1, ask="How do fares bear on parking near the harbour?")  # many answers share a word
        graph.grow(0, 1, first=PLANTED)
        seen = []
        for round_ in range(8):  # past the index's first marks (64, 72, 81, 91): read after each
            graph.grow(round_ % 3, 12)
            seen.append(graph.candidates(graph.asked))
        assert late.get_context(graph.graph_id, graph.asked)["candidates"] == seen[-1]
        assert len({c["node_id"] for view in seen for c in view}) > 8  # the pool moved as the graph grew
        claimed = early.claim_work(graph.graph_id, "w1", with_context=True)
        assert claimed["context"] == early.get_context(graph.graph_id, claimed["node_id"])
