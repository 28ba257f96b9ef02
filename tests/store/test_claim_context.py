"""A claim that carries its question's context (``claim_work(with_context=True)``).

docs/architecture.md, "The cascade" and "A worker's round trips": a worker claims and
reads in one call; the read is the same as ``get_context`` right after the claim, and
it runs after the claim commits, outside the write lock.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, SimulatedLLM
from tests.conftest import Tree


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
            assert claim["context"]["node"]["status"] == "claimed" and claim["context"]["node"]["owner"] == "w1"
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


def test_the_context_is_read_after_the_claim_commits_outside_the_write_lock() -> None:
    """With many workers the claim is the serialized part: the read must not lengthen it."""
    under_lock: list[bool] = []
    store: GraphStore

    def tracer(sql: str, params: tuple[Any, ...]) -> None:
        if "'sibling' AS part" in sql:  # the context's main read
            under_lock.append(store._db.writing())

    store = GraphStore(tracer=tracer)
    with store:
        g = store.create_graph("Why do rivers meander?", "explore", "autonomous")
        answer = store.add_node(g["graph_id"], g["root_node_id"], "answer", "Flow and banks.")
        store.add_node(g["graph_id"], answer["node_id"], "question", "Why does flow bend?")
        assert store.claim_work(g["graph_id"], "w1", with_context=True)["context"]["siblings"] == []
    assert under_lock == [False]
