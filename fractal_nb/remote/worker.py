"""A worker process on a graph another process owns: the engine's worker loop over MCP.

Run it as ``fractal-nb worker --mcp-url URL``: it claims, answers and synthesizes
through the server's tools until the graph has no work left for it, so workers
can be spread over processes and machines while one process owns the DuckDB file.
"""

from __future__ import annotations

from ..engine.dispatcher import Clock, Dispatcher, RealClock, WorkerReport
from ..engine.primitive import RunState
from ..errors import InvalidInputError
from ..llm.protocol import LLM
from .store import RemoteStore


def only_active_graph(store: RemoteStore, what: str = "graph_id") -> str:
    """The id of the server's one active graph; InvalidInputError asking for ``what`` if not one."""
    graphs = store.list_graphs()["graphs"]
    active = [g for g in graphs if g["status"] == "active"]
    if len(active) != 1:
        ids = ", ".join(f"{g['graph_id']} ({g['status']})" for g in graphs) or "none"
        raise InvalidInputError(f"the server holds {len(active)} active graphs ({ids}); pass {what}")
    return str(active[0]["graph_id"])


def work_remotely(
    store: RemoteStore,
    llm: LLM,
    *,
    worker_id: str,
    graph_id: str | None = None,
    threads: int = 1,
    clock: Clock | None = None,
) -> list[WorkerReport]:
    """Work the graph behind ``store`` with ``threads`` workers named ``worker_id-1…``; their reports."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInputError(f"threads must be an integer >= 1, not {threads!r}")
    graph = store.get_graph(only_active_graph(store) if graph_id is None else graph_id)
    state = RunState.for_graph(store, graph, llm)
    dispatcher = Dispatcher(
        state, workers=threads, clock=clock or RealClock(), worker_prefix=worker_id, patient=True
    )
    return dispatcher.work(threads)
