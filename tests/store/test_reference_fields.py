"""Claim order and the fields the reference's tool results carry, beside ours.

Covers: store/claim.py, store/records.py.
"""

from __future__ import annotations

from tests.conftest import Tree


def test_a_fresh_worker_claims_shallower_questions_first_then_older(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    claimed = store.claim_work(g, "w1")["node_id"]
    assert claimed == tree.seeds[0]  # same depth: the oldest
    deep = store.submit_answer(g, claimed, "Jobs.", owner="w1", sub_questions=["Do wages rise with size?"])[
        "sub_questions"
    ][0]["node_id"]
    newer_shallow = tree.ask(tree.root_answer, "Does transport shape growth?")  # after the depth-2 one
    order = [store.claim_work(g, "fresh")["node_id"] for _ in range(4)]
    assert order == [tree.seeds[1], tree.seeds[2], newer_shallow, deep]


def test_affinity_comes_before_depth(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    claimed = store.claim_work(g, "w1")["node_id"]
    deep = store.submit_answer(g, claimed, "Jobs.", owner="w1", sub_questions=["Do wages rise with size?"])[
        "sub_questions"
    ][0]["node_id"]
    assert store.claim_work(g, "w1")["node_id"] == deep  # its own branch first


def test_saturation_fields_as_the_reference_names_them(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    store.mark_saturated(g, tree.seeds[0], "derivable")
    assert tree.node(tree.seeds[0])["metadata"]["saturation_reason"] == "derivable"
    store.claim_work(g, "w1")
    branches = {b["node_id"]: b for b in store.get_saturation_status(g)["branches"]}
    assert (
        branches[tree.seeds[0]].items()
        >= {"saturated": True, "saturation_reason": "derivable", "open_questions": 0}.items()
    )
    second = branches[tree.seeds[1]]
    assert second["saturated"] is False and second["saturation_reason"] is None
    assert branches[tree.seeds[1]]["open_questions"] == 1  # claimed counts as open work
    pruned = store.prune_branch(g, tree.seeds[2])
    assert tree.node(pruned["node_id"])["metadata"]["saturation_reason"] == "pruned"


def test_the_graph_status_reason_is_in_its_metadata_too(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    store.update_graph_status(g, "paused", reason="a person paused it")
    assert store.get_graph(g)["metadata"]["status_reason"] == "a person paused it"
    assert store.get_graph(g)["status_reason"] == "a person paused it"
    store.update_graph_status(g, "active")
    assert "status_reason" not in store.get_graph(g)["metadata"]


def test_update_node_with_nothing_is_a_no_op(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    before = store.get_snapshot(g), store.get_events(g)
    result = store.update_node(g, tree.seeds[0], {})
    assert result == {"node_id": tree.seeds[0], "metadata": {}, "edges_created": 0}
    assert store.update_node(g, tree.seeds[0], "{}")["edges_created"] == 0
    assert (store.get_snapshot(g), store.get_events(g)) == before
