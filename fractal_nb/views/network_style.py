"""How a graph looks in vis-network, shared by the live widget and the HTML export.

Items are built from the store's lean feed rows (``GraphStore.get_changes``).
Tooltips are plain text: vis-network 9 shows a string ``title`` as text, and
the widget and the export both keep it that way, so model text is never HTML.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..store.records import Changes, FeedNode
from ..text import clip

# Node fill and border by status; gated questions stand out with a thick dashed border.
STATUS_COLORS: dict[str, tuple[str, str]] = {
    "open": ("#d8e2f0", "#6b7f99"),
    "claimed": ("#ffd27a", "#c98a00"),
    "answered": ("#9cc8f2", "#3a78b5"),
    "synthesized": ("#8fd19e", "#2f8a47"),
    "saturated": ("#c9c9c9", "#7a7a7a"),
    "gated": ("#fff4f0", "#e0452b"),
    "error": ("#f29a9a", "#b42323"),
}
SHAPES = {"root": "star", "question": "dot", "answer": "diamond"}
SIZES = {"root": 22, "question": 14, "answer": 10}
TREE_EDGE = {"color": {"color": "#a8b3bf"}, "width": 1, "arrows": "to"}  # the default edge style
EDGE_STYLES: dict[str, dict[str, Any]] = {
    "parent_child": {},
    "convergence": {"color": {"color": "#2f9e44"}, "width": 2.5, "dashes": [8, 4], "arrows": ""},
    "contradiction": {"color": {"color": "#e03131"}, "width": 2.5, "dashes": [2, 5], "arrows": ""},
}
LABEL_CHARS = 36
TITLE_CHARS = 1200
# Above these sizes physics is stabilised once and switched off (live) or not used (export).
LIVE_PHYSICS_LIMIT = 1000
EXPORT_PHYSICS_LIMIT = 2000


def status_groups() -> dict[str, dict[str, Any]]:
    """vis-network groups, one per status: the colours, and the gated questions' dashed border."""
    return {
        status: {
            "color": {
                "background": fill,
                "border": border,
                "highlight": {"background": fill, "border": "#111111"},
                "hover": {"background": fill, "border": "#111111"},
            },
            "borderWidth": 4 if status == "gated" else 1.5,
            "shapeProperties": {"borderDashes": [6, 3] if status == "gated" else False},
        }
        for status, (fill, border) in STATUS_COLORS.items()
    }


def vis_node(row: FeedNode, root_id: str) -> dict[str, Any]:
    """A feed row as a vis-network node: group (colour) by status, shape by type, worker on claims."""
    status = row["status"]
    kind = "root" if row["node_id"] == root_id else row["node_type"]
    label = clip(row["text"], LABEL_CHARS)
    if status == "claimed" and row["owner"]:
        label += f"\n⚙ {row['owner']}"
    title = f"{row['node_type']} · {status}"
    if row["status_reason"]:
        title += f" ({row['status_reason']})"
    if status == "claimed" and row["owner"]:
        title += f" · {row['owner']}"
    title += "\n\n" + row["text"]
    if synthesis := row["synthesis"]:
        title += "\n\nSynthesis: " + synthesis
    return {
        "id": row["node_id"],
        "label": label,
        "title": clip_lines(title, TITLE_CHARS),
        "group": status,
        "shape": SHAPES[kind],
        "size": SIZES[kind],
    }


def clip_lines(text: str, limit: int) -> str:
    """Cut long text but keep its line breaks (the tooltip shows them)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def vis_tree_edge(row: FeedNode) -> dict[str, Any] | None:
    """The parent → child edge of a feed row (None for the root)."""
    if row["parent_id"] is None:
        return None
    return vis_edge(row["parent_id"], row["node_id"], "parent_child", {})


def vis_edge(from_node: str, to_node: str, edge_type: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """A vis-network edge with a stable id, styled by type; insight or tension as tooltip."""
    item: dict[str, Any] = {
        "id": f"{from_node}|{to_node}|{edge_type}",
        "from": from_node,
        "to": to_node,
        "edge_type": edge_type,
        **EDGE_STYLES.get(edge_type, EDGE_STYLES["parent_child"]),
    }
    note = metadata.get("insight") or metadata.get("tension")
    if note:
        item["title"] = f"{edge_type}: {clip_lines(str(note), TITLE_CHARS)}"
    return item


def vis_items(changes: Changes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes and edges (tree edges and links) of a ``get_changes`` result."""
    root = changes["root_node_id"]
    nodes = [vis_node(row, root) for row in changes["nodes"]]
    edges = [e for e in (vis_tree_edge(row) for row in changes["nodes"]) if e is not None]
    edges += [
        vis_edge(link["from_node"], link["to_node"], link["edge_type"], link["metadata"])
        for link in changes["links"]
    ]
    return nodes, edges


def network_options(node_count: int, *, physics_limit: int) -> dict[str, Any]:
    """vis-network options: physics for small graphs, fixed positions above ``physics_limit``."""
    physics: dict[str, Any] = {
        "enabled": node_count <= physics_limit,
        "solver": "forceAtlas2Based",
        "forceAtlas2Based": {"gravitationalConstant": -40, "springLength": 60, "avoidOverlap": 0.2},
        "stabilization": {"enabled": True, "iterations": 200, "updateInterval": 50},
    }
    return {
        "physics": physics,
        "interaction": {"hover": True, "tooltipDelay": 150, "hideEdgesOnDrag": node_count > physics_limit},
        "nodes": {"font": {"size": 12, "face": "sans-serif"}},
        "groups": status_groups(),
        "edges": {**TREE_EDGE, "smooth": node_count <= physics_limit},
        "layout": {"improvedLayout": node_count <= 200},
    }


def radial_positions(rows: Iterable[FeedNode], *, ring: float = 120.0) -> dict[str, tuple[float, float]]:
    """A radial tree layout in one pass: depth rings, each subtree a wedge sized by its leaves.

    Used where physics is off (large graphs), so nodes start where a reader
    expects them instead of in vis-network's random circle.
    """
    children: dict[str | None, list[str]] = {}
    for row in rows:
        children.setdefault(row["parent_id"], []).append(row["node_id"])
    roots = children.get(None, [])
    leaves: dict[str, int] = {}
    order: list[str] = []
    stack = list(roots)
    while stack:  # pre-order; leaf counts are then summed in reverse
        node = stack.pop()
        order.append(node)
        stack.extend(children.get(node, []))
    for node in reversed(order):
        kids = children.get(node, [])
        leaves[node] = sum(leaves[k] for k in kids) if kids else 1
    positions: dict[str, tuple[float, float]] = {}
    wedges: list[tuple[str, int, float, float]] = [(r, 0, 0.0, 2 * math.pi) for r in roots]
    while wedges:
        node, level, start, end = wedges.pop()
        angle = (start + end) / 2
        positions[node] = (level * ring * math.cos(angle), level * ring * math.sin(angle))
        span, cursor = end - start, start
        for kid in children.get(node, []):
            share = span * leaves[kid] / leaves[node]
            wedges.append((kid, level + 1, cursor, cursor + share))
            cursor += share
    return positions
