"""View benchmark: store change → delta sent (100 / 1k / 5k nodes) and to_html (1k / 5k / 20k nodes).

Run from the repository root::

    python bench/view_bench.py              # deltas at 100 / 1,000 / 5,000 nodes; HTML at 1k / 5k / 20k
    python bench/view_bench.py --quick      # a smoke run: deltas at 100 / 1,000; HTML at 1k / 5k
    python bench/view_bench.py --file-only  # skip the in-memory store rows of the delta table
    python bench/view_bench.py --big        # add a 100,000-node page (building it takes minutes)

Targets (issue 27): a delta in at most 50 ms at 1,000 nodes; ``to_html`` in at
most 1 s at 100,000 nodes (the 20,000-node row was issue 9's target of 1 s).
Each row shows its figure and the ratio to the target (measured / target: at
most 1.00 meets it); the target's own row is marked.

Graphs are grown by ``tests/graph_builder.grow_graph`` (a 'deep' graph, breadth
first, an answer and 8 sub-questions per answered question) in a DuckDB file in
a temporary folder (and, for the deltas, in an in-memory store too).

Deltas: a ``NetworkWidget`` on the graph, its ``send`` replaced on the instance
by a recorder of ``time.perf_counter()``. The first full snapshot
(``widget.feed.snapshot()``, what a view that opens asks for) is timed once;
then one untimed warm-up change and refresh; then each repetition is what a
worker writes (``add_answer`` with 3 sub-questions, to an open question that may
still take them) followed by ``widget.refresh()``. "refresh" runs from the
write's return (committed) to ``send``; "write+refresh" from just before the
write to ``send``. Medians over the repetitions; max shown for the noise.
Not included: the wait for the live view's next tick (``KernelPump`` polls every
0.5 s, or at once when the engine wakes it) and the trip to the browser.

HTML: what ``Exploration.to_html(path)`` does for the graph, ``write_html(store.get_question_items(gid),
path, heading=...)``, timed end to end (store read included), median of 3; then
the same split in its parts (``get_question_items`` / ``render_html`` / writing the file),
each a median of 3, so a reader sees where the time goes.

Nothing here is a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from machine import print_header  # noqa: E402  (bench/machine.py, beside this script)

from fractal_nb import GraphStore  # noqa: E402
from fractal_nb.views import NetworkWidget  # noqa: E402
from fractal_nb.views.html_export import render_html, write_html  # noqa: E402
from fractal_nb.vocabulary import BUDGETS, Intensity  # noqa: E402
from tests.graph_builder import grow_graph  # noqa: E402

DELTA_TARGET_S, DELTA_TARGET_NODES = 0.050, 1000
HTML_TARGET_S, HTML_TARGET_NODES = 1.0, 100_000
# grow_graph makes 'deep' graphs: a question at max_depth - 1 takes no sub-questions.
SUB_QUESTION_DEPTH_LIMIT = BUDGETS[Intensity.DEEP].max_depth - 1


@dataclass
class DeltaRun:
    store: str
    nodes: int
    snapshot_s: float
    refresh_s: list[float]
    end_to_end_s: list[float]
    delta_nodes: int
    delta_edges: int


@dataclass
class HtmlRun:
    nodes: int
    edges: int
    end_to_end_s: float
    read_s: float
    render_s: float
    write_s: float
    megabytes: float


class SendClock:
    """Stands in for ``widget.send``: notes when it was called and with what."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.message: dict[str, Any] | None = None
        self.calls = 0

    def __call__(self, message: dict[str, Any], *_args: object, **_kwargs: object) -> None:
        self.at = time.perf_counter()
        self.message = message
        self.calls += 1


def say(text: str) -> None:
    print(f"  ... {text}", file=sys.stderr, flush=True)


def build(store: GraphStore, size: int, kind: str) -> tuple[str, int]:
    t0 = time.perf_counter()
    gid = grow_graph(store, size, fanout=8 if size <= 30_000 else 12)  # 8 stops at depth 5 near 40k
    nodes = len(store.get_changes(gid)["nodes"])
    say(f"built {nodes} nodes in a {kind} store in {time.perf_counter() - t0:.1f} s")
    return gid, nodes


def answerable(store: GraphStore, gid: str, count: int) -> list[str]:
    """``count`` open questions that may still take sub-questions, spread over the open ones."""
    ids = [
        q["node_id"]
        for q in store.get_open_questions(gid)["open_questions"]
        if q["depth"] < SUB_QUESTION_DEPTH_LIMIT
    ]
    if len(ids) < count:
        raise SystemExit(f"only {len(ids)} open questions can take sub-questions; {count} needed")
    step = len(ids) / count
    return [ids[int(i * step)] for i in range(count)]


def delta_run(store: GraphStore, gid: str, nodes: int, kind: str, reps: int) -> DeltaRun:
    widget = NetworkWidget(store, gid)
    clock = SendClock()
    widget.send = clock  # the instance's comm send: no kernel here, only the clock
    try:
        t0 = time.perf_counter()
        snapshot = widget.feed.snapshot()  # the first full load (sets the feed's seq)
        snapshot_s = time.perf_counter() - t0
        if snapshot["counts"]["total"] != nodes:
            raise SystemExit(f"snapshot counts {snapshot['counts']['total']} nodes, the graph {nodes}")
        questions = answerable(store, gid, reps + 1)
        refresh_s: list[float] = []
        end_to_end_s: list[float] = []
        sizes: list[tuple[int, int]] = []
        for i, question in enumerate(questions):
            clock.at = None
            t0 = time.perf_counter()
            written = store.add_answer(
                gid,
                question,
                f"answer {i} from the bench",
                sub_questions=[f"bench sub-question {i}.{k}" for k in "abc"],
            )
            t1 = time.perf_counter()
            widget.refresh()
            if clock.at is None or clock.message is None or clock.message["type"] != "delta":
                raise SystemExit(f"refresh sent no delta ({kind}, {nodes} nodes)")
            sent = {a["id"] for q in clock.message["questions"] for a in q["answers"]}
            if written["answer"]["node_id"] not in sent:
                raise SystemExit(f"the delta misses the new answer ({kind}, {nodes} nodes)")
            if i == 0:
                continue  # warm-up: the first since > 0 read
            refresh_s.append(clock.at - t1)
            end_to_end_s.append(clock.at - t0)
            sizes.append((len(clock.message["questions"]), len(clock.message["links"])))
    finally:
        widget.close()
    delta_nodes, delta_edges = sizes[len(sizes) // 2]
    return DeltaRun(kind, nodes, snapshot_s, refresh_s, end_to_end_s, delta_nodes, delta_edges)


def html_run(store: GraphStore, gid: str, nodes: int, folder: Path, reps: int) -> HtmlRun:
    path = folder / f"g-{nodes}.html"
    whole: list[float] = []
    for _ in range(reps):  # what Exploration.to_html does
        t0 = time.perf_counter()
        write_html(store.get_question_items(gid), path, heading="x")
        whole.append(time.perf_counter() - t0)
    parts: list[tuple[float, float, float]] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        items = store.get_question_items(gid)
        t1 = time.perf_counter()
        page = render_html(items, heading="x")
        t2 = time.perf_counter()
        path.write_text(page, encoding="utf-8")
        t3 = time.perf_counter()
        parts.append((t1 - t0, t2 - t1, t3 - t2))
    return HtmlRun(
        nodes,
        nodes - 1 + items["link_count"],  # one root: every other node hangs under its parent
        statistics.median(whole),
        *(statistics.median(p[k] for p in parts) for k in range(3)),
        path.stat().st_size / 1e6,
    )


def rule(header: str) -> str:
    return "|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def print_deltas(runs: list[DeltaRun], reps: int) -> None:
    print(
        f"Store change -> delta sent (NetworkWidget.refresh; median of {reps} after a warm-up; "
        f"target <= {DELTA_TARGET_S * 1000:.0f} ms at {DELTA_TARGET_NODES:,} nodes)"
    )
    header = (
        f"| {'store':6} | {'nodes':>6} | {'1st snapshot ms':>15} | {'refresh ms':>10} | "
        f"{'write+refresh ms':>16} | {'max ms':>7} | {'delta q/l':>9} | {'vs target':>9} | "
        f"{'target':6} |"
    )
    print(header)
    print(rule(header))
    for run in runs:
        e2e = statistics.median(run.end_to_end_s)
        mark = "<- yes" if run.nodes == DELTA_TARGET_NODES else ""
        print(
            f"| {run.store:6} | {run.nodes:>6} | {ms(run.snapshot_s):>15} | "
            f"{ms(statistics.median(run.refresh_s)):>10} | {ms(e2e):>16} | "
            f"{ms(max(run.end_to_end_s)):>7} | {f'{run.delta_nodes}/{run.delta_edges}':>9} | "
            f"{e2e / DELTA_TARGET_S:>8.2f}x | {mark:6} |"
        )
    print(
        "  refresh: from the write's commit to send; write+refresh: from just before add_answer "
        "to send;\n  max: the slowest write+refresh; vs target: write+refresh median / "
        f"{DELTA_TARGET_S * 1000:.0f} ms; delta q/l: question items/links in one delta message"
    )


def print_html(runs: list[HtmlRun], reps: int) -> None:
    print(
        f"to_html = write_html(store.get_question_items(gid), path) (DuckDB file store; median of {reps}; "
        f"target <= {HTML_TARGET_S:g} s at {HTML_TARGET_NODES:,} nodes)"
    )
    header = (
        f"| {'nodes':>6} | {'edges':>6} | {'to_html ms':>10} | {'store read ms':>14} | "
        f"{'render ms':>9} | {'write ms':>8} | {'file MB':>7} | {'vs target':>9} | {'target':6} |"
    )
    print(header)
    print(rule(header))
    for run in runs:
        mark = "<- yes" if run.nodes >= HTML_TARGET_NODES else ""
        print(
            f"| {run.nodes:>6} | {run.edges:>6} | {ms(run.end_to_end_s):>10} | {ms(run.read_s):>14} | "
            f"{ms(run.render_s):>9} | {ms(run.write_s):>8} | {run.megabytes:>7.2f} | "
            f"{run.end_to_end_s / HTML_TARGET_S:>8.2f}x | {mark:6} |"
        )
    print(
        "  store read (get_question_items) / render / write: the same call split in its parts "
        "(medians of their own runs); "
        f"vs target: to_html / {HTML_TARGET_S:g} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (smaller graphs)")
    parser.add_argument("--file-only", action="store_true", help="no in-memory store rows for deltas")
    parser.add_argument("--big", action="store_true", help="a 100,000-node page too (minutes to build)")
    parser.add_argument("--reps", type=int, default=20, help="timed changes per delta row (default 20)")
    parser.add_argument("--html-reps", type=int, default=3, help="to_html runs per size (default 3)")
    args = parser.parse_args(argv)
    delta_sizes = (100, 1000) if args.quick else (100, 1000, 5000)
    html_sizes = ((1000, 5000) if args.quick else (1000, 5000, 20000)) + (
        (HTML_TARGET_NODES,) if args.big else ()
    )

    print_header("fractal_nb view benchmark" + (" (--quick)" if args.quick else ""))

    deltas: list[DeltaRun] = []
    pages: list[HtmlRun] = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fractal-view-bench-") as tmp:
        folder = Path(tmp)
        # One file store per size: the HTML export reads it first (it writes nothing),
        # then the delta rows add to it.
        for size in sorted({*delta_sizes, *html_sizes}):
            with GraphStore(folder / f"view-{size}.duckdb") as store:
                gid, nodes = build(store, size, "file")
                if size in html_sizes:
                    pages.append(html_run(store, gid, nodes, folder, args.html_reps))
                    say(f"to_html {nodes} nodes: {ms(pages[-1].end_to_end_s)} ms")
                if size in delta_sizes:
                    deltas.append(delta_run(store, gid, nodes, "file", args.reps))
                    say(
                        f"delta (file) {nodes} nodes: "
                        f"{ms(statistics.median(deltas[-1].end_to_end_s))} ms write+refresh"
                    )
        if not args.file_only:
            for size in delta_sizes:
                with GraphStore() as store:
                    gid, nodes = build(store, size, "memory")
                    deltas.append(delta_run(store, gid, nodes, "memory", args.reps))
                    say(
                        f"delta (memory) {nodes} nodes: "
                        f"{ms(statistics.median(deltas[-1].end_to_end_s))} ms write+refresh"
                    )
    total = time.perf_counter() - t_all

    print_deltas(deltas, args.reps)
    print()
    print_html(pages, args.html_reps)
    print()
    at_target = [r for r in deltas if r.store == "file" and r.nodes == DELTA_TARGET_NODES]
    if at_target:
        e2e = statistics.median(at_target[0].end_to_end_s)
        print(
            f"delta at {DELTA_TARGET_NODES:,} nodes (file store): {ms(e2e)} ms, "
            f"{e2e / DELTA_TARGET_S:.2f}x the {DELTA_TARGET_S * 1000:.0f} ms target "
            f"({'met' if e2e <= DELTA_TARGET_S else 'MISSED'})"
        )
    big = [r for r in pages if r.nodes >= HTML_TARGET_NODES]
    if not big:
        print(f"to_html at {HTML_TARGET_NODES:,} nodes: not measured (run with --big)")
    if big:
        print(
            f"to_html at {big[0].nodes:,} nodes: {big[0].end_to_end_s:.2f} s, "
            f"{big[0].end_to_end_s / HTML_TARGET_S:.2f}x the {HTML_TARGET_S:g} s target "
            f"({'met' if big[0].end_to_end_s <= HTML_TARGET_S else 'MISSED'})"
        )
    print(f"Total bench time {total:.1f} s (graph building included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
