"""Store benchmark: claim throughput (1 vs 8 threads) and get_snapshot() cost (1k vs 10k nodes).

Run from the repository root::

    python bench/store_bench.py            # 2000 questions per claim run, snapshots at 1k / 10k
    python bench/store_bench.py --quick    # a smoke run: 200 questions, snapshots at 200 / 2k

Claims: for each store (in memory; a DuckDB file in a temporary folder) and each
thread count, a fresh graph gets N open questions (built in one ``store.batch()``);
then every thread runs its own loop ``claim_work`` until nothing is left. The
clock runs from the moment all threads are released until the last one ends.
Every question must be claimed exactly once, or the run aborts.

Snapshots: a graph shaped like a real run (answers under questions, ten
questions under each answer, levels below max_depth 6) of the given size in
an in-memory store; ``get_snapshot`` is timed several times and the median kept.

Nothing here is a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import GraphStore  # noqa: E402


@dataclass
class ClaimRun:
    store: str
    threads: int
    claims: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.claims / self.seconds


def fill_open_questions(store: GraphStore, n: int) -> tuple[str, set[str]]:
    """A deep graph whose root answer carries ``n`` open questions (one transaction)."""
    g = store.create_graph("How fast can workers claim?", "deep", "autonomous")
    gid = g["graph_id"]
    with store.batch():
        answer = store.add_node(gid, g["root_node_id"], "answer", "Many questions.")["node_id"]
        ids = {store.add_node(gid, answer, "question", f"question {i}")["node_id"] for i in range(n)}
    return gid, ids


def claim_run(store: GraphStore, kind: str, threads: int, n: int) -> ClaimRun:
    gid, questions = fill_open_questions(store, n)
    start = threading.Barrier(threads + 1)
    results: list[list[str]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def loop(k: int) -> None:
        mine = results[k]
        worker = f"worker-{k}"
        try:
            start.wait()
            while True:
                got = store.claim_work(gid, worker)
                if got["node_id"] is None:
                    return
                mine.append(got["node_id"])
        except BaseException as exc:  # reported after the run
            errors.append(exc)

    pool = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"claim run failed ({kind}, {threads} threads): {errors[0]!r}")
    claimed = [node for mine in results for node in mine]
    if len(claimed) != n or set(claimed) != questions:
        raise SystemExit(
            f"claim run broke rule 1 ({kind}, {threads} threads): {len(claimed)} claims, "
            f"{len(set(claimed))} distinct, {n} questions"
        )
    return ClaimRun(kind, threads, n, seconds)


def build_tree(store: GraphStore, n_nodes: int, fanout: int = 10) -> str:
    """A graph of exactly ``n_nodes`` nodes: question → answer → ``fanout`` questions → …"""
    g = store.create_graph("How big can a snapshot get?", "deep", "autonomous")
    gid = g["graph_id"]
    count = 1
    with store.batch():
        answers: deque[str] = deque()
        answers.append(store.add_node(gid, g["root_node_id"], "answer", "root answer")["node_id"])
        count += 1
        while count < n_nodes:
            parent = answers.popleft()
            for i in range(fanout):
                if count >= n_nodes:
                    break
                q = store.add_node(gid, parent, "question", f"question {count} ({i})")
                count += 1
                # the last level stays open; a question at max_depth - 1 takes no sub-questions
                if count < n_nodes and q["depth"] < 5:
                    a = store.add_node(gid, q["node_id"], "answer", f"answer {count}")
                    answers.append(a["node_id"])
                    count += 1
    got = len(store.get_snapshot(gid)["nodes"])
    if got != n_nodes:
        raise SystemExit(f"built {got} nodes, wanted {n_nodes}")
    return gid


def median_snapshot_s(store: GraphStore, gid: str, runs: int) -> tuple[float, float, int, int]:
    """Medians of ``get_snapshot`` and of the same graph read the way it was before (each row turned into
    its dict in Python: ``NodeRow.to_dict``, ``rows.edge_dict``), interleaved run by run."""

    def per_row() -> None:
        with store._db.read():
            [n.to_dict() for n in store._nodes("graph_id = ?", [gid])]
            store._edges(gid)

    store.get_snapshot(gid)  # warm-up
    per_row()
    times, rows = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        snap = store.get_snapshot(gid)
        t1 = time.perf_counter()
        per_row()
        rows.append(time.perf_counter() - t1)
        times.append(t1 - t0)
    return statistics.median(times), statistics.median(rows), len(snap["nodes"]), len(snap["edges"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    n_claims = 200 if args.quick else 2000
    sizes = (200, 2000) if args.quick else (1000, 10000)
    runs = 3 if args.quick else 7
    thread_counts = (1, 8)

    print_header("fractal_nb store benchmark" + (" (--quick)" if args.quick else ""))

    claim_runs: list[ClaimRun] = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fractal-bench-") as tmp:
        for kind in ("memory", "file"):
            for threads in thread_counts:
                path = None if kind == "memory" else Path(tmp) / f"claims-{threads}.duckdb"
                with GraphStore(path) as store:
                    run = claim_run(store, kind, threads, n_claims)
                claim_runs.append(run)
                print(f"  ... {kind:6} {threads} thread(s): {run.rate:8.1f} claims/s", flush=True)

    snapshots: list[tuple[int, float, int, float]] = []
    with GraphStore() as store:
        for size in sizes:
            gid = build_tree(store, size)
            median, per_row, nodes, edges = median_snapshot_s(store, gid, runs)
            snapshots.append((nodes, median, edges, per_row))
            print(f"  ... snapshot {nodes} nodes: {median * 1000:8.1f} ms", flush=True)
    total = time.perf_counter() - t_all

    print()
    print(f"Claims: {n_claims} open questions per run; each thread loops claim_work until none left")
    header = (
        f"| {'store':6} | {'threads':>7} | {'claims':>6} | {'seconds':>8} | "
        f"{'claims/s':>9} | {'vs 1 thread':>11} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for run in claim_runs:
        base = next(r for r in claim_runs if r.store == run.store and r.threads == 1)
        ratio = run.rate / base.rate
        print(
            f"| {run.store:6} | {run.threads:>7} | {run.claims:>6} | {run.seconds:>8.2f} | "
            f"{run.rate:>9.1f} | {ratio:>10.2f}x |"
        )
    print()
    print(f"get_snapshot() (in-memory store, median of {runs} runs after a warm-up)")
    header = (
        f"| {'nodes':>6} | {'edges':>6} | {'median ms':>9} | {'vs smallest':>11} | "
        f"{'per-row Python ms':>17} | {'speed-up':>8} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for nodes, median, edges, per_row in snapshots:
        ratio = median / snapshots[0][1]
        print(
            f"| {nodes:>6} | {edges:>6} | {median * 1000:>9.1f} | {ratio:>10.2f}x | "
            f"{per_row * 1000:>17.1f} | {per_row / median:>7.2f}x |"
        )
    print(
        "  per-row Python: the same graph read as get_snapshot read it before its JSON was written by "
        "DuckDB (store/snapshot.py), interleaved run by run; speed-up: per-row / get_snapshot"
    )
    (n_small, t_small, _, _), (n_big, t_big, _, _) = snapshots[0], snapshots[-1]
    rate = {(r.store, r.threads): r.rate for r in claim_runs}
    scaling = ", ".join(f"{k} {rate[k, 8] / rate[k, 1]:.2f}" for k in ("memory", "file"))
    print(
        f"\nsnapshot {n_big:g}/{n_small:g} nodes time ratio: {t_big / t_small:.2f} "
        f"(node ratio {n_big / n_small:g}); claims/s 8-thread/1-thread: {scaling}"
    )
    print(f"Total bench time {total:.1f} s (graph building included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
