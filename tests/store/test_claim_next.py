"""The cascade's next step claimed with the write that made it ready (``claim_next``).

docs/architecture/engine.md, "The cascade": a leaf's answer or a synthesis that finishes the
last sub-question of an answered question claims that question's synthesis for the
same worker in the same transaction; READY's rule for that one question, no more.

Covers: store/synthesis.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM, StateError
from fractal_nb.store.holders import HOLDER_LEASE_S, new_holder
from tests.conftest import FakeClock, Tree


def claimed_leaf(tree: Tree, question: str, worker: str, **kw: Any) -> dict[str, Any]:
    """Claim ``question`` (it must be the next claimable one) and answer it as a leaf with claim_next."""
    store, g = tree.store, tree.graph_id
    got = store.claim_work(g, worker)["node_id"]
    assert got == question, (got, question)
    return dict(store.submit_answer(g, question, f"{worker}'s answer", owner=worker, claim_next=True, **kw))


def synthesis_claims(store: GraphStore, graph_id: str) -> dict[str, str]:
    events = store.get_events(graph_id)["events"]
    held: dict[str, str] = {}
    for e in events:
        if e["kind"] == "synthesis_claimed":
            held[e["node_id"]] = e["actor"]
    return held


def test_the_last_leaf_claims_the_question_above_and_the_others_do_not(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    first, second, third = tree.seeds
    for q, w in ((first, "w1"), (second, "w2")):
        written = claimed_leaf(tree, q, w)
        assert written["status"] == "synthesized"
        assert written["next_synthesis"] == {"node_id": None, "graph_id": g, "graph_status": "active"}
    last = claimed_leaf(tree, third, "w3")
    assert last["next_synthesis"]["node_id"] == tree.root
    assert last["next_synthesis"]["text"] == "What makes a city grow?"
    assert last["next_synthesis"]["depth"] == 0 and last["next_synthesis"]["lease_s"] == 60
    # Claimed for w3, with the answer: no one else is handed it; w3 may submit it.
    assert synthesis_claims(store, g) == {tree.root: "w3"}
    assert store.claim_synthesis(g, "w4")["node_id"] is None
    done = store.submit_synthesis(g, tree.root, "The root's synthesis.", worker_id="w3", claim_next=True)
    assert done["status"] == "synthesized"
    assert done["next_synthesis"]["node_id"] is None, "the root has nothing above it"


def test_a_synthesis_climbs_to_the_question_above(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    first, second, third = tree.seeds
    for q in (first, second):
        claimed_leaf(tree, q, "w1")
    # The third seed asks two sub-questions; their leaves finish it, then its synthesis finishes the root.
    assert store.claim_work(g, "w2")["node_id"] == third
    subs = store.submit_answer(g, third, "Two angles.", owner="w2", sub_questions=["One?", "Two?"])
    assert "next_synthesis" not in subs, "without claim_next the result is as before"
    one, two = (s["node_id"] for s in subs["sub_questions"])
    assert claimed_leaf(tree, one, "w2")["next_synthesis"]["node_id"] is None
    nxt = claimed_leaf(tree, two, "w2")["next_synthesis"]
    assert nxt["node_id"] == third
    top = store.submit_synthesis(g, third, "Both angles.", worker_id="w2", claim_next=True)
    assert top["next_synthesis"]["node_id"] == tree.root
    assert synthesis_claims(store, g) == {third: "w2", tree.root: "w2"}
    # The claim and the write it came with are one commit: one event id apart, the same instant.
    events = store.get_events(g)["events"]
    synthesized = next(e for e in events if e["kind"] == "synthesized" and e["node_id"] == third)
    claimed = next(e for e in events if e["kind"] == "synthesis_claimed" and e["node_id"] == tree.root)
    assert (
        claimed["event_id"] > synthesized["event_id"] and claimed["created_at"] == synthesized["created_at"]
    )


def held_then_asked_again(tree: Tree) -> str:
    """The root's synthesis held by w9, then a seed question asked under its answer: the late question."""
    store, g = tree.store, tree.graph_id
    for q in tree.seeds:
        claimed_leaf(tree, q, "w1")
    store.release_synthesis(g, tree.root, "w1")  # the last leaf's climb claimed it for w1
    assert store.claim_synthesis(g, "w9")["node_id"] == tree.root
    return tree.ask(tree.root_answer, "A late seed question")


def test_a_live_claim_on_the_question_above_is_left_to_its_holder(tree: Tree) -> None:
    late = held_then_asked_again(tree)
    written = claimed_leaf(tree, late, "w2")
    assert written["next_synthesis"]["node_id"] is None, "w9 composes it"
    assert synthesis_claims(tree.store, tree.graph_id)[tree.root] == "w9"
    landed = tree.store.submit_synthesis(tree.graph_id, tree.root, "w9's synthesis.", worker_id="w9")
    assert landed["status"] in ("synthesized", "answered")  # landed, or kept and reopened (rule 11)


def test_a_lapsed_claim_gives_way_to_the_climb(tree: Tree, clock: FakeClock) -> None:
    late = held_then_asked_again(tree)
    clock.advance(61)  # w9's lease (60 s) ran out; w9 never wrote
    written = claimed_leaf(tree, late, "w2")
    assert written["next_synthesis"]["node_id"] == tree.root, "the climb takes it"
    assert synthesis_claims(tree.store, tree.graph_id)[tree.root] == "w2"
    with pytest.raises(StateError, match="not by 'w9'"):
        tree.store.submit_synthesis(tree.graph_id, tree.root, "w9 came back.", worker_id="w9")


def test_the_climb_keeps_the_holder_of_the_claim_that_finished_the_question(
    tree: Tree, clock: FakeClock
) -> None:
    store, g = tree.store, tree.graph_id
    first, second, third = tree.seeds
    claimed_leaf(tree, first, "w1")
    claimed_leaf(tree, second, "w1")
    remote = new_holder("remote worker")
    assert store.claim_work(g, "w2", holder=remote)["node_id"] == third
    written = store.submit_answer(g, third, "Leaf.", owner="w2", claim_next=True)
    assert written["next_synthesis"]["lease_s"] == HOLDER_LEASE_S, "another process's holder: its short lease"
    clock.advance(HOLDER_LEASE_S - 1)
    store.heartbeat(remote["holder_id"])  # its heartbeat renews the synthesis too
    clock.advance(HOLDER_LEASE_S - 1)
    assert store.claim_synthesis(g, "w9")["node_id"] is None, "renewed: still held"
    clock.advance(2)
    assert store.claim_synthesis(g, "w9")["node_id"] == tree.root, "silent for a lease: handed out again"


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_claim_next_must_be_a_flag_and_a_refused_call_changes_nothing(tree: Tree, bad: object) -> None:
    store, g = tree.store, tree.graph_id
    q = store.claim_work(g, "w1")["node_id"]
    before = store.get_events(g)["events"]
    with pytest.raises(InvalidInputError, match="claim_next must be True or False"):
        store.submit_answer(g, q, "Leaf.", owner="w1", claim_next=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="claim_next must be True or False"):
        store.submit_synthesis(g, tree.root, "x", worker_id="w1", claim_next=bad)  # type: ignore[arg-type]
    assert store.get_events(g)["events"] == before


@pytest.mark.parametrize("seed", range(3))
def test_every_synthesis_claim_of_a_run_was_ready_when_made(seed: int) -> None:
    """Over whole simulated runs (which climb), each synthesis claimed was READY in the state its
    commit left: answered, every sub-question synthesized or saturated; and none was claimed twice
    without being reopened or given back in between."""
    with Exploration.create(
        "Why do some cities grow faster than others?",
        intensity="explore",
        llm=SimulatedLLM(seed=seed),
    ) as ex:
        assert ex.run(max_workers=1, progress=False, resume=True) in ("all_complete", "budget_exhausted")
        store, g = ex.store, ex.graph_id
        events = store.get_events(g, limit=100_000)["events"]
        claimed = [e for e in events if e["kind"] == "synthesis_claimed"]
        assert len(claimed) > 3, "the run synthesized through claims"
        for e in claimed:
            nodes = store.get_state_at(g, e["event_id"])["nodes"]
            question = next(n for n in nodes if n["node_id"] == e["node_id"])
            answers = {n["node_id"] for n in nodes if n["parent_id"] == e["node_id"]}
            below = [n for n in nodes if n["parent_id"] in answers and n["node_type"] == "question"]
            assert question["status"] == "answered", (e, question["status"])
            assert below and all(n["status"] in ("synthesized", "saturated") for n in below), e
