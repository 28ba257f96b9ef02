"""Claims that carry what their work reads: a question's context, a synthesis's inputs.

docs/architecture/engine.md, "A worker's round trips": ``claim_work(with_context=True)``,
``claim_synthesis(with_inputs=True)`` and the writes' ``claim_next=True,
with_inputs=True`` claim and read in one call; the read is the same as ``get_context``
or ``get_synthesis_inputs`` right after the claim, and runs after it commits, outside
the write lock.

Covers: store/round_trips.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, NotFoundError, SimulatedLLM
from tests.conftest import Backend, Tree


def test_the_context_is_get_context_right_after_the_claim() -> None:
    """In a grown graph (ancestry, siblings, syntheses and answers to link to), for every claim."""
    llm = SimulatedLLM(seed=3, branching=2.0, link_rate=0.0)
    with Exploration.create("How do coral reefs recover?", intensity="deep", llm=llm) as ex:
        ex.step(8)
        store, g = ex.store, ex.graph_id
        compared = 0
        while True:
            claim: dict[str, Any] = dict(store.claim_work(g, "w1", with_context=True))
            if claim["node_id"] is None:
                break
            assert claim["context"] == store.get_context(g, claim["node_id"])
            assert (
                claim["context"]["node"]["status"] == "claimed" and claim["context"]["node"]["owner"] == "w1"
            )
            compared += 1
            store.submit_answer(g, claim["node_id"], "A leaf's answer.", owner="w1")
        assert compared >= 5, compared


def test_a_claim_without_the_flag_or_without_a_question_carries_no_context(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    assert "context" not in store.claim_work(g, "w1")
    for q in tree.seeds[1:]:
        assert "context" in store.claim_work(g, "w1", with_context=True), q
    nothing = store.claim_work(g, "w1", with_context=True)
    assert nothing["node_id"] is None and "context" not in nothing


@pytest.mark.parametrize("flag", ["yes", 1, None, "true"])
def test_a_flag_that_is_not_a_bool_is_refused_and_claims_nothing(tree: Tree, flag: object) -> None:
    store, g = tree.store, tree.graph_id
    events = len(store.get_events(g)["events"])
    with pytest.raises(InvalidInputError, match="with_context must be True or False"):
        store.claim_work(g, "w1", with_context=flag)  # type: ignore[arg-type]
    assert len(store.get_events(g)["events"]) == events
    assert all(tree.status(q) == "open" for q in tree.seeds)


def test_the_context_is_read_after_the_claim_commits_outside_the_write_lock(backend: Backend) -> None:
    """With many workers the claim is the serialized part: the read must not lengthen it."""
    under_lock: list[bool] = []
    store: GraphStore

    def tracer(sql: str, params: tuple[Any, ...]) -> None:
        if "'sibling' AS part" in sql:  # the context's main read
            under_lock.append(store._db.writing())

    store = backend.open(tracer=tracer)
    with store:
        g = store.create_graph("Why do rivers meander?", "explore", "autonomous")
        answer = store.add_node(g["graph_id"], g["root_node_id"], "answer", "Flow and banks.")
        store.add_node(g["graph_id"], answer["node_id"], "question", "Why does flow bend?")
        assert store.claim_work(g["graph_id"], "w1", with_context=True)["context"]["siblings"] == []
    assert under_lock == [False]


def test_each_synthesis_claim_carries_get_synthesis_inputs_right_after_it(tree: Tree) -> None:
    """The climb's (from an answer and from a synthesis) and the whole graph's hand-out."""
    store, g = tree.store, tree.graph_id
    first, second, third = tree.seeds
    sub = [tree.ask(tree.answer(third, "Two parts."), text) for text in ("Part one?", "Part two?")]
    for q in (first, second, sub[0]):
        claim = store.claim_work(g, "w1")
        assert claim["node_id"] == q
        written = store.submit_answer(g, q, "A leaf.", owner="w1", claim_next=True, with_inputs=True)
        assert written["next_synthesis"]["node_id"] is None and "inputs" not in written["next_synthesis"]
    assert store.claim_work(g, "w1")["node_id"] == sub[1]
    last = store.submit_answer(g, sub[1], "A leaf.", owner="w1", claim_next=True, with_inputs=True)
    climb = last["next_synthesis"]
    assert climb["node_id"] == third and climb["inputs"] == store.get_synthesis_inputs(g, third)
    done = store.submit_synthesis(g, third, "Both parts.", worker_id="w1", claim_next=True, with_inputs=True)
    above = done["next_synthesis"]
    assert above["node_id"] == tree.root and above["inputs"] == store.get_synthesis_inputs(g, tree.root)
    assert [s["node_id"] for s in above["inputs"]["sub_questions"]] == tree.seeds
    store.release_synthesis(g, tree.root, "w1")
    handed = store.claim_synthesis(g, "w2", with_inputs=True)
    assert handed["node_id"] == tree.root and handed["inputs"] == above["inputs"]
    assert "inputs" not in store.claim_synthesis(g, "w3", with_inputs=True), "nothing handed out"


@pytest.mark.parametrize(
    ("claim_next", "with_inputs", "error"),
    [
        (False, True, "with_inputs=True needs claim_next=True"),
        (True, "yes", "with_inputs must be True or False"),
        (True, 1, "with_inputs must be True or False"),
    ],
)
def test_inputs_without_a_climb_or_not_a_bool_are_refused_and_write_nothing(
    tree: Tree, claim_next: bool, with_inputs: object, error: str
) -> None:
    store, g = tree.store, tree.graph_id
    q = store.claim_work(g, "w1")["node_id"]
    events = len(store.get_events(g)["events"])
    with pytest.raises(InvalidInputError, match=error):
        store.submit_answer(g, q, "A leaf.", owner="w1", claim_next=claim_next, with_inputs=with_inputs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="with_inputs must be True or False"):
        store.claim_synthesis(g, "w1", with_inputs="true")  # type: ignore[arg-type]
    assert len(store.get_events(g)["events"]) == events
    assert tree.status(q) == "claimed"


def test_a_read_that_fails_after_the_commit_leaves_the_claim_standing_without_it(tree: Tree) -> None:
    """The claim committed: it is returned without its read, and the worker's own read meets the error."""
    store, g = tree.store, tree.graph_id

    def gone(*args: Any, **kw: Any) -> Any:
        raise NotFoundError("deleted meanwhile")

    store._context.around = gone  # type: ignore[method-assign]
    store._context.get_synthesis_inputs = gone  # type: ignore[method-assign]
    claims = [store.claim_work(g, "w1", with_context=True) for _ in tree.seeds]
    assert [c["node_id"] for c in claims] == tree.seeds and not any("context" in c for c in claims)
    assert all(tree.status(q) == "claimed" for q in tree.seeds)
    for q in tree.seeds:
        written = store.submit_answer(g, q, "A leaf.", owner="w1", claim_next=True, with_inputs=True)
    assert written["next_synthesis"]["node_id"] == tree.root and "inputs" not in written["next_synthesis"]
