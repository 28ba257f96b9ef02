"""Claims benchmark: what holders, heartbeats and synthesis claims cost, side by side in one run.

Run: ``python bench/claims_bench.py`` (``--quick`` for fewer nodes).

(a) claims/s with 8 threads: claims tied to a holder (the engine's) vs plain leases.
(b) the cascade with 8 threads: the store handing out syntheses (``claim_synthesis`` +
    ``submit_synthesis``, what workers do now) vs every thread reading
    ``get_ready_to_synthesize`` and racing on ``synthesize_node`` with no guard shared
    between them (what workers in separate processes did): time per synthesis, and
    how many model calls each way pays per synthesis (a sleep stands in for the call).
(c) one heartbeat renewing the leases of N held claims.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from typing import Any

from machine import print_header

from fractal_nb import GraphStore
from fractal_nb.errors import FractalError
from fractal_nb.vocabulary import MAX_CHILDREN

THREADS = 8
MODEL_S = 0.002  # a stand-in for the model call behind each synthesis


def ready_graph(store: GraphStore, leaves: int) -> str:
    """A graph whose ``leaves`` seed questions are answered, with sub-questions all synthesized."""
    g = store.create_graph("How fast is the cascade?", "deep", "autonomous")
    gid = g["graph_id"]
    with store.batch():
        for i in range(leaves):
            if i % MAX_CHILDREN == 0:  # the most one answer holds
                answer = store.add_node(gid, g["root_node_id"], "answer", f"Split {i}.")["node_id"]
            q = store.add_node(gid, answer, "question", f"Seed {i}")["node_id"]
            sub = store.add_answer(gid, q, "Answered.", sub_questions=[f"Detail of {i}"])
            leaf = sub["sub_questions"][0]["node_id"]
            store.add_answer(gid, leaf, "A leaf.", synthesize=True)
    return gid


def open_questions(store: GraphStore, gid: str, n: int) -> None:
    """``n`` open questions under the root's answers, ``MAX_CHILDREN`` to an answer (the most it holds)."""
    root = store.get_graph(gid)["root_node_id"]
    with store.batch():
        for start in range(0, n, MAX_CHILDREN):
            answer = store.add_node(gid, root, "answer", f"Split {start}.")["node_id"]
            for i in range(start, min(n, start + MAX_CHILDREN)):
                store.add_node(gid, answer, "question", f"Q{i}")


def in_threads(work: Any) -> float:
    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(THREADS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def claims_per_s(nodes: int, holder: Any) -> float:
    with GraphStore() as store:
        gid = store.create_graph("How fast are claims?", "deep", "autonomous")["graph_id"]
        open_questions(store, gid, nodes)

        def work(worker: str) -> None:
            while store.claim_work(gid, worker, holder=holder)["node_id"] is not None:
                pass

        return nodes / in_threads(work)


def cascade(leaves: int, *, store_hands_out: bool) -> tuple[float, Counter[str]]:
    paid: Counter[str] = Counter()
    with GraphStore() as store:
        gid = ready_graph(store, leaves)

        def by_claims(worker: str) -> None:
            while (node := store.claim_synthesis(gid, worker)["node_id"]) is not None:
                time.sleep(MODEL_S)
                paid[node] += 1
                store.submit_synthesis(gid, node, "Composed.", worker_id=worker)

        def racing(worker: str) -> None:
            while ready := store.get_ready_to_synthesize(gid)["ready_nodes"]:
                node = ready[hash(worker) % len(ready)]["node_id"]  # workers spread as they can
                time.sleep(MODEL_S)
                paid[node] += 1
                try:
                    store.synthesize_node(gid, node, "Composed.")
                except FractalError:  # another worker got there first: this call is thrown away
                    pass

        seconds = in_threads(by_claims if store_hands_out else racing)
        assert store.get_ready_to_synthesize(gid)["count"] == 0
    return seconds / (leaves + 1), paid


def heartbeat_ms(held: int) -> float:
    with GraphStore() as store:
        gid = store.create_graph("How dear is a heartbeat?", "deep", "autonomous")["graph_id"]
        open_questions(store, gid, held)
        for _ in range(held):
            store.claim_work(gid, "w1")
        started = time.perf_counter()
        for _ in range(20):
            assert store.heartbeat(store.holder["holder_id"])["renewed"] == held
        return (time.perf_counter() - started) / 20 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer nodes")
    args = parser.parse_args()
    print_header(__doc__.splitlines()[0])
    nodes, leaves = (400, 60) if args.quick else (2000, 200)
    held = claims_per_s(nodes, "store")
    plain = claims_per_s(nodes, None)
    print(
        f"(a) {THREADS} threads claiming {nodes} questions: held {held:,.0f}/s, "
        f"plain lease {plain:,.0f}/s; ratio {held / plain:.2f}"
    )
    new_s, new_paid = cascade(leaves, store_hands_out=True)
    old_s, old_paid = cascade(leaves, store_hands_out=False)
    print(f"(b) cascade of {leaves + 1} syntheses, {THREADS} threads, {MODEL_S * 1000:.0f} ms a call:")
    print(
        f"    handed out by the store: {new_s * 1000:.1f} ms each, {sum(new_paid.values())} calls, "
        f"at most {max(new_paid.values())} per synthesis"
    )
    print(
        f"    racing, no shared guard: {old_s * 1000:.1f} ms each, {sum(old_paid.values())} calls, "
        f"at most {max(old_paid.values())} per synthesis"
    )
    print(
        f"    time ratio {new_s / old_s:.2f}; calls ratio "
        f"{sum(new_paid.values()) / sum(old_paid.values()):.2f}"
    )
    for count in (10, 100):
        print(f"(c) one heartbeat renewing {count} claims: {heartbeat_ms(count):.2f} ms")


if __name__ == "__main__":
    main()
