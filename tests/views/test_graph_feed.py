"""The live feed: deltas from the event log add up to the graph, under real worker threads."""

from __future__ import annotations

import threading

import pytest

from fractal_nb import Exploration, GraphStore, InvalidInputError, NotFoundError, SimulatedLLM
from fractal_nb.views.graph_feed import GraphFeed
from fractal_nb.views.network_style import LIVE_PHYSICS_LIMIT
from tests.engine.test_runs import FAST
from tests.graph_builder import grow_graph


def visible_state(nodes: dict[str, dict], edges: dict[str, dict]) -> tuple[dict, set]:
    return {k: (v["group"], v["label"], v["title"]) for k, v in nodes.items()}, set(edges)


def test_get_changes_since_zero_is_everything_and_later_only_what_moved(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    full = fresh_store.get_changes(g["graph_id"])
    assert [n["node_id"] for n in full["nodes"]] == [g["root_node_id"]] and full["links"] == []
    last = full["last_event_id"]
    answer = fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "The moon.")
    changes = fresh_store.get_changes(g["graph_id"], since=last)
    # the answer is new, and the root it answers moved to 'answered'
    assert [(n["node_id"], n["status"]) for n in changes["nodes"]] == [
        (g["root_node_id"], "answered"),
        (answer["node_id"], "answered"),
    ]
    assert changes["last_event_id"] > last and changes["since"] == last
    quiet = fresh_store.get_changes(g["graph_id"], since=changes["last_event_id"])
    assert quiet["nodes"] == [] and quiet["last_event_id"] == changes["last_event_id"]


@pytest.mark.parametrize("since", [-1, 1.5, True, "3"])
def test_get_changes_refuses_a_bad_since(fresh_store: GraphStore, since: object) -> None:
    g = fresh_store.create_graph("Why?", "pulse", "autonomous")
    with pytest.raises(InvalidInputError, match="since"):
        fresh_store.get_changes(g["graph_id"], since=since)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        fresh_store.get_changes("g-missing")


def test_get_node_and_node_calls(fresh_store: GraphStore) -> None:
    g = fresh_store.create_graph("Why do tides turn?", "pulse", "autonomous")
    a = fresh_store.add_node(g["graph_id"], g["root_node_id"], "answer", "The moon.")
    details = fresh_store.get_node(g["graph_id"], g["root_node_id"])
    assert details["node"]["node_id"] == g["root_node_id"]
    assert [c["node_id"] for c in details["children"]] == [a["node_id"]]
    with pytest.raises(NotFoundError):
        fresh_store.get_node(g["graph_id"], "n-missing")
    with pytest.raises(InvalidInputError):
        fresh_store.get_llm_calls(g["graph_id"], node_id="")


def test_deltas_polled_during_a_threaded_run_add_up_to_the_final_graph() -> None:
    """A poller thread applies deltas while 4 workers write: nothing missed, nothing stale."""
    with Exploration.create(
        "Why do cities grow?", intensity="explore", llm=SimulatedLLM(seed=5, link_rate=0.4), clock=FAST
    ) as ex:
        feed = GraphFeed(ex.store, ex.graph_id)
        nodes: dict[str, dict] = {}
        edges: dict[str, dict] = {}
        done = threading.Event()
        seen_deltas = []

        def poll() -> None:
            while not done.is_set():
                delta = feed.delta()
                if delta is not None:
                    assert delta["since"] <= delta["seq"]
                    seen_deltas.append(delta["seq"])
                    nodes.update({n["id"]: n for n in delta["nodes"]})
                    edges.update({e["id"]: e for e in delta["edges"]})

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            assert ex.run(4, progress=False) in ("all_complete", "budget_exhausted")
        finally:
            done.set()
            poller.join()
        last = feed.delta()
        if last is not None:
            nodes.update({n["id"]: n for n in last["nodes"]})
            edges.update({e["id"]: e for e in last["edges"]})
        snapshot = GraphFeed(ex.store, ex.graph_id).snapshot()
        assert len(seen_deltas) > 3, "the run was watched while it grew"
        assert seen_deltas == sorted(seen_deltas)
        assert visible_state(nodes, edges) == visible_state(
            {n["id"]: n for n in snapshot["nodes"]}, {e["id"]: e for e in snapshot["edges"]}
        )
        assert any(e["edge_type"] != "parent_child" for e in snapshot["edges"]), "links are fed too"
        counts = feed.counts()
        assert counts["total"] == len(snapshot["nodes"]) and counts["synthesized"] > 0


def test_snapshot_of_a_big_graph_has_positions_and_no_physics(fresh_store: GraphStore) -> None:
    gid = grow_graph(fresh_store, LIVE_PHYSICS_LIMIT + 10)
    snapshot = GraphFeed(fresh_store, gid).snapshot()
    assert snapshot["options"]["physics"]["enabled"] is False
    assert all("x" in n and "y" in n for n in snapshot["nodes"])
    assert len({(round(n["x"]), round(n["y"])) for n in snapshot["nodes"]}) > len(snapshot["nodes"]) * 0.9
    small = GraphFeed(fresh_store, fresh_store.create_graph("Small?", "pulse", "autonomous")["graph_id"])
    assert small.snapshot()["options"]["physics"]["enabled"] is True
