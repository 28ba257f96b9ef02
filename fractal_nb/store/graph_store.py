"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .base import DEFAULT_LEASE_S
from .context import NodeContext
from .database import Tracer
from .graphs import GraphLifecycle
from .lineage import Lineage
from .llm_log import LLMLog
from .nodes import NodeWrites
from .queries import GraphQueries
from .records import Forked, LineageRecord, SnapshotAt
from .replay import Replay
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

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        lease_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.time,
        tracer: Tracer | None = None,
    ) -> None:
        super().__init__(path, read_only=read_only, lease_s=lease_s, clock=clock, tracer=tracer)
        self._replay = Replay(self._db)
        self._lineage = Lineage(self._db, self._replay, self._journal, self, self.clock)

    # -- history and forks (docs/architecture.md, "History and forks") ----------------

    def get_state_at(self, graph_id: str, event_id: int) -> SnapshotAt:
        """The graph as it was at ``event_id``: a snapshot (as get_snapshot) folded from its history."""
        return self._replay.state_at(graph_id, event_id)

    def fork_graph(self, graph_id: str, at_event: int) -> Forked:
        """A new graph in this file from ``graph_id``'s state at ``at_event``; the source never changes."""
        return self._lineage.fork(graph_id, at_event)

    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        """The family of forks ``graph_id`` belongs to, oldest first."""
        self._graph(graph_id)  # NotFoundError for an unknown graph
        return self._lineage.lineage(graph_id)

    def list_family(self) -> list[LineageRecord]:
        """Every graph in the file and where it was forked from, oldest first."""
        return self._lineage.family()
