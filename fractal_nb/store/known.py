"""What the stores on one file in this process remember of it: graph rows and registered holders.

Kept apart from :class:`~fractal_nb.store.database.Database`, which is only the
connection, its transactions and the write lock. A graph's id, seed, intensity
and checkpoint mode never change, so reads that need only those are served from
here (``StoreBase._known_graph``; its status may be stale, never decide on it).
A holder registered once needs no second INSERT. When no store has the file
open, another process may change it: the first store to open it starts afresh.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .rows import GraphRow


@dataclass
class Known:
    """Graph rows by id (static fields) and the holder ids already in the holders table."""

    graphs: dict[str, GraphRow] = field(default_factory=dict)
    holders: set[str] = field(default_factory=set)


_KNOWN: dict[str, Known] = {}
_GUARD = threading.Lock()


def known_for(path: str | None, *, fresh: bool) -> Known:
    """What is known of the file at ``path`` (an in-memory store's is its own); ``fresh``: forget it."""
    if path is None:
        return Known()
    with _GUARD:
        known = _KNOWN.setdefault(path, Known())
        if fresh:
            known.graphs.clear()
            known.holders.clear()
        return known
