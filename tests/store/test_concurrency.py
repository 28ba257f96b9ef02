"""Store rules under real threads (rule 1 and friends): no double claims, consistent ends.

Covers: store/claim.py, store/links.py.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from fractal_nb import FractalError, GraphStore
from fractal_nb.vocabulary import MAX_CHILDREN
from tests.conftest import Backend, FakeClock, make_tree

WORKERS = 8


def run_threads(target: Callable[[int], Any], n: int = WORKERS) -> list[Any]:
    """Start ``n`` threads at once (a barrier) and return their results; re-raise failures."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            results[i] = target(i)
        except BaseException as exc:  # surfaced below, in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


def claim_counts(store: GraphStore, graph_id: str) -> Counter[str]:
    events = store.get_events(graph_id)["events"]
    return Counter(e["node_id"] for e in events if e["kind"] == "claimed")


def test_parallel_claims_take_each_question_exactly_once(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=MAX_CHILDREN)  # the most one answer holds

    def claim_all(i: int) -> list[str]:
        mine = []
        while (node := fresh_store.claim_work(t.graph_id, f"w{i}")["node_id"]) is not None:
            mine.append(node)
        return mine

    per_worker = run_threads(claim_all)
    claimed = [n for mine in per_worker for n in mine]
    assert len(claimed) == len(set(claimed)) == MAX_CHILDREN
    assert set(claimed) == set(t.seeds)
    assert set(claim_counts(fresh_store, t.graph_id).values()) == {1}
    assert sum(1 for mine in per_worker if mine) > 1, "only one thread ever claimed"


def test_parallel_claims_on_a_lasting_store(backend: Backend) -> None:
    """A file on DuckDB, the schema on PostgreSQL: the store other processes would open too."""
    with backend.open(backend.lasting) as store:
        t = make_tree(store, "explore", seeds=100)
        results = run_threads(
            lambda i: [c for _ in range(30) if (c := store.claim_work(t.graph_id, f"w{i}")["node_id"])]
        )
        claimed = [n for mine in results for n in mine]
        assert sorted(claimed) == sorted(t.seeds)


def _worker_loop(store: GraphStore, graph_id: str, worker: str, seed: int) -> dict[str, int]:
    """The seed-000 worker primitive against the store, with refusals treated as data."""
    rng = random.Random(seed)
    stats = Counter[str]()
    idle = 0
    while idle < 200:
        claim = store.claim_work(graph_id, worker)
        if claim["node_id"] is None:
            if claim["graph_done"]:
                break
            idle += 1
            threading.Event().wait(0.002)
            continue
        idle = 0
        node = claim["node_id"]
        stats["claimed"] += 1
        try:
            answer = store.add_node(graph_id, node, "answer", f"answer to {node}", owner=worker)
            subs = {1: rng.randint(1, 3), 2: rng.randint(0, 2)}.get(claim["depth"], 0)
            with store.batch():
                for k in range(subs):
                    store.add_node(graph_id, answer["node_id"], "question", f"sub {k}", owner=worker)
            if subs == 0:
                store.synthesize_node(graph_id, node, f"leaf {node}")
                stats["synthesized"] += 1
        except FractalError:
            stats["refused"] += 1
            continue
        while ready := store.get_ready_to_synthesize(graph_id)["ready_nodes"]:
            try:
                store.synthesize_node(graph_id, ready[0]["node_id"], "cascade")
                stats["synthesized"] += 1
            except FractalError:  # another worker got there first
                stats["lost_race"] += 1
    return dict(stats)


def test_parallel_workers_end_with_a_consistent_graph(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=6)
    stats = run_threads(lambda i: _worker_loop(fresh_store, t.graph_id, f"w{i}", seed=i))
    snap = fresh_store.get_snapshot(t.graph_id)
    questions = [n for n in snap["nodes"] if n["node_type"] == "question"]
    assert len(questions) > 20
    assert {q["status"] for q in questions} == {"synthesized"}
    assert all("synthesis" in q["metadata"] for q in questions)
    counts = claim_counts(fresh_store, t.graph_id)
    assert set(counts.values()) == {1}
    assert set(counts) == {q["node_id"] for q in questions if q["depth"] > 0}
    assert t.root not in counts
    assert sum(s.get("synthesized", 0) for s in stats) == len(questions)
    assert fresh_store.claim_work(t.graph_id, "late")["graph_done"] is True


def test_prune_during_parallel_work_leaves_no_stuck_nodes(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=6)

    def work_or_prune(i: int) -> dict[str, int]:
        if i == 0:
            for seed in t.seeds[:3]:
                threading.Event().wait(0.01)
                try:
                    fresh_store.prune_branch(t.graph_id, seed)
                except FractalError:
                    pass  # already finished: nothing to prune
            return {}
        return _worker_loop(fresh_store, t.graph_id, f"w{i}", seed=i)

    run_threads(work_or_prune)
    snap = fresh_store.get_snapshot(t.graph_id)
    statuses = Counter(n["status"] for n in snap["nodes"] if n["node_type"] == "question")
    assert set(statuses) <= {"synthesized", "saturated"}
    assert snap["nodes"][0]["status"] == "synthesized"
    assert set(claim_counts(fresh_store, t.graph_id).values()) == {1}


def test_parallel_links_create_each_edge_once(fresh_store: GraphStore) -> None:
    t = make_tree(fresh_store, "explore", seeds=4)
    answers = [t.answer(q) for q in t.seeds]

    def link(i: int) -> int:
        me, other = answers[i % 2], answers[2 + (i % 2)]
        a, b = (me, other) if i % 4 < 2 else (other, me)
        return int(fresh_store.update_node(t.graph_id, a, {"convergence_with": [b]})["edges_created"])

    assert sum(run_threads(link)) == 2
    assert fresh_store.query_convergence(t.graph_id)["count"] == 2


def test_expired_leases_are_taken_over_once_under_threads(backend: Backend, clock: FakeClock) -> None:
    with backend.open(lease_s=60, clock=clock) as store:
        t = make_tree(store, "explore", seeds=50)
        for _ in range(50):  # a crashed worker held everything
            store.claim_work(t.graph_id, "crashed")
        clock.advance(61)
        results = run_threads(
            lambda i: [c for _ in range(20) if (c := store.claim_work(t.graph_id, f"w{i}")["node_id"])]
        )
        retaken = [n for mine in results for n in mine]
        assert sorted(retaken) == sorted(t.seeds)
