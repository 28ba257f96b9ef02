"""The argument parser of ``fractal-nb``: every command, its options and their types.

docs/architecture.md, "Layers" (the faces) and "Inspecting a file": :func:`build_parser`
is the source of ``--help``; argparse checks each option's type here, and
:mod:`.option_checks` checks what argparse cannot. Only the standard library loads.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from ..vocabulary import DEFAULT_STRATEGY, Preset, Strategy
from .exit_codes import EXIT_CODES
from .inspection_help import INSPECTION_HELP

DEMO_SEED = "Should a mid-sized city build a tram line or expand its bus network?"
DEMO_DB = "fractal-demo.duckdb"

# The commands that take --at EVENT: the state at that event (tree, edges, export), or the rows
# written by then (events, heads, turns).
AT_COMMANDS = ("tree", "edges", "export", "events", "heads", "turns")
# The commands that read through the MCP server of a process serving FILE (mcp/reads.py READS).
SERVED_READS = ("report", "state", "events", "heads", "turns", "tree", "payload")
# The commands that write to an exploration's FILE, typed as inspection takes it or as --db FILE.
FILE_COMMANDS = ("resume", "harvest", "ask", "fork", "serve-mcp")
EXPORT_FORMATS = (".md", ".html", ".parquet")
EXPORT_TABLES = ("nodes", "edges", "events", "llm_calls", "gaps", "turns", "heads")  # graph_sql.TABLES
EXPORT_AT_TABLES = ("nodes", "edges", "gaps")  # export --at: the tables the state at an event holds


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The parser's subcommands, as ``add_subparsers`` returns them."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (also the source of ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="fractal-nb",
        description="Fractal thinking: LLM workers decompose a question recursively into a DuckDB graph.",
        epilog="exit codes:\n" + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    parser.add_argument(
        "--profile",
        metavar="P",
        help="options from [profiles.P] of ~/.config/fractal-nb/config.toml (or $FRACTAL_NB_CONFIG), "
        "before the ones typed; anywhere on the line, or env FRACTAL_NB_PROFILE (docs/shell.md)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_running(commands)
    _add_turns(commands)
    _add_serving(commands)
    _add_seeding(commands)
    for name, (summary, description) in INSPECTION_HELP.items():
        _add_inspection(commands.add_parser(name, help=summary, description=description), name)
    return parser


def _add_running(commands: Commands) -> None:
    """The commands that run an exploration: run, demo, resume, harvest."""
    run = commands.add_parser(
        "run",
        help="explore a seed and print the harvest",
        description="Explore SEED and print the harvest: the root's synthesis, findings and gaps.",
    )
    run.add_argument("seed", help="the question, claim, goal or fact to explore")
    _add_run_options(run, db_default="exploration.duckdb")
    _add_model_options(run)
    _add_making_options(run)

    demo = commands.add_parser(
        "demo",
        help="run an offline exploration with the simulated model",
        description="Explore a sample question (or yours) with the simulated model (no network, no API "
        "key) or, with --local, the packaged real model, into a DuckDB file, and print the harvest.",
    )
    demo.add_argument(
        "question", nargs="?", default=DEMO_SEED, help="the question to explore (default: the sample's)"
    )
    _add_run_options(demo, db_default=DEMO_DB, intensity="explore")
    demo.add_argument(
        "--local",
        action="store_true",
        help="a real model instead: start llama.cpp's server on 127.0.0.1 with the packaged "
        "Gemma 3 270M (the [local] extra), run a pulse exploration through it, stop it",
    )

    resume = commands.add_parser(
        "resume",
        help="run a stopped or paused exploration on from its file",
        description="Reopen an exploration (paused by a model outage, gates, a checkpoint or a budget) "
        "and run it on; claims of a dead run come back first.",
    )
    _add_graph_options(resume)
    resume.add_argument("--approve", action="store_true", help="approve every gated question first")
    resume.add_argument(
        "--new-budget",
        action="store_true",
        help="go on with a budget_exhausted graph: a new turn of kind budget with --max-tokens/--max-wall-s "
        "as its limits (none after a circuit breaker); without it such a graph is refused",
    )
    resume.add_argument("--workers", type=_positive, default=None, help="worker threads (default: budget)")
    resume.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_budget_options(resume)
    _add_model_options(resume)

    harvest = commands.add_parser(
        "harvest",
        help="finish an exploration now and print its result",
        description="Finish an exploration as it stands: questions not yet explored become gaps, "
        "the syntheses are completed up to the root, and the result is printed.",
    )
    _add_graph_options(harvest)
    _add_model_options(harvest)


def _add_turns(commands: Commands) -> None:
    """The commands that take a graph further or elsewhere: ask, fork, copy."""
    ask = commands.add_parser(
        "ask",
        help="a follow-up as a new turn, run and harvested",
        description="Ask a follow-up QUESTION of an exploration (a completed one takes a new turn), "
        "run the turn's work and harvest it into a new head; prints the result.",
    )
    _add_graph_options(ask)
    ask.add_argument("question", metavar="QUESTION", help="the follow-up question")
    ask.add_argument("--under", help="a node id to ask under (default: the root's answer)")
    ask.add_argument("--workers", type=_positive, default=None, help="worker threads (default: budget)")
    ask.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_budget_options(ask)
    _add_model_options(ask)

    fork = commands.add_parser(
        "fork",
        help="fork at an event or head (the source is unchanged)",
        description="Fork the exploration at an event (--at) or at a head (--head TURN) into a new "
        "graph of the same file; prints its id. The source never changes.",
    )
    _add_graph_options(fork)
    where = fork.add_mutually_exclusive_group(required=True)
    where.add_argument("--at", type=_positive, help="the event id to fork at")
    where.add_argument("--head", type=_positive, metavar="TURN", help="the head of this turn to fork at")

    copy = commands.add_parser(
        "copy",
        help="copy explorations to another store (DuckDB <-> PostgreSQL)",
        description="Copy the graphs of SRC into DST with every row (ids, statuses, links, events, "
        "history, the call log, turns, heads, lineage, sources): a DuckDB file or a postgresql:// URL "
        "each, either way round. SRC is only read; DST is made if a new file. Refused, with nothing "
        "written: a graph DST already holds, a graph with claims in flight.",
    )
    copy.add_argument(
        "source", metavar="SRC", help="the source: a DuckDB file or a postgresql:// URL (only read)"
    )
    copy.add_argument(
        "destination",
        metavar="DST",
        help="the destination: a DuckDB file (made if new) or a postgresql:// URL",
    )
    copy.add_argument("--graph-id", help="the graph to copy (default: every graph of SRC, forks included)")


def _add_serving(commands: Commands) -> None:
    """The commands that share a graph: serve-mcp, and worker (over MCP or on a database)."""
    serve = commands.add_parser(
        "serve-mcp",
        help="serve a DuckDB file as MCP tools (stdio or HTTP)",
        description="Serve the fractal tool contract (fractal_create_graph, fractal_claim_work, ...) "
        "from a DuckDB file, so MCP agents and worker processes share its graphs. This "
        "process owns the file while it runs.",
    )
    _add_file(serve, "the DuckDB file to serve (created if missing)")
    serve.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    serve.add_argument(
        "--token",
        help="bearer token every HTTP request must carry (else env "
        "FRACTAL_NB_TOKEN; beyond loopback, one is generated and printed)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="another Host name to answer to beyond loopback (NAME: any port, NAME:PORT: that "
        "one; repeatable); '*' turns the Host check off",
    )

    worker = commands.add_parser(
        "worker",
        help="work a graph served over MCP",
        description="Run the engine's worker loop against a graph served by `fractal-nb serve-mcp --http` "
        "or Exploration.serve_mcp(), or straight on a PostgreSQL store many machines share (--db "
        "postgresql://...): claim, answer, synthesize until no work is left.",
    )
    where = worker.add_mutually_exclusive_group(required=True)
    where.add_argument("--mcp-url", help="the server's URL, e.g. http://127.0.0.1:8765/mcp")
    where.add_argument(
        "--db", help="the store itself: postgresql://user@host/db (or a DuckDB file no one holds)"
    )
    worker.add_argument("--graph-id", help="the graph to work (default: the server's only active graph)")
    worker.add_argument("--worker-id", default="remote", help="worker name prefix (default remote)")
    worker.add_argument(
        "--threads", type=_positive, default=1, help="worker threads in this process (default 1)"
    )
    worker.add_argument("--token", help="the server's bearer token (else env FRACTAL_NB_TOKEN)")
    _add_model_options(worker)


def _add_seeding(commands: Commands) -> None:
    """``seed``: a graph seeded for workers elsewhere (``Exploration.seed``)."""
    seed = commands.add_parser(
        "seed",
        help="seed a graph for workers elsewhere, and stop",
        description="Write the root's plan and its seed questions with the model, and stop: `fractal-nb "
        "worker` processes and MCP agents then work the graph (they never seed one). With SEED, a new "
        "exploration in --db; without, the graph --graph-id names (or the file's only one), such as one "
        "made over MCP. A graph served over MCP is seeded by the process that serves it.",
    )
    seed.add_argument("seed", nargs="?", metavar="SEED", help="a new exploration's question (default: none)")
    seed.add_argument(
        "--db", required=True, help="DuckDB file or postgresql:// URL (no other process holds it)"
    )
    seed.add_argument("--graph-id", help="the graph to seed (without SEED; default: the file's only one)")
    _add_shape_options(seed, intensity="explore", when="with SEED: ")
    _add_model_options(seed)
    _add_making_options(seed)


def _add_inspection(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "file", metavar="FILE", help="the exploration's DuckDB file or postgresql:// URL (opened read-only)"
    )
    if name == "payload":
        parser.add_argument(
            "node", metavar="NODE", help="the node's id, e.g. n-3f9c0a1b2c4d5e6f (from `tree`)"
        )
    parser.add_argument("--graph-id", help="the graph (needed when FILE holds several)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    if name in SERVED_READS:
        parser.add_argument(
            "--token",
            help="when another process serves FILE over MCP (it then reads through it): the server's "
            "bearer token (else env FRACTAL_NB_TOKEN)",
        )
    if name == "events":
        parser.add_argument(
            "--since", type=_count, default=0, help="only the events after this event id (default 0: all)"
        )
    if name in AT_COMMANDS:
        parser.add_argument(
            "--at",
            type=_positive,
            metavar="EVENT",
            help="the state at this event id (from `events`, or a head's event in `heads`): "
            "read from the graph's history",
        )
    if name == "export":
        parser.add_argument(
            "--to",
            required=True,
            help=f"the file to write; its suffix the format: {', '.join(EXPORT_FORMATS)}",
        )
        parser.add_argument(
            "--table",
            choices=EXPORT_TABLES,
            default="nodes",
            help="for .parquet: the table to write (default nodes; the tables of Exploration.sql)",
        )


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--llm",
        choices=["simulated", "openai"],
        default="simulated",
        help="simulated (offline; the same prompt gets the same reply, and with --workers 1 a run repeats "
        "exactly: several workers shape the tree in their order) or openai (any OpenAI-compatible server)",
    )
    parser.add_argument("--model", help="model name for --llm openai (or env FRACTAL_NB_MODEL)")
    parser.add_argument("--base-url", help="server URL for --llm openai (or env OPENAI_BASE_URL)")
    parser.add_argument(
        "--seed-value",
        type=int,
        default=None,
        help="seed of the simulated model (default 0); the request seed for --llm openai",
    )
    parser.add_argument(
        "--max-concurrency",
        type=_positive,
        default=None,
        help="--llm openai: requests in flight at once (default: 1 for a server on this "
        "machine, unbounded for a remote API)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=60.0,
        help="--llm openai: seconds per request once sent (default 60; waiting for a slot does not count)",
    )


def _add_shape_options(parser: argparse.ArgumentParser, *, intensity: str, when: str = "") -> None:
    """A new graph's ``--intensity`` and ``--checkpoint`` (``when``: a prefix saying when they count)."""
    parser.add_argument(
        "--intensity",
        choices=["pulse", "explore", "deep"],
        default=intensity,
        help=f"{when}budget: agents, depth, seed questions (default {intensity})",
    )
    parser.add_argument(
        "--checkpoint",
        default="autonomous",
        help=f"{when}autonomous (default), convergence, interactive or depth:N "
        "(N below the intensity's depth: pulse 1, explore 1-3, deep 1-5)",
    )


def _add_run_options(parser: argparse.ArgumentParser, *, db_default: str, intensity: str = "pulse") -> None:
    _add_shape_options(parser, intensity=intensity)
    parser.add_argument(
        "--db", default=db_default, help=f"DuckDB file, new or a fractal_nb store (default {db_default})"
    )
    parser.add_argument("--workers", type=_positive, default=None, help="worker threads (default: budget)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_budget_options(parser)


def _add_budget_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-tokens",
        type=_positive,
        default=None,
        help="token budget of the exploration (prompt + completion, every call counted)",
    )
    parser.add_argument(
        "--max-wall-s",
        type=_positive_seconds,
        default=None,
        help="seconds this run may take; reaching it ends the run as budget_exhausted",
    )


def _add_making_options(parser: argparse.ArgumentParser) -> None:
    """How a new graph thinks and what its answers cite (``Exploration.create``'s strategy and sources)."""
    parser.add_argument(
        "--strategy",
        choices=[s.value for s in Strategy],
        default=None,
        help=f"how the graph thinks (default {DEFAULT_STRATEGY.value}; tracks with --preset); "
        "docs/strategies.md",
    )
    parser.add_argument(
        "--preset",
        choices=[p.value for p in Preset],
        default=None,
        help="explore a codebase (--sources FOLDER) with seed 003's tracks: architecture (services, layers, "
        "errors, config) or feature (models, ui-state, api, errors); implies --strategy tracks",
    )
    parser.add_argument(
        "--sources",
        action="append",
        metavar="PATH",
        help="a folder or file the answers cite, checked as they are written (repeat it for more)",
    )


def _add_graph_options(parser: argparse.ArgumentParser) -> None:
    _add_file(parser, "the exploration's DuckDB file or postgresql:// URL")
    parser.add_argument("--graph-id", help="the graph (default: the file's only graph)")


def _add_file(parser: argparse.ArgumentParser, what: str) -> None:
    """FILE as the inspection commands take it, or ``--db FILE`` (either; option_checks needs one).

    Both fill ``db``; the positional's SUPPRESS default leaves a ``--db`` (a profile's too) in place
    when FILE is not typed, and FILE typed after it wins, as a later option would.
    """
    parser.add_argument("db", nargs="?", default=argparse.SUPPRESS, metavar="FILE", help=what)
    parser.add_argument("--db", dest="db", default=None, metavar="FILE", help="FILE, as an option")


class _Version(argparse.Action):
    """``--version``: the installed version, read only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import version

        print(f"{parser.prog} {version('fractal-nb')}")
        parser.exit()


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return integer


_positive = _at_least(1)
_count = _at_least(0)


def _positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value
