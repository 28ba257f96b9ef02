"""The store's turns: supersede, notes, the depth allowance, heads, the turn-only moves.

Covers: store/turns.py, store/turn_requests.py, store/reopening.py.
"""

from __future__ import annotations

import pytest

from fractal_nb import BudgetError, GraphStore, InvalidInputError, InvalidTransitionError, StateError
from fractal_nb.vocabulary import check_node_transition
from tests.conftest import Tree, make_tree


def test_a_redecomposed_question_keeps_its_old_subtree_superseded(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    q = tree.seeds[0]
    written = store.add_answer(g, q, "first answer", sub_questions=["Old sub one?", "Old sub two?"])
    old_answer = written["answer"]["node_id"]
    s1, s2 = (s["node_id"] for s in written["sub_questions"])
    store.add_answer(g, s1, "a leaf answer", synthesize=True)
    assert tree.status(s1) == "synthesized" and tree.status(s2) == "open"

    request = store.redecompose(g, q, "Look at money.")
    assert request == {
        "turn": 1,  # the seed turn is still open: the request joins it
        "kind": "redecompose",
        "arguments": {"node_id": q, "hint": "Look at money."},
        "created": [],
        "reopened": [q],
    }
    redone = tree.node(q)
    assert redone["status"] == "open" and redone["metadata"]["redecompose"] == {
        "hint": "Look at money.",
        "avoid": ["Old sub one?", "Old sub two?"],
    }
    for node_id in (old_answer, s1, s2):
        assert tree.node(node_id)["superseded_turn"] == 1
    assert tree.status(s1) == "synthesized"  # kept as it was
    assert tree.node(s2)["status"] == "saturated" and tree.node(s2)["status_reason"] == "superseded"
    assert tree.node(old_answer)["status"] == "saturated"

    claims = {store.claim_work(g, f"w{i}")["node_id"]: f"w{i}" for i in range(5)}
    assert s2 not in claims and q in claims  # superseded work is never claimable
    # Rule 10 compares current questions only: the new decomposition may ask an old text again.
    again = store.submit_answer(
        g, q, "second answer", owner=claims[q], sub_questions=["Old sub one?", "New sub?"]
    )
    assert [s["node_id"] for s in again["sub_questions"]] and not again["repeated"]
    inputs = store.get_synthesis_inputs(g, q)
    assert [a["text"] for a in inputs["answers"]] == ["second answer"]
    assert {s["text"] for s in inputs["sub_questions"]} == {"Old sub one?", "New sub?"}
    with pytest.raises(Exception, match="superseded"):
        store.add_note(g, s1, "on an old node")


def test_a_note_on_a_leaf_reopens_it_and_the_syntheses_above(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    for seed in tree.seeds:
        store.add_answer(g, seed, f"leaf answer {seed}", synthesize=True)
    store.synthesize_node(g, tree.root, "root synthesis")
    assert store.get_ready_to_synthesize(g)["count"] == 0

    request = store.add_note(g, tree.seeds[1], "A person says: it was the river.")
    note = tree.node(request["created"][0])
    assert note["node_type"] == "note" and note["parent_id"] == tree.seeds[1] and note["status"] == "answered"
    assert tree.status(tree.seeds[1]) == "answered" and tree.status(tree.root) == "answered"
    assert [n["node_id"] for n in store.get_ready_to_synthesize(g)["ready_nodes"]] == [tree.seeds[1]]
    inputs = store.get_synthesis_inputs(g, tree.seeds[1])
    assert inputs["notes"] == [{"node_id": note["node_id"], "text": "A person says: it was the river."}]
    store.synthesize_node(g, tree.seeds[1], "with the river")
    assert [n["node_id"] for n in store.get_ready_to_synthesize(g)["ready_nodes"]] == [tree.root]


def test_a_deepened_branch_may_go_past_the_depth_for_its_turn(fresh_store: GraphStore) -> None:
    tree = make_tree(fresh_store, "pulse")
    store, g = tree.store, tree.graph_id
    deep, other = tree.seeds[0], tree.seeds[1]
    answer = tree.answer(deep)
    other_answer = tree.answer(other)
    with pytest.raises(BudgetError, match="max_depth 2"):
        tree.ask(answer, "Too deep?")
    assert store.get_context(g, deep)["max_depth"] == 2

    store.deepen(g, deep, 1)
    assert store.get_context(g, deep)["max_depth"] == 3
    assert store.get_context(g, other)["max_depth"] == 2
    below = tree.ask(answer, "Deeper now?")
    assert tree.node(below)["depth"] == 2
    with pytest.raises(BudgetError):
        tree.ask(tree.answer(below), "Deeper still?")
    with pytest.raises(BudgetError):
        tree.ask(other_answer, "Not this branch?")

    store.end_turn(g)  # the allowance held for the turn that asked for it
    assert store.get_context(g, deep)["max_depth"] == 2


def test_heads_and_the_turn_only_moves(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do cities grow?", "pulse")["graph_id"]
    created = fresh_store.get_events(g)["events"][0]
    (turn,) = fresh_store.list_turns(g)
    assert turn["started_event"] == created["event_id"] and created["kind"] == "graph_created"
    fresh_store.update_graph_status(g, "completed")
    head = fresh_store.end_turn(g)
    assert head is not None and head["head_event"] == fresh_store.get_events(g)["events"][-1]["event_id"]
    assert head["status"] == "completed" and head["counts"]["open"] == 1 and head["tokens"] == 0
    assert fresh_store.end_turn(g) is None  # no open turn: nothing to end
    with pytest.raises(InvalidTransitionError, match="only by a new turn"):
        fresh_store.update_graph_status(g, "active")
    with pytest.raises(InvalidTransitionError, match="may become"):
        check_node_transition("n-1", "question", "synthesized", "open")
    check_node_transition("n-1", "question", "synthesized", "open", turn=True)
    with pytest.raises(InvalidTransitionError):
        check_node_transition("n-1", "answer", "saturated", "answered", turn=True)
    with pytest.raises(Exception, match="add_note"):
        fresh_store.add_node(g, fresh_store.get_graph(g)["root_node_id"], "note", "a note")


def test_store_requests_refuse_what_they_cannot_do(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    q0, q1, q2 = tree.seeds
    answer = tree.answer(q0)
    assert store.ask(g, "Under an answer?", under=answer)["created"]
    with pytest.raises(StateError, match="no answer yet"):
        store.ask(g, "Under an open question?", under=q1)
    with pytest.raises(StateError, match="no decomposition to replace"):
        store.redecompose(g, q1)
    note = store.add_note(g, q1, "An open question may take a note.")["created"][0]
    assert tree.status(q1) == "open"  # nothing to reopen: its synthesis, when written, reads it
    with pytest.raises(InvalidInputError, match="is a note"):
        store.ask(g, "Under a note?", under=note)
    with pytest.raises(InvalidInputError, match="non-empty list"):
        store.widen(g, "Why?")
    with pytest.raises(StateError, match="nothing to widen"):
        store.widen(g, ["Seed question 1", "seed question 2?"])
    widened = store.widen(g, ["Seed question 1", "A new angle?"], n=2)
    assert len(widened["created"]) == 1 and widened["arguments"] == {"n": 2, "repeated": ["Seed question 1"]}
    store.mark_saturated(g, q2, "budget_exhausted")
    with pytest.raises(StateError, match="redecompose"):
        store.add_note(g, q2, "On a question a budget cut.")
    store.prune_branch(g, q0)
    before = store.get_events(g)["events"][-1]["event_id"]
    for refused in (
        lambda: store.add_note(g, q0, "On a pruned question."),
        lambda: store.deepen(g, q0),
        lambda: store.redecompose(g, q0),
    ):
        with pytest.raises(StateError, match="pruned: not current"):
            refused()
    assert store.get_events(g)["events"][-1]["event_id"] == before


def test_a_note_on_a_leaf_a_worker_saturated_reopens_it(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    store.add_answer(g, tree.seeds[0], "settled", synthesize=True, saturation="derivable")
    assert tree.status(tree.seeds[0]) == "saturated"
    request = store.add_note(g, tree.seeds[0], "Not settled: new data.")
    assert request["reopened"] == [tree.seeds[0]] and tree.status(tree.seeds[0]) == "answered"
    assert "synthesis" not in tree.node(tree.seeds[0])["metadata"]
    assert [n["node_id"] for n in store.get_ready_to_synthesize(g)["ready_nodes"]] == [tree.seeds[0]]


def test_a_graph_from_before_turns_gets_its_seed_head_at_harvest(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why?", "pulse")["graph_id"]
    fresh_store._db.execute("DELETE FROM turns WHERE graph_id = ?", [g])  # as a file older than turns
    fresh_store.update_graph_status(g, "completed")
    head = fresh_store.end_turn(g)
    assert head is not None and head["turn"] == 1 and head["kind"] == "seed" and head["head_event"]
    assert head["started_event"] == fresh_store.get_events(g)["events"][0]["event_id"]
