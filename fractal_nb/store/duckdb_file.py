"""The store's connection to a DuckDB file or memory: a cursor per thread, one write lock, short transactions.

The recipe of docs/architecture/store.md ("Store rules", concurrency): a single ``duckdb.connect()``
per store, a cursor per thread, one process-wide write lock around short write
transactions, and reads without the lock. DuckDB shares one database instance
between connections to the same file in a process, so the lock is keyed by the
file's real path and shared by every store on it.

Nothing reaches for the network (docs/architecture/store.md, "Store rules", rule 12):
every connection is opened with :data:`NO_NETWORK`, and a file that is not a
DuckDB database is refused by its first bytes, before DuckDB opens it.
"""

from __future__ import annotations

import codecs
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb

from ..arguments import check_store_path
from ..errors import InvalidInputError, StateError, StoreLockedError
from .database import OWN_TABLES, CommitHook, Params, Tracer
from .dialect import Dialect, split_sql
from .in_process import for_file

SCHEMA_VERSION = "3"  # 2: claim holders, synthesis claims; 3: history and lineage (schema.sql migrates)
_HOLDER_PID = re.compile(r"PID (\d+)")

# DuckDB downloads an extension it lacks when a file or query asks for one (a SQLite
# file wants sqlite_scanner). The store needs none: no autoinstall, no autoload, no
# file or network access beyond the database itself, and no SET that undoes it.
NO_NETWORK: Mapping[str, bool] = MappingProxyType(
    {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "enable_external_access": False,
        "lock_configuration": True,
    }
)
# A new file's blocks: DuckDB's default of 256 KiB gives every table at least one, so a ten-node
# graph took 3.8 MB; 16 KiB blocks keep it near 300 KB (docs/store.md, "The file on disk").
# Set for new files only: a file keeps the block size it was made with.
FILE_BLOCK_SIZE = 16 * 1024
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
_SQLITE_MAGIC = b"SQLite format 3\x00"


class DuckDBDatabase:
    """A :class:`~fractal_nb.store.database.Database` on DuckDB: per-thread cursors, a shared write lock."""

    dialect = Dialect.DUCKDB  # the SQL the steps speak to it (store/dialect.py)

    def __init__(
        self, path: str | Path | None, *, read_only: bool = False, tracer: Tracer | None = None
    ) -> None:
        self.path = None if path is None else str(check_store_path(path, "the store's path").resolve())
        if not isinstance(read_only, bool):
            raise InvalidInputError(f"read_only must be True or False, not {read_only!r}")
        self.read_only = read_only
        self.tracer = tracer
        self.commit_hook: CommitHook | None = None  # set by the store's journal
        if read_only and self.path is None:
            raise InvalidInputError("read_only=True needs a path: an in-memory store starts empty")
        self._conn = self._connect()
        self.location = self.path or ":memory:"  # what messages name
        self.file = for_file(self.path)  # what the stores on this file in this process share
        self._write_lock = self.file.write_lock
        self.file.opened()
        self._local = threading.local()
        self._cursors: dict[int, duckdb.DuckDBPyConnection] = {}
        self._cursors_guard = threading.Lock()
        self._closed = False
        try:
            if read_only:
                self._refuse_foreign_file(self.cursor())
            else:
                with self.write() as cur:
                    self._create_schema(cur)
        except BaseException:
            self.close()
            raise

    # -- opening -----------------------------------------------------------------

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            return duckdb.connect(":memory:", config={**NO_NETWORK})
        file = Path(self.path)
        if file.exists():
            _refuse_other_formats(file)
        elif self.read_only:
            raise InvalidInputError(f"cannot open {self.path} read-only: the file does not exist")
        try:
            return duckdb.connect(
                self.path,
                read_only=self.read_only,
                config={**NO_NETWORK, "default_block_size": str(FILE_BLOCK_SIZE)},
            )
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise StateError(f"cannot open {self.path}: {exc}") from exc
            match = _HOLDER_PID.search(str(exc))
            pid = int(match.group(1)) if match else None
            holder = f"process {pid}" if pid else "another process"
            raise StoreLockedError(
                f"{self.path} is in use by {holder}: DuckDB lets one process write a file. "
                "Ways out: close the store in that process (store.close()), or connect to the "
                "MCP server that process runs (fractal-nb serve-mcp / Exploration.serve_mcp()) "
                "instead of opening the file here. read_only=True works only when no process "
                "is writing the file.",
                path=self.path,
                holder_pid=pid,
            ) from exc
        except duckdb.Error as exc:
            raise StateError(f"cannot open {self.path}: {exc}") from exc

    def _create_schema(self, cur: duckdb.DuckDBPyConnection) -> None:
        self._refuse_foreign_file(cur)
        script = resources.files("fractal_nb.store").joinpath("schema.sql").read_text()
        for statement in split_sql(script):
            cur.execute(statement)
        cur.execute(
            "INSERT OR REPLACE INTO store_info (key, value) VALUES ('schema_version', ?)", [SCHEMA_VERSION]
        )

    def _refuse_foreign_file(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Leave another application's DuckDB file as it is (docs/shell.md, "One file per exploration store").

        A file without the store's own ``store_info`` table is another application's. A
        store's file may also hold the analyst's own tables, put there while no run held it:
        the store never writes them and reads them only as ``Table`` sources
        (docs/architecture/store.md, "Sources and citations").
        """
        rows = cur.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_catalog = current_database() ORDER BY table_schema, table_name"
        ).fetchall()
        tables = {name for schema, name in rows if schema == "main"}
        foreign = sorted(
            f"{schema}.{name}" if schema != "main" else name
            for schema, name in rows
            if schema != "main" or name not in OWN_TABLES
        )
        if "store_info" in tables:
            return  # a store's file; any other table there is the analyst's, only ever read
        if foreign or tables:
            listed = ", ".join((foreign or sorted(tables))[:8])
            raise InvalidInputError(
                f"{self.path} is not a fractal_nb store: it holds other tables ({listed}). fractal_nb "
                "keeps its graphs in a file of its own and left this one unchanged; pass "
                + ("a store's path" if self.read_only else "another path (a new file is created)")
            )
        if self.read_only and not tables:
            raise InvalidInputError(
                f"{self.path} is an empty DuckDB database, not a fractal_nb store: there is nothing to "
                "read. read_only=True opens a store a run wrote; open it without read_only to make "
                "this file a store"
            )

    # -- cursors and transactions -----------------------------------------------------

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """The calling thread's cursor (DuckDB connections are not shared between threads)."""
        if self._closed:
            raise StateError("the store is closed; open a new GraphStore")
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._conn.cursor()
            self._local.cursor = cur
            with self._cursors_guard:
                alive = {t.ident for t in threading.enumerate()}
                for ident in [i for i in self._cursors if i not in alive]:
                    self._cursors.pop(ident).close()
                self._cursors[threading.get_ident()] = cur
        return cur

    def execute(self, sql: str, params: Params = ()) -> duckdb.DuckDBPyConnection:
        """Run one statement on this thread's cursor, through the tracer when set."""
        if self.tracer is not None:
            self.tracer(sql, tuple(params))
        return self.cursor().execute(sql, params)

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Rows of one query."""
        return self.execute(sql, params).fetchall()

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """First row of one query, or None."""
        return self.execute(sql, params).fetchone()

    @contextmanager
    def write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write transaction under the write lock; nested calls join the outer one.

        Everything inside commits together or not at all, so a refused call (or a
        batch that raises) changes nothing.
        """
        if self.read_only:
            raise StateError(f"{self.path} was opened read_only=True; open it without read_only to write")
        with self._write_lock:
            cur = self.cursor()
            depth = getattr(self._local, "write_depth", 0)
            if depth:  # joined an enclosing transaction (store.batch())
                self._local.write_depth = depth + 1
                try:
                    yield cur
                finally:
                    self._local.write_depth = depth
                return
            self._local.write_depth = 1
            self.execute("BEGIN TRANSACTION")
            try:
                yield cur
                if self.commit_hook is not None:  # history at commit (docs/architecture/store.md, rule 13)
                    self.commit_hook.before_commit()
            except BaseException:
                self.execute("ROLLBACK")
                if self.commit_hook is not None:
                    self.commit_hook.rolled_back()
                raise
            else:
                self.execute("COMMIT")
            finally:
                self._local.write_depth = 0

    def writing(self) -> bool:
        """Whether this thread is inside a write transaction (it holds the write lock)."""
        return bool(getattr(self._local, "write_depth", 0))

    def write_one(self, sql: str, params: Params = ()) -> None:
        """One statement under the write lock, committed on its own (or joining a batch)."""
        if self.read_only:
            raise StateError(f"{self.path} was opened read_only=True; open it without read_only to write")
        with self._write_lock:
            self.execute(sql, params)

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A consistent snapshot for several reads, without the write lock."""
        cur = self.cursor()
        if getattr(self._local, "write_depth", 0) or getattr(self._local, "reading", False):
            yield cur  # inside a write or read transaction already: see its state
            return
        self._local.reading = True
        self.execute("BEGIN TRANSACTION")
        try:
            yield cur
        finally:
            self._local.reading = False
            self.execute("COMMIT")

    def notify(self, graph_ids: Sequence[str]) -> None:
        """Nothing to send: no other process writes the file."""

    def listen(self, wake: Callable[[str], None]) -> Callable[[], None]:
        """Nothing to hear: the one process writing the file tells its own workers (engine/primitive.py)."""
        return _nothing

    def now(self) -> float:
        """The machine's clock: the one process that writes the file keeps time for it."""
        return time.time()

    def close(self) -> None:
        """Close every cursor and the connection; later calls raise StateError."""
        if self._closed:
            return
        self._closed = True
        self.file.closed()
        with self._cursors_guard:
            for cur in self._cursors.values():
                cur.close()
            self._cursors.clear()
        self._conn.close()


def _nothing() -> None:
    """Stops listening to a file no other process writes."""


def _refuse_other_formats(file: Path) -> None:
    """Refuse, by its first bytes, a file that is not a DuckDB database; DuckDB never opens it.

    DuckDB would try to download an extension for some (a SQLite file) and fail on
    others with a raw error; this says what the file is and what is expected.
    """
    try:
        with file.open("rb") as opened:
            head = opened.read(4096)
    except OSError as exc:
        raise StateError(f"cannot open {file}: {exc.strerror or exc}") from exc
    if head[8:12] == _DUCKDB_MAGIC:
        return
    if not head:
        kind = "an empty file"
    elif head.startswith(_SQLITE_MAGIC):
        kind = "a SQLite database"
    elif _is_text(head):
        kind = "a text file"
    else:
        kind = f"a file of another format (it starts with bytes {head[:8].hex(' ')})"
    raise InvalidInputError(
        f"{file} is {kind}, not a fractal_nb store: the store is a DuckDB file of its own. Pass a store's "
        "path or a path that does not exist yet (a new store is created there); this file was left "
        "unchanged"
    )


def _is_text(head: bytes) -> bool:
    """The bytes read as UTF-8 text without NUL characters (a character cut at the end is fine)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head
