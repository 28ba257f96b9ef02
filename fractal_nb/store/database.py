"""The store's connection contract: what every step of the store asks of a database.

Two connections implement it: :class:`~fractal_nb.store.duckdb_file.DuckDBDatabase`
(a DuckDB file or memory, the embedded default) and
:class:`~fractal_nb.store.postgres.PostgresDatabase` (a PostgreSQL schema shared by
many processes). The steps speak to it only through these methods, in the SQL of
its :attr:`Database.dialect` (store/dialect.py; docs/architecture/store.md, "Dialects").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .dialect import Dialect
from .in_process import FileState

# The tables schema.sql makes; a file holding any other is another application's.
OWN_TABLES = frozenset(
    {
        "store_info",
        "graphs",
        "nodes",
        "edges",
        "events",
        "llm_calls",
        "llm_cache",
        "holders",
        "synthesis_claims",
        "node_history",
        "graph_history",
        "history_baselines",
        "lineage",
        "fork_nodes",
        "turns",
        "depth_allowances",
        "sources",
        "source_chunks",
    }
)

Tracer = Callable[[str, tuple[Any, ...]], None]
Params = Sequence[Any]


class CommitHook(Protocol):
    """Told about the end of each outermost write transaction (store/journal.py is the one)."""

    def before_commit(self) -> None:
        """Last writes of the transaction (through :meth:`Database.execute`), just before its COMMIT."""
        ...

    def rolled_back(self) -> None:
        """The transaction was rolled back: forget what it noted."""
        ...


class Rows(Protocol):
    """The result of one statement."""

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The remaining rows."""
        ...


class Database(Protocol):
    """One store's connection: statements, write transactions under the store's write lock, snapshots.

    A write transaction (:meth:`write`) is serialised with every other write to the
    same store, in this process and (on PostgreSQL) in every process, so a rule that
    reads and then writes inside one sees no other write between (docs/architecture/store.md,
    "Store rules", concurrency). Nested :meth:`write` calls join the outer one.
    """

    dialect: Dialect
    path: str | None  # the DuckDB file (None: in memory, or not a file)
    location: str  # what messages name: the file, ":memory:", or a URL without its password
    read_only: bool
    tracer: Tracer | None
    commit_hook: CommitHook | None
    file: FileState  # what the stores on this database in this process share (in_process.py)

    def execute(self, sql: str, params: Params = ()) -> Rows:
        """Run one statement (``?`` placeholders), through the tracer when set."""
        ...

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Rows of one query."""
        ...

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """First row of one query, or None."""
        ...

    def write(self) -> AbstractContextManager[object]:
        """A write transaction under the write lock: all of it commits, or none if the block raises."""
        ...

    def writing(self) -> bool:
        """Whether this thread is inside a write transaction."""
        ...

    def write_one(self, sql: str, params: Params = ()) -> None:
        """One statement under the write lock, committed on its own (or joining a transaction)."""
        ...

    def read(self) -> AbstractContextManager[object]:
        """A consistent snapshot for several reads, without the write lock."""
        ...

    def notify(self, graph_ids: Sequence[str]) -> None:
        """Tell other processes, when this write transaction commits, that these graphs gained work."""
        ...

    def listen(self, wake: Callable[[str], None]) -> Callable[[], None]:
        """Call ``wake(graph_id)`` when another process's commit tells of new work; the call that stops it.

        DuckDB's file has one writing process, which tells its own workers itself: nothing comes.
        """
        ...

    def now(self) -> float:
        """Seconds since the epoch on the database's clock: the store's leases and timestamps (by default)."""
        ...

    def close(self) -> None:
        """Close the connection; later calls raise StateError."""
        ...
