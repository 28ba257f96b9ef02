"""``GraphStore``: the graph of one or many explorations in a DuckDB file or in memory."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..model import TurnKind
from .base import DEFAULT_LEASE_S
from .citations import CitationCheck
from .context import NodeContext
from .database import Tracer
from .graphs import GraphLifecycle
from .lineage import Lineage
from .llm_log import LLMLog
from .nodes import NodeWrites
from .queries import GraphQueries
from .records import (
    ChunkRecord,
    CitationRecord,
    Forked,
    LineageRecord,
    SnapshotAt,
    SourceHit,
    SourceLines,
    SourceRecord,
    SourceText,
    TurnRecord,
    TurnRequest,
)
from .replay import Replay
from .rows import GraphRow, NodeRow
from .sources import Sources
from .synthesis import SynthesisQueue
from .thinkon import ThinkonWrites
from .turns import Turns


class GraphStore(
    GraphLifecycle, ThinkonWrites, NodeWrites, SynthesisQueue, GraphQueries, NodeContext, LLMLog
):
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
        self._citations = CitationCheck(self._db)
        self._sources = Sources(self._db, self.clock, self._citations, self)
        self._replay = Replay(self._db)
        self._lineage = Lineage(self._db, self._replay, self._journal, self, self.clock)
        self._turns = Turns(self._db, self.clock, self)

    # -- history and forks (docs/architecture.md, "History and forks") ----------------

    def get_state_at(self, graph_id: str, event_id: int) -> SnapshotAt:
        """The graph as it was at ``event_id``: a snapshot (as get_snapshot) folded from its history."""
        return self._replay.state_at(graph_id, event_id)

    def fork_graph(self, graph_id: str, at_event: int) -> Forked:
        """A new graph in this file from ``graph_id``'s state at ``at_event``; the source never changes."""
        return self._lineage.fork(graph_id, at_event)

    def get_lineage(self, graph_id: str) -> list[LineageRecord]:
        """The lineage of ``graph_id``: its original and every fork of it, oldest first."""
        self._graph(graph_id)  # NotFoundError for an unknown graph
        return self._lineage.lineage(graph_id)

    def list_family(self) -> list[LineageRecord]:
        """Every graph in the file and where it was forked from, oldest first."""
        return self._lineage.family()

    def create_graph(
        self,
        seed: str,
        intensity: str = "explore",
        checkpoint_mode: str = "autonomous",
        metadata: dict[str, Any] | str | None = None,
    ) -> dict[str, Any]:
        """Create a graph whose root question is ``seed`` (turn 1 opens); returns ids, budget and status."""
        with self._db.write():
            created = super().create_graph(seed, intensity, checkpoint_mode, metadata)
            self._turns.open_seed(created["graph_id"])
        return created

    # -- turns and heads (store/turns.py; docs/architecture.md, "Turns and heads") --

    def ask(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A follow-up question under the root's answer or ``under`` a node (:meth:`Turns.ask`)."""
        return self._turns.ask(graph_id, question, under)

    def attach(self, graph_id: str, question: str, under: str | None = None) -> TurnRequest:
        """A fork's narrower question: :meth:`ask` opening a turn of kind ``attach`` (:meth:`Turns.ask`)."""
        return self._turns.ask(graph_id, question, under, kind=TurnKind.ATTACH)

    def widen(self, graph_id: str, questions: Sequence[str], n: int | None = None) -> TurnRequest:
        """New seed questions under the root's answer (:meth:`Turns.widen`)."""
        return self._turns.widen(graph_id, questions, n)

    def deepen(self, graph_id: str, node_id: str, levels: int = 1) -> TurnRequest:
        """Let a branch go ``levels`` past the depth for this turn (:meth:`Turns.deepen`)."""
        return self._turns.deepen(graph_id, node_id, levels)

    def redecompose(self, graph_id: str, node_id: str, hint: str | None = None) -> TurnRequest:
        """Answer a question again with a new decomposition (:meth:`Turns.redecompose`)."""
        return self._turns.redecompose(graph_id, node_id, hint)

    def add_note(self, graph_id: str, node_id: str, text: str) -> TurnRequest:
        """A person's note under a question (:meth:`Turns.add_note`)."""
        return self._turns.add_note(graph_id, node_id, text)

    def end_turn(self, graph_id: str, *, cost: float | None = None) -> TurnRecord | None:
        """End the open turn in a head (:meth:`Turns.end_turn`)."""
        return self._turns.end_turn(graph_id, cost=cost)

    def list_turns(self, graph_id: str) -> list[TurnRecord]:
        """The graph's turns, heads included (:meth:`Turns.list_turns`)."""
        return self._turns.list_turns(graph_id)

    def list_heads(self, graph_id: str) -> list[TurnRecord]:
        """The graph's heads: its ended turns in order, the current head last (the open turn left out).

        >>> store = GraphStore()
        >>> g = store.create_graph("Why do cities grow?", "pulse")
        >>> store.list_heads(g["graph_id"])  # turn 1 (the seed) ends in a head at its harvest
        []
        """
        return [t for t in self._turns.list_turns(graph_id) if t["head_event"] is not None]

    # -- sources and citations (store/sources.py; docs/architecture.md, "Sources and citations") --

    def add_sources(self, graph_id: str, texts: Sequence[SourceText]) -> list[SourceRecord]:
        """Add texts as the graph's sources, kept as chunks (:meth:`Sources.add`)."""
        return self._sources.add(graph_id, texts)

    def add_source_text(self, graph_id: str, name: str, text: str) -> SourceRecord:
        """Add one text snippet as a source named ``name`` (what MCP offers: text, never a path to read)."""
        return self.add_sources(
            graph_id, [{"name": name, "kind": "snippet", "location": None, "text": text}]
        )[0]

    def list_sources(self, graph_id: str) -> list[SourceRecord]:
        """The graph's sources in the order they were added (:meth:`Sources.list`)."""
        return self._sources.listing(graph_id)

    def source_chunks(self, graph_id: str) -> list[ChunkRecord]:
        """The chunks of the graph's sources (:meth:`Sources.chunks`)."""
        return self._sources.chunks(graph_id)

    def read_source(self, graph_id: str, source: str, line_start: int, line_end: int) -> SourceLines:
        """A span of a source's lines as stored (:meth:`Sources.read`)."""
        return self._sources.read(graph_id, source, line_start, line_end)

    def search_sources(self, graph_id: str, query: str, k: int = 5) -> list[SourceHit]:
        """The chunks of the graph's sources that best match ``query`` (:meth:`Sources.search`)."""
        return self._sources.search(graph_id, query, k)

    def check_citations(self, graph_id: str, citations: Sequence[Mapping[str, Any]]) -> list[CitationRecord]:
        """Each citation with what the store's check found; nothing written (:meth:`Sources.check`)."""
        return self._sources.check(graph_id, citations)

    def table_lines(self, name: str, columns: Sequence[str] | None = None) -> list[str]:
        """A table or view of this file beside the graphs, a line per row (:meth:`Sources.table_lines`)."""
        return self._sources.table_lines(name, columns)

    def _depth_ceiling(self, graph: GraphRow, question: NodeRow, needed: int) -> int:
        return self._turns.depth_ceiling(graph, question, needed)
