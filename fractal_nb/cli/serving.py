"""The ``fractal-nb`` commands that share a graph: ``serve-mcp`` and ``worker``.

docs/architecture.md, "Layers" (the faces): ``serve-mcp`` serves a store as MCP
tools (stdio, or HTTP with a bearer token); ``worker`` runs the engine's worker
loop against such a server or a store many machines share. The MCP server, its
client and the store load inside the commands.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..arguments import check_store_target, shown_target
from ..errors import FractalError
from ..loopback import is_loopback
from ..vocabulary import ExitReason
from .exit_codes import EXIT_MODEL, EXIT_OK

if TYPE_CHECKING:
    from ..llm.protocol import LLM


def serve(args: argparse.Namespace) -> int:
    """``serve-mcp``: the store as MCP tools over stdio, or over HTTP with a bearer token."""
    from ..mcp import auth as mcp_auth
    from ..mcp.server import AnnouncingServer, build_server
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
        _exit_on_terminate()
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
        # FILE.mcp.json says where while it listens: the shell's inspection reads through it (faces.md, 26)
        server = AnnouncingServer(config, db=args.db, token_required=token is not None)
        try:
            server.run()
        except SystemExit as exc:  # uvicorn's own code (3: it could not start) is not ours to pass on
            if exc.code in (0, None):
                return EXIT_OK
            raise FractalError(
                f"the MCP server on {args.host}:{args.port} could not start (see above)"
            ) from None
    return EXIT_OK


def _exit_on_terminate() -> None:
    """On SIGTERM, leave by ``SystemExit(0)``: the store is closed on the way out.

    uvicorn catches the signal, shuts down (withdrawing FILE.mcp.json), and raises it again
    once it has: Python's default would then end the process before the store was closed.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _check_listen(address: tuple[Any, ...], host: str, port: int) -> None:
    """Refuse, before the store is opened, an address this machine cannot listen on (in use, not its own)."""
    family, kind, proto, _, where = address
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(where)
        except OSError as exc:
            raise FractalError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def work(args: argparse.Namespace, llm: LLM) -> int:
    """``worker``: the engine's worker loop on a graph served over MCP or on a shared store."""
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
