"""The store's side of claims and the weak mark: checked claims, which children make a synthesis weak."""

from __future__ import annotations

import pytest

from fractal_nb import GraphStore
from fractal_nb.errors import InvalidInputError, InvalidTransitionError
from tests.conftest import Backend


def tree(store: GraphStore) -> tuple[str, str, list[str]]:
    g = store.create_graph("Why do rivers flood?", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    subs = store.add_answer(
        gid, root, "Rain and land.", sub_questions=["Is rain enough?", "Does land matter?", "Do dams help?"]
    )["sub_questions"]
    return gid, root, [q["node_id"] for q in subs]


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ("fact", "a list of objects"),
        ([{"kind": "rumour", "text": "It rained."}], "fact, assumption, unknown"),
        ([{"kind": "fact", "text": ""}], "a claim's text"),
        ([{"kind": "fact", "text": "It rained.", "source": 7}], "a claim's source"),
    ],
)
def test_bad_claims_are_refused_and_change_nothing(backend: Backend, claims: object, why: str) -> None:
    with backend.open() as store:
        gid, root, subs = tree(store)
        for q in subs:
            store.mark_saturated(gid, q, "actionable")
        before = store.get_snapshot(gid)
        with pytest.raises(InvalidInputError, match=why):
            store.synthesize_node(gid, root, "Rain, mostly.", claims=claims)  # type: ignore[arg-type]
        assert store.get_snapshot(gid) == before


def test_pruned_and_settled_children_are_sound_budget_cut_ones_are_not(backend: Backend) -> None:
    with backend.open() as store:
        gid, root, (rain, land, dams) = tree(store)
        store.mark_saturated(gid, rain, "derivable")
        store.prune_branch(gid, land)
        store.mark_saturated(gid, dams, "budget_exhausted")
        claims = [{"kind": "unknown", "text": "How wet the spring was."}]
        store.synthesize_node(gid, root, "Rain, mostly.", claims=claims)
        meta = store.get_node(gid, root)["node"]["metadata"]
        assert meta["weak"] == [{"node_id": dams, "reason": "budget_cut"}]
        assert meta["claims"] == [{**claims[0], "support": "", "source": None}]


def test_only_a_question_saturated_as_failed_reopens(backend: Backend) -> None:
    with backend.open() as store:
        gid, root, (rain, land, dams) = tree(store)
        store.prune_branch(gid, land)
        store.mark_saturated(gid, dams, "budget_exhausted")
        store.mark_saturated(gid, rain, "error")
        assert store.recover_stuck(gid, include_errors=True)["recovered"] == [rain]
        statuses = {n["node_id"]: n["status"] for n in store.get_snapshot(gid)["nodes"]}
        assert (statuses[rain], statuses[land], statuses[dams]) == ("open", "saturated", "saturated")
        with pytest.raises(InvalidTransitionError):
            store.mark_saturated(gid, land, "actionable")


def test_a_failed_question_in_a_branch_still_saturated_stays_closed(backend: Backend) -> None:
    """Rule 4 holds through recovery: no question reopens under a node that stays saturated."""
    with backend.open() as store:
        gid, root, (rain, land, dams) = tree(store)
        answer = store.add_answer(gid, rain, "Heavy rain.", sub_questions=["How heavy?", "How long?"])
        heavy, long = (q["node_id"] for q in answer["sub_questions"])
        store.mark_saturated(gid, answer["answer"]["node_id"], "error")  # cascades "error" to both
        store.mark_saturated(gid, dams, "error")
        deep = store.add_answer(gid, land, "Clay.", sub_questions=["Is clay wet?"])["sub_questions"][0]
        store.mark_saturated(gid, deep["node_id"], "error")
        store.prune_branch(gid, land)  # the failed question below stays failed, in a pruned branch
        assert store.recover_stuck(gid, include_errors=True)["recovered"] == [dams]
        statuses = {n["node_id"]: n["status"] for n in store.get_snapshot(gid)["nodes"]}
        assert statuses[dams] == "open"
        assert {statuses[q] for q in (heavy, long, deep["node_id"])} == {"saturated"}
