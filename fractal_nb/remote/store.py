"""``RemoteStore``: the store methods a worker uses, called as MCP tools on another process's server.

The engine's worker loop runs unchanged on it: each method is one tool call
(blocking, from any thread, through one AnyIO portal), and a refusal comes back
as the same :class:`~fractal_nb.FractalError` subclass the local store raises.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .. import errors
from ..errors import FractalError, StateError, StoreUnreachableError
from ..llm.openai_llm import connection_problem
from ..store.holders import HolderInfo, hold, let_go, new_holder

_REFUSALS = {
    401: "pass the server's token: --token or FRACTAL_NB_TOKEN",
    403: "the token or the request's Origin was not accepted",
    421: "the server does not answer to this host name: start it with --allow-host NAME",
}


@asynccontextmanager
async def _connect(
    url: str, *, timeout_s: float, token: str | None, refusals: list[httpx2.Response]
) -> AsyncIterator[Client]:
    """An MCP session over streamable HTTP sending the bearer token; refusals are noted in ``refusals``."""

    async def note_refusal(response: httpx2.Response) -> None:
        if response.status_code in _REFUSALS:
            refusals.append(response)

    headers = {"Authorization": f"Bearer {token}"} if token else None
    # The transport leaves a client it is given open: this one is closed here.
    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks = {"response": [note_refusal]}
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=timeout_s) as client:
            yield client


def _connect_failure(url: str, exc: BaseException, refusals: list[httpx2.Response]) -> str:
    """Why connecting failed: the server's refusal (status and remedy) or the root cause, not a group."""
    if refusals:
        response = refusals[-1]
        return (
            f"the MCP server at {url} refused the request: {response.status_code} "
            f"{response.reason_phrase} ({_REFUSALS[response.status_code]})"
        )
    return f"cannot reach the MCP server at {url}: {connection_problem(exc)}"


class RemoteStore:
    """A worker's view of a graph store served over MCP (``fractal-nb serve-mcp``, ``serve_mcp()``).

    Parameters
    ----------
    url : str
        The server's endpoint, e.g. ``http://127.0.0.1:8765/mcp``.
    timeout_s : float
        How long one tool call may take.
    token : str, optional
        The server's bearer token, sent as ``Authorization: Bearer <token>`` on
        every request (required by a server bound beyond loopback).

    Raises
    ------
    StateError
        When the server cannot be reached or refuses the connection (a 401 for a
        missing or wrong token names the status and how to pass the token).
    """

    def __init__(self, url: str, *, timeout_s: float = 120.0, token: str | None = None) -> None:
        self.url = url
        # This worker process holds the claims made through this store while it is open.
        self.holder: HolderInfo = new_holder("remote worker")
        self.lease_s = 300.0  # until the server's first heartbeat answer says otherwise
        self._stack = ExitStack()
        refusals: list[httpx2.Response] = []
        try:
            self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
            self._client: Client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(
                    _connect(url, timeout_s=timeout_s, token=token, refusals=refusals)
                )
            )
        except BaseException as exc:
            self._stack.close()
            if isinstance(exc, Exception):
                kind = StateError if refusals else StoreUnreachableError  # refused, or not there at all
                raise kind(_connect_failure(url, exc, refusals)) from exc
            raise
        hold(self.holder)

    def close(self) -> None:
        """Disconnect (idempotent); a server that is already gone leaves nothing to disconnect from."""
        let_go(self.holder)
        try:
            self._stack.close()
        except Exception:  # noqa: BLE001 - the session's goodbye failed on a dead server; all is closed
            pass

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteStore {self.url}>"

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """One tool call; its JSON result, or the store's error raised here.

        A server that is gone raises :class:`~fractal_nb.errors.StoreUnreachableError`.
        """
        try:
            result = self._portal.call(self._client.call_tool, tool, arguments)
        except Exception as exc:  # the transport's failure, not a refusal by the store
            raise StoreUnreachableError(
                f"lost the MCP server at {self.url} ({tool}): {connection_problem(exc)}; claims held "
                "here go back to open when the server recovers them (at once on this host, after the "
                "lease elsewhere)"
            ) from exc
        text = result.content[0].text if result.content else ""
        try:
            value: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError:
            raise StateError(f"{tool} failed on the server: {text}") from None
        if result.is_error:
            kind = getattr(errors, str(value.get("error_type")), None)
            if not (isinstance(kind, type) and issubclass(kind, FractalError)):
                kind = FractalError
            raise kind(str(value.get("error", value)))
        return value

    # -- the methods the engine's worker path calls -----------------------------------

    def get_graph(self, graph_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.get_graph`."""
        return self.call("fractal_get_graph", graph_id=graph_id)

    def list_graphs(self) -> dict[str, Any]:
        """See :meth:`GraphStore.list_graphs`."""
        return self.call("fractal_list_graphs")

    def claim_work(
        self, graph_id: str, worker_id: str, *, holder: HolderInfo | dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.claim_work` (``holder``: this process, which the server checks on)."""
        return self.call(
            "fractal_claim_work",
            graph_id=graph_id,
            worker_id=worker_id,
            holder=json.dumps(holder) if holder else "",
        )

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> dict[str, Any]:
        """See :meth:`GraphStore.get_claimable_work`."""
        return self.call("fractal_get_claimable_work", graph_id=graph_id, worker_id=worker_id or "")

    def recover_stuck(
        self,
        graph_id: str,
        older_than_s: float | None = None,
        *,
        include_errors: bool = False,
        worker_id: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.recover_stuck`."""
        return self.call(
            "fractal_recover_stuck",
            graph_id=graph_id,
            older_than_s=older_than_s,
            include_errors=include_errors,
            worker_id=worker_id or "",
        )

    def get_context(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.get_context`."""
        return self.call("fractal_get_context", graph_id=graph_id, node_id=node_id)

    def submit_answer(
        self,
        graph_id: str,
        question_id: str,
        text: str,
        *,
        owner: str | None = None,
        metadata: dict[str, Any] | None = None,
        sub_questions: list[Any] | None = None,
        links: dict[str, Any] | None = None,
        calls: list[dict[str, Any]] | None = None,
        saturation: str | None = None,
        boundary: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.submit_answer` (one transaction on the server)."""
        return self.call(
            "fractal_submit_answer",
            graph_id=graph_id,
            node_id=question_id,
            owner=owner or "",
            text=text,
            metadata=json.dumps(metadata) if metadata else "",
            sub_questions=json.dumps(sub_questions or []),
            links=json.dumps(links) if links else "",
            calls=json.dumps(calls or []),
            saturation=saturation or "",
            boundary=json.dumps(boundary) if boundary else "",
        )

    def record_llm_calls(self, calls: list[dict[str, Any]]) -> int:
        """See :meth:`GraphStore.record_llm_calls`."""
        if not calls:
            return 0
        return int(self.call("fractal_record_llm_calls", calls=json.dumps(calls))["recorded"])

    def get_ready_to_synthesize(self, graph_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.get_ready_to_synthesize`."""
        return self.call("fractal_get_ready_to_synthesize", graph_id=graph_id)

    def get_synthesis_inputs(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.get_synthesis_inputs`."""
        return self.call("fractal_get_synthesis_inputs", graph_id=graph_id, node_id=node_id)

    def synthesize_node(self, graph_id: str, node_id: str, synthesis_text: str) -> dict[str, Any]:
        """See :meth:`GraphStore.synthesize_node`."""
        return self.call(
            "fractal_synthesize_node", graph_id=graph_id, node_id=node_id, synthesis_text=synthesis_text
        )

    def release_claim(
        self, graph_id: str, node_id: str, worker_id: str, error: str, *, failed: bool = True
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.release_claim`."""
        return self.call(
            "fractal_release_claim",
            graph_id=graph_id,
            node_id=node_id,
            worker_id=worker_id,
            error=error,
            failed=failed,
        )

    def claim_synthesis(
        self,
        graph_id: str,
        worker_id: str,
        *,
        holder: HolderInfo | dict[str, Any] | None = None,
        skip: list[str] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.claim_synthesis`."""
        return self.call(
            "fractal_claim_synthesis",
            graph_id=graph_id,
            worker_id=worker_id,
            holder=json.dumps(holder) if holder else "",
            skip=json.dumps(skip or []),
        )

    def submit_synthesis(
        self,
        graph_id: str,
        node_id: str,
        synthesis_text: str,
        *,
        worker_id: str,
        calls: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """See :meth:`GraphStore.submit_synthesis` (one transaction on the server)."""
        return self.call(
            "fractal_submit_synthesis",
            graph_id=graph_id,
            node_id=node_id,
            synthesis_text=synthesis_text,
            worker_id=worker_id,
            calls=json.dumps(calls or []),
        )

    def release_synthesis(self, graph_id: str, node_id: str, worker_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.release_synthesis`."""
        return self.call("fractal_release_synthesis", graph_id=graph_id, node_id=node_id, worker_id=worker_id)

    def heartbeat(self, holder_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.heartbeat`; remembers the server's lease."""
        beat = self.call("fractal_heartbeat", holder_id=holder_id)
        self.lease_s = float(beat["lease_s"])
        return beat
