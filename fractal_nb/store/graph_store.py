"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory."""

from __future__ import annotations

from .context import NodeContext
from .graphs import GraphLifecycle
from .llm_log import LLMLog
from .nodes import NodeWrites
from .queries import GraphQueries
from .synthesis import SynthesisQueue


class GraphStore(GraphLifecycle, NodeWrites, SynthesisQueue, GraphQueries, NodeContext, LLMLog):
    """The graph contract on DuckDB; the only place in fractal_nb that speaks SQL.

    Every method returns a JSON-ready dict (ids are strings) and raises a
    :class:`~fractal_nb.FractalError` on bad input; a refused call changes
    nothing. Safe to share between threads: claims are atomic.

    Parameters
    ----------
    path:
        A DuckDB file, or None for an in-memory store.
    read_only:
        Open a file that no process is writing, for reading only.
    lease_s:
        How long a claim holds before another worker may take it over.
    clock:
        Seconds since the epoch; swap it in tests to age leases.
    tracer:
        Called with ``(sql, params)`` before every statement.

    Examples
    --------
    >>> store = GraphStore()
    >>> g = store.create_graph("Why do cities grow?", "pulse", "autonomous")
    >>> a = store.add_node(g["graph_id"], g["root_node_id"], "answer", "Jobs and trade.")
    >>> q = store.add_node(g["graph_id"], a["node_id"], "question", "Which jobs?")
    >>> store.claim_work(g["graph_id"], "worker-1")["node_id"] == q["node_id"]
    True
    """
