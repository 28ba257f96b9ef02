"""Questions are deduplicated graph-wide, not only under one parent (docs/models.md, "No call spent").

Covers: store/answer.py.
"""

from __future__ import annotations

from fractal_nb import GraphStore
from tests.conftest import Tree


def questions(tree: Tree) -> list[str]:
    nodes = tree.store.get_snapshot(tree.graph_id)["nodes"]
    return [n["text"] for n in nodes if n["node_type"] == "question"]


def test_a_sub_question_asked_in_another_branch_is_not_asked_again(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    first = store.submit_answer(
        g, tree.seeds[0], "Jobs draw people.", sub_questions=["Do wages rise with city size?"]
    )
    [asked] = first["sub_questions"]
    second = store.submit_answer(
        g,
        tree.seeds[1],
        "Housing limits growth.",
        sub_questions=[
            "  do WAGES rise with   city size ",
            "Does zoning cap growth?",
            "Does zoning cap growth?!",  # twice in this very answer
            "What makes a city grow",  # the root itself
            "seed question 2.",  # a sibling seed question
        ],
    )
    [fresh] = second["sub_questions"]
    assert tree.node(fresh["node_id"])["text"] == "Does zoning cap growth?"
    assert second["repeated"] == [
        {"text": "  do WAGES rise with   city size ", "asked_at": asked["node_id"]},
        {"text": "Does zoning cap growth?!", "asked_at": None},
        {"text": "What makes a city grow", "asked_at": tree.root},
        {"text": "seed question 2.", "asked_at": tree.seeds[2]},
    ]
    answer = tree.node(second["answer"]["node_id"])
    assert answer["metadata"]["repeated_questions"] == second["repeated"]
    assert sorted(questions(tree)).count("Do wages rise with city size?") == 1
    assert tree.status(tree.seeds[1]) == "answered"  # one fresh sub-question: not a leaf


def test_an_answer_whose_sub_questions_are_all_repeats_is_a_leaf(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    written = store.submit_answer(
        g, tree.seeds[0], "Jobs draw people.", sub_questions=["Seed question 0", "SEED QUESTION 1?"]
    )
    assert written["sub_questions"] == [] and len(written["repeated"]) == 2
    node = tree.node(tree.seeds[0])  # a leaf that only rephrased the graph: saturated, its answer kept
    assert (node["status"], node["status_reason"]) == ("saturated", "semantic_overlap")
    assert node["metadata"]["synthesis"] == "Jobs draw people."
    assert questions(tree).count("Seed question 1") == 1


def test_other_graphs_do_not_count(fresh_store: GraphStore, tree: Tree) -> None:
    other = fresh_store.create_graph("Why do rivers meander?", "explore", "autonomous")
    answer = fresh_store.add_node(other["graph_id"], other["root_node_id"], "answer", "Flow.")["node_id"]
    written = fresh_store.add_node(other["graph_id"], answer, "question", "Seed question 0")
    assert written["status"] == "open"
    assert tree.status(tree.seeds[0]) == "open"
    repeated = fresh_store.submit_answer(
        tree.graph_id, tree.seeds[1], "x y z", sub_questions=["Why do rivers meander?"]
    )["repeated"]
    assert repeated == []
