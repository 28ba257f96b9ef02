"""``RemoteStore``: the store's methods, called as MCP tools on another process's server.

The engine's worker loop runs unchanged on it: each method is one tool call
(blocking, from any thread, through one AnyIO portal), and a refusal comes back
as the same :class:`~fractal_nb.FractalError` subclass the local store raises.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from ... import errors
from ...errors import FractalError, InvalidInputError, StateError, StoreUnreachableError
from ...store import Store, WorkerStore
from ...store.holders import HOLDER_LEASE_S, OWN_HOLDER, HolderInfo, hold, let_go, new_holder
from ...store.records import Heartbeat
from ...wire import connection_problem
from ..tools import TOOLS_BY_METHOD

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


P = ParamSpec("P")
R = TypeVar("R")


def remote_method(
    method: Callable[Concatenate[Store, P], R],
) -> Callable[Concatenate[RemoteStore, P], R]:
    """``method`` of :class:`Store` as a tool call: the same signature, its row of the tool table.

    The arguments are bound to the store method's signature and encoded as the
    row says; one the tool does not carry (``release_claim``'s ``max_failures``)
    must keep its default. ``holder=OWN_HOLDER`` (the store's own, the default) is this worker's.
    """
    tool = TOOLS_BY_METHOD[method.__name__]
    signature = inspect.signature(method)
    carried = {p.arg for p in tool.params}
    # Worked out once: the parameters the tool leaves out (they must keep their defaults).
    left_out = {n: p.default for n, p in list(signature.parameters.items())[1:] if n not in carried}
    takes_holder = "holder" in carried

    def call(self: RemoteStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, default in left_out.items():
            if bound.arguments[name] != default:
                raise InvalidInputError(
                    f"{name} is not carried by {tool.name}; RemoteStore keeps its default"
                )
        if takes_holder and bound.arguments["holder"] == OWN_HOLDER:
            bound.arguments["holder"] = self.holder
        value = self.call(tool.name, **{p.name: p.encode(bound.arguments[p.arg]) for p in tool.params})
        return cast(R, value[tool.result_key] if tool.result_key else value)

    call.__name__ = method.__name__
    call.__signature__ = signature  # type: ignore[attr-defined]  # what help() and IDEs show
    call.__doc__ = f"See :meth:`Store.{method.__name__}` (the tool {tool.name})."
    return call


class RemoteStore(WorkerStore):
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
        # A remote holder's lease, until the server's first heartbeat answer says otherwise.
        self.lease_s = HOLDER_LEASE_S
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

    def watch(self, graph_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        """MCP sends no news of other workers' commits: ``wake`` is never called (they back off)."""
        return _unwatched

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
            refused = exc.data if isinstance(exc, MCPError) else None
            if isinstance(refused, dict) and refused.get("error_type") == "InvalidInputError":
                # refused by the server before any tool ran: a request over its size limit
                raise InvalidInputError(f"{tool}: {exc}") from None
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

    # -- the store's methods, one per tool of the tool table ---------------------------------

    create_graph = remote_method(Store.create_graph)
    resume_graph = remote_method(Store.resume_graph)
    update_graph_status = remote_method(Store.update_graph_status)
    delete_graph = remote_method(Store.delete_graph)
    add_node = remote_method(Store.add_node)
    update_node = remote_method(Store.update_node)
    mark_saturated = remote_method(Store.mark_saturated)
    claim_work = remote_method(Store.claim_work)
    synthesize_node = remote_method(Store.synthesize_node)
    get_snapshot = remote_method(Store.get_snapshot)
    get_branch = remote_method(Store.get_branch)
    get_open_questions = remote_method(Store.get_open_questions)
    query_convergence = remote_method(Store.query_convergence)
    query_contradictions = remote_method(Store.query_contradictions)
    get_saturation_status = remote_method(Store.get_saturation_status)
    get_claimable_work = remote_method(Store.get_claimable_work)
    get_ready_to_synthesize = remote_method(Store.get_ready_to_synthesize)
    recover_stuck = remote_method(Store.recover_stuck)
    approve_gate = remote_method(Store.approve_gate)
    prune_branch = remote_method(Store.prune_branch)
    submit_halt = remote_method(Store.submit_halt)  # halts (docs/architecture/engine.md, "Halts")
    choose = remote_method(Store.choose)
    list_gates = remote_method(Store.list_gates)
    get_graph = remote_method(Store.get_graph)
    list_graphs = remote_method(Store.list_graphs)
    get_context = remote_method(Store.get_context)
    submit_answer = remote_method(Store.submit_answer)
    get_synthesis_inputs = remote_method(Store.get_synthesis_inputs)
    release_claim = remote_method(Store.release_claim)
    claim_synthesis = remote_method(Store.claim_synthesis)
    submit_synthesis = remote_method(Store.submit_synthesis)
    release_synthesis = remote_method(Store.release_synthesis)
    record_llm_calls = remote_method(Store.record_llm_calls)
    ask = remote_method(Store.ask)
    deepen = remote_method(Store.deepen)
    redecompose = remote_method(Store.redecompose)
    add_note = remote_method(Store.add_note)
    new_budget = remote_method(Store.new_budget)
    list_turns = remote_method(Store.list_turns)
    list_heads = remote_method(Store.list_heads)
    get_state_at = remote_method(Store.get_state_at)
    fork_graph = remote_method(Store.fork_graph)
    get_lineage = remote_method(Store.get_lineage)
    list_sources = remote_method(Store.list_sources)
    add_source_text = remote_method(Store.add_source_text)
    search_sources = remote_method(Store.search_sources)
    read_source = remote_method(Store.read_source)
    glob_sources = remote_method(Store.glob_sources)
    grep_sources = remote_method(Store.grep_sources)
    check_citations = remote_method(Store.check_citations)
    thinkon_level = remote_method(Store.thinkon_level)
    thinkon_chain = remote_method(Store.thinkon_chain)
    thinkon_plan = remote_method(Store.thinkon_plan)
    thinkon_call = remote_method(Store.thinkon_call)
    thinkon_return = remote_method(Store.thinkon_return)
    _heartbeat = remote_method(Store.heartbeat)

    def heartbeat(self, holder_id: str) -> Heartbeat:
        """See :meth:`Store.heartbeat`; remembers the server's lease."""
        beat = self._heartbeat(holder_id)
        self.lease_s = float(beat["lease_s"])
        return beat


def _unwatched() -> None:
    """Stops a watch that never heard anything."""
