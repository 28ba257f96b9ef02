"""Scope benchmark: a small graph's step costs the same whether its file holds other graphs or not.

Run: ``python bench/scope_bench.py`` (``--quick``: 5,000 other nodes in 6 graphs; ``--large``:
420,000, a 20,000-node graph and 20 forks of it).

Turns and forks put many graphs in one file, so every hot query is scoped by graph
(docs/architecture/store.md, "Cost by graph"). Measured side by side, rounds
interleaved, the median of each round's ratio kept: the engine's step
(``Exploration.step``, the simulator, no model latency) on a new graph of about 100
nodes, in an empty file and in a copy of a file that also holds 20,000 other nodes: a
graph of about 950 nodes and 20 forks of it (a fork copies its source's nodes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import deque

from fractal_nb import Exploration, GraphStore, SimulatedLLM

SEED = "Should a mid-sized city build a tram line?"


def fill(path: str, n_nodes: int, forks: int) -> None:
    """A graph of ``n_nodes`` nodes (question → answer → 10 questions → …) and ``forks`` forks of it."""
    n_nodes //= forks + 1  # each fork holds its source's nodes again
    with GraphStore(path) as store:
        g = store.create_graph("What else does the file hold?", "deep", "autonomous")
        gid, count = g["graph_id"], 1
        with store.batch():
            answers = deque([store.add_node(gid, g["root_node_id"], "answer", "root answer")["node_id"]])
            count += 1
            while count < n_nodes:
                parent = answers.popleft()
                for i in range(10):
                    if count >= n_nodes:
                        break
                    q = store.add_node(gid, parent, "question", f"question {count} ({i})")
                    count += 1
                    if count < n_nodes and q["depth"] < 5:
                        answers.append(
                            store.add_node(gid, q["node_id"], "answer", f"answer {count}")["node_id"]
                        )
                        count += 1
        last_event = int(store.get_events(gid)["last_event_id"])
        for _ in range(forks):
            store.fork_graph(gid, last_event)


def step_ms(path: str, steps: int) -> tuple[float, int]:
    """Median ms per engine step on a new graph in ``path``, and the graph's nodes at the end."""
    with Exploration.create(SEED, intensity="deep", llm=SimulatedLLM(seed=1, link_rate=0.3), path=path) as ex:
        ex.step(1)  # the seed plan
        spent = []
        for _ in range(steps):
            started = time.perf_counter()
            if not ex.step(1):
                break
            spent.append(time.perf_counter() - started)
        return statistics.median(spent) * 1000, len(ex.nodes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 other nodes, 5 of the graphs forks")
    parser.add_argument("--large", action="store_true", help="420,000 other nodes (20 forks of 20,000)")
    args = parser.parse_args()
    other, forks, steps, rounds = (5000, 5, 30, 2) if args.quick else (20_000, 20, 60, 5)
    if args.large:
        other = 420_000
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full.duckdb")
        fill(full, other, forks)
        with GraphStore(full, read_only=True) as store:
            held = sum(len(store.get_snapshot(g["graph_id"])["nodes"]) for g in store.list_graphs()["graphs"])
        alone: list[float] = []
        shared: list[float] = []
        nodes = 0
        for r in range(rounds):
            for kind in ("alone", "shared"):
                path = os.path.join(tmp, f"{kind}-{r}.duckdb")
                if kind == "shared":
                    shutil.copy(full, path)
                ms, nodes = step_ms(path, steps)
                (alone if kind == "alone" else shared).append(ms)
                print(f"  ... round {r + 1} {kind:6s}: {ms:6.2f} ms per step", flush=True)
    a, s = statistics.median(alone), statistics.median(shared)
    # Each round runs both, one after the other: their ratio is what the machine's drift leaves alone.
    paired = statistics.median(b / a_ for a_, b in zip(alone, shared, strict=True))
    print(f"\nA new graph's engine step ({steps} steps, {nodes} nodes at the end), median of {rounds} rounds")
    others = f"{held:,} other nodes in {1 + forks} graphs ({forks} forks)"
    print(f"| {'file holds':44s} | ms per step |")
    print(f"|{'-' * 46}|-------------|")
    print(f"| {'only this graph':44s} | {a:11.2f} |")
    print(f"| {others:44s} | {s:11.2f} |")
    print(f"\nstep time shared/alone: {paired:.3f}, each round's ratio, median (target within 5%: <= 1.05)")
    print(f"Total bench time {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
