"""``get_snapshot``'s JSON written by DuckDB gives the dicts the rows give (store/snapshot.py).

The reference is each row's own dict: ``NodeRow.to_dict`` and ``rows.edge_dict``
over the same rows, key for key and in order, on every graph shape the tests grow:
failures and saturations, hostile and non-ASCII text, metadata an outside client
wrote (nested, numbers, unicode escapes), links, notes, turns and the simulator's
runs. The timestamps' SQL is checked against ``rows.iso`` on arbitrary clocks.

Covers: store/rows.py.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.store.rows import iso
from fractal_nb.store.snapshot import iso_sql, micros_sql
from tests.engine.test_runs import FAST
from tests.graph_builder import run_shaped_graph
from tests.views.failing_graph import failing_graph


def from_rows(store: GraphStore, graph_id: str) -> dict[str, Any]:
    """What get_snapshot gave before DuckDB wrote it: each row turned into its dict in Python."""
    with store._db.read():
        nodes = [n.to_dict() for n in store._core.nodes("graph_id = ?", [graph_id])]
        edges = store._queries.edges(graph_id)
    return {"nodes": nodes, "edges": edges}


def assert_same(store: GraphStore, graph_id: str) -> None:
    snapshot, rows = store.get_snapshot(graph_id), from_rows(store, graph_id)
    assert snapshot["nodes"] == rows["nodes"] and snapshot["edges"] == rows["edges"]
    assert [list(n) for n in snapshot["nodes"]] == [list(n) for n in rows["nodes"]], "keys in the same order"
    assert json.dumps(snapshot["nodes"]) == json.dumps(rows["nodes"]), "the same JSON, byte for byte"


def test_failures_hostile_text_and_an_outside_clients_metadata_give_the_same_dicts(
    fresh_store: GraphStore,
) -> None:
    built = failing_graph(fresh_store)
    gid, root = built["graph_id"], built["root"]
    answer = fresh_store.add_node(
        gid, root, "answer", 'Quotes " \\ and </script> and \u00e9\u4e2d\U0001f600.'
    )["node_id"]
    fresh_store.update_node(
        gid,
        answer,
        {
            "nested": {"list": [1, 2.5, -3e-7, None, True], "text": "\u2028 line \t tab"},
            "big": 2**62,
            "emoji": "\U0001f600",
        },
    )
    fresh_store.update_node(
        gid, answer, {"convergence_with": [built["weak"]], "convergence_insight": "the same"}
    )
    fresh_store.add_note(gid, built["weak"], "A person's <b>note</b>.")
    assert_same(fresh_store, gid)
    assert fresh_store.get_snapshot(gid)["nodes"][0]["claimed_at"] is None


def test_simulated_runs_and_a_run_shaped_graph_give_the_same_dicts(fresh_store: GraphStore) -> None:
    assert_same(fresh_store, run_shaped_graph(fresh_store, 150))
    for strategy in ("fractal", "thinkon"):
        with Exploration.create(
            "Should a mid-sized city build a tram line?",
            llm=SimulatedLLM(seed=5),
            strategy=strategy,
            clock=FAST,
        ) as ex:
            ex.run(progress=False)
            ex.harvest()
            assert_same(ex.store, ex.graph_id)
            if strategy == "fractal":  # a later turn (a chain takes none)
                ex.ask("What would the tram line cost to run each year?")
                assert_same(ex.store, ex.graph_id)
    only_root = fresh_store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
    assert fresh_store.get_snapshot(only_root)["edges"] == []
    assert_same(fresh_store, only_root)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False, allow_infinity=False))
def test_the_timestamps_sql_is_isoformat(seconds: float) -> None:
    with duckdb.connect() as con:
        micros = f"SELECT {micros_sql('x')} AS u FROM (SELECT ?::DOUBLE AS x)"
        row = con.execute(f"SELECT {iso_sql('u')} FROM ({micros})", [seconds]).fetchone()
    assert row is not None and row[0] == iso(seconds)


def test_a_snapshot_kept_between_steps_is_the_graph_at_each_step() -> None:
    # The store keeps each row's text and has changed rows written again (store/snapshot.py):
    # after every step, the kept snapshot is the rows' own, and the MCP text says the same.
    with Exploration.create(
        "Should a mid-sized city build a tram line?",
        llm=SimulatedLLM(seed=3),
        intensity="explore",
        clock=FAST,
    ) as ex:
        steps = 0
        while ex.step():
            steps += 1
            assert_same(ex.store, ex.graph_id)
            assert json.loads(ex.store.get_snapshot_text(ex.graph_id)) == ex.store.get_snapshot(ex.graph_id)
        ex.harvest()
        assert_same(ex.store, ex.graph_id)
        assert steps > 5
