"""Time travel and forks for ``Exploration``: the state at an event, a fork at one, the family.

The facade of store/replay.py and store/lineage.py (docs/architecture/store.md, "History and forks").
:class:`GraphAt` is the graph frozen at an event, with ``nodes()`` / ``edges()`` shaped exactly
like ``Exploration.nodes()`` / ``edges()`` (both come from :mod:`fractal_nb.exploration.frames`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..checks import shown
from ..errors import InvalidInputError
from ..store.records import EdgeRecord, GraphRecord, LineageRecord, NodeRecord, SnapshotAt
from .frames import edge_frame, node_frame, timestamps

if TYPE_CHECKING:
    from ..store import Store

LINEAGE_COLUMNS = ["graph_id", "forked_from", "forked_at", "seed", "status", "created"]


@dataclass(frozen=True)
class GraphAt:
    """A graph as it was at one event: read-only, and unchanged by later work.

    ``graph`` holds its fields then (status, metadata, ...); ``nodes()`` and ``edges()`` are
    the frames ``Exploration.nodes()`` / ``edges()`` gave at that event.
    """

    event_id: int
    graph_id: str
    status: str
    graph: GraphRecord
    node_records: tuple[NodeRecord, ...]
    edge_records: tuple[EdgeRecord, ...]

    @classmethod
    def from_snapshot(cls, snapshot: SnapshotAt) -> GraphAt:
        """The view of a store's state-at-event record."""
        fields: dict[str, Any] = {
            k: v for k, v in snapshot.items() if k not in ("nodes", "edges", "event_id")
        }
        return cls(
            event_id=snapshot["event_id"],
            graph_id=snapshot["graph_id"],
            status=snapshot["status"],
            graph=fields,  # type: ignore[arg-type]  # the GraphRecord keys of the snapshot
            node_records=tuple(snapshot["nodes"]),
            edge_records=tuple(snapshot["edges"]),
        )

    def nodes(self) -> pd.DataFrame:
        """Every node then, in creation order, metadata flattened into ``meta_*`` columns."""
        return node_frame(self.node_records)

    def edges(self) -> pd.DataFrame:
        """Every edge then (tree and links), in creation order."""
        return edge_frame(self.edge_records)

    def __repr__(self) -> str:
        return (
            f"<GraphAt {self.graph_id} at event {self.event_id}: {self.status}, "
            f"{len(self.node_records)} nodes, {len(self.edge_records)} edges>"
        )


def event_point(at: object, name: str = "at") -> int:
    """The event ``at(...)`` or ``fork(at=...)`` means: an event id, or a head.

    An event id may be a numpy integer (a DataFrame cell); a head is a mapping or a
    ``heads()`` row with ``head_event``.

    >>> event_point(12)
    12
    >>> event_point({"head_event": 7, "turn": 2})
    7
    """
    if isinstance(at, Mapping | pd.Series) and "head_event" in at:
        at = at["head_event"]
    if isinstance(at, Integral) and not isinstance(at, bool):  # a numpy integer from a DataFrame cell
        at = int(at)
    if isinstance(at, bool) or not isinstance(at, int):
        raise InvalidInputError(
            f"{name} must be an event id (an int from events()) or a head (a dict or heads() row with "
            f"'head_event'), not {shown(at)}"
        )
    return at


def own_event(store: Store, graph_id: str, event: int) -> int:
    """A fork's own event for its fork point: the head it was forked at is its ``forked`` event.

    A fork keeps its source's heads, whose events are the source's; the one it was
    forked at is the state the fork began with, so ``at``, ``fork`` and ``attach``
    read it as the fork's first event. Any other event is left as given.
    """
    origin = next((g for g in store.get_lineage(graph_id) if g["graph_id"] == graph_id), None)
    if origin is None or origin["forked_from"] is None or event != origin["forked_at"]:
        return event
    first = store.get_events(graph_id, limit=1)["events"]
    return int(first[0]["event_id"]) if first and first[0]["kind"] == "forked" else event


def lineage_frame(records: list[LineageRecord]) -> pd.DataFrame:
    """Graphs and where each was forked from: ``graph_id, forked_from, forked_at, seed, status, created``."""
    frame = pd.DataFrame(records, columns=LINEAGE_COLUMNS)
    frame["forked_from"] = frame["forked_from"].astype(object).where(frame["forked_from"].notna(), None)
    frame["forked_at"] = frame["forked_at"].astype("Int64")
    return timestamps(frame, ["created"])
