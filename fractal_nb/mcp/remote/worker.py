"""A worker process on a graph others share: the engine's worker loop, over MCP or on the database.

Run it as ``fractal-nb worker --mcp-url URL``: it claims, answers and synthesizes
through the server's tools until the graph has no work left for it, so workers
can be spread over processes and machines while one process owns the DuckDB file.
Or as ``fractal-nb worker --db postgresql://...``: the same loop straight on a
PostgreSQL store, with no owner process between (docs/architecture/store.md, "PostgreSQL").
"""

from __future__ import annotations

from ... import engine
from ...engine import Clock, RunState, WorkerReport
from ...errors import InvalidInputError, StateError
from ...llm.protocol import LLM
from ...store import Store
from ...vocabulary import NodeStatus
from .store import RemoteStore

WorkedStore = RemoteStore | Store  # a graph's tools over MCP, or its store itself


def only_active_graph(store: WorkedStore, what: str = "graph_id") -> str:
    """The id of the store's one active graph; InvalidInputError asking for ``what`` if not one."""
    graphs = store.list_graphs()["graphs"]
    active = [g for g in graphs if g["status"] == "active"]
    if len(active) != 1:
        ids = ", ".join(f"{g['graph_id']} ({g['status']})" for g in graphs) or "none"
        raise InvalidInputError(f"the store holds {len(active)} active graphs ({ids}); pass {what}")
    return str(active[0]["graph_id"])


def work_remotely(
    store: WorkedStore,
    llm: LLM,
    *,
    worker_id: str,
    graph_id: str | None = None,
    threads: int = 1,
    clock: Clock | None = None,
) -> list[WorkerReport]:
    """Work the graph behind ``store`` with ``threads`` workers named ``worker_id-1…``; their reports.

    At most the graph's ``max_agents`` threads start (docs/architecture/store.md, rule 17).
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInputError(f"threads must be an integer >= 1, not {threads!r}")
    graph = store.get_graph(only_active_graph(store) if graph_id is None else graph_id)
    gid = graph["graph_id"]
    root = store.get_synthesis_inputs(gid, graph["root_node_id"])["node"]
    # Workers never seed (engine/runs.py seed, in the owner); a chain's root is its first level, claimable.
    if root["status"] == NodeStatus.OPEN and not store.get_claimable_work(gid)["count"]:
        raise StateError(
            f"graph {gid} holds only its root: nothing is seeded for workers to claim; seed it where its "
            f"store is opened whole (`fractal-nb seed --db FILE --graph-id {gid}`, or ex.seed() in the "
            "process that serves it)"
        )
    state = RunState.for_graph(store, graph, llm)
    return engine.work(state, threads=threads, worker_prefix=worker_id, clock=clock)
