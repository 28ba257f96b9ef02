"""``Exploration.sql`` on a large graph: what a query costs, and how much of it is the store's listing.

Run from the repository root::

    python bench/sql_bench.py            # a 10,000-node graph
    python bench/sql_bench.py --quick    # a smoke run: 1,000 nodes

A graph of the given size (answers under questions, eight questions under each
answer, tests/graph_builder.py) is written to a DuckDB file in a temporary
folder and opened read-only; each query is timed several times and the median
kept, beside ``store.get_snapshot`` alone (what the ``nodes`` and ``edges``
tables are built from). docs/architecture/facade.md, "Inspecting a file", quotes
the figure.

Nothing here is a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import Exploration, GraphStore, SimulatedLLM  # noqa: E402
from tests.graph_builder import grow_graph  # noqa: E402

QUERIES = [
    "SELECT count(*) FROM nodes",
    "SELECT status, count(*) FROM nodes WHERE node_type = 'question' GROUP BY status",
    "SELECT count(*) FROM nodes n JOIN edges e ON e.to_node = n.node_id",
    "SELECT kind, count(*) FROM events GROUP BY kind",
    "SELECT count(*) FROM gaps",
    "SELECT (SELECT count(*) FROM nodes) + (SELECT count(*) FROM edges) + (SELECT count(*) FROM events) "
    "+ (SELECT count(*) FROM llm_calls) + (SELECT count(*) FROM gaps)",
]


def median_s(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 nodes instead of 10,000")
    parser.add_argument("--repeat", type=int, default=5, help="timings per query (median kept)")
    args = parser.parse_args()
    size = 1_000 if args.quick else 10_000
    print_header(f"Exploration.sql on a {size:,}-node graph (median of {args.repeat})")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.duckdb"
        with GraphStore(path) as store:
            graph_id = grow_graph(store, size)
        with Exploration.open(path, graph_id, llm=SimulatedLLM(), read_only=True) as ex:
            snapshot = median_s(lambda: ex.store.get_snapshot(graph_id), args.repeat)
            print(f"{snapshot * 1000:8.0f} ms  store.get_snapshot alone (the rows of nodes and edges)")
            for query in QUERIES:
                took = median_s(lambda query=query: ex.sql(query), args.repeat)
                print(f"{took * 1000:8.0f} ms  {query}")


if __name__ == "__main__":
    main()
