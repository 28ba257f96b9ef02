"""The fractal tool contract over MCP: one store, served to outside agents and worker processes.

Tool names, parameters and results are the seed skill's (``fractal_`` + the
store method; metadata passed as a JSON string). A refused call comes back as
``{"error": "<the store's message>"}`` with ``isError`` set, and changes
nothing, as in the store itself.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import INVALID_REQUEST, CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..arguments import check_bind_host
from ..errors import FractalError, InvalidInputError
from ..loopback import is_loopback
from ..store import Store
from ..store.sources import MAX_SOURCE_CHARS
from ..vocabulary import TERMINAL_GRAPH
from .announce import announce, withdraw
from .auth import (
    auth_settings,
    beyond_loopback_warning,
    client_url,
    http_app,
    resolve_token,
    token_verifier,
    transport_security,
)
from .reads import add_reads
from .tool_shape import answered, refused, shaped
from .tools import TOOLS, Tool

# How long the server keeps an idle connection open. A client's pool (httpx's, the MCP
# SDK's) drops its idle connections after 5 s; with the same 5 s here, a worker that
# reuses a connection at the edge of its backoff sends on a socket the server is closing,
# and the request fails as "connection closed". The server must outlast the client.
KEEP_ALIVE_S = 30

MAX_REQUEST_BYTES = 6 * MAX_SOURCE_CHARS + (1 << 20)
"""The largest HTTP request the server reads (the SDK's default, 4 MiB, kept a source at the store's
limit from ever arriving: issue 37). A source of ``MAX_SOURCE_CHARS`` characters fits as JSON whatever
they are (a control character travels as six bytes, ``\\u0001``), with a MiB for the rest of the call."""

INSTRUCTIONS = """\
A fractal-thinking graph: questions are broken into sub-questions, answered, and
synthesized bottom-up into one conclusion. The graph is the work queue.

A worker's loop: fractal_claim_work(graph_id, worker_id, with_context=true) → read
its context (or fractal_get_branch / fractal_get_snapshot) → fractal_add_node(node_type="answer")
under the claimed question → either fractal_add_node(node_type="question") under
that answer for each sub-question worth asking, or, for a leaf,
fractal_synthesize_node on the question → then cascade: call
fractal_get_ready_to_synthesize and synthesize what it lists, deepest first, until
it lists nothing. Stop when fractal_claim_work returns graph_done: true.
With several workers, take each synthesis with fractal_claim_synthesis (it hands a
ready question to one worker at a time, so each is paid for once) and write it with
fractal_submit_synthesis; pass claim_next=true to fractal_submit_answer and
fractal_submit_synthesis and each write that finishes a question's last sub-question
hands you that question's synthesis (next_synthesis; with with_inputs=true also
what it reads, as inputs) in the same transaction: climb
with it until next_synthesis.node_id is null, then ask fractal_claim_synthesis again
only when fractal_claim_work finds nothing. A claim is a lease: send a holder with fractal_claim_work
and call fractal_heartbeat a few times per lease to keep long work.
Take a turn on a graph, harvested or not: fractal_ask (a follow-up question),
fractal_deepen, fractal_redecompose or fractal_add_note (the graph becomes active
again); work it as above, or let the notebook serving it run() and harvest() it,
which ends the turn in a head. fractal_list_turns and fractal_list_heads list them;
fractal_get_state_at reads the graph as it was at an event (e.g. a head_event);
fractal_fork_graph makes a new graph from that state and never changes the source.
Read what the shell's inspection commands print, as JSON (document) and text: fractal_report,
fractal_state, fractal_events, fractal_heads, fractal_turns, fractal_tree, fractal_payload (one node).
Evidence: fractal_list_sources, fractal_search_sources and fractal_read_source read the
graph's sources (fractal_add_source_text adds a text snippet); cite what you read as
citations [{source, line_start, line_end, quote}] in fractal_submit_answer's metadata (or
a track's findings in fractal_synthesize_node): the store checks each (the quote must be
found in those lines) and marks the answer supported or unsupported;
fractal_check_citations checks them first without writing.
A question that forks on a choice only the person can make, or that cannot be understood
or answered: fractal_submit_halt instead of an answer. Questions held for the person are
listed by fractal_list_gates with their options; fractal_choose answers one.
Errors come back as {"error": "..."} and change nothing."""


def _tool_function(store: Store, tool: Tool) -> Callable[..., CallToolResult]:
    """The function served as ``tool``: its signature says the parameters, its body calls the store.

    The store's answer comes back as JSON (text and structured; a tool with a ``text_method``, as
    text only), its refusal as ``{"error": ...}``.
    """
    method = getattr(store, tool.method)
    text_method = getattr(store, tool.text_method) if tool.text_method else None

    def call_store(**arguments: Any) -> CallToolResult:
        try:
            decoded = {p.arg: p.decode(arguments[p.name]) for p in tool.params}
            if text_method is not None:
                return CallToolResult(content=[TextContent(type="text", text=text_method(**decoded))])
            answer = method(**decoded)
        except FractalError as exc:
            return refused(exc)
        return answered({tool.result_key: answer} if tool.result_key else dict(answer))

    return shaped(call_store, tool.method, tool.doc, tool.params)


class AnnouncingServer(uvicorn.Server):
    """uvicorn's server that says where it listens (``FILE.mcp.json``) while it does (faces.md, 26).

    Written once the sockets are bound (a reader that finds the file finds a server, at
    the port the system chose for port 0), withdrawn when it shuts down: the one way
    ``fractal-nb serve-mcp --http`` and ``ex.serve_mcp()`` say where they are.
    """

    def __init__(self, config: uvicorn.Config, *, db: str | Path, token_required: bool) -> None:
        super().__init__(config)
        self._db, self._token_required = db, token_required
        self.announcement: Path | None = None
        self.url = ""  # where it listens, once it does
        # Set once it listens and has said so: uvicorn's ``started`` comes before the announcement.
        self.announced = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Uvicorn's startup, then the announcement once it listens."""
        await super().startup(sockets)
        if self.started:
            port = int(self.servers[0].sockets[0].getsockname()[1])
            self.url = client_url(self.config.host, port)
            self.announcement = announce(self._db, self.url, token_required=self._token_required)
            self.announced.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """The announcement withdrawn, then uvicorn's shutdown."""
        withdraw(self.announcement, self.url)
        self.announcement = None
        await super().shutdown(sockets)


def recover_claims(store: Store) -> int:
    """Return to open the claims of gone holders (and expired leases) in every unfinished graph."""
    return sum(
        store.recover_stuck(g["graph_id"])["count"]
        for g in store.list_graphs()["graphs"]
        if g["status"] not in TERMINAL_GRAPH
    )


class FractalServer(MCPServer):
    """The SDK's server whose HTTP app answers in JSON and reads requests up to ``MAX_REQUEST_BYTES``.

    JSON replies: the SDK's client reads an SSE event of at most 1 MiB, so a larger tool
    result sent as SSE (a snapshot, a long source, any client that negotiates a protocol
    before 2026-07-28) failed on the client after the call had done its work (issue 37);
    a JSON reply it reads whole. No tool sends a notification or a request back during
    a call, which only SSE could carry.
    """

    def streamable_http_app(self, **options: Any) -> Starlette:
        """The streamable-HTTP app, with the options above; a request too large is refused by name."""
        app = super().streamable_http_app(
            **{**options, "json_response": True, "max_request_body_size": MAX_REQUEST_BYTES}
        )
        app.add_middleware(RequestSizeLimit)
        return app


class RequestSizeLimit:
    """Refuse a request that declares more than ``MAX_REQUEST_BYTES`` with a JSON-RPC error naming the limit.

    The SDK's own bound answers in plain text, which its client reports only as "Server
    returned an error response" (issue 37). A body sent without its length is left to that
    bound. The error's ``data`` carries ``error_type`` as a refused tool call's result does.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer an HTTP request declared too large here; pass anything else on."""
        declared = Headers(scope=scope).get("content-length", "") if scope["type"] == "http" else ""
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            message = (
                f"the request is {int(declared):,} bytes; this server reads at most {MAX_REQUEST_BYTES:,} "
                f"(docs/store.md, Limits): a source of up to {MAX_SOURCE_CHARS:,} characters fits, a longer "
                "text goes as several sources"
            )
            error = {"code": INVALID_REQUEST, "message": message, "data": {"error_type": "InvalidInputError"}}
            await JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=413)(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)


def build_server(store: Store, *, name: str = "fractal-nb", token: str | None = None) -> MCPServer:
    """An MCP server whose tools are the store's contract (the store stays the caller's to close).

    One tool per row of :data:`fractal_nb.mcp.tools.TOOLS`, then the read tools
    (:data:`fractal_nb.mcp.reads.READS`). A server that starts
    first gives back the claims of holders that are gone (a restarted server's
    dead workers: at once on this host).

    With a ``token``, its HTTP app answers 401 to any request without
    ``Authorization: Bearer <token>`` (stdio is unaffected).
    """
    server = FractalServer(
        name,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        token_verifier=token_verifier(token),
        auth=auth_settings(token),
    )
    recover_claims(store)
    for tool in TOOLS:
        server.tool(name=tool.name)(_tool_function(store, tool))
    add_reads(server, store)
    return server


class BackgroundServer:
    """Streamable HTTP on a thread with its own event loop: never the notebook kernel's loop.

    Parameters
    ----------
    store : Store
        The store served (it stays the caller's to close).
    host : str
        The address to bind (default loopback). Beyond loopback every request
        needs the bearer token, and starting prints a warning line to stderr.
    port : int
        The port (0: one the system picks; see :attr:`port` after :meth:`start`).
    token : str, optional
        The bearer token every request must carry; else ``$FRACTAL_NB_TOKEN``;
        else, beyond loopback only, a generated one (see :attr:`token`).
    allow_hosts : Iterable[str]
        Extra Host names to answer to beyond loopback, e.g. ``["myhost.example.org"]``;
        ``"*"`` turns the Host check off (see :func:`fractal_nb.mcp.auth.transport_security`).

    Attributes
    ----------
    token : str or None
        The token required (None: none is, on loopback).
    token_generated : bool
        Whether :attr:`token` was generated here, for the caller to hand out.
    """

    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        check_bind_host(host)  # before anything is built: a host of the wrong form is refused at once
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidInputError(
                f"port must be an integer 0-65535 (0: the system picks one), not {port!r}"
            )
        self.token, self.token_generated = resolve_token(token, host=host)
        self._security = transport_security(host, allow_hosts=allow_hosts)
        app = http_app(build_server(store, token=self.token), host=host, security=self._security)
        self._server = AnnouncingServer(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="on",
                timeout_keep_alive=KEEP_ALIVE_S,
            ),
            db=store.location,
            token_required=self.token is not None,
        )
        self._thread = threading.Thread(target=self._server.run, name="fractal-nb mcp", daemon=True)
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. ``http://127.0.0.1:8765/mcp`` (loopback for a 0.0.0.0 bind)."""
        return client_url(self.host, self.port)

    def start(self, timeout_s: float = 15.0) -> str:
        """Start serving; returns the URL (the port chosen by the system when 0 was asked)."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.announced.wait(0.01):  # a caller may read FILE.mcp.json at once
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the MCP server did not start on {self.host}:{self.port}")
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        if not is_loopback(self.host):
            hint = (
                "generated: read it from the server's .token, ex.mcp_token in a notebook"
                if self.token_generated
                else "the one given or $FRACTAL_NB_TOKEN"
            )
            print(
                beyond_loopback_warning(self.host, self.port, security=self._security, token_hint=hint),
                file=sys.stderr,
                flush=True,
            )
        return self.url

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop serving and wait for the thread (idempotent)."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
