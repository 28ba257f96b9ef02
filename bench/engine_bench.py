"""Engine benchmark: parallel speedup, engine overhead, prompt tokens per node.

Run: ``python bench/engine_bench.py`` (``--quick`` for a smaller, faster pass).
Everything is measured side by side in one run; the machine is noisy, so read
the ratios, not the absolute seconds.

(a) wall time of the same exploration with 1 and 8 workers, and the speedup.
    ``SimulatedLLM(link_rate=0)`` gives a tree whose shape does not depend on
    scheduling, so both runs process the same nodes.
(b) engine overhead: wall time minus time spent inside the model, as a share
    of wall time, with one worker (no overlap to hide it).
(c) the store's write lock in (a)'s runs: held per node, as a share of wall time,
    and how long workers waited for it. With 8 workers the share held is the
    serialized part that bounds (a)'s speedup.
(d) mean prompt tokens per processed node in a ~50-node and a ~500-node graph.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import duckdb

from fractal_nb import Exploration, SimulatedLLM

SEED = "What would it take for a mid-sized city to halve its car traffic in ten years?"


def run_to_end(ex: Exploration, workers: int) -> tuple[float, int]:
    """Run (a new budget's turn after each circuit-breaker stop) until no work is left; (seconds, runs)."""
    started, runs = time.perf_counter(), 0
    while True:
        runs += 1
        if ex.run(max_workers=workers, progress=False) != "budget_exhausted":
            return time.perf_counter() - started, runs
        # budget_exhausted is terminal for resume: going on is a new turn (docs/notebook.md, "Budgets")
        ex.new_budget()


class LockMeter:
    """The store's write lock, timed: how long writes hold it and how long workers wait for it.

    Every write transaction runs under one lock per file (docs/architecture/store.md,
    "Store rules"), so with many workers the time it is held is the run's serialized
    part. The bench swaps the store's lock for this wrapper (an internal, reached on
    purpose).
    """

    def __init__(self, lock: threading.Lock) -> None:
        self.lock, self.held_s, self.waited_s, self.transactions = lock, 0.0, 0.0, 0
        self.local = threading.local()

    def __enter__(self) -> LockMeter:
        asked = time.perf_counter()
        self.lock.acquire()
        depth = getattr(self.local, "depth", 0)
        self.local.depth = depth + 1
        if depth == 0:  # an outer transaction (a nested one joins it)
            self.local.since = time.perf_counter()
            self.waited_s += self.local.since - asked
        return self

    def __exit__(self, *exc: object) -> None:
        self.local.depth -= 1
        if self.local.depth == 0:
            self.held_s += time.perf_counter() - self.local.since
            self.transactions += 1
        self.lock.release()


def speedup(latency: float, branching: float) -> dict[str, float]:
    rows = {}
    for workers in (1, 8):
        llm = SimulatedLLM(seed=1, branching=branching, link_rate=0.0, latency_s=latency)
        with Exploration.create(SEED, intensity="deep", llm=llm) as ex:
            meter = ex.store._db._write_lock = LockMeter(ex.store._db._write_lock)
            wall, runs = run_to_end(ex, workers)
            calls = ex.llm_calls()
            nodes = len(ex.events().query("kind == 'claimed'"))
            model_s = float(calls["latency_s"].sum())
            rows[workers] = {
                "wall": wall,
                "nodes": nodes,
                "graph": len(ex.nodes()),
                "calls": len(calls),
                "model_s": model_s,
                "runs": runs,
                "held_s": meter.held_s,
                "waited_s": meter.waited_s,
                "transactions": meter.transactions,
            }
    one, eight = rows[1], rows[8]
    print(
        f"(a) {one['graph']} nodes in the graph, {one['nodes']} processed, {one['calls']} model calls "
        f"of {latency * 1000:.0f} ms"
    )
    print(f"    1 worker : {one['wall']:7.1f} s   ({one['runs']} runs)")
    print(f"    8 workers: {eight['wall']:7.1f} s   ({eight['runs']} runs, {eight['nodes']} processed)")
    ratio = one["wall"] / eight["wall"]
    print(f"    speedup  : {ratio:5.2f}x   (target >= 7x)")
    overhead = (one["wall"] - one["model_s"]) / one["wall"]
    per_node = (one["wall"] - one["model_s"]) / max(one["nodes"], 1) * 1000
    print(
        f"(b) engine overhead with 1 worker: {overhead * 100:.1f}% of wall time "
        f"({per_node:.0f} ms per node outside the model; target <= 2%)"
    )
    for workers, row in rows.items():
        nodes = max(row["nodes"], 1)
        held, waited = row["held_s"] / nodes * 1000, row["waited_s"] / nodes * 1000
        print(
            f"(c) the write lock, {workers} worker{'s' if workers > 1 else ''}: held {held:.1f} ms per node "
            f"({row['transactions'] / nodes:.1f} transactions), {row['held_s'] / row['wall'] * 100:.0f}% of "
            f"wall time; waited {waited:.1f} ms per node"
        )
    return {"speedup": ratio, "overhead": overhead}


def tokens_per_node(target: int) -> tuple[int, float]:
    """Grow a graph to about ``target`` nodes; mean prompt tokens per processed node."""
    llm = SimulatedLLM(seed=2, branching=3.0 if target > 100 else 1.2, decay=0.7)
    with Exploration.create(SEED, intensity="deep", llm=llm) as ex:
        while len(ex.nodes()) < target:
            if ex.run(progress=False) != "budget_exhausted":
                break
            ex.new_budget()  # the circuit breaker: a new turn, the same limits
        calls = ex.llm_calls()
        nodes = max(1, len(ex.events().query("kind == 'claimed'")))
        work = calls[calls["role"].isin(["answer", "connect", "synthesize"])]
        return len(ex.nodes()), float(work["prompt_tokens"].sum()) / nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter latency and a smaller graph")
    args = parser.parse_args()
    print(f"duckdb {duckdb.__version__}, {os.cpu_count()} cpus")
    latency, branching = (0.05, 1.6) if args.quick else (0.2, 2.0)
    speedup(latency, branching)
    small_n, small = tokens_per_node(50)
    large_n, large = tokens_per_node(500)
    print(
        f"(d) prompt tokens per node: {small:,.0f} at {small_n} nodes, {large:,.0f} at {large_n} nodes; "
        f"ratio {large / small:.2f} (target <= 1.2)"
    )


if __name__ == "__main__":
    main()
