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
an in-memory store; ``get_snapshot`` is timed cold (a store's first read) and
after one node changed (what an outside agent's loop sees), beside the per-row
Python read it replaced, interleaved, medians kept.

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
from fractal_nb.store.snapshot import SnapshotTexts  # noqa: E402
from fractal_nb.vocabulary import MAX_CHILDREN  # noqa: E402

PEER_SNAPSHOT_10K_MS = 747.0  # spellbook's get_snapshot at 10k nodes, as issue 29 measured it on this machine


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
    """A deep graph whose root answers carry ``n`` open questions, ``MAX_CHILDREN`` each (one transaction)."""
    g = store.create_graph("How fast can workers claim?", "deep", "autonomous")
    gid = g["graph_id"]
    ids = set()
    with store.batch():
        for start in range(0, n, MAX_CHILDREN):  # the most one answer holds
            answer = store.add_node(gid, g["root_node_id"], "answer", f"Many questions {start}.")["node_id"]
            for i in range(start, min(n, start + MAX_CHILDREN)):
                ids.add(store.add_node(gid, answer, "question", f"question {i}")["node_id"])
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


@dataclass
class SnapshotTimes:
    """Medians in seconds of one graph's snapshot, read three ways, interleaved run by run."""

    nodes: int
    edges: int
    cold: float  # the first get_snapshot of a store: every row written by DuckDB
    changed: float  # get_snapshot after one node changed (the seed loop's case): that row written again
    per_row: float  # each row turned into its dict in Python, as get_snapshot read it before


def snapshot_times(store: GraphStore, gid: str, runs: int) -> SnapshotTimes:
    """Time ``get_snapshot`` cold, after a one-node change, and the per-row Python read (SnapshotTimes)."""

    def per_row() -> None:
        with store._db.read():
            [n.to_dict() for n in store._core.nodes("graph_id = ?", [gid])]
            store._queries.edges(gid)

    def cold() -> None:
        # what a store keeps, forgotten (store/snapshot.py)
        store._queries._snapshot_texts = SnapshotTexts(store._db)
        store.get_snapshot(gid)

    changing = store.get_snapshot(gid)["nodes"][-1]["node_id"]
    times: dict[str, list[float]] = {"cold": [], "changed": [], "per_row": []}
    cold()  # warm-up
    per_row()
    for i in range(runs):
        for kind, read in (("cold", cold), ("per_row", per_row)):
            t0 = time.perf_counter()
            read()
            times[kind].append(time.perf_counter() - t0)
        store.update_node(gid, changing, {"bench_run": i})
        t0 = time.perf_counter()
        snap = store.get_snapshot(gid)
        times["changed"].append(time.perf_counter() - t0)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return SnapshotTimes(len(snap["nodes"]), len(snap["edges"]), **medians)


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

    snapshots: list[SnapshotTimes] = []
    with GraphStore() as store:
        for size in sizes:
            gid = build_tree(store, size)
            timed = snapshot_times(store, gid, runs)
            snapshots.append(timed)
            print(f"  ... snapshot {timed.nodes} nodes: {timed.changed * 1000:8.1f} ms", flush=True)
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
        f"| {'nodes':>6} | {'edges':>6} | {'cold ms':>8} | {'one change ms':>13} | "
        f"{'per-row Python ms':>17} | {'speed-up':>8} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for t in snapshots:
        print(
            f"| {t.nodes:>6} | {t.edges:>6} | {t.cold * 1000:>8.1f} | {t.changed * 1000:>13.1f} | "
            f"{t.per_row * 1000:>17.1f} | {t.per_row / t.changed:>7.2f}x |"
        )
    print(
        "  cold: a store's first read of the graph (every row written by DuckDB); one change: after a node "
        "changed,\n  only its row written again (store/snapshot.py); per-row Python: the rows read as "
        "get_snapshot read them\n  before (NodeRow.to_dict, rows.edge_dict); speed-up: per-row / one change"
    )
    small, big = snapshots[0], snapshots[-1]
    if big.nodes >= 10_000:
        print(
            f"  vs spellbook's snapshot at 10k nodes ({PEER_SNAPSHOT_10K_MS:g} ms, quoted from issue 29): "
            f"{PEER_SNAPSHOT_10K_MS / (big.changed * 1000):.1f}x after one change, "
            f"{PEER_SNAPSHOT_10K_MS / (big.cold * 1000):.1f}x cold (target 5x)"
        )
    rate = {(r.store, r.threads): r.rate for r in claim_runs}
    scaling = ", ".join(f"{k} {rate[k, 8] / rate[k, 1]:.2f}" for k in ("memory", "file"))
    print(
        f"\nsnapshot {big.nodes:g}/{small.nodes:g} nodes time ratio (one change): "
        f"{big.changed / small.changed:.2f} (node ratio {big.nodes / small.nodes:g}); "
        f"claims/s 8-thread/1-thread: {scaling}"
    )
    print(f"Total bench time {total:.1f} s (graph building included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
