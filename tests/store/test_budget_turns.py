"""``budget_exhausted`` is terminal for resume; going on is a new turn of kind ``budget`` (seed 001).

docs/architecture/store.md, "The graph contract" and "Turns and heads": ``resume_graph`` and a
status change to ``active`` refuse a ``budget_exhausted`` graph, naming the way on, and write
nothing; ``new_budget`` ends the stopped turn in a head, opens a ``budget`` turn recording the
graph's limits (merged into ``metadata["limits"]``) and makes the graph active, or refuses and
writes nothing. The harvest's own move (``start_harvest``) is not a resume. Both backends.

Covers: store/budget_turns.py, store/turns.py, store/graphs.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from fractal_nb import GraphStore, InvalidInputError, InvalidTransitionError, StateError
from tests.conftest import Tree, make_tree


def stopped(store: GraphStore, *, tokens: int = 0, limits: dict[str, Any] | None = None) -> Tree:
    """A graph whose budget stopped it: ``tokens`` spent by one call, ``limits`` kept with it."""
    tree = make_tree(store)
    if limits is not None:
        store.update_graph_metadata(tree.graph_id, {"limits": limits})
    if tokens:
        store.record_llm_call(
            graph_id=tree.graph_id,
            node_id=None,
            worker="w1",
            role="answer",
            model="m",
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            attempts=1,
            latency_s=0.1,
            outcome="ok",
        )
    store.update_graph_status(tree.graph_id, "budget_exhausted", reason="token budget of 1,000 reached")
    return tree


def unchanged(store: GraphStore, graph_id: str) -> tuple[Any, ...]:
    """What a refused call must leave as it was: the graph, its events and its turns."""
    return (
        store.get_graph(graph_id),
        len(store.get_events(graph_id)["events"]),
        store.list_turns(graph_id),
    )


def test_resume_and_a_status_change_refuse_a_budget_exhausted_graph_and_name_the_way_on(
    fresh_store: GraphStore,
) -> None:
    t = stopped(fresh_store)
    before = unchanged(fresh_store, t.graph_id)
    with pytest.raises(InvalidTransitionError, match="terminal for a resume.*new turn with a new budget"):
        fresh_store.resume_graph(t.graph_id)
    with pytest.raises(InvalidTransitionError, match="'budget_exhausted' to 'active'.*new_budget"):
        fresh_store.update_graph_status(t.graph_id, "active")
    with pytest.raises(StateError, match="budget_exhausted.*new_budget"):  # a write says so too
        t.answer(t.seeds[0])
    assert unchanged(fresh_store, t.graph_id) == before
    assert fresh_store.claim_work(t.graph_id, "w1")["graph_status"] == "budget_exhausted"


def test_a_new_budget_is_a_turn_of_kind_budget_with_the_graphs_limits(fresh_store: GraphStore) -> None:
    t = stopped(fresh_store, tokens=1_200, limits={"max_tokens": 1_000, "max_cost": None, "prices": {}})
    request = fresh_store.new_budget(t.graph_id, {"max_tokens": 5_000, "max_wall_s": 30})
    assert request == {
        "turn": 2,
        "kind": "budget",
        "arguments": {"limits": {"max_tokens": 5_000, "max_wall_s": 30}},
        "created": [],
        "reopened": [],
    }
    graph = fresh_store.get_graph(t.graph_id)
    assert graph["status"] == "active"
    assert graph["metadata"]["limits"] == {
        "max_tokens": 5_000,
        "max_cost": None,
        "prices": {},
        "max_wall_s": 30,
    }
    turns = fresh_store.list_turns(t.graph_id)
    assert [(r["turn"], r["kind"], r["status"], r["head_event"] is None) for r in turns] == [
        (1, "seed", "budget_exhausted", False),  # the turn the budget stopped ended in a head
        (2, "budget", None, True),
    ]
    assert turns[0]["tokens"] == 1_200
    t.answer(t.seeds[0])  # work goes on
    assert fresh_store.claim_work(t.graph_id, "w1")["node_id"] in t.seeds[1:]


def test_a_circuit_breaker_stop_goes_on_under_the_same_limits(fresh_store: GraphStore) -> None:
    t = stopped(fresh_store, tokens=100, limits={"max_tokens": 1_000})
    request = fresh_store.new_budget(t.graph_id, {})  # each run has its own circuit breaker
    assert request["arguments"] == {"limits": {"max_tokens": 1_000}}
    assert fresh_store.get_graph(t.graph_id)["status"] == "active"
    fresh_store.update_graph_status(t.graph_id, "budget_exhausted", reason="circuit breaker")
    assert fresh_store.new_budget(t.graph_id, "{}")["turn"] == 3  # JSON text as MCP sends it
    kinds = [(r["kind"], r["status"]) for r in fresh_store.list_turns(t.graph_id)]
    assert kinds == [("seed", "budget_exhausted"), ("budget", "budget_exhausted"), ("budget", None)]


@pytest.mark.parametrize(
    ("limits", "error", "match"),
    [
        (
            {"max_tokens": 1_000},
            StateError,
            r"spent already \(token budget of 1,000 reached \(1,200 spent\)\)",
        ),
        ({"max_tokens": 1_200}, StateError, "spent already"),
        (
            {"max_tokens": 9_999, "max_cost": 0.001, "prices": {"m": [1.0, 1.0]}},
            StateError,
            "cost budget of 0.001 reached",
        ),
        (
            {"max_tokens": 9_999, "max_cost": 5.0, "prices": {"other": [1.0, 1.0]}},
            StateError,
            "cost budget",
        ),  # m has no price
        ({"tokens": 5_000}, InvalidInputError, "unknown key 'tokens'"),
        ({"max_tokens": 0}, InvalidInputError, "max_tokens.*positive integer"),
        ({"max_tokens": 2.5}, InvalidInputError, "max_tokens.*positive integer"),
        ({"max_wall_s": True}, InvalidInputError, "max_wall_s.*positive number"),
        ({"prices": {"m": [1.0]}}, InvalidInputError, "prices"),
        ("[1, 2]", InvalidInputError, "JSON object"),
    ],
)
def test_a_bad_or_spent_budget_is_refused_and_nothing_written(
    fresh_store: GraphStore, limits: Any, error: type[Exception], match: str
) -> None:
    t = stopped(fresh_store, tokens=1_200, limits={"max_tokens": 1_000})
    before = unchanged(fresh_store, t.graph_id)
    with pytest.raises(error, match=match):
        fresh_store.new_budget(t.graph_id, limits)
    assert unchanged(fresh_store, t.graph_id) == before


@pytest.mark.parametrize("status", ["active", "paused", "completed", "error"])
def test_a_new_budget_is_only_for_a_budget_exhausted_graph(fresh_store: GraphStore, status: str) -> None:
    t = make_tree(fresh_store)
    if status != "active":
        fresh_store.update_graph_status(t.graph_id, status)
    before = unchanged(fresh_store, t.graph_id)
    with pytest.raises(
        StateError, match=f"is '{status}': a new budget opens a turn only on a 'budget_exhausted'"
    ):
        fresh_store.new_budget(t.graph_id, {"max_tokens": 5_000})
    assert unchanged(fresh_store, t.graph_id) == before


def test_the_harvests_own_move_is_not_a_resume_and_a_prune_leaves_it_budget_exhausted(
    fresh_store: GraphStore,
) -> None:
    t = stopped(fresh_store)
    cut = fresh_store.prune_branch(t.graph_id, t.seeds[0])  # spends nothing: the status stays
    assert cut["node_id"] == t.seeds[0] and fresh_store.get_graph(t.graph_id)["status"] == "budget_exhausted"
    moved = fresh_store.start_harvest(t.graph_id)
    assert moved == {"graph_id": t.graph_id, "status": "active", "previous_status": "budget_exhausted"}
    assert [r["kind"] for r in fresh_store.list_turns(t.graph_id)] == ["seed"]  # no new turn
    fresh_store.update_graph_status(t.graph_id, "completed", reason="harvested")
    with pytest.raises(
        InvalidTransitionError, match="a harvest finishes an active, paused or budget_exhausted"
    ):
        fresh_store.start_harvest(t.graph_id)
