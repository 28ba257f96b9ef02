"""Loop benchmark: the seed-000 worker loop straight on the embedded store, at 100 and 5,000 nodes.

Run from the repository root::

    python bench/loop_bench.py                     # 100 and 5,000 nodes
    python bench/loop_bench.py --quick             # a smoke run (under a minute): fewer steps and rounds
    python bench/loop_bench.py --compare-with DIR  # DIR's fractal_nb (a worktree) and this one, interleaved

One step is the seed-000 worker's (tests/mcp/seed_worker.py), called in-process on a
``GraphStore`` in memory (DuckDB), no MCP and no model: read the graph
(``get_snapshot``), ``claim_work``, the answer (``add_node``), then two
sub-questions when the question is above the last level, else the leaf's
synthesis, then the cascade (``get_ready_to_synthesize`` and a synthesis of each
ready question, until none is ready). The graph (intensity explore) holds
answered sub-trees as filler (answered questions with no sub-questions are never
ready, rule 3) and a pool of open questions one level above the
last under a few answered questions, so steps mix sub-questions, leaves and
cascades the way a run does, and the graph stays at about its size.

Printed: steps/s (median of the rounds), ms per operation (median per call; the two
sub-questions together), statements and transactions per step (a tracer on the
connection: ``GraphStore(tracer=...)``), the statements that cost most, and the
ratio to spellbook's loop (its SQLite store), whose figures are quoted from issue 39
(its code is not in this repository): 16.83 steps/s at 100 nodes, 0.36 at 5,000.
Goals (issue 39, deliverable 8): >= 1.5x the peer at 100 nodes, >= 20x at 5,000.

With ``--compare-with DIR`` every round runs twice, in two processes, one on DIR's
``fractal_nb`` and one on this checkout's, alternating which goes first, and the
ratios of the medians are printed: before and after measured side by side.

Nothing here is a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_CHECKOUT = Path(__file__).resolve().parents[1]
if "--checkout" in sys.argv:  # a compared tree's fractal_nb (set before it is imported)
    _CHECKOUT = Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
sys.path.insert(0, str(_CHECKOUT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/machine.py

from machine import print_header  # noqa: E402

from fractal_nb import GraphStore  # noqa: E402
from fractal_nb.vocabulary import BUDGETS, Intensity  # noqa: E402

PEER_STEPS_S = {100: 16.83, 5000: 0.36}  # spellbook's loop, quoted from issue 39 (not measured here)
GOAL_VS_PEER = {100: 1.5, 5000: 20.0}
INTENSITY = "explore"
MAX_DEPTH = BUDGETS[Intensity.EXPLORE].max_depth
POOL_DEPTH = MAX_DEPTH - 2  # a pool question takes two sub-questions, each of them a leaf
FILLER_CHILDREN = 40  # answered questions under each filler answer
POOL_CHILDREN = 6  # open questions under each live answer: a cascade every 18 steps
OPERATIONS = ("snapshot", "claim", "answer", "sub-questions", "synthesis", "ready")
WRITES = ("INSERT", "UPDATE", "DELETE")


class StatementTracer:
    """Counts statements, transactions and write transactions, and the time between statements per text.

    A statement's time is taken up to the next statement the tracer sees (or the end of the
    step): close to what the statement cost, the Python around it included.
    """

    def __init__(self) -> None:
        self.statements = 0
        self.transactions = 0
        self.write_transactions = 0
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._wrote = False
        self._last: tuple[str, float] | None = None

    def __call__(self, sql: str, params: tuple[Any, ...]) -> None:
        now = time.perf_counter()
        self.close_last(now)
        text = " ".join(sql.split())
        self._last = (text, now)
        self.statements += 1
        head = text.split(" ", 1)[0].upper()
        if head == "BEGIN":
            self.transactions += 1
            self._wrote = False
        elif head in WRITES:
            self._wrote = True
        elif head == "COMMIT" and self._wrote:
            self.write_transactions += 1

    def close_last(self, now: float | None = None) -> None:
        if self._last is not None:
            text, started = self._last
            self.spent[text] += (time.perf_counter() if now is None else now) - started
            self.calls[text] += 1
            self._last = None


@dataclass
class Result:
    """One round: steps, seconds, ms per call of each operation, statements and transactions."""

    nodes: int
    steps: int
    seconds: float
    per_call: dict[str, list[float]] = field(default_factory=dict)
    statements: int = 0
    transactions: int = 0
    write_transactions: int = 0
    top: list[tuple[str, float, int]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.steps / self.seconds


def build_graph(store: GraphStore, n_nodes: int, pool: int) -> str:
    """A graph of about ``n_nodes`` nodes: answered filler, and ``pool`` open questions at POOL_DEPTH."""
    g = store.create_graph("How fast is the seed's worker loop?", INTENSITY, "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    with store.batch():
        top = store.add_node(gid, root, "answer", "root answer")["node_id"]
        count = 2
        live = -(-pool // POOL_CHILDREN)
        for k in range(live):  # depth 1, answered, its open questions the pool
            q = store.add_node(gid, top, "question", f"live question {k}")["node_id"]
            a = store.add_node(gid, q, "answer", f"live answer {k}")["node_id"]
            count += 2
            for i in range(min(POOL_CHILDREN, pool - k * POOL_CHILDREN)):
                store.add_node(gid, a, "question", f"open question {k}.{i}")
                count += 1
        k = 0
        while count < n_nodes:  # depth 1, answered; below it answered questions with no sub-questions
            q = store.add_node(gid, top, "question", f"filler question {k}")["node_id"]
            a = store.add_node(gid, q, "answer", f"filler answer {k}")["node_id"]
            count += 2
            for i in range(FILLER_CHILDREN):
                if count >= n_nodes - 1:
                    break
                leaf = store.add_node(gid, a, "question", f"filler question {k}.{i}")["node_id"]
                store.add_node(gid, leaf, "answer", f"filler answer {k}.{i}")
                count += 2
            k += 1
    return gid


class Timer:
    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = defaultdict(list)

    @contextmanager
    def op(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.spent[name].append(time.perf_counter() - started)


def step(store: GraphStore, gid: str, worker: str, timer: Timer) -> None:
    """One turn of the seed-000 worker loop (tests/mcp/seed_worker.py), in-process."""
    with timer.op("snapshot"):
        store.get_snapshot(gid)
    with timer.op("claim"):
        claim = store.claim_work(gid, worker)
    node = claim["node_id"]
    if node is None:
        raise SystemExit("the graph ran out of open questions: build it with a larger pool")
    with timer.op("answer"):
        answer = store.add_node(gid, node, "answer", f"{worker} answers: {claim['text']}", owner=worker)
    if claim["depth"] + 1 < MAX_DEPTH:
        with timer.op("sub-questions"):
            for i in range(2):
                store.add_node(
                    gid,
                    answer["node_id"],
                    "question",
                    f"{claim['text']} / part {i}",
                    metadata={"proxy_signal": "qualifiers"},
                )
    else:
        with timer.op("synthesis"):
            store.synthesize_node(gid, node, f"leaf: {claim['text']}")
    while True:  # the cascade: synthesize what became ready, deepest first
        with timer.op("ready"):
            ready = store.get_ready_to_synthesize(gid)
        if not ready["count"]:
            return
        for question in ready["ready_nodes"]:
            with timer.op("synthesis"):
                store.synthesize_node(gid, question["node_id"], f"{worker} sums up {question['text']}")


def run_rounds(n_nodes: int, n_steps: int, rounds: int, *, memory: bool) -> list[Result]:
    """A store and graph of ``n_nodes``, two warm-up steps, then ``rounds`` of ``n_steps`` steps, timed.

    The store is a DuckDB file in a temporary folder (an exploration kept on disk; the peer's
    store is a SQLite file), or memory with ``memory``.
    """
    tracer = StatementTracer()
    tracing = [False]

    def trace(sql: str, params: tuple[Any, ...]) -> None:
        if tracing[0]:
            tracer(sql, params)

    pool = -(-(n_steps * rounds + 2) // 3) + 1
    results = []
    with tempfile.TemporaryDirectory(prefix="fractal-loop-") as tmp:
        path = None if memory else Path(tmp) / "loop.duckdb"
        with GraphStore(path, tracer=trace) as store:
            gid = build_graph(store, n_nodes, pool)
            nodes = len(store.get_snapshot(gid)["nodes"])
            for _ in range(2):
                step(store, gid, "worker", Timer())
            for _ in range(rounds):
                tracer = StatementTracer()
                timer = Timer()
                tracing[0] = True
                started = time.perf_counter()
                for _ in range(n_steps):
                    step(store, gid, "worker", timer)
                seconds = time.perf_counter() - started
                tracer.close_last()
                tracing[0] = False
                top = sorted(((t, s, tracer.calls[t]) for t, s in tracer.spent.items()), key=lambda x: -x[1])
                results.append(
                    Result(
                        nodes=nodes,
                        steps=n_steps,
                        seconds=seconds,
                        per_call=dict(timer.spent),
                        statements=tracer.statements,
                        transactions=tracer.transactions,
                        write_transactions=tracer.write_transactions,
                        top=top[:20],
                    )
                )
    return results


@dataclass
class Summary:
    """A size's rounds, folded: median steps/s, median ms per call, counts per step."""

    size: int
    nodes: int
    rate: float
    ms: dict[str, float]
    calls_per_step: dict[str, float]
    statements: float
    transactions: float
    write_transactions: float
    top: list[tuple[str, float, int]]


def summarize(size: int, rounds: list[Result]) -> Summary:
    steps = sum(r.steps for r in rounds)
    spent: dict[str, list[float]] = defaultdict(list)
    for r in rounds:
        for k, v in r.per_call.items():
            spent[k].extend(v)
    top: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rounds:
        for text, s, n in r.top:
            top[text][0] += s
            top[text][1] += n
    return Summary(
        size=size,
        nodes=rounds[0].nodes,
        rate=statistics.median(r.rate for r in rounds),
        ms={k: statistics.median(spent[k]) * 1000 for k in OPERATIONS if spent.get(k)},
        calls_per_step={k: len(spent[k]) / steps for k in OPERATIONS if spent.get(k)},
        statements=sum(r.statements for r in rounds) / steps,
        transactions=sum(r.transactions for r in rounds) / steps,
        write_transactions=sum(r.write_transactions for r in rounds) / steps,
        top=sorted(((t, s / steps * 1000, n / steps) for t, (s, n) in top.items()), key=lambda x: -x[1])[:10],
    )


def plan(quick: bool) -> tuple[tuple[int, ...], dict[int, int], int]:
    """Sizes, steps per round at each size, rounds."""
    if quick:
        return (100, 5000), {100: 30, 5000: 10}, 2
    return (100, 5000), {100: 60, 5000: 30}, 5


def print_summary(s: Summary) -> None:
    peer = PEER_STEPS_S.get(s.size)
    vs = f"{s.rate / peer:.2f}x the peer ({peer} steps/s, goal {GOAL_VS_PEER[s.size]:g}x)" if peer else ""
    print(f"\n{s.nodes} nodes: {s.rate:.2f} steps/s  {vs}")
    print(
        f"  per step: {s.statements:.1f} statements, {s.transactions:.2f} transactions "
        f"({s.write_transactions:.2f} writing)"
    )
    print("  ms per call (median), calls per step:")
    for op in OPERATIONS:
        if op in s.ms:
            print(f"    {op:14s} {s.ms[op]:8.2f} ms  x{s.calls_per_step[op]:.2f}")
    print("  statements that cost most (ms per step, calls per step):")
    for text, ms, n in s.top:
        print(f"    {ms:7.2f} ms  x{n:5.2f}  {text[:110]}")


def one(size: int, n_steps: int, rounds: int, *, memory: bool) -> Summary:
    return summarize(size, run_rounds(size, n_steps, rounds, memory=memory))


def compare(other: Path, sizes: tuple[int, ...], steps: dict[int, int], rounds: int, *, memory: bool) -> None:
    """Each round in two processes, ``other``'s fractal_nb and this one's, alternating which goes first."""
    script = str(Path(__file__).resolve())
    got: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    trees = {"before": other.resolve(), "after": _CHECKOUT}
    env = {**os.environ, "PYTHONPATH": ""}
    for size in sizes:
        for k in range(rounds):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            for name in order:
                out = subprocess.run(
                    [
                        sys.executable,
                        script,
                        "--checkout",
                        str(trees[name]),
                        "--json",
                        str(size),
                        str(steps[size]),
                        *(["--memory"] if memory else []),
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                ).stdout
                got[name, size].append(json.loads(out.splitlines()[-1]))
                print(
                    f"  ... {name:6s} {size} nodes round {k + 1}: {got[name, size][-1]['rate']:.2f} steps/s"
                )
    print(
        f"\nBefore ({trees['before']}) and after ({trees['after']}), medians of {rounds} interleaved rounds"
    )
    print("| nodes | before steps/s | after steps/s | after/before | after vs peer | goal |")
    print("|-------|----------------|---------------|--------------|---------------|------|")
    for size in sizes:
        b = statistics.median(r["rate"] for r in got["before", size])
        a = statistics.median(r["rate"] for r in got["after", size])
        peer = PEER_STEPS_S[size]
        print(
            f"| {size:5d} | {b:14.2f} | {a:13.2f} | {a / b:11.2f}x | {a / peer:12.2f}x | "
            f"{GOAL_VS_PEER[size]:g}x |"
        )
    print(
        "\nms per call (median of the rounds' medians), before -> after; statements and transactions per step"
    )
    for size in sizes:
        print(f"  {size} nodes:")
        for op in OPERATIONS:
            bs = [r["ms"][op] for r in got["before", size] if op in r["ms"]]
            as_ = [r["ms"][op] for r in got["after", size] if op in r["ms"]]
            if bs and as_:
                b, a = statistics.median(bs), statistics.median(as_)
                print(f"    {op:14s} {b:8.2f} -> {a:8.2f} ms  ({b / a:.2f}x)")
        for key in ("statements", "transactions", "write_transactions"):
            b = statistics.median(r[key] for r in got["before", size])
            a = statistics.median(r[key] for r in got["after", size])
            print(f"    {key:18s} {b:6.1f} -> {a:6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer steps and rounds")
    parser.add_argument("--compare-with", type=Path, help="another checkout (a worktree): before and after")
    parser.add_argument("--memory", action="store_true", help="an in-memory store rather than a file")
    parser.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", nargs=2, type=int, metavar=("NODES", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.json:  # one round for --compare-with: its summary as the last line
        size, n_steps = args.json
        print(json.dumps(asdict(summarize(size, run_rounds(size, n_steps, 1, memory=args.memory)))))
        return 0
    sizes, steps, rounds = plan(args.quick)
    print_header(
        "fractal_nb loop benchmark: the seed-000 worker loop on GraphStore"
        + (" (--quick)" if args.quick else "")
    )
    started = time.perf_counter()
    if args.compare_with:
        compare(args.compare_with, sizes, steps, rounds, memory=args.memory)
    else:
        for size in sizes:
            print_summary(one(size, steps[size], rounds, memory=args.memory))
    print(f"\nTotal bench time {time.perf_counter() - started:.1f} s (graph building included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
