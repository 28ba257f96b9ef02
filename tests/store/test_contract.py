"""Return shapes of the contract table, events, batches, persistence and closing.

Covers: store/base.py, store/database.py, store/graph_store.py, store/graphs.py, store/records.py.
"""

from __future__ import annotations

import json

import pytest

from fractal_nb import GraphStore, NotFoundError, StateError
from tests.conftest import Backend, FakeClock, Tree, make_tree


@pytest.mark.parametrize(
    ("intensity", "budget"),
    [
        ("pulse", {"max_agents": 3, "max_depth": 2, "seed_questions": [3, 4]}),
        ("explore", {"max_agents": 8, "max_depth": 4, "seed_questions": [5, 7]}),
        ("deep", {"max_agents": 15, "max_depth": 6, "seed_questions": [8, 12]}),
    ],
)
def test_create_graph_shape_and_budgets(fresh_store: GraphStore, intensity: str, budget: dict) -> None:
    g = fresh_store.create_graph("Is remote work here to stay?", intensity, "depth:1", {"who": "me"})
    assert set(g) == {"graph_id", "root_node_id", "intensity", "checkpoint_mode", "budget", "status"}
    assert (g["intensity"], g["checkpoint_mode"], g["status"]) == (intensity, "depth:1", "active")
    assert g["budget"] == budget
    snap = fresh_store.get_snapshot(g["graph_id"])
    assert snap["seed"] == "Is remote work here to stay?" and snap["metadata"] == {"who": "me"}
    root = snap["nodes"][0]
    assert (root["node_id"], root["depth"], root["node_type"], root["status"]) == (
        g["root_node_id"],
        0,
        "question",
        "open",
    )
    json.dumps(snap)  # JSON-ready


def test_node_dict_fields(tree: Tree, clock: FakeClock) -> None:
    node = tree.node(tree.seeds[0])
    for key in (
        "node_id",
        "graph_id",
        "parent_id",
        "node_type",
        "text",
        "depth",
        "status",
        "owner",
        "metadata",
        "created_at",
        "updated_at",
    ):
        assert key in node
    assert node["parent_id"] == tree.root_answer and node["branch_id"] == tree.seeds[0]
    assert node["created_at"].startswith("2023-11-14T22:13:20")  # the injected clock


def test_add_node_return_shape(tree: Tree) -> None:
    result = tree.store.add_node(tree.graph_id, tree.seeds[0], "answer", "text", owner="w1")
    assert set(result) == {"node_id", "graph_id", "parent_id", "depth", "node_type", "status"}
    assert (result["depth"], result["status"]) == (1, "answered")


def test_claim_prefers_branches_the_worker_touched(tree: Tree) -> None:
    ans = tree.answer(tree.seeds[2], owner="w1")
    sub = tree.ask(ans, "follow-up in w1's branch")
    claimable = tree.store.get_claimable_work(tree.graph_id, "w1")
    assert [n["node_id"] for n in claimable["claimable"]] == [sub, tree.seeds[0], tree.seeds[1]]
    neutral = tree.store.get_claimable_work(tree.graph_id)["claimable"]
    assert [n["node_id"] for n in neutral] == [tree.seeds[0], tree.seeds[1], sub]
    assert tree.store.claim_work(tree.graph_id, "w1")["node_id"] == sub
    assert tree.store.claim_work(tree.graph_id, "w2")["node_id"] == tree.seeds[0]


def test_open_questions_and_branch(tree: Tree) -> None:
    ans = tree.answer(tree.seeds[0])
    sub = tree.ask(ans)
    opened = tree.store.get_open_questions(tree.graph_id)
    assert [n["node_id"] for n in opened["open_questions"]] == [tree.seeds[1], tree.seeds[2], sub]
    assert opened["count"] == 3
    branch = tree.store.get_branch(tree.graph_id, tree.seeds[0])
    assert branch["root"] == tree.seeds[0]
    assert [n["node_id"] for n in branch["nodes"]] == [tree.seeds[0], ans, sub]
    assert [(e["from_node"], e["to_node"]) for e in branch["edges"]] == [(tree.seeds[0], ans), (ans, sub)]


def test_saturation_status(tree: Tree) -> None:
    status = tree.store.get_saturation_status(tree.graph_id)
    assert [b["node_id"] for b in status["branches"]] == tree.seeds
    assert (status["all_saturated"], status["all_complete"]) == (False, False)
    tree.store.mark_saturated(tree.graph_id, tree.seeds[0], "derivable")
    for q in tree.seeds[1:]:
        tree.answer(q)
        tree.store.synthesize_node(tree.graph_id, q, "done")
    status = tree.store.get_saturation_status(tree.graph_id)
    assert status["branches"][0]["counts"]["saturated"] == 1
    assert (status["all_saturated"], status["all_complete"]) == (True, False)
    tree.store.synthesize_node(tree.graph_id, tree.root, "root synthesis")
    assert tree.store.get_saturation_status(tree.graph_id)["all_complete"] is True


def test_events_record_every_mutation_in_order(tree: Tree) -> None:
    first = tree.store.get_events(tree.graph_id)
    kinds = [e["kind"] for e in first["events"]]
    assert kinds[:3] == ["graph_created", "node_added", "node_added"]
    assert kinds.count("node_added") == 1 + 1 + 3  # root, its answer, three seed questions
    claim = tree.store.claim_work(tree.graph_id, "w1")["node_id"]
    tree.answer(claim, owner="w1")
    later = tree.store.get_events(tree.graph_id, since=first["last_event_id"])
    assert [(e["kind"], e["node_id"], e["actor"]) for e in later["events"]] == [
        ("claimed", claim, "w1"),
        ("node_added", later["events"][1]["node_id"], "w1"),
        ("status_changed", claim, "w1"),
    ]
    assert later["events"][2]["payload"] == {"from": "claimed", "to": "answered"}
    ids = [e["event_id"] for e in first["events"] + later["events"]]
    assert ids == sorted(set(ids))
    assert (
        tree.store.get_events(tree.graph_id, since=first["last_event_id"], limit=1)["events"]
        == later["events"][:1]
    )


def test_batch_is_all_or_nothing(tree: Tree) -> None:
    before = tree.store.get_snapshot(tree.graph_id)
    with pytest.raises(NotFoundError), tree.store.batch():
        tree.answer(tree.seeds[0])
        tree.answer("n-does-not-exist")
    assert tree.store.get_snapshot(tree.graph_id) == before
    with tree.store.batch():
        a = tree.answer(tree.seeds[0])
        tree.ask(a)
        assert tree.status(tree.seeds[0]) == "answered"  # reads inside see the batch
    assert len(tree.store.get_snapshot(tree.graph_id)["nodes"]) == len(before["nodes"]) + 2


def test_delete_graph(tree: Tree) -> None:
    other = make_tree(tree.store)
    assert tree.store.delete_graph(tree.graph_id) == {"graph_id": tree.graph_id, "deleted": True}
    with pytest.raises(NotFoundError):
        tree.store.get_snapshot(tree.graph_id)
    assert len(tree.store.get_snapshot(other.graph_id)["nodes"]) == 5


def test_tracer_sees_every_statement(backend: Backend) -> None:
    seen: list[str] = []
    with backend.open(tracer=lambda sql, params: seen.append(sql)) as store:
        store.create_graph("x", "pulse", "autonomous")
    assert any(sql.startswith("INSERT INTO graphs") for sql in seen)


def test_a_lasting_store_keeps_everything_across_reopen(backend: Backend) -> None:
    path = backend.lasting
    with backend.open(path) as store:
        t = make_tree(store)
        claim = store.claim_work(t.graph_id, "w1")["node_id"]
        store.update_node(t.graph_id, claim, {"note": "kept"})
        snap = store.get_snapshot(t.graph_id)
        events = store.get_events(t.graph_id)
    with backend.open(path) as store:
        assert store.get_snapshot(t.graph_id) == snap
        assert store.get_events(t.graph_id) == events
        assert store.claim_work(t.graph_id, "w2")["node_id"] not in (None, claim)


def test_closed_store_refuses_calls(backend: Backend) -> None:
    path = backend.lasting
    store = backend.open(path)
    g = store.create_graph("x", "pulse", "autonomous")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StateError, match="closed"):
        store.get_snapshot(g["graph_id"])
    with backend.open(path, read_only=True) as reader:  # the file was released
        assert reader.get_snapshot(g["graph_id"])["status"] == "active"
        with pytest.raises(StateError, match="read_only"):
            reader.create_graph("y", "pulse", "autonomous")


@pytest.mark.duckdb_only  # PostgreSQL's repr (no password): test_postgres
def test_a_memory_store_says_so() -> None:
    assert repr(GraphStore()) == "<GraphStore :memory:>"


def test_update_graph_metadata_merges_and_needs_an_active_graph(tree: Tree) -> None:
    result = tree.store.update_graph_metadata(tree.graph_id, {"harvest": {"summary": "s"}})
    assert result["metadata"] == {"harvest": {"summary": "s"}}
    tree.store.update_graph_metadata(tree.graph_id, '{"note": 1}')
    assert tree.store.get_snapshot(tree.graph_id)["metadata"] == {"harvest": {"summary": "s"}, "note": 1}
    before = tree.store.get_snapshot(tree.graph_id)
    for bad in ("[1]", {}, 3):
        with pytest.raises(ValueError, match="metadata"):
            tree.store.update_graph_metadata(tree.graph_id, bad)  # type: ignore[arg-type]
    tree.store.update_graph_status(tree.graph_id, "completed")
    with pytest.raises(StateError, match="is 'completed'"):
        tree.store.update_graph_metadata(tree.graph_id, {"late": True})
    assert tree.store.get_snapshot(tree.graph_id)["metadata"] == before["metadata"]


def test_get_graph_is_the_snapshot_without_nodes(tree: Tree) -> None:
    snapshot = tree.store.get_snapshot(tree.graph_id)
    graph = tree.store.get_graph(tree.graph_id)
    assert graph == {k: v for k, v in snapshot.items() if k not in ("nodes", "edges")}
    with pytest.raises(NotFoundError, match="g-none"):
        tree.store.get_graph("g-none")
