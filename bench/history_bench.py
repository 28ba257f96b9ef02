"""History benchmark: replay of 10k events, fork of a 10k-node graph, a step beside 20 forks, capture cost.

Run: ``python bench/history_bench.py`` (``--quick`` for fewer repeats). Everything is measured
side by side in one run (docs/architecture/store.md, "History and forks"); the machine is
noisy, so read the medians and the ratios.

(a) ``get_state_at`` (and ``Exploration.at`` with its DataFrames) at the 10,000th event of a
    graph written one worker commit at a time (goal <= 100 ms).
(b) ``fork_graph`` of that graph at its last event, ~10k nodes (goal <= 1 s).
(c) ``Exploration.step(1)`` on a ~100-node graph with 20 forks of it in the same file, and on
    the same graph alone in a file of its own, interleaved (goal: within 5%).
(d) the capture's own cost: the same step with the history hook on and off, interleaved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import Exploration, GraphStore, SimulatedLLM  # noqa: E402

SEED = "What would it take for a mid-sized city to halve its car traffic in ten years?"


def write_graph(store: GraphStore, questions: int, fanout: int = 6) -> str:
    """A graph grown as workers grow one: claim, then one answer with ``fanout`` sub-questions and a call."""
    graph = store.create_graph(SEED, "deep", "autonomous")
    gid = graph["graph_id"]
    for i in range(questions):
        claim = store.claim_work(gid, f"w{i}")  # no branch affinity: breadth first
        node = claim["node_id"] or graph["root_node_id"]
        call = {"graph_id": gid, "node_id": node, "role": "answer", "model": "sim", "prompt_tokens": 90,
                "completion_tokens": 40, "attempts": 1, "latency_s": 0.01, "outcome": "ok"}  # fmt: skip
        store.submit_answer(
            gid,
            node,
            f"Answer {i}.",
            owner=f"w{i}",
            sub_questions=[f"Question {i}.{j}?" for j in range(fanout)],
            calls=[call],
        )
    return gid


def timed(action: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def ms(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1000:7.1f} ms (min {min(times) * 1000:.1f})"


def replay_and_fork(where: Path, repeats: int) -> None:
    with GraphStore(where / "big.duckdb") as store:
        started = time.perf_counter()
        gid = write_graph(store, 1_555)  # every question at depths 0-4 answered (deep: 0-5)
        events = store.get_events(gid)["events"]
        nodes = len(store.get_snapshot(gid)["nodes"])
        print(f"    wrote {nodes:,} nodes, {len(events):,} events in {time.perf_counter() - started:.1f} s")
        at = int(events[9_999]["event_id"])
        state = store.get_state_at(gid, at)
        _, _, commit = store._replay.commit_of(gid, at)  # noqa: SLF001 - the fold alone, in SQL
        ex = Exploration(store, gid, SimulatedLLM())
        last = int(events[-1]["event_id"])
        rows = {
            "the fold in SQL (rows_at)": lambda: store._replay.rows_at(gid, commit),  # noqa: SLF001
            "get_state_at (records)": lambda: store.get_state_at(gid, at),
            "Exploration.at + nodes()": lambda: ex.at(at).nodes(),
            "get_snapshot now, same size": lambda: store.get_snapshot(gid),
            f"get_state_at, event #{len(events):,}": lambda: store.get_state_at(gid, last),
        }
        print(f"(a) state at event #10,000 ({len(state['nodes']):,} nodes then; goal <= 100 ms):")
        for label, action in rows.items():
            print(f"    {label:30} {ms(timed(action, repeats))}")
        forks: list[str] = []
        times = timed(lambda: forks.append(store.fork_graph(gid, last)["graph_id"]), max(3, repeats // 3))
        print(f"(b) fork of {nodes:,} nodes: {ms(times)}  (goal <= 1 s)")
        assert len(store.get_snapshot(forks[0])["nodes"]) == nodes


def grown(path: Path, target: int) -> str:
    """A ~``target``-node exploration with work left (stepped, breadth first)."""
    llm = SimulatedLLM(seed=5, branching=3.0, decay=0.9, link_rate=0.2)
    with Exploration.create(SEED, intensity="deep", llm=llm, path=path) as ex:
        while len(ex.nodes()) < target:
            ex.step(5)
        return ex.graph_id


def interleaved(left: Exploration, right: Exploration, steps: int) -> tuple[list[float], list[float]]:
    """``step(1)`` on each in turn: the same node sequence on both sides, alternating who goes first."""
    a, b = [], []
    for i in range(steps):
        pair = [(left, a), (right, b)] if i % 2 == 0 else [(right, b), (left, a)]
        for ex, times in pair:
            started = time.perf_counter()
            ex.step(1)
            times.append(time.perf_counter() - started)
    return a, b


def beside_forks(where: Path, steps: int) -> None:
    paths = {name: where / f"{name}.duckdb" for name in ("alone", "crowd", "on", "off")}
    gid = grown(paths["alone"], 100)
    for name in ("crowd", "on", "off"):
        shutil.copy(paths["alone"], paths[name])
    llm = SimulatedLLM(seed=5, branching=3.0, decay=0.9, link_rate=0.2)
    with (
        Exploration.open(paths["alone"], gid, llm=llm) as alone,
        Exploration.open(paths["crowd"], gid, llm=llm) as crowd,
        Exploration.open(paths["on"], gid, llm=llm) as on,
        Exploration.open(paths["off"], gid, llm=llm) as off,
    ):
        last = int(crowd.events()["event_id"].max())
        forks = [crowd.store.fork_graph(gid, last)["graph_id"] for _ in range(20)]
        for fork in forks:  # the forks have lived: each went on a little
            Exploration(crowd.store, fork, llm).step(3)
        for ex in (alone, crowd, on, off):  # each file's log folded in, so no step pays for it
            ex.store._db.execute("CHECKPOINT")  # noqa: SLF001
        size = len(alone.nodes())
        alone_t, crowd_t = interleaved(alone, crowd, steps)
        ratio = statistics.median(crowd_t) / statistics.median(alone_t)
        print(f"(c) step(1) on a graph of {size} nodes at the start, {steps} steps each, interleaved:")
        print(f"    alone in its file  {ms(alone_t)}")
        print(f"    beside 20 forks    {ms(crowd_t)}   ratio {ratio:.3f} (goal within 5%)")
        off.store._db.commit_hook = None  # noqa: SLF001 - the capture switched off, to measure it
        on_t, off_t = interleaved(on, off, steps)
        ratio = statistics.median(on_t) / statistics.median(off_t)
        print("(d) the capture's cost, the same step with history on and off:")
        print(f"    history on   {ms(on_t)}")
        print(f"    history off  {ms(off_t)}   on/off {ratio:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    print_header("History benchmark (bench/history_bench.py)")
    repeats, steps = (5, 30) if args.quick else (15, 80)
    with tempfile.TemporaryDirectory() as tmp:
        replay_and_fork(Path(tmp), repeats)
        beside_forks(Path(tmp), steps)


if __name__ == "__main__":
    main()
