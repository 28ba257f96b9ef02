"""Graph lifecycle: create, resume, change status, delete."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..checks import merged_metadata, optional_text, require_text, shown
from ..errors import InvalidInputError, InvalidTransitionError
from ..text import normalize
from ..vocabulary import (
    BUDGETS,
    TERMINAL_GRAPH,
    CheckpointMode,
    GraphStatus,
    Intensity,
    JsonArgument,
    NodeStatus,
    NodeType,
    check_graph_transition,
    parse_choice,
    parse_metadata,
)
from .base import StoreCore, new_graph_id, new_id
from .citations import CitationCheck
from .queries import GraphQueries
from .records import Snapshot, StatusChanged

# A graph's history and lineage rows (docs/architecture/store.md, "History and forks"); its forks keep theirs.
_OWN_ROWS = (
    "node_history",
    "graph_history",
    "history_baselines",
    "fork_nodes",
    "lineage",
    "turns",
    "depth_allowances",
    "sources",
    "source_chunks",
)


# How a graph a resume refuses goes on (docs/architecture/store.md, "The graph contract").
_WAY_ON: dict[GraphStatus, str] = {
    GraphStatus.BUDGET_EXHAUSTED: "; its budget stopped it: going on is a new turn with a new budget "
    "(new_budget: MCP fractal_new_budget, ex.new_budget(...) in Python, fractal-nb resume --new-budget), "
    "and the harvest finishes it",
}


class GraphLifecycle:
    """Create a graph with its root question and move it through its statuses."""

    def __init__(self, core: StoreCore, queries: GraphQueries, citations: CitationCheck) -> None:
        self._core = core
        self._db = core.db
        self._queries = queries
        self._citations = citations

    def create_graph(
        self,
        seed: str,
        intensity: str = "explore",
        checkpoint_mode: str = "autonomous",
        metadata: JsonArgument | None = None,
    ) -> dict[str, Any]:
        """Create a graph whose root question is ``seed``; returns ids, budget and status."""
        seed = require_text(seed, "seed")
        level = parse_choice(Intensity, intensity, "intensity")
        mode = CheckpointMode.parse(checkpoint_mode, level)
        meta = parse_metadata(metadata)
        graph_id, root_id = new_graph_id(), new_id("n")
        with self._db.write():
            now = self._core.clock()
            self._db.execute(
                "INSERT INTO graphs (graph_id, seed, intensity, checkpoint_mode, status, status_reason, "
                "root_node_id, "
                "metadata, created_at, updated_at) VALUES (?, ?, ?, ?, 'active', NULL, ?, ?, ?, ?)",
                [graph_id, seed, level.value, str(mode), root_id, json.dumps(meta), now, now],
            )
            self._db.execute(
                "INSERT INTO nodes (node_id, graph_id, seq, node_type, text, question_key, depth, status, "
                "path, metadata, created_at, updated_at) "
                "VALUES (?, ?, nextval('node_seq'), ?, ?, ?, 0, ?, '', '{}', ?, ?)",
                [
                    root_id,
                    graph_id,
                    NodeType.QUESTION.value,
                    seed,
                    normalize(seed),
                    NodeStatus.OPEN.value,
                    now,
                    now,
                ],
            )
            self._core.log(
                graph_id,
                None,
                "graph_created",
                None,
                {"seed": seed, "intensity": level.value, "checkpoint_mode": str(mode)},
                now,
            )
            self._core.log(graph_id, root_id, "node_added", None, {"node_type": "question", "depth": 0}, now)
        return {
            "graph_id": graph_id,
            "root_node_id": root_id,
            "intensity": level.value,
            "checkpoint_mode": str(mode),
            "budget": BUDGETS[level].to_dict(),
            "status": GraphStatus.ACTIVE.value,
        }

    def resume_graph(self, graph_id: str) -> Snapshot:
        """Reactivate a paused graph and return its snapshot.

        An active graph is returned unchanged; a completed, errored or budget_exhausted
        one is refused (docs/architecture/store.md, "The graph contract").
        """
        with self._db.write():
            graph = self._core.graph(graph_id)
            if graph.status in TERMINAL_GRAPH or graph.status == GraphStatus.BUDGET_EXHAUSTED:
                raise InvalidTransitionError(
                    f"graph {graph.graph_id} is {graph.status!r}, which is terminal for a resume; only "
                    f"paused or active graphs can be resumed{_WAY_ON.get(GraphStatus(graph.status), '')}",
                    graph_id=graph.graph_id,
                )
            if graph.status != GraphStatus.ACTIVE:
                self.change_status(graph.graph_id, graph.status, GraphStatus.ACTIVE, "resumed")
        return self._queries.get_snapshot(graph.graph_id)

    def start_harvest(self, graph_id: str) -> StatusChanged:
        """The harvest's own move: a paused or budget_exhausted graph becomes active for its writes.

        Not a resume (docs/architecture/store.md, "The graph contract"): the harvest
        that asks for it ends the graph ``completed``, or puts its status back if it
        fails. An active graph is left as it is; any other status is refused.
        """
        with self._db.write():
            graph = self._core.graph(graph_id)
            if graph.status not in (GraphStatus.ACTIVE, GraphStatus.PAUSED, GraphStatus.BUDGET_EXHAUSTED):
                raise InvalidTransitionError(
                    f"graph {graph.graph_id} is {graph.status!r}: a harvest finishes an active, paused or "
                    "budget_exhausted graph (a completed one is read back, an errored one summarised)",
                    graph_id=graph.graph_id,
                )
            if graph.status != GraphStatus.ACTIVE:
                self.change_status(graph.graph_id, graph.status, GraphStatus.ACTIVE, "harvesting")
        return {
            "graph_id": graph.graph_id,
            "status": GraphStatus.ACTIVE.value,
            "previous_status": graph.status,
        }

    def update_graph_status(self, graph_id: str, status: str, reason: str | None = None) -> StatusChanged:
        """Move the graph to ``status`` if the transition table allows it."""
        target = parse_choice(GraphStatus, status, "status")
        reason = optional_text(reason, "reason")
        with self._db.write():
            graph = self._core.graph(graph_id)
            if graph.status == GraphStatus.BUDGET_EXHAUSTED and target == GraphStatus.ACTIVE:
                raise InvalidTransitionError(
                    f"graph {graph.graph_id} cannot go from 'budget_exhausted' to 'active' by a status "
                    f"change{_WAY_ON[GraphStatus.BUDGET_EXHAUSTED]}",
                    graph_id=graph.graph_id,
                )
            if graph.status == GraphStatus.COMPLETED:  # only a new turn reopens it (store/turns.py)
                raise InvalidTransitionError(
                    f"graph {graph.graph_id} cannot go from 'completed' to {target.value!r} by a status "
                    "change; from 'completed' it may go to: active, only by a new turn (ask, deepen, "
                    "widen, redecompose or note)",
                    graph_id=graph.graph_id,
                )
            self.change_status(graph.graph_id, graph.status, target, reason)
        return {"graph_id": graph.graph_id, "status": target.value, "previous_status": graph.status}

    def update_graph_metadata(self, graph_id: str, metadata: JsonArgument) -> dict[str, Any]:
        """Merge ``metadata`` into the graph's (shallow), e.g. the harvest's summary."""
        meta = parse_metadata(metadata)
        if not meta:
            raise InvalidInputError("metadata is empty; send a JSON object with at least one key")
        with self._db.write():
            graph = self._core.active_graph(graph_id)
            merged, text = merged_metadata(json.loads(graph.metadata_json), meta, f"graph {graph.graph_id}")
            now = self._core.clock()
            self._db.execute(
                "UPDATE graphs SET metadata = ?, updated_at = ? WHERE graph_id = ?",
                [text, now, graph.graph_id],
            )
            self._core.log(graph.graph_id, None, "graph_metadata_updated", None, {"keys": sorted(meta)}, now)
        return {"graph_id": graph.graph_id, "metadata": merged}

    def record_harvest(self, graph_id: str, harvest: Mapping[str, Any]) -> dict[str, Any]:
        """Write the harvest (graph metadata ``harvest``), its findings' citations checked first.

        Each of ``harvest["findings"]`` gets checked citations and its ``support``
        (docs/architecture/store.md, "Sources and citations"), in the transaction that
        writes it: as :meth:`update_graph_metadata` with ``{"harvest": ...}``.
        """
        if not isinstance(harvest, Mapping):
            raise InvalidInputError(
                f"harvest must be an object (summary, findings, gaps, ...), not {shown(harvest)}"
            )
        with self._db.write():
            gid = self._core.graph(graph_id).graph_id
            checked = dict(harvest)
            if "findings" in checked:
                checked["findings"] = self._citations.checked_findings(
                    gid, checked["findings"], "harvest.findings"
                )
            return self.update_graph_metadata(gid, {"harvest": checked})

    def delete_graph(self, graph_id: str) -> dict[str, Any]:
        """Delete the graph with its nodes, edges, events and call log."""
        with self._db.write():
            graph = self._core.graph(graph_id)
            for table in (*_OWN_ROWS, "events", "edges", "synthesis_claims", "nodes", "llm_calls", "graphs"):
                self._db.execute(f"DELETE FROM {table} WHERE graph_id = ?", [graph.graph_id])
        self._db.file.graphs.pop(graph.graph_id, None)
        self._db.file.sourced.pop(graph.graph_id, None)
        return {"graph_id": graph.graph_id, "deleted": True}

    def change_status(self, graph_id: str, previous: str, target: str, reason: str | None) -> None:
        """Every graph status change: checked against the transition table, then written and logged."""
        check_graph_transition(graph_id, previous, target)
        now = self._core.clock()
        row = self._db.fetchone("SELECT metadata FROM graphs WHERE graph_id = ?", [graph_id])
        metadata = json.loads(row[0] if row else "{}")
        metadata.pop("status_reason", None)
        if reason is not None:  # also where MCP agents following the reference look for it
            metadata["status_reason"] = reason
        self._db.execute(
            "UPDATE graphs SET status = ?, status_reason = ?, metadata = ?, updated_at = ? "
            "WHERE graph_id = ?",
            [target, reason, json.dumps(metadata), now, graph_id],
        )
        payload = {"from": previous, "to": str(target), "reason": reason}
        self._core.log(graph_id, None, "graph_status_changed", None, payload, now)
