"""History at commit, the state at an event, and forks, on the store (docs/architecture/store.md, rules
13-16).

Covers: store/journal.py, store/replay.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fractal_nb import GraphStore, NotFoundError, StateError
from tests.conftest import Backend, FakeClock, Tree, make_tree


def last(store: GraphStore, graph_id: str) -> int:
    return int(store.get_events(graph_id)["last_event_id"])


def now_equals_at_last(store: GraphStore, graph_id: str) -> None:
    snapshot = store.get_snapshot(graph_id)
    state = store.get_state_at(graph_id, last(store, graph_id))
    assert {k: v for k, v in state.items() if k != "event_id"} == snapshot


def rows(store: GraphStore, table: str, graph_id: str) -> list[tuple[Any, ...]]:
    found = store._db.fetchall(f"SELECT * FROM {table} WHERE graph_id = ?", [graph_id])  # noqa: SLF001
    return sorted(found, key=lambda row: [(v is None, str(v)) for v in row])


def test_an_event_inside_a_commit_shows_the_state_after_that_commit(tree: Tree) -> None:
    first = int(tree.store.get_events(tree.graph_id)["events"][0]["event_id"])  # graph_created
    state = tree.store.get_state_at(tree.graph_id, first)
    assert [n["node_id"] for n in state["nodes"]] == [tree.root]  # node_added landed in the same commit
    now_equals_at_last(tree.store, tree.graph_id)


def test_a_rolled_back_transaction_leaves_no_history(tree: Tree) -> None:
    before = {
        t: rows(tree.store, t, tree.graph_id) for t in ("node_history", "graph_history", "history_baselines")
    }
    with pytest.raises(RuntimeError), tree.store.batch():
        tree.answer(tree.seeds[0])
        tree.store.update_graph_status(tree.graph_id, "paused")
        raise RuntimeError("refused")
    assert {t: rows(tree.store, t, tree.graph_id) for t in before} == before
    tree.answer(tree.seeds[1])  # the next commit records only its own work
    now_equals_at_last(tree.store, tree.graph_id)


def test_a_commit_writes_a_few_history_statements(backend: Backend, clock: FakeClock) -> None:
    seen: list[str] = []
    with backend.open(clock=clock, tracer=lambda sql, _params: seen.append(sql)) as store:
        tree = make_tree(store)
        seen.clear()
        store.claim_work(tree.graph_id, "w1")
        history = [s for s in seen if "_history" in s or "history_baselines" in s]
        assert len(history) == 1, history  # the claimed node's image, with the watermark


def test_a_heartbeat_renews_the_image_at_the_last_event(tree: Tree, clock: FakeClock) -> None:
    tree.store.claim_work(tree.graph_id, "w1")
    at = last(tree.store, tree.graph_id)
    clock.advance(30)
    assert tree.store.heartbeat(tree.store.holder["holder_id"])["renewed"] == 1
    assert last(tree.store, tree.graph_id) == at  # no event
    now_equals_at_last(tree.store, tree.graph_id)


def test_fork_rewrites_every_reference_and_reopens_claims(tree: Tree, clock: FakeClock) -> None:
    store, gid = tree.store, tree.graph_id
    a0, a1 = tree.answer(tree.seeds[0]), tree.answer(tree.seeds[1])
    store.update_node(
        gid, a0, {"convergence_with": [a1], "convergence_insight": "same", "converging_nodes": [a0, a1]}
    )
    sub = store.add_node(gid, a1, "question", "A deeper one?")["node_id"]
    store.mark_saturated(gid, tree.seeds[1], "pruned")
    claimed = store.claim_work(gid, "w1")["node_id"]
    at = last(store, gid)
    before = {t: rows(store, t, gid) for t in ("graphs", "nodes", "edges", "events", "node_history")}
    forked = store.fork_graph(gid, at)
    fork = forked["graph_id"]
    assert (forked["forked_from"], forked["forked_at"], forked["nodes"]) == (gid, at, 8)
    assert {t: rows(store, t, gid) for t in before} == before
    nodes = store._db.fetchall(  # noqa: SLF001 - every column, question_id and path included
        "SELECT node_id, parent_id, question_id, branch_id, path, inherited_from, metadata, status, holder, "
        "claimed_at FROM nodes WHERE graph_id = ? ORDER BY seq",
        [fork],
    )
    mine = {n[0] for n in nodes}
    source_ids = {n["node_id"] for n in store.get_snapshot(gid)["nodes"]}
    for node_id, parent, question, branch, path, inherited, metadata, *_ in nodes:
        refs = [parent, question, branch, inherited, *(path.split("/") if path else [])]
        refs += re.findall("n-[0-9a-f]{16}", metadata)
        assert all(r is None or r in mine for r in refs), (node_id, refs)
    text = json.dumps([rows(store, t, fork) for t in ("graphs", "nodes", "edges", "llm_calls")], default=str)
    assert not [i for i in source_ids if i in text], "a source id left in the fork"
    by_source = dict(
        store._db.fetchall("SELECT source_node_id, node_id FROM fork_nodes WHERE graph_id = ?", [fork])
    )  # noqa: SLF001
    reopened = next(n for n in nodes if n[0] == by_source[claimed])
    assert reopened[7:] == ("open", None, None)
    inherited = next(n for n in nodes if n[0] == by_source[sub])
    assert inherited[5] == by_source[tree.seeds[1]]
    links = store.get_snapshot(fork)["edges"]
    assert [(e["from_node"], e["to_node"]) for e in links if e["edge_type"] == "convergence"] == [
        (by_source[a0], by_source[a1])
    ]
    assert store.get_events(fork)["events"][-1]["kind"] == "forked"
    now_equals_at_last(store, fork)
    assert store.claim_work(fork, "w2")["node_id"] == by_source[claimed]  # the fork's work goes on


def test_deleting_a_source_keeps_its_fork_and_drops_only_its_own_history(tree: Tree) -> None:
    store = tree.store
    fork = store.fork_graph(tree.graph_id, last(store, tree.graph_id))["graph_id"]
    store.delete_graph(tree.graph_id)
    for table in ("node_history", "graph_history", "history_baselines", "lineage", "fork_nodes"):
        assert rows(store, table, tree.graph_id) == []
    now_equals_at_last(store, fork)
    assert store.get_lineage(fork)[0]["forked_from"] == tree.graph_id


def test_state_at_refuses_an_event_past_the_journal(tree: Tree) -> None:
    store, gid = tree.store, tree.graph_id
    at = last(store, gid)
    for table in ("node_history", "graph_history"):  # as if an older version had written the last events
        store._db.execute(f"DELETE FROM {table} WHERE graph_id = ? AND event_id >= ?", [gid, at])  # noqa: SLF001
    with pytest.raises(StateError, match="has no recorded state"):
        store.get_state_at(gid, at)


def test_unknown_graphs_and_read_only_stores_are_refused(tree: Tree, backend: Backend) -> None:
    store = tree.store
    for call in (
        lambda: store.get_state_at("g-none", 1),
        lambda: store.fork_graph("g-none", 1),
        lambda: store.get_lineage("g-none"),
    ):
        with pytest.raises(NotFoundError, match="g-none"):
            call()
    with backend.open(backend.lasting) as writer:
        gid = writer.create_graph("Why?", "pulse")["graph_id"]
        at = last(writer, gid)
    with backend.open(backend.lasting, read_only=True) as reader:
        assert reader.get_state_at(gid, at)["nodes"][0]["text"] == "Why?"
        with pytest.raises(StateError, match="read_only"):
            reader.fork_graph(gid, at)
        family = {g["graph_id"] for g in reader.list_family()}
        assert family - {tree.graph_id} == {gid}  # on PostgreSQL the tree's store is this one too


@pytest.mark.duckdb_only  # a DuckDB file of a later schema (PostgreSQL's schema is versioned: test_postgres)
def test_a_column_added_to_nodes_is_kept_in_history_too(tmp_path: Any) -> None:
    path = tmp_path / "grown.duckdb"
    with GraphStore(path) as store:
        gid = store.create_graph("Why?", "pulse")["graph_id"]
        store._db.execute("ALTER TABLE nodes ADD COLUMN weak BOOLEAN DEFAULT false")  # noqa: SLF001 - a later schema
    with GraphStore(path) as store:
        root = store.get_snapshot(gid)["root_node_id"]
        store._db.execute("UPDATE nodes SET weak = true WHERE node_id = ?", [root])  # noqa: SLF001
        store.add_node(gid, root, "answer", "Because.")
        images = store._db.fetchall(
            "SELECT weak FROM node_history WHERE node_id = ? ORDER BY event_id", [root]
        )  # noqa: SLF001
        assert images[-1] == (True,)
        now_equals_at_last(store, gid)
