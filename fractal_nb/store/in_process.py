"""Everything this process keeps beside the files it has open: the one registry, and why each part is kept.

DuckDB shares one database between the connections a process opens on a file,
so what must be shared between the stores on one file lives here, keyed by the
file's real path (an in-memory store gets a state of its own, never shared):

- ``write_lock``: one writer at a time per file in this process (store/duckdb_file.py, store/postgres.py);
  DuckDB would otherwise fail a transaction on a conflict rather than wait.
- ``open_stores``: how many stores have the file open; when none has, another
  process may have changed it, so the next one to open it forgets what follows.
- ``graphs``: the graph rows read once, for their fields that never change (id,
  seed, intensity, checkpoint mode; ``StoreCore.known_graph``: never decide on
  their status).
- ``holders``: the holder ids already written to the file's holders table (a
  holder registered once needs no second INSERT).
- ``sourced``: per graph, whether it has sources, as a write transaction read it
  (store/citations.py). Only writes use and set it, under the write lock, so no
  other write can change it meanwhile; adding sources or deleting the graph drops
  the graph's entry, a rollback drops them all.
- ``run_locks``: per graph, the lock that lets one ``run()`` or ``step()`` at a
  time work it in this process, whichever ``Exploration`` object asks (a notebook
  may open the same file again while a run goes on).

Beside them, :data:`LIVE_HOLDERS`: the holders of stores open in this process.
A claim held by one of them is alive; a claim of this process's holder that is
not among them was left by a store since closed, and comes back at once
(store/holders.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .rows import GraphRow


@dataclass
class FileState:
    """What every store on one file in this process shares (see the module's docstring)."""

    write_lock: threading.RLock = field(default_factory=threading.RLock)
    open_stores: int = 0
    graphs: dict[str, GraphRow] = field(default_factory=dict)
    holders: set[str] = field(default_factory=set)
    sourced: dict[str, bool] = field(default_factory=dict)
    run_locks: dict[str, threading.Lock] = field(default_factory=dict)

    def opened(self) -> None:
        """One more store has the file open; the first forgets what was known (another process may have)."""
        with GUARD:
            if self.open_stores == 0:
                self.graphs.clear()
                self.holders.clear()
                self.sourced.clear()
            self.open_stores += 1

    def closed(self) -> None:
        """One store less has the file open."""
        with GUARD:
            self.open_stores -= 1

    def run_lock(self, graph_id: str) -> threading.Lock:
        """The lock that lets one run or step at a time work ``graph_id`` in this process."""
        with GUARD:
            return self.run_locks.setdefault(graph_id, threading.Lock())


_FILES: dict[str, FileState] = {}
GUARD = threading.Lock()  # guards the registry and every FileState's counters and maps

LIVE_HOLDERS: set[str] = set()  # guarded by GUARD too


def for_file(path: str | None) -> FileState:
    """The state of the file at ``path`` (its real path); a new private one for an in-memory store (None)."""
    if path is None:
        return FileState()
    with GUARD:
        return _FILES.setdefault(path, FileState())
