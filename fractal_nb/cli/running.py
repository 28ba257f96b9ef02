"""The ``fractal-nb`` commands that run a graph with a model: run, demo, resume, ask, harvest, seed.

docs/architecture.md, "Layers" (the faces): each opens or creates the exploration
through the facade, runs it with the command's workers and budgets, and prints how
the run ended (the harvest, or what is left and the commands that go on) with the
exit code it implies (docs/shell.md, "From the shell"). The facade loads inside
the commands.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..arguments import check_store_target, shown_target
from ..errors import FractalError
from ..vocabulary import MODEL_FAILED
from .exit_codes import EXIT_ERROR, EXIT_MODEL, EXIT_OK, EXIT_STOPPED

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from ..llm.protocol import LLM
    from ..results.result import FractalResult
    from ..results.run_report import RunReport

# A run that stopped before the end: its exit code by status (any other: EXIT_STOPPED).
_UNFINISHED: dict[str, int] = {
    **dict.fromkeys(MODEL_FAILED, EXIT_MODEL),
    "error": EXIT_ERROR,
}  # error: every worker crashed


def explore(seed: str, llm: LLM, args: argparse.Namespace) -> int:
    """``run`` and ``demo``: a new exploration of SEED in ``--db``, run and reported."""
    with _created(seed, args, llm) as exploration:
        if (before := len(exploration.store.list_graphs()["graphs"]) - 1) > 0:
            print(
                f"{shown_target(args.db)} holds {before} exploration(s) already: this one is added beside "
                f"them as {exploration.graph_id} (--db another file to start one of its own)",
                file=sys.stderr,
            )
        return _run_reported(exploration, args, llm)


def demo_local(args: argparse.Namespace) -> int:
    """The demo on a real local model: llama.cpp's server with Gemma 3 270M, a pulse exploration."""
    from ..llm.local_server import LocalModelServer

    print("Starting llama.cpp's server with Gemma 3 270M on 127.0.0.1 (one thread) ...", file=sys.stderr)
    with LocalModelServer() as server, server.llm() as llm:
        args.intensity = "pulse"
        return explore(args.question, llm, args)


def seed(args: argparse.Namespace, llm: LLM) -> int:
    """``seed``: the seed phase alone (``Exploration.seed``), for workers elsewhere to work the graph."""
    db = shown_target(args.db)
    with _created(args.seed, args, llm) if args.seed is not None else opened(args, llm) as exploration:
        record = exploration.seed()
        where = f"--db {db} --graph-id {exploration.graph_id}"
        questions = exploration.nodes().query("node_type == 'question' and depth == 1")
        if record is not None and record.error:
            print(f"fractal-nb: the seed phase failed: {record.error}", file=sys.stderr)
            print(f"The root of {exploration.graph_id} stays open: `fractal-nb seed {where}` tries again.")
            return EXIT_MODEL
        done = "is seeded already" if record is None else "is seeded"
        print(
            f"{exploration.graph_id} in {db} {done}: {len(questions)} seed question(s), no worker ran.\n"
            f"  work it from any process:  fractal-nb worker {where} [--threads N] [--llm …]\n"
            f"  or run it whole here:  fractal-nb resume {db} --graph-id {exploration.graph_id}"
        )
    return EXIT_OK


def _created(seed: str, args: argparse.Namespace, llm: LLM) -> Exploration:
    """A new exploration of ``seed`` in ``--db`` as the options shape it (run, demo, seed).

    ``--strategy``, ``--preset`` and ``--sources`` where the command takes them (demo: none).
    """
    from ..exploration.exploration import Exploration

    making: dict[str, Any] = {}
    if getattr(args, "strategy", None) is not None:
        making["strategy"] = args.strategy
    if getattr(args, "preset", None) is not None:
        making["preset"] = args.preset
    if getattr(args, "sources", None):
        making["sources"] = [Path(source) for source in args.sources]
    return Exploration.create(
        seed,
        intensity=args.intensity,
        checkpoint=args.checkpoint,
        llm=llm,
        path=check_store_target(args.db),
        **making,
    )


def opened(args: argparse.Namespace, llm: LLM) -> Exploration:
    """The exploration ``--db`` and ``--graph-id`` name; without ``--graph-id``, the file's only one."""
    from ..exploration.exploration import Exploration

    graph_id = args.graph_id
    if graph_id is None:
        graphs = Exploration.graphs(check_store_target(args.db))
        if len(graphs) != 1:
            listing = "; ".join(f"{g.graph_id} ({g.status}): {g.seed[:60]!r}" for g in graphs.itertuples())
            db = shown_target(args.db)
            raise FractalError(
                f"--db {db} holds {len(graphs)} explorations{': ' + listing if listing else ''}; "
                "pass --graph-id to name one"
                if len(graphs)
                else f"--db {db} holds no exploration"
            )
        graph_id = str(graphs["graph_id"].iloc[0])
    return Exploration.open(check_store_target(args.db), graph_id, llm=llm)


def resume(args: argparse.Namespace, llm: LLM) -> int:
    """A stopped or paused exploration run on (its gates approved first with ``--approve``)."""
    with opened(args, llm) as exploration:
        if exploration.status == "completed":
            db = shown_target(args.db)
            raise FractalError(
                f"graph {exploration.graph_id} in {db} is completed: nothing is left to run; "
                f"`fractal-nb harvest {db} --graph-id {exploration.graph_id}` prints its result"
            )
        if exploration.status == "budget_exhausted":
            # Terminal for resume (docs/architecture/store.md, "The graph contract"): a new budget goes on.
            if not (args.new_budget or args.max_tokens or args.max_wall_s):
                raise FractalError(budget_refusal(exploration, shown_target(args.db)))
            step = exploration.new_budget(max_tokens=args.max_tokens, max_wall_s=args.max_wall_s)
            print(f"Turn {step.turn}: a new budget ({exploration.turns()['asked'].iloc[-1]}).")
        if args.approve and len(exploration.gates):
            print(f"Approved {exploration.approve()['count']} gated question(s).")
        # `resume` is also the explicit act that goes on with a graph an engine failure stopped (error).
        return _run_reported(exploration, args, llm, resume=True)


def budget_refusal(exploration: Exploration, db: str) -> str:
    """Why ``resume`` refuses a budget_exhausted graph, and the option that goes on."""
    return (
        f"graph {exploration.graph_id} in {db} is budget_exhausted ({exploration.status_reason}): it is "
        f"terminal for resume; going on is a new turn with a new budget: `fractal-nb resume {db} "
        f"--graph-id {exploration.graph_id} --new-budget [--max-tokens N] [--max-wall-s S]` (a spent token "
        f"budget needs a larger --max-tokens); `fractal-nb harvest` finishes it as it stands"
    )


def ask(args: argparse.Namespace, llm: LLM) -> int:
    """A follow-up question as a new turn (or joining the open one), run, and harvested into a head."""
    with opened(args, llm) as exploration:
        step = exploration.ask(args.question, args.under)
        print(f"Turn {step.turn}: asked {args.question!r} ({step.created[0] if step.created else ''}).")
        return _run_reported(exploration, args, llm)


def harvest(args: argparse.Namespace, llm: LLM) -> int:
    """The exploration finished as it stands (the rest as gaps) and its result printed."""
    with opened(args, llm) as exploration:
        result = exploration.harvest(finish=True)  # a person asks to finish it as it stands
        print(render(result, run_status="harvested", path=shown_target(args.db)))
        return EXIT_MODEL if result.degraded else EXIT_OK


def _run_reported(
    exploration: Exploration, args: argparse.Namespace, llm: LLM, *, resume: bool = False
) -> int:
    """Run with the command's workers, progress and budgets, then print how it ended (:func:`_report`)."""
    status = exploration.run(
        max_workers=args.workers,
        progress=not args.quiet,
        resume=resume,
        max_tokens=args.max_tokens,
        max_wall_s=args.max_wall_s,
    )
    return _report(exploration, status, llm, shown_target(args.db))


def _report(exploration: Exploration, report: RunReport, llm: LLM, db: str) -> int:
    """Print how the run ended and choose the exit code; harvest only a run that ended by itself.

    ``all_complete`` and ``budget_exhausted`` are harvested (a budget freezes
    the rest as gaps; docs/shell.md, "From the shell"); a graph paused by the model, gates or a checkpoint
    is left resumable, never harvested into ``completed`` on its own.
    """
    status = report.status
    if status in ("all_complete", "budget_exhausted"):
        result = exploration.harvest()
        print(render(result, run_status=status, path=db))
        code = EXIT_MODEL if result.degraded else EXIT_OK if status == "all_complete" else EXIT_STOPPED
    else:
        print(_render_unfinished(exploration, status, db))
        code = _UNFINISHED.get(status, EXIT_STOPPED)
    print(f"\nThis run: {report.headline(spend=False)}")
    print(f"\n{ledger_line(exploration)}; model: {llm!r}")
    graphs = len(exploration.store.list_graphs()["graphs"])
    named = f" --graph-id {exploration.graph_id}" if graphs > 1 else ""
    held = f" (the file holds {graphs} explorations: name this one)" if graphs > 1 else ""
    print(f"See it again: fractal-nb report {db}{named}{held}")
    print(f"Open it in a notebook: Exploration.open({db!r}, {exploration.graph_id!r}, llm=...)")
    return code


def ledger_line(exploration: Exploration) -> str:
    """The graph's model calls from its call log, one source for every count printed (harvest included)."""
    rows = exploration.llm_calls()
    tools = rows["role"].str.startswith("tool:")  # a model's tool calls: rows of their own, no tokens
    calls = rows[~tools]
    replies = exploration.store.count_replies(exploration.graph_id)
    paid = calls[calls["outcome"] != "cached"]  # what exploration.usage() and the budgets count
    prompt, completion = int(paid["prompt_tokens"].sum()), int(paid["completion_tokens"].sum())
    discarded = int((calls["outcome"] == "discarded").sum())
    cached = len(calls) - len(paid)
    used = int(tools.sum())
    return (
        f"{len(paid):,} model call{'' if len(paid) == 1 else 's'} ({replies['accepted']} accepted, "
        f"{replies['corrected']} corrected, "
        f"{replies['rejected']} rejected, {replies['failed']} failed, {discarded} discarded), "
        f"{int(paid['attempts'].sum()):,} requests, {prompt + completion:,} tokens "
        f"({prompt:,} prompt + {completion:,} completion), all runs and the harvest"
        + (f"; {used:,} tool call{'' if used == 1 else 's'} by the model" if used else "")
        + (f"; {cached:,} replayed from the cache" if cached else "")
    )


def _render_unfinished(exploration: Exploration, status: str, db: str) -> str:
    """A run that stopped before the end: why, what is left, and the commands that go on."""
    graph = exploration.store.get_graph(exploration.graph_id)
    counts = exploration.nodes().query("node_type == 'question'")["status"].value_counts()
    where = f"{db} --graph-id {exploration.graph_id}"
    lines = [
        f"Seed: {graph['seed']}",
        f"Run: {status}; graph {exploration.graph_id} is {graph['status']} in {db}",
        f"Why: {graph['status_reason'] or status}",
        "Questions: " + ", ".join(f"{count} {name}" for name, count in counts.items()),
        "",
        "Nothing was harvested: the graph keeps its work and runs on from the file.",
    ]
    if counts.get("gated", 0):
        lines.append(f"  approve the gates and go on:  fractal-nb resume {where} --approve")
    lines += [
        f"  go on (e.g. when the model is back):  fractal-nb resume {where} [--llm …]",
        f"  finish it now, the rest as gaps:  fractal-nb harvest {where}",
    ]
    return "\n".join(lines)


def render(result: FractalResult, *, run_status: str, path: str) -> str:
    """The harvest as plain text for a terminal."""
    lines = [
        f"Seed: {result.seed}",
        f"Run: {run_status}; graph {result.graph_id} is {result.status} in {path}",
        f"{result.node_count} nodes, {result.edge_count} edges, depth {result.max_depth}, "
        f"{result.convergence_count} convergences, {result.contradiction_count} contradictions",
    ]
    if result.degraded:
        lines += ["", "DEGRADED RESULT (the model could not do the job well):"]
        lines += [f"  - {reason}" for reason in result.degraded_reasons]
    lines += [
        "",
        "Summary:",
        f"  {result.summary}",
    ]
    if result.findings:
        lines += ["", "Findings:"] + [
            f"  - {f['finding']} ({f['confidence']}){_cites(f)}" for f in result.findings
        ]
    if result.gaps:
        lines += ["", f"Gaps ({len(result.gaps)}):"] + [f"  - {g}" for g in result.gaps[:10]]
        if len(result.gaps) > 10:
            lines.append(f"  ... and {len(result.gaps) - 10} more")
    return "\n".join(lines)


def _cites(finding: dict[str, Any]) -> str:
    """A finding's citations as ``file:L12-L14`` labels after it ("" for none)."""
    from ..results.evidence import citation_label

    labels = [
        citation_label(c["source"], c["line_start"], c["line_end"]) for c in finding.get("citations") or []
    ]
    return f" [{', '.join(labels)}]" if labels else ""
