"""A graph from a file older than turns (no rows in ``turns``) takes a turn as any other.

docs/architecture/store.md, "Turns and heads": turn 1 is the seed. Steering such a graph first
gives it its seed turn (ended in a head at once when the graph was completed), so the
request is turn 2, or joins the seed turn while the graph is still being worked on.
"""

from __future__ import annotations

import pytest

from fractal_nb import GraphStore
from tests.conftest import Tree

pytestmark = (
    pytest.mark.duckdb_only
)  # older DuckDB files; PostgreSQL's schema has had turns from its first version


def as_older_file(store: GraphStore, graph_id: str) -> None:
    store._db.execute("DELETE FROM turns WHERE graph_id = ?", [graph_id])  # noqa: SLF001


def test_a_completed_graph_from_before_turns_keeps_its_seed_head_when_steered(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    for seed in tree.seeds:
        store.add_answer(g, seed, "an answer", synthesize=True)
    store.update_graph_status(g, "completed")
    as_older_file(store, g)
    last = store.get_events(g)["last_event_id"]
    request = store.ask(g, "What about the rivers?")
    assert request["turn"] == 2
    seed, asked = store.list_turns(g)
    assert (seed["turn"], seed["kind"], seed["status"]) == (1, "seed", "completed")
    assert seed["head_event"] is not None and seed["head_event"] >= last
    assert seed["counts"]["synthesized"] == len(tree.seeds)
    assert (asked["turn"], asked["kind"], asked["head_event"]) == (2, "ask", None)
    assert store.get_graph(g)["status"] == "active"


def test_an_unfinished_graph_from_before_turns_joins_its_seed_turn(tree: Tree) -> None:
    store, g = tree.store, tree.graph_id
    store.add_answer(g, tree.seeds[0], "an answer", synthesize=True)
    as_older_file(store, g)
    request = store.add_note(g, tree.seeds[0], "A census says so.")
    assert request["turn"] == 1
    [seed] = store.list_turns(g)
    assert (seed["turn"], seed["kind"], seed["head_event"]) == (1, "seed", None)
    assert [r["kind"] for r in seed["requests"]] == ["note"]
