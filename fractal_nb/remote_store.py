"""``RemoteStore``: the store methods a worker uses, called as MCP tools on another process's server.

The engine's worker loop runs unchanged on it: each method is one tool call
(blocking, from any thread, through one AnyIO portal), and a refusal comes back
as the same :class:`~fractal_nb.FractalError` subclass the local store raises.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client

from . import errors
from .errors import FractalError, StateError


class RemoteStore:
    """A worker's view of a graph store served over MCP (``fractal-nb serve-mcp``, ``serve_mcp()``)."""

    def __init__(self, url: str, *, timeout_s: float = 120.0) -> None:
        self.url = url
        self._stack = ExitStack()
        try:
            self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
            self._client: Client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(Client(url, read_timeout_seconds=timeout_s)))
        except BaseException as exc:
            self._stack.close()
            if isinstance(exc, Exception):
                raise StateError(f"cannot reach the MCP server at {url}: {exc}") from exc
            raise

    def close(self) -> None:
        """Disconnect (idempotent)."""
        self._stack.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteStore {self.url}>"

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """One tool call; its JSON result, or the store's error raised here."""
        result = self._portal.call(self._client.call_tool, tool, arguments)
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

    def claim_work(self, graph_id: str, worker_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.claim_work`."""
        return self.call("fractal_claim_work", graph_id=graph_id, worker_id=worker_id)

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> dict[str, Any]:
        """See :meth:`GraphStore.get_claimable_work`."""
        return self.call("fractal_get_claimable_work", graph_id=graph_id, worker_id=worker_id or "")

    def recover_stuck(self, graph_id: str, older_than_s: float | None = None, *,
                      include_errors: bool = False, worker_id: str | None = None) -> dict[str, Any]:
        """See :meth:`GraphStore.recover_stuck`."""
        return self.call("fractal_recover_stuck", graph_id=graph_id, older_than_s=older_than_s,
                         include_errors=include_errors, worker_id=worker_id or "")

    def get_context(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """See :meth:`GraphStore.get_context`."""
        return self.call("fractal_get_context", graph_id=graph_id, node_id=node_id)

    def submit_answer(self, graph_id: str, question_id: str, text: str, *, owner: str | None = None,
                      metadata: dict[str, Any] | None = None, sub_questions: list[Any] | None = None,
                      links: dict[str, Any] | None = None,
                      calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """See :meth:`GraphStore.submit_answer` (one transaction on the server)."""
        return self.call("fractal_submit_answer", graph_id=graph_id, node_id=question_id, owner=owner or "",
                         text=text, metadata=json.dumps(metadata) if metadata else "",
                         sub_questions=json.dumps(sub_questions or []),
                         links=json.dumps(links) if links else "", calls=json.dumps(calls or []))

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
        return self.call("fractal_synthesize_node", graph_id=graph_id, node_id=node_id,
                         synthesis_text=synthesis_text)

    def release_claim(self, graph_id: str, node_id: str, worker_id: str, error: str) -> dict[str, Any]:
        """See :meth:`GraphStore.release_claim`."""
        return self.call("fractal_release_claim", graph_id=graph_id, node_id=node_id, worker_id=worker_id,
                         error=error)
