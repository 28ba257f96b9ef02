"""``fractal-nb``: run an exploration from the shell; ``demo`` runs one offline.

Every option is checked before a file is opened or created, and the exit code
says how the work ended (``EXIT_CODES``, printed by ``--help``). This module
loads only the standard library and the package's leaves: the facade, the
models, pandas and DuckDB load inside the commands that need them, so
``--help``, ``--version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

from ..arguments import check_bind_host, check_store_target, check_token, shown_target
from ..checks import require_id, require_text
from ..errors import FractalError, InvalidInputError
from ..loopback import is_loopback
from ..vocabulary import CheckpointMode, ExitReason, Intensity

if TYPE_CHECKING:
    from ..exploration.exploration import Exploration
    from ..llm.protocol import LLM
    from ..results.result import FractalResult
    from ..results.run_report import RunReport

DEMO_SEED = "Should a mid-sized city build a tram line or expand its bus network?"
DEMO_DB = "fractal-demo.duckdb"

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MODEL, EXIT_STOPPED = 0, 1, 2, 3, 4
EXIT_CODES = {
    EXIT_OK: "finished: the exploration is complete and harvested (or the command did its work)",
    EXIT_ERROR: "failed: a file in use or not a store, an unknown graph or a file of several without "
    "--graph-id, an --at event outside the graph's history, an address the MCP server cannot listen on "
    "(before the file is opened), a lost MCP server",
    EXIT_USAGE: "usage error: a bad option or argument (nothing was opened or written), or an inspection "
    "command on a file of several graphs without --graph-id (read, never written)",
    EXIT_MODEL: "the model failed: unreachable or failing every call (the graph is paused with the "
    "reason and resumes with `fractal-nb resume`), or the run finished degraded (failed "
    "questions are listed as gaps)",
    EXIT_STOPPED: "stopped early: a budget ran out (unexplored questions are gaps), gated questions "
    "await approval, a checkpoint or pause (resume with `fractal-nb resume`)",
}
_UNFINISHED = {"model_unavailable": EXIT_MODEL, "seed_failed": EXIT_MODEL}

# The read-only commands (docs/architecture.md, "Inspecting a file"): name -> (help, description).
# Each is one function of inspection.COMMANDS; a new one is a row here and a function there.
INSPECTION_HELP = {
    "report": (
        "print the result as the graph stands (read-only)",
        "Print the exploration's result as it stands (summary, findings, gaps, synthesis chain) as "
        "Markdown; never harvests.",
    ),
    "events": (
        "print the event log (read-only)",
        "Print the graph's event log, one row per change, oldest first.",
    ),
    "edges": (
        "print the edges (read-only)",
        "Print every edge of the graph: the tree and the links between answers.",
    ),
    "tree": (
        "print the question tree with statuses (read-only)",
        "Print the question tree, indented by level, each question with its status (and why) and id.",
    ),
    "export": (
        "write the graph as Markdown, HTML or Parquet (read-only on FILE)",
        "Write the graph to --to: .md the report, .html the self-contained page with the tree, "
        ".parquet one table (--table, default nodes); with --at, one table (nodes, edges or gaps) as "
        "Parquet as it was at that event.",
    ),
    "heads": (
        "print the heads, the current one last (read-only)",
        "Print one row per head (where a turn ended at harvest): its event, turn, status, counts, "
        "spend and what the turn asked; the last row is the head a new turn or resume continues from.",
    ),
    "state": (
        "print where the exploration stands (read-only)",
        "Print the exploration's state from the file alone: the line of work turn by turn, the "
        "branches and why each exists, the verified, assumed, missing and failed values with node ids, "
        "the head resume uses, the earlier heads worth attaching from, and the checks.",
    ),
    "turns": (
        "print the turns (read-only)",
        "Print one row per turn (the seed is turn 1): its kind, what it asked, the event it started at "
        "and its head's event (empty for the open turn).",
    ),
    "sources": (
        "print the sources the answers may cite (read-only)",
        "Print one row per source of the graph: its name (what citations name), kind, lines and chunks, "
        "and whether the file on disk changed since it was added (citations check the text as added).",
    ),
}
# The commands that take --at EVENT: the state at that event (tree, edges, export), or the rows
# written by then (events, heads, turns).
AT_COMMANDS = ("tree", "edges", "export", "events", "heads", "turns")
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
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_running(commands)
    _add_turns(commands)
    _add_serving(commands)
    for name, (summary, description) in INSPECTION_HELP.items():
        _add_inspection(commands.add_parser(name, help=summary, description=description), name)
    return parser


def _add_running(commands: Commands) -> None:
    """The commands that run an exploration: run, demo, resume, harvest."""
    run = commands.add_parser(
        "run",
        help="explore a seed and print the harvest",
        description="Explore SEED and print the harvest summary.",
    )
    run.add_argument("seed", help="the question, claim, goal or fact to explore")
    _add_run_options(run, db_default="exploration.duckdb")
    _add_model_options(run)

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
    serve.add_argument("--db", required=True, help="DuckDB file (created if missing)")
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


def _add_inspection(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "file", metavar="FILE", help="the exploration's DuckDB file or postgresql:// URL (opened read-only)"
    )
    parser.add_argument("--graph-id", help="the graph (needed when FILE holds several)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
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
        help="simulated (offline, deterministic) or openai (any OpenAI-compatible server)",
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


def _add_run_options(parser: argparse.ArgumentParser, *, db_default: str, intensity: str = "pulse") -> None:
    parser.add_argument(
        "--intensity",
        choices=["pulse", "explore", "deep"],
        default=intensity,
        help=f"budget: agents, depth, seed questions (default {intensity})",
    )
    parser.add_argument(
        "--checkpoint",
        default="autonomous",
        help="autonomous (default), convergence, interactive or depth:N "
        "(N below the intensity's depth: pulse 1, explore 1-3, deep 1-5)",
    )
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


def _add_graph_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="the exploration's DuckDB file")
    parser.add_argument("--graph-id", help="the graph (default: the file's only graph)")


class _Version(argparse.Action):
    """``--version``: the installed version, read only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import version

        print(f"{parser.prog} {version('fractal-nb')}")
        parser.exit()


def _positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _count(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (``EXIT_CODES``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    llm = _checked(parser, args)  # every option, before any file is touched
    try:
        if args.command in INSPECTION_HELP:
            return _inspect(parser, args)
        if args.command == "fork":
            return _fork(args)
        if args.command == "copy":
            return _copy(args)
        if llm is None:
            return _serve(args)
        if args.command == "ask":
            return _ask(args, llm)
        if args.command == "worker":
            return _work(args, llm)
        if args.command == "resume":
            return _resume(args, llm)
        if args.command == "harvest":
            return _harvest(args, llm)
        if args.command == "demo" and args.local:
            return _demo_local(args)
        return _explore(args.question if args.command == "demo" else args.seed, llm, args)
    except FractalError as exc:
        print(f"fractal-nb: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> LLM | None:
    """Check what argparse cannot, exiting 2 (usage) before anything is opened; the model to use.

    Each check is the one the facade makes, named by its flag.
    """

    def refuse(message: str) -> None:
        parser.error(f"{args.command}: {message}")

    try:
        _check_stores(args)
        _check_texts(args)
        _check_serving(args)
        if args.command in ("serve-mcp", "fork", "copy") or args.command in INSPECTION_HELP:
            return None  # the server, a fork, a copy and the read-only commands call no model
        return _model(args)
    except InvalidInputError as exc:
        refuse(str(exc))
        raise  # parser.error exits; this satisfies the type checker


def _check_stores(args: argparse.Namespace) -> None:
    """The files and databases a command names, and the export's target."""
    if args.command in INSPECTION_HELP:
        check_store_target(args.file, "FILE", must_exist=True)
    if args.command == "copy":
        check_store_target(args.source, "SRC", must_exist=True)
        check_store_target(args.destination, "DST")
    if args.command == "export":
        _check_export_target(args.to, args.file)
        _check_export_at(args)
    if getattr(args, "db", None) is not None:
        check_store_target(args.db, "--db", must_exist=args.command in ("resume", "harvest", "worker"))


def _check_texts(args: argparse.Namespace) -> None:
    """The question, the ids and the checkpoint a command takes, checked as the facade checks them."""
    if args.command in ("run", "demo"):
        require_text(args.seed if args.command == "run" else args.question, args.command.upper())
        try:
            CheckpointMode.parse(args.checkpoint, Intensity(args.intensity))
        except InvalidInputError as exc:
            raise InvalidInputError(f"--checkpoint: {exc}") from None
    if getattr(args, "graph_id", None) is not None:
        require_id(args.graph_id, "--graph-id")
    if args.command == "ask":
        require_text(args.question, "QUESTION")
        if args.under is not None:
            require_id(args.under, "--under")


def _check_serving(args: argparse.Namespace) -> None:
    """Addresses, tokens and the model's server: where a command listens or connects."""
    if args.command == "worker" and args.mcp_url is not None:
        _check_url(args.mcp_url, "--mcp-url", "http://127.0.0.1:8765/mcp")
        require_id(args.worker_id, "--worker-id")
    if getattr(args, "llm", None) == "openai":
        base = args.base_url if args.base_url is not None else os.environ.get("OPENAI_BASE_URL")
        if base is not None:
            what = "--base-url" if args.base_url is not None else "$OPENAI_BASE_URL"
            _check_url(base, what, "http://127.0.0.1:8080/v1")
    if getattr(args, "token", None) is not None:  # serve-mcp, worker: an empty one would be none
        check_token(args.token, "--token")
    if args.command == "serve-mcp":
        if not 0 <= args.port <= 65535:
            raise InvalidInputError(f"--port must be 0-65535, not {args.port}")
        check_bind_host(args.host, "--host")
        if args.http:
            args.address = _resolved(args.host, args.port)
    if args.command == "demo" and args.local:
        from ..llm.local_server import INSTALL_HINT, local_model_available

        if not local_model_available():
            raise InvalidInputError(f"--local needs the [local] extra: {INSTALL_HINT}")


def _check_export_target(to: str, file: str) -> None:
    """``--to`` names a file of a known format, not a directory and not the store itself."""
    out = Path(to)
    if out.suffix.lower() not in EXPORT_FORMATS:
        raise InvalidInputError(f"--to {to}: the suffix names the format: one of {', '.join(EXPORT_FORMATS)}")
    if out.is_dir():
        raise InvalidInputError(f"--to {to}: is a directory; name a file")
    if not out.parent.is_dir():
        raise InvalidInputError(f"--to {to}: there is no directory {out.parent}")
    if out.exists() and out.resolve() == Path(file).resolve():
        raise InvalidInputError(f"--to {to}: is FILE itself; name another file")


def _check_export_at(args: argparse.Namespace) -> None:
    """``export --at`` writes one table of the state then, as Parquet (the result is the graph's now)."""
    if args.at is None:
        return
    if Path(args.to).suffix.lower() != ".parquet":
        raise InvalidInputError(
            f"--at {args.at}: exports one table as it was then, as .parquet (--table nodes, edges or "
            "gaps); the .md and .html exports are the result as the graph stands"
        )
    if args.table not in EXPORT_AT_TABLES:
        raise InvalidInputError(
            f"--at {args.at} --table {args.table}: the state at an event holds the tables "
            f"{', '.join(EXPORT_AT_TABLES)}"
        )


def _inspect(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """A read-only command (inspection.COMMANDS) on FILE; several graphs without --graph-id: usage, 2."""
    from .inspection import GraphChoiceError, inspect_file

    try:
        print(inspect_file(args))
    except GraphChoiceError as exc:
        parser.error(f"{args.command}: {exc}")
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from ..mcp import auth as mcp_auth
    from ..mcp.server import build_server
    from ..store import open_store

    if not args.http:
        with open_store(check_store_target(args.db)) as store:
            build_server(store).run("stdio")
        return 0
    import uvicorn

    _check_listen(args.address, args.host, args.port)  # before the file is opened
    token, generated = mcp_auth.resolve_token(args.token, host=args.host)
    security = mcp_auth.transport_security(args.host, allow_hosts=args.allow_host)
    with open_store(check_store_target(args.db)) as store:
        app = mcp_auth.http_app(build_server(store, token=token), host=args.host, security=security)
        if not is_loopback(args.host):
            hint = "generated, printed below" if generated else "the one given or $FRACTAL_NB_TOKEN"
            print(
                mcp_auth.beyond_loopback_warning(args.host, args.port, security=security, token_hint=hint),
                file=sys.stderr,
            )
        if generated:
            print(
                f"fractal-nb: token (pass it to workers with --token or FRACTAL_NB_TOKEN): {token}",
                file=sys.stderr,
            )
        print(
            f"fractal-nb: MCP over HTTP at {mcp_auth.client_url(args.host, args.port)} "
            f"for {shown_target(args.db)}"
            f"{' (bearer token required)' if token else ''}",
            file=sys.stderr,
            flush=True,
        )
        try:
            uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        except SystemExit as exc:  # uvicorn's own code (3: it could not start) is not ours to pass on
            if exc.code in (0, None):
                return EXIT_OK
            raise FractalError(
                f"the MCP server on {args.host}:{args.port} could not start (see above)"
            ) from None
    return EXIT_OK


def _check_url(url: str, what: str, example: str) -> None:
    """Refuse a URL that is not http(s) with a host: nothing could be sent to it."""
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # a port out of range raises here
    except ValueError as exc:
        raise InvalidInputError(f"{what} {url!r} is not a URL ({exc}); e.g. {example}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidInputError(
            f"{what} must be an http:// or https:// URL with a host, not {url!r}; e.g. {example}"
        )


def _resolved(host: str, port: int) -> tuple[Any, ...]:
    """The address ``--host`` names (a name is looked up, as the server would); a usage error if none."""
    try:
        return socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInputError(f"--host {host!r} names no address ({exc})") from None


def _check_listen(address: tuple[Any, ...], host: str, port: int) -> None:
    """Refuse, before the store is opened, an address this machine cannot listen on (in use, not its own)."""
    family, kind, proto, _, where = address
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(where)
        except OSError as exc:
            raise FractalError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _work(args: argparse.Namespace, llm: LLM) -> int:
    from ..mcp.auth import client_token
    from ..mcp.remote import RemoteStore, only_active_graph, work_remotely
    from ..store import open_store

    opened = (
        RemoteStore(args.mcp_url, token=client_token(args.token))
        if args.mcp_url is not None
        else open_store(check_store_target(args.db, "--db"))
    )
    with opened as store:
        graph_id = args.graph_id or only_active_graph(store, "--graph-id")
        reports = work_remotely(store, llm, worker_id=args.worker_id, graph_id=graph_id, threads=args.threads)
    for report in reports:
        print(
            f"{report.worker}: {report.answered} answered, {report.synthesized} synthesized, "
            f"{report.failures} failed; exit: {report.exit_reason}"
        )
    if down := next((r for r in reports if r.exit_reason == ExitReason.MODEL_UNAVAILABLE), None):
        print(f"fractal-nb: {down.detail}; this worker's claims were given back", file=sys.stderr)
        return EXIT_MODEL
    return EXIT_OK


def _model(args: argparse.Namespace) -> LLM:
    """The model the options name: the simulator (the demo's seed 7) or an OpenAI-compatible server."""
    if args.command == "demo" or args.llm == "simulated":
        from ..llm.simulated import SimulatedLLM

        # --local: stands in until the server is up (_demo_local)
        return SimulatedLLM(seed=7) if args.command == "demo" else SimulatedLLM(seed=args.seed_value or 0)
    from ..llm.openai_llm import OpenAILLM

    return OpenAILLM(
        model=args.model,
        base_url=args.base_url,
        seed=args.seed_value,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency or "auto",
    )


def _explore(seed: str, llm: LLM, args: argparse.Namespace) -> int:
    from ..exploration.exploration import Exploration

    with Exploration.create(
        seed, intensity=args.intensity, checkpoint=args.checkpoint, llm=llm, path=check_store_target(args.db)
    ) as exploration:
        return _run_reported(exploration, args, llm)


def _demo_local(args: argparse.Namespace) -> int:
    """The demo on a real local model: llama.cpp's server with Gemma 3 270M, a pulse exploration."""
    from ..llm.local_server import LocalModelServer

    print("Starting llama.cpp's server with Gemma 3 270M on 127.0.0.1 (one thread) ...", file=sys.stderr)
    with LocalModelServer() as server, server.llm() as llm:
        args.intensity = "pulse"
        return _explore(args.question, llm, args)


def _opened(args: argparse.Namespace, llm: LLM) -> Exploration:
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


def _resume(args: argparse.Namespace, llm: LLM) -> int:
    with _opened(args, llm) as exploration:
        if exploration.status == "completed":
            db = shown_target(args.db)
            raise FractalError(
                f"graph {exploration.graph_id} in {db} is completed: nothing is left to run; "
                f"`fractal-nb harvest --db {db} --graph-id {exploration.graph_id}` prints its result"
            )
        if args.approve and len(exploration.gates):
            print(f"Approved {exploration.approve()['count']} gated question(s).")
        # `resume` is the explicit act that goes on with a budget-exhausted graph, or one an
        # engine failure stopped (error), too.
        return _run_reported(exploration, args, llm, resume=True)


def _ask(args: argparse.Namespace, llm: LLM) -> int:
    """A follow-up question as a new turn (or joining the open one), run, and harvested into a head."""
    with _opened(args, llm) as exploration:
        step = exploration.ask(args.question, args.under)
        print(f"Turn {step.turn}: asked {args.question!r} ({step.created[0] if step.created else ''}).")
        return _run_reported(exploration, args, llm)


def _fork(args: argparse.Namespace) -> int:
    """A new graph of the file from the state at ``--at`` (an event) or ``--head`` (a turn's head)."""
    from ..llm.simulated import SimulatedLLM

    # A fork copies rows: no model is called (the fork is opened with a model later, to run it).
    with _opened(args, SimulatedLLM()) as exploration:
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
            print(
                f"Forked {exploration.graph_id} at event {forked.lineage()['forked_at'].iloc[-1]} into "
                f"{forked.graph_id} ({forked.status}, {len(forked.nodes())} nodes) in "
                f"{shown_target(args.db)}.\n"
                f"Open it: Exploration.open({shown_target(args.db)!r}, {forked.graph_id!r}, llm=...)"
            )
    return EXIT_OK


def _copy(args: argparse.Namespace) -> int:
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


def _harvest(args: argparse.Namespace, llm: LLM) -> int:
    with _opened(args, llm) as exploration:
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
    where = f"--db {db} --graph-id {exploration.graph_id}"
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
        lines += ["", "Findings:"] + [f"  - {f['finding']} ({f['confidence']})" for f in result.findings]
    if result.gaps:
        lines += ["", f"Gaps ({len(result.gaps)}):"] + [f"  - {g}" for g in result.gaps[:10]]
        if len(result.gaps) > 10:
            lines.append(f"  ... and {len(result.gaps) - 10} more")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
