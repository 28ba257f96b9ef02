"""Read-only views of a graph: snapshot, branch, queues, links, saturation, events.

Every listing is in creation order (docs/architecture/store.md, rule 8), read inside one transaction so
that nodes and edges come from the same moment.
"""

from __future__ import annotations

import json
from typing import Any, cast

import networkx as nx

from ..checks import optional_name, require_count, require_id
from ..vocabulary import DONE_QUESTION, PENDING_QUESTION, TRACK_KEY, EdgeType, NodeStatus
from .base import StoreCore
from .claim import claimable
from .dialect import Dialect, json_text, json_true, json_value, pick
from .question_items import QuestionFold
from .records import (
    Changes,
    ClaimableList,
    EdgeRecord,
    FeedNode,
    GraphList,
    GraphRecord,
    OpenQuestions,
    QuestionItems,
    ReadyList,
    Snapshot,
)
from .rows import EDGES_SQL, EVENT_COLUMNS, GRAPH_COLUMNS, GraphRow, NodeRow, edge_dict, event_dict
from .snapshot import SnapshotTexts
from .synthesis import READY_WHERE

_Filter = tuple[str, list[Any]]  # a WHERE fragment and its parameters
_ALL: _Filter = ("TRUE", [])
# Node fields the live view and the HTML export draw from.
_FEED_COLUMNS = "node_id, parent_id, node_type, text, depth, status, status_reason, owner, seq"


def _feed_metadata(d: Dialect) -> str:
    """What the view needs of the metadata, pulled out in SQL: a feed node's keys, in the SELECT's order."""
    return (
        f"{json_text(d, 'metadata', 'synthesis')}, {json_text(d, 'metadata', 'last_error')}, "
        # true only for JSON true: any other value an outside client wrote there reads as false
        f"{json_true(d, 'metadata', 'synthesis_failed')}, "
        # the weak mark (docs/architecture/engine.md, "Facts, assumptions, unknowns")
        f"{json_value(d, 'metadata', 'weak')}, "
        # an answer's support and a track question's name (docs/architecture/faces.md,
        # "Evidence in the faces")
        f"{json_text(d, 'metadata', 'support')}, {json_text(d, 'metadata', 'track', 'name')}"
    )


_FEED_NAMES = (
    *_FEED_COLUMNS.split(", "),
    *("synthesis", "last_error", "synthesis_failed", "weak", "support", TRACK_KEY),
)
_TOUCHED = "SELECT node_id FROM events WHERE graph_id = ? AND event_id > ? AND event_id <= ?"


class GraphQueries:
    """Queries of the tool contract; none of them writes."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._db = core.db
        self._snapshot_texts = SnapshotTexts(core.db)  # each graph's rows as JSON, kept (snapshot.py)
        self._question_fold = QuestionFold(core.db)  # the whole graph as the view's items (question_items.py)
        self._feed_metadata = _feed_metadata(core.db.dialect)
        self._ready_where = pick(READY_WHERE, core.db.dialect)

    def get_snapshot(self, graph_id: str) -> Snapshot:
        """The whole graph: its fields, nodes and edges in creation order."""
        graph, nodes, edges = self._snapshot_parts(graph_id)
        return {**graph.to_dict(), "nodes": json.loads(nodes), "edges": json.loads(edges)}

    def get_snapshot_text(self, graph_id: str) -> str:
        """:meth:`get_snapshot` as JSON text, its nodes and edges as the database wrote them (never parsed).

        What the MCP tool sends: an outside agent reads the whole graph at every step
        of its loop, so a big graph's snapshot costs no Python per node on the way out.

        >>> from fractal_nb.store import GraphStore
        >>> store = GraphStore()
        >>> g = store.create_graph("Why do cities grow?", "pulse")
        >>> json.loads(store.get_snapshot_text(g["graph_id"])) == store.get_snapshot(g["graph_id"])
        True
        """
        graph, nodes, edges = self._snapshot_parts(graph_id)
        fields = json.dumps(graph.to_dict())
        return f'{fields[:-1]}, "nodes": {nodes}, "edges": {edges}}}'

    def _snapshot_parts(self, graph_id: str) -> tuple[GraphRow, str, str]:
        """The graph's row and its nodes and edges as JSON text, read in one transaction (snapshot.py)."""
        with self._db.read():
            graph = self._core.graph(graph_id)
            return graph, *self._snapshot_texts.nodes_and_edges(graph.graph_id)

    def get_graph(self, graph_id: str) -> GraphRecord:
        """The graph's own fields (status, seed, budget, metadata) without its nodes."""
        return self._core.graph(graph_id).to_dict()

    def get_node(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """One node with its direct children and the links touching it: what an inspector shows."""
        with self._db.read():
            graph = self._core.known_graph(graph_id)
            node = self._core.node(graph.graph_id, node_id)
            children = self._core.nodes("graph_id = ? AND parent_id = ?", [graph.graph_id, node.node_id])
            links = self.edges(
                graph.graph_id,
                tree=None,
                links=("(from_node = ? OR to_node = ?)", [node.node_id, node.node_id]),
            )
        return {
            "graph_id": graph.graph_id,
            "node": node.to_dict(),
            "children": [c.to_dict() for c in children],
            "links": links,
        }

    def list_graphs(self) -> GraphList:
        """Every graph in the store (without nodes), oldest first."""
        rows = self._db.fetchall(f"SELECT {GRAPH_COLUMNS} FROM graphs ORDER BY created_at, graph_id")
        graphs = [GraphRow(*r).to_dict() for r in rows]
        return {"graphs": graphs, "count": len(graphs)}

    def get_branch(self, graph_id: str, node_id: str) -> dict[str, Any]:
        """The subtree under ``node_id`` (itself included) and the edges inside it."""
        with self._db.read():
            graph = self._core.known_graph(graph_id)
            root = self._core.node(graph.graph_id, node_id)
            ids = [root.node_id, *self._core.descendants(graph.graph_id, root.node_id)]
            marks = ", ".join("?" for _ in ids)
            nodes = self._core.nodes(f"node_id IN ({marks})", ids)
            edges = self.edges(
                graph.graph_id,
                tree=(f"node_id IN ({marks}) AND node_id != ?", [*ids, root.node_id]),
                links=(f"from_node IN ({marks}) AND to_node IN ({marks})", ids + ids),
            )
        return {
            "graph_id": graph.graph_id,
            "root": root.node_id,
            "nodes": [n.to_dict() for n in nodes],
            "edges": edges,
        }

    def get_open_questions(self, graph_id: str) -> OpenQuestions:
        """Questions waiting for a worker (status ``open``)."""
        graph = self._core.known_graph(graph_id)
        nodes = self._core.nodes(
            "graph_id = ? AND node_type = 'question' AND status = 'open'", [graph.graph_id]
        )
        return {
            "graph_id": graph.graph_id,
            "open_questions": [n.to_dict() for n in nodes],
            "count": len(nodes),
        }

    def get_claimable_work(self, graph_id: str, worker_id: str | None = None) -> ClaimableList:
        """What ``claim_work`` would hand out, in order (affinity to ``worker_id`` first)."""
        worker = optional_name(worker_id, "worker_id")
        graph = self._core.known_graph(graph_id)
        rows = self._db.fetchall(*claimable(graph, worker, self._core.clock(), active=False))
        nodes = [NodeRow(*r).to_dict() for r in rows]
        return {"graph_id": graph.graph_id, "claimable": nodes, "count": len(nodes)}

    def get_ready_to_synthesize(self, graph_id: str) -> ReadyList:
        """Answered questions whose sub-questions all are synthesized or saturated, deepest first."""
        graph = self._core.known_graph(graph_id)
        nodes = self._core.nodes(self._ready_where, [graph.graph_id] * 3)
        nodes.sort(key=lambda n: (-n.depth, n.seq))
        return {"graph_id": graph.graph_id, "ready_nodes": [n.to_dict() for n in nodes], "count": len(nodes)}

    def query_convergence(self, graph_id: str) -> dict[str, Any]:
        """Clusters of nodes joined by convergence edges; a cluster's insight joins its edges'."""
        with self._db.read():
            graph = self._core.known_graph(graph_id)
            edges = self.edges(graph.graph_id, tree=None, links=("edge_type = ?", [EdgeType.CONVERGENCE]))
            order = self._seq_of(graph.graph_id)
        links: nx.Graph = nx.Graph()
        for edge in edges:
            links.add_edge(edge["from_node"], edge["to_node"])
        clusters = []
        for component in nx.connected_components(links):
            members = sorted(component, key=order.__getitem__)
            insights = [
                e["metadata"]["insight"]
                for e in edges
                if e["from_node"] in component and e["metadata"].get("insight")
            ]
            clusters.append({"nodes": members, "insight": "; ".join(dict.fromkeys(insights))})
        clusters.sort(key=lambda c: order[c["nodes"][0]])
        return {"graph_id": graph.graph_id, "convergence_points": clusters, "count": len(clusters)}

    def query_contradictions(self, graph_id: str) -> dict[str, Any]:
        """Contradiction edges as node pairs with their tension, in creation order."""
        graph = self._core.known_graph(graph_id)
        edges = self.edges(graph.graph_id, tree=None, links=("edge_type = ?", [EdgeType.CONTRADICTION]))
        pairs = [
            {"nodes": [e["from_node"], e["to_node"]], "tension": e["metadata"].get("tension", "")}
            for e in edges
        ]
        return {"graph_id": graph.graph_id, "contradictions": pairs, "count": len(pairs)}

    def get_saturation_status(self, graph_id: str) -> dict[str, Any]:
        """Per seed-question branch: status counts and whether it is done.

        ``all_saturated``: there are branches and every question in them is
        synthesized or saturated. ``all_complete``: that, and the root is done too.
        """
        graph = self._core.known_graph(graph_id)
        questions = self._core.nodes("graph_id = ? AND node_type = 'question'", [graph.graph_id])
        by_branch: dict[str, list[NodeRow]] = {}
        for q in questions:
            if q.branch_id is not None:
                by_branch.setdefault(q.branch_id, []).append(q)
        branches = []
        for q in questions:
            if q.depth != 1:
                continue
            members = by_branch[q.node_id]
            counts = {s.value: 0 for s in NodeStatus}
            for m in members:
                counts[m.status] += 1
            done = all(m.status in DONE_QUESTION for m in members)
            branches.append(
                {
                    "node_id": q.node_id,
                    "text": q.text,
                    "status": q.status,
                    "status_reason": q.status_reason,
                    "questions": len(members),
                    "counts": counts,
                    "done": done,
                    # the reference's fields, beside ours
                    "saturated": q.status == NodeStatus.SATURATED,
                    "saturation_reason": (q.status_reason if q.status == NodeStatus.SATURATED else None),
                    "open_questions": sum(counts[s] for s in PENDING_QUESTION),
                }
            )
        all_saturated = bool(branches) and all(b["done"] for b in branches)
        root = next(q for q in questions if q.depth == 0)
        return {
            "graph_id": graph.graph_id,
            "branches": branches,
            "all_saturated": all_saturated,
            "all_complete": all(b["done"] for b in branches) and root.status in DONE_QUESTION,
        }

    def get_events(self, graph_id: str, since: int = 0, limit: int | None = None) -> dict[str, Any]:
        """Events after ``since`` in order, at most ``limit`` (None: all): the feed of the live view."""
        since = require_count(since, "since")
        if limit is not None:
            limit = require_count(limit, "limit", none="all of them")
        graph = self._core.known_graph(graph_id)
        sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE graph_id = ? AND event_id > ? ORDER BY event_id"
        params: list[Any] = [graph.graph_id, since]
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, limit]
        events = [event_dict(r) for r in self._db.fetchall(sql, params)]
        last = events[-1]["event_id"] if events else since
        return {"graph_id": graph.graph_id, "events": events, "last_event_id": last}

    def get_changes(self, graph_id: str, since: int = 0) -> Changes:
        """What changed after event ``since`` (everything when 0), lean: the live view's feed.

        Nodes touched by those events in their current state (synthesis text, last
        error and whether the synthesis was joined pulled out of the metadata in SQL,
        nothing else of it), links added by them, the graph's status and the last
        event id, all read at one moment.
        """
        since = require_count(since, "since")
        gid = require_id(graph_id, "graph_id")
        with self._db.read():
            # The graph and its last event in one query: a quiet poll stops here.
            row = self._db.fetchone(
                f"SELECT {GRAPH_COLUMNS}, (SELECT max(event_id) FROM events WHERE graph_id = ?) "
                "FROM graphs WHERE graph_id = ?",
                [gid, gid],
            )
            if row is None:
                self._core.graph(gid)  # raises NotFoundError
            assert row is not None
            graph, last = GraphRow(*row[:-1]), max(since, row[-1] or 0)
            if since == 0:
                node_filter, link_filter, params = "TRUE", "TRUE", []
            else:
                node_filter = f"node_id IN ({_TOUCHED})"
                link_filter = f"from_node IN ({_TOUCHED} AND kind = 'edge_added')"
                params = [gid, since, last]
            quiet = since > 0 and last == since
            nodes = (
                []
                if quiet
                else self._db.fetchall(
                    f"SELECT {_FEED_COLUMNS}, {self._feed_metadata} FROM nodes "
                    f"WHERE graph_id = ? AND {node_filter} ORDER BY seq",
                    [gid, *params],
                )
            )
            links = (
                []
                if quiet
                else self._db.fetchall(
                    f"SELECT from_node, to_node, edge_type, metadata FROM edges "
                    f"WHERE graph_id = ? AND {link_filter} ORDER BY seq",
                    [gid, *params],
                )
            )
        return {
            "graph_id": gid,
            "status": graph.status,
            "root_node_id": graph.root_node_id,
            "since": since,
            "last_event_id": last,
            "nodes": [_feed_node(r) for r in nodes],
            "links": [
                {"from_node": f, "to_node": t, "edge_type": e, "metadata": json.loads(m)}
                for f, t, e, m in links
            ],
        }

    def get_question_items(self, graph_id: str) -> QuestionItems:
        """The whole graph as the live view's question items and links, JSON written by the database.

        What a view that opens and the exported page draw (store/question_items.py): the
        graph's status and last event id read at the same moment.
        """
        gid = require_id(graph_id, "graph_id")
        with self._db.read():
            row = self._db.fetchone(
                "SELECT status, (SELECT max(event_id) FROM events WHERE graph_id = ?) "
                "FROM graphs WHERE graph_id = ?",
                [gid, gid],
            )
            if row is None:
                self._core.graph(gid)  # raises NotFoundError
            assert row is not None
            return self._question_fold.items(gid, row[0], row[1] or 0)

    def carries_evidence(self, graph_id: str) -> bool:
        """Whether some answer carries a support value or some question a track (what evidence reads)."""
        graph = self._core.graph(graph_id)
        with self._db.read():
            return self._question_fold.carries_evidence(graph.graph_id)

    # -- internals ----------------------------------------------------------------

    def edges(
        self,
        graph_id: str,
        *,
        tree: _Filter | None = _ALL,
        links: _Filter = _ALL,
    ) -> list[EdgeRecord]:
        """Tree edges (filtered on the child) and links, merged in creation order."""
        tree_sql, tree_params = tree if tree is not None else ("FALSE", [])
        sql = EDGES_SQL.format(tree=tree_sql, links=links[0])
        rows = self._db.fetchall(sql, [graph_id, *tree_params, graph_id, *links[1]])
        return [edge_dict(r) for r in rows]

    def _seq_of(self, graph_id: str) -> dict[str, int]:
        rows = self._db.fetchall("SELECT node_id, seq FROM nodes WHERE graph_id = ?", [graph_id])
        return dict(rows)


def _feed_node(row: tuple[Any, ...]) -> FeedNode:
    """A feed row as a FeedNode: the weak mark read as a list of marks ([] when none or not a list)."""
    node = dict(zip(_FEED_NAMES, row, strict=True))
    marks = json.loads(node["weak"]) if isinstance(node["weak"], str) else None
    node["weak"] = [
        {"node_id": str(m.get("node_id")), "reason": str(m.get("reason"))}
        for m in (marks if isinstance(marks, list) else [])
        if isinstance(m, dict)
    ]
    return cast(FeedNode, node)
