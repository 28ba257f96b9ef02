"""Boundary questions as seed 000 places them, and the syntheses they reopen.

Covers: store/answer.py.
"""

from __future__ import annotations

import pytest

from fractal_nb import InvalidInputError
from tests.conftest import Tree


def finish_branch(tree: Tree, seed_index: int, text: str) -> str:
    """Answer a seed question as a leaf (synthesized at once); its answer's id."""
    written = tree.store.submit_answer(tree.graph_id, tree.seeds[seed_index], text)
    assert written["status"] == "synthesized"
    return str(written["answer"]["node_id"])


def test_a_question_under_a_synthesized_question_reopens_it_and_its_ancestors(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    for i in range(3):
        finish_branch(tree, i, f"Answer {i}.")
    assert store.get_ready_to_synthesize(g)["count"] == 1
    store.synthesize_node(g, tree.root, "The root's synthesis.")
    assert tree.status(tree.root) == "synthesized"
    answer = tree.node(tree.seeds[0])  # its question, then its answer
    answer_id = next(n["node_id"] for n in store.get_snapshot(g)["nodes"] if n["parent_id"] == tree.seeds[0])
    added = tree.ask(answer_id, "What do the two branches share?")
    assert tree.status(added) == "open"
    for reopened in (tree.seeds[0], tree.root):
        node = tree.node(reopened)
        assert node["status"] == "answered" and "synthesis" not in node["metadata"]
    assert tree.status(tree.seeds[1]) == "synthesized"  # a sibling keeps its synthesis
    events = [e for e in store.get_events(g)["events"] if e["kind"] == "reopened"]
    assert [e["node_id"] for e in events] == [tree.seeds[0], tree.root]
    assert events[0]["payload"]["synthesis"] == answer["metadata"]["synthesis"]
    assert events[1]["payload"]["synthesis"] == "The root's synthesis."
    # The cascade runs again once the new question is done.
    store.submit_answer(g, added, "They share land prices.")
    assert [n["node_id"] for n in store.get_ready_to_synthesize(g)["ready_nodes"]] == [tree.seeds[0]]


def test_a_boundary_question_hangs_under_the_shallower_answer_with_seed_000s_metadata(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    shallow = finish_branch(tree, 0, "Jobs drive growth.")
    deep_q = store.submit_answer(
        g, tree.seeds[1], "It depends on wages.", sub_questions=["Do wages follow jobs?"]
    )["sub_questions"][0]["node_id"]
    written = store.submit_answer(
        g,
        deep_q,
        "Wages follow jobs.",
        boundary={"text": "What does the convergence on jobs imply?", "converging_with": shallow},
    )
    boundary = tree.node(written["boundary"])
    new_answer = written["answer"]["node_id"]
    assert boundary["parent_id"] == shallow and boundary["depth"] == 2
    assert boundary["metadata"] == {"boundary": True, "converging_nodes": [new_answer, shallow]}
    assert tree.status(tree.seeds[0]) == "answered"  # its synthesis reopened
    assert written["status"] == "synthesized"  # the new answer is a leaf all the same


def test_at_equal_depth_the_boundary_question_hangs_under_the_new_answer(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    other = finish_branch(tree, 0, "Jobs drive growth.")
    boundary_in = {"text": "Why do both branches land on jobs?", "converging_with": other}
    written = store.submit_answer(g, tree.seeds[1], "Jobs, again.", boundary=boundary_in)
    boundary = tree.node(written["boundary"])
    assert boundary["parent_id"] == written["answer"]["node_id"]
    assert boundary["metadata"]["converging_nodes"] == [written["answer"]["node_id"], other]
    assert written["status"] == "answered"  # not a leaf: the boundary question hangs below it


def test_a_bad_boundary_is_refused_and_changes_nothing(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    before = store.get_snapshot(g), store.get_events(g)
    for bad, message in [
        ({"text": "x?"}, "boundary must be"),
        ("not json", "not valid JSON"),
        ({"text": "Why?", "converging_with": tree.seeds[0]}, "must be an answer's id"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            store.submit_answer(g, tree.seeds[1], "An answer.", boundary=bad)
    assert (store.get_snapshot(g), store.get_events(g)) == before
