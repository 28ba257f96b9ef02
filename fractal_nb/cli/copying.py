"""The ``fractal-nb`` commands that copy a graph's rows: ``fork`` and ``copy``; no model is called.

docs/architecture.md, "Layers" (the faces): ``fork`` makes a new graph of the file
from the state at an event or a turn's head (the source never changes); ``copy``
writes graphs into another store (DuckDB or PostgreSQL) with every row and id.
"""

from __future__ import annotations

import argparse

from ..arguments import shown_target
from ..errors import FractalError
from .exit_codes import EXIT_OK
from .running import opened


def fork(args: argparse.Namespace) -> int:
    """A new graph of the file from the state at ``--at`` (an event) or ``--head`` (a turn's head)."""
    from ..llm.simulated import SimulatedLLM

    # A fork copies rows: no model is called (the fork is opened with a model later, to run it).
    with opened(args, SimulatedLLM()) as exploration:
        at: int | dict[str, int] = args.at
        if args.head is not None:
            heads = exploration.heads()
            row = heads[heads["turn"] == args.head]
            if row.empty:
                raise FractalError(
                    f"graph {exploration.graph_id} has no head of turn {args.head}; its heads: "
                    f"{', '.join(str(t) for t in heads['turn']) or 'none yet'}"
                )
            at = {"head_event": int(row["head_event"].iloc[0])}
        forked = exploration.fork(at=at)
        with forked:
            db = shown_target(args.db)
            print(
                f"Forked {exploration.graph_id} at event {forked.lineage()['forked_at'].iloc[-1]} into "
                f"{forked.graph_id} ({forked.status}, {len(forked.nodes())} nodes) in {db}.\n"
                f"  see it:  fractal-nb report {db} --graph-id {forked.graph_id}\n"
                f"  run it on:  fractal-nb resume {db} --graph-id {forked.graph_id} [--llm …]\n"
                f"  or ask it a follow-up:  fractal-nb ask {db} QUESTION --graph-id {forked.graph_id}\n"
                f"  in a notebook:  Exploration.open({db!r}, {forked.graph_id!r}, llm=...)"
            )
    return EXIT_OK


def copy(args: argparse.Namespace) -> int:
    """The graphs of SRC (or ``--graph-id``) into DST, every row and id as they are."""
    from ..store import copy_graphs

    copied = copy_graphs(args.source, args.destination, None if args.graph_id is None else [args.graph_id])
    count = len(copied["graph_ids"])
    print(
        f"Copied {count} graph{'s' if count != 1 else ''} ({', '.join(copied['graph_ids'])}) from "
        f"{shown_target(args.source)} to {shown_target(args.destination)}: "
        f"{sum(copied['rows'].values()):,} rows.\n"
        f"Open one: Exploration.open({shown_target(args.destination)!r}, {copied['graph_ids'][0]!r}, llm=...)"
    )
    return EXIT_OK
