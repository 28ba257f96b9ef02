"""Context benchmark: what a worker's context read costs, and whether it sees the whole graph.

Run from the repository root::

    python bench/context_bench.py                     # 2,000 and 5,000 nodes
    python bench/context_bench.py --quick             # a smoke run: smaller graphs, fewer steps
    python bench/context_bench.py --compare-with DIR  # DIR's fractal_nb (a worktree), then this one's

Two measures (issue 42, point 3; docs/architecture/engine.md, "Context from the whole graph"):

- **A planted convergence.** Twelve branches under a root (tests/graph_builder.py
  ``Branches``), the first answer of the first branch about a harbour's dredging,
  then filler answers in every branch up to 2,000 nodes, then a question about
  the harbour in the last branch: is the planted answer among the question's
  candidates (``get_context``), and where?
- **The step's context read at 5,000 nodes.** On a DuckDB file, a worker's turn
  as the engine takes it: ``get_context`` of an open question (timed), then its
  answer (not timed), round the branches, so the graph grows as it is read and
  the answers written since the last read, and a rebuilt index now and then,
  are in the figure. The first read (which reads every answer) is shown apart.

With ``--compare-with DIR`` every round runs twice, in two processes, one on
DIR's ``fractal_nb`` and one on this checkout's, alternating which goes first,
and the ratios of the medians are printed.

Nothing here is a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve()
_CHECKOUT = _HERE.parents[1]
if "--checkout" in sys.argv:  # a compared tree's fractal_nb (set before it is imported)
    _CHECKOUT = Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
sys.path.insert(0, str(_CHECKOUT))
sys.path.insert(0, str(_HERE.parent))  # bench/machine.py

from machine import print_header  # noqa: E402

from fractal_nb import GraphStore  # noqa: E402

# The graph builder is this checkout's, whatever fractal_nb is measured (an older tree may lack it).
_spec = importlib.util.spec_from_file_location(
    "graph_builder", _HERE.parents[1] / "tests" / "graph_builder.py"
)
assert _spec is not None and _spec.loader is not None
graph_builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_builder)

PLANTED = "Dredging the harbour channel every spring sets how much freight the port can take."
ASKED = "How does the harbour dredging schedule limit freight?"
BRANCHES = 12


def convergence(nodes: int) -> dict[str, Any]:
    """Whether the planted answer of the first branch is a candidate of the last branch's question."""
    with GraphStore() as store:
        graph = graph_builder.Branches(store, BRANCHES)
        planted = graph.grow(0, 1, first=PLANTED)[0]
        branch = 0
        while graph.nodes < nodes:
            graph.grow(branch, 5)
            branch = (branch + 1) % (BRANCHES - 1)  # the last branch waits for the question
        graph.grow(BRANCHES - 1, 1, ask=ASKED)
        offered = [c["node_id"] for c in store.get_context(graph.graph_id, graph.asked)["candidates"]]
        return {"nodes": graph.nodes, "rank": offered.index(planted) + 1 if planted in offered else None}


def context_reads(nodes: int, steps: int) -> dict[str, Any]:
    """The first ``get_context`` and ``steps`` more, each followed by the answer it was read for."""
    with tempfile.TemporaryDirectory() as folder, GraphStore(Path(folder) / "bench.duckdb") as store:
        graph = graph_builder.Branches(
            store, BRANCHES, levels=5, fanout=4
        )  # about as many answers as questions
        branch = 0
        while graph.nodes < nodes:
            graph.grow(branch, 1)
            branch = (branch + 1) % BRANCHES
        spent: list[float] = []
        for step in range(steps + 1):
            branch = step % BRANCHES
            question = graph.open[branch][0][0]
            started = time.perf_counter()
            store.get_context(graph.graph_id, question)
            spent.append(time.perf_counter() - started)
            graph.grow(branch, 1)
        return {
            "nodes": graph.nodes,
            "first_ms": spent[0] * 1000,
            "median_ms": statistics.median(spent[1:]) * 1000,
            "mean_ms": statistics.fmean(spent[1:]) * 1000,
        }


def one_round(quick: bool) -> dict[str, Any]:
    small, large, steps = (600, 1500, 60) if quick else (2000, 5000, 400)
    return {"convergence": convergence(small), "reads": context_reads(large, steps)}


def compare(other: Path, quick: bool, rounds: int) -> None:
    """Each round in two processes, ``other``'s fractal_nb and this one's, alternating which goes first."""
    trees = {"before": other.resolve(), "after": _CHECKOUT}
    got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for k in range(rounds):
        for name in ("before", "after") if k % 2 == 0 else ("after", "before"):
            command = [sys.executable, str(_HERE), "--checkout", str(trees[name]), "--json"]
            out = subprocess.run(
                command + (["--quick"] if quick else []),
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": ""},
                check=True,
            ).stdout
            got[name].append(json.loads(out.splitlines()[-1]))
            print(f"  ... {name:6s} round {k + 1}: {got[name][-1]}")
    print(
        f"\nBefore ({trees['before']}) and after ({trees['after']}), medians of {rounds} interleaved rounds"
    )
    for name in ("before", "after"):
        found = got[name][0]["convergence"]
        print(
            f"  {name:6s} the planted answer at {found['nodes']:,} nodes: rank {found['rank']} (None: missed)"
        )
    print("| measure | before | after | after/before |")
    print("|---------|--------|-------|--------------|")
    size = got["after"][0]["reads"]["nodes"]
    for key in ("first_ms", "median_ms", "mean_ms"):
        b = statistics.median(r["reads"][key] for r in got["before"])
        a = statistics.median(r["reads"][key] for r in got["after"])
        print(f"| get_context {key}, {size:,} nodes | {b:.2f} | {a:.2f} | {a / b:.2f}x |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: smaller graphs, fewer steps")
    parser.add_argument("--compare-with", type=Path, help="another checkout (a worktree): before and after")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds for --compare-with")
    parser.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:  # one round for --compare-with: its figures as the last line
        print(json.dumps(one_round(args.quick)))
        return 0
    print_header(
        "fractal_nb context benchmark: the whole graph in a worker's context"
        + (" (--quick)" if args.quick else "")
    )
    if args.compare_with:
        compare(args.compare_with, args.quick, args.rounds)
        return 0
    figures = one_round(args.quick)
    found = figures["convergence"]
    print(f"the planted answer at {found['nodes']:,} nodes: rank {found['rank']} (None: missed)")
    reads = figures["reads"]
    print(
        f"get_context at {reads['nodes']:,} nodes: first read {reads['first_ms']:.2f} ms, "
        f"then median {reads['median_ms']:.2f} ms, mean {reads['mean_ms']:.2f} ms a step"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
