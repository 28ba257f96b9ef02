"""The store's connection to a PostgreSQL schema: many processes, on many machines, one graph.

A :class:`~fractal_nb.store.database.Database` on psycopg 3 and a
``psycopg_pool.ConnectionPool`` (docs/architecture/store.md, "PostgreSQL"):

- A transaction (:meth:`PostgresDatabase.write`, :meth:`PostgresDatabase.read`) keeps
  one pooled connection for the thread until it ends; a statement outside one takes a
  connection for itself. Rows are fetched before a connection goes back to the pool.
- Every write transaction first takes the store's advisory lock
  (``pg_advisory_xact_lock``, keyed by the schema), so writes to one store are
  serialised across every process as DuckDB's write lock serialises them in one: the
  rules that read and then write see no other write between.
- The schema is the project's own: schema.sql's tables in PostgreSQL's types, then
  ``schema/postgresql_<n>.sql`` (what PostgreSQL adds), applied on open in one
  transaction under a lock of its own, recorded in ``store_info``; a database a newer
  fractal_nb wrote is refused.
- Statements keep the ``?`` placeholders the steps write; :func:`to_pyformat` turns
  them into psycopg's.
- The password never leaves the URL it came in: :func:`~fractal_nb.arguments.shown_target` is what messages,
  ``repr`` and the in-process registry name.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

import psycopg  # the [postgres] extra: graph_store.py imports this module only for a postgresql:// URL
import psycopg_pool
from psycopg.adapt import Loader

from ..arguments import shown_target
from ..errors import InvalidInputError, StateError
from .database import OWN_TABLES, CommitHook, Params, Tracer
from .dialect import Dialect, split_sql
from .in_process import for_file

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1  # the newest schema/postgresql_<n>.sql
POOL_SIZE = 24  # connections per store: workers, the view and the heartbeat each hold one briefly
_MIGRATION_LOCK = 0x66726163  # one advisory lock for every store's migrations ("frac")


@functools.lru_cache(maxsize=4096)
def to_pyformat(sql: str) -> str:
    """``sql`` with psycopg's placeholders: each ``?`` outside quotes becomes ``%s``, each ``%`` ``%%``.

    >>> to_pyformat("SELECT * FROM t WHERE a = ? AND b LIKE 'x%' AND c = '?'")
    "SELECT * FROM t WHERE a = %s AND b LIKE 'x%%' AND c = '?'"
    """
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if ch == "%":
            out.append("%%")
        elif quote is not None:
            out.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


class _Fetched:
    """A statement's rows, fetched before its connection went back to the pool."""

    __slots__ = ("_at", "_rows")

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows
        self._at = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest, self._at = self._rows[self._at :], len(self._rows)
        return rest


class _NumberLoader(Loader):
    """``numeric`` as DuckDB gives it: an int when whole (``sum`` of integers), else a float."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        return int(text) if text.lstrip("-").isdigit() else float(text)


class PostgresDatabase:
    """A :class:`~fractal_nb.store.database.Database` on a PostgreSQL schema (the module's docstring)."""

    dialect = Dialect.POSTGRESQL
    path: str | None = None  # not a file

    def __init__(self, url: str, *, read_only: bool = False, tracer: Tracer | None = None) -> None:
        if not isinstance(read_only, bool):
            raise InvalidInputError(f"read_only must be True or False, not {read_only!r}")
        self._url = url
        self.location = shown_target(url)
        self.read_only = read_only
        self.tracer = tracer
        self.commit_hook: CommitHook | None = None  # set by the store's journal
        self._local = threading.local()
        self._closed = False
        # Signs this store's notifications: its own commits are no news from elsewhere.
        self._sender = uuid.uuid4().hex
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name="fractal_nb",
        )
        try:
            self._pool.open(wait=True, timeout=15)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            raise StateError(f"cannot connect to {self.location}: {self._reason()}") from None
        try:
            with self._pool.connection() as conn:
                schema = conn.execute("SELECT current_schema()").fetchone()
            if schema is None or schema[0] is None:
                raise InvalidInputError(
                    f"{self.location} has no schema to keep the store in: the search_path names none that "
                    "exists. Create it (CREATE SCHEMA ...) or name an existing one "
                    "(?options=-csearch_path%3D<schema>)"
                )
            self.schema: str = schema[0]
            self._offset = self._clock_offset()
            digest = hashlib.blake2b(f"fractal_nb:{self.schema}".encode(), digest_size=8).digest()
            self._lock_key = int.from_bytes(digest, "big", signed=True)
            self._channel = f"fractal_nb_{digest.hex()}"  # NOTIFY's channel: this schema's
            self._listeners: list[Callable[[str], None]] = []
            self._listening: threading.Thread | None = None
            self._listen_guard = threading.Lock()  # guards the two above
            self.file = for_file(f"{self.location}#{self.schema}")
            self.file.opened()
            self._migrate()
        except BaseException:
            self._closed = True
            self._pool.close()
            raise

    def _clock_offset(self) -> float:
        """The server's clock minus this machine's, measured at the middle of one round trip."""
        with self._pool.connection() as conn:
            before = time.time()
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
            after = time.time()
        return float(row[0]) - (before + after) / 2 if row else 0.0

    def notify(self, graph_ids: Sequence[str]) -> None:
        """``NOTIFY`` this schema's channel with the graph ids, delivered when the transaction commits."""
        if graph_ids:
            payload = f"{self._sender}:{','.join(sorted(set(graph_ids)))}"
            self.execute("SELECT pg_notify(?, ?)", [self._channel, payload])

    def listen(self, wake: Callable[[str], None]) -> Callable[[], None]:
        """Call ``wake(graph_id)`` for each graph another store's commit says gained work (``LISTEN``).

        One thread per store listens on a connection of its own while anyone listens.
        """
        with self._listen_guard:
            self._listeners.append(wake)
            if self._listening is None:
                ready = threading.Event()
                self._listening = threading.Thread(
                    target=self._listen, args=(ready,), name="fractal-nb listen", daemon=True
                )
                self._listening.start()
                ready.wait(10)

        def stop() -> None:
            with self._listen_guard:
                if wake in self._listeners:
                    self._listeners.remove(wake)

        return stop

    def _listen(self, ready: threading.Event) -> None:
        try:
            with psycopg.connect(self._url, autocommit=True) as conn:
                conn.execute(f'LISTEN "{self._channel}"')
                ready.set()
                while not self._closed:
                    with self._listen_guard:
                        if not self._listeners:
                            self._listening = None
                            return
                    for note in conn.notifies(timeout=1.0):
                        sender, _, graph_ids = note.payload.rpartition(":")
                        if sender == self._sender:
                            # This store's own commit, heard late (under load, after its worker began
                            # to wait): its workers announce their work themselves (engine/run_state.py).
                            continue
                        with self._listen_guard:
                            listeners = list(self._listeners)
                        for graph_id in graph_ids.split(","):
                            for wake in listeners:
                                wake(graph_id)
        except psycopg.Error:  # the server went away: workers fall back to their backoff
            log.warning("fractal_nb: stopped listening to %s for new work", self.location)
            with self._listen_guard:
                self._listening = None
        finally:
            ready.set()

    def now(self) -> float:
        """The server's clock: this machine's, corrected by the offset measured on open.

        Every machine working the store times leases alike.
        """
        return time.time() + self._offset

    def _configure(self, conn: Any) -> None:
        conn.adapters.register_loader("numeric", _NumberLoader)
        if self.read_only:
            conn.execute("SET default_transaction_read_only = on")

    def _reason(self) -> str:
        """Why the pool has no connection, from psycopg's own attempt (its message names no password)."""
        try:
            psycopg.connect(self._url, connect_timeout=5).close()
        except psycopg.Error as exc:
            return str(exc).strip().replace(self._url, self.location)
        return "the server did not answer in time"

    # -- the schema ---------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            if not self.read_only:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                ).fetchall()
            }
            version = 0
            if "store_info" in tables:
                row = conn.execute("SELECT value FROM store_info WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else 0
            elif tables - OWN_TABLES:
                listed = ", ".join(sorted(tables)[:8])
                raise InvalidInputError(
                    f"schema {self.schema} of {self.location} is not a fractal_nb store: it holds other "
                    f"tables ({listed}). fractal_nb keeps its graphs in a schema of its own and left this "
                    "one unchanged; name another (?options=-csearch_path%3D<schema>)"
                )
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"schema {self.schema} of {self.location} is at store version {version}; this "
                    f"fractal-nb knows up to {SCHEMA_VERSION}: upgrade it "
                    "(pip install -U 'fractal-nb[postgres]')"
                )
            if version == SCHEMA_VERSION:
                return
            if self.read_only:
                raise InvalidInputError(
                    f"schema {self.schema} of {self.location} is not a fractal_nb store yet: there is "
                    "nothing to read. read_only=True opens a store a run wrote"
                )
            store = resources.files("fractal_nb.store")
            # DuckDB's tables (schema.sql, idempotent) in PostgreSQL's types, then each version's own.
            script = re.sub(r"\bDOUBLE\b", "DOUBLE PRECISION", store.joinpath("schema.sql").read_text())
            for step in range(version + 1, SCHEMA_VERSION + 1):
                script += store.joinpath("schema", f"postgresql_{step}.sql").read_text()
            for statement in split_sql(script):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO store_info (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [str(SCHEMA_VERSION)],
            )

    # -- statements and transactions ------------------------------------------------------

    def _run(self, conn: Any, sql: str, params: Params) -> _Fetched:
        if self.tracer is not None:
            self.tracer(sql, tuple(params))
        try:
            cur = conn.execute(to_pyformat(sql), list(params))
        except psycopg.Error as exc:
            raise _store_error(exc, sql, self.location) from exc
        return _Fetched(cur.fetchall() if cur.description is not None else [])

    def _check_open(self) -> None:
        if self._closed:
            raise StateError("the store is closed; open a new GraphStore")

    def execute(self, sql: str, params: Params = ()) -> _Fetched:
        """Run one statement: in this thread's transaction, else on a pooled connection of its own."""
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return self._run(conn, sql, params)
        if _READS.match(sql):
            with self._pool.connection() as conn:
                return self._run(conn, sql, params)
        with self._transaction(write=True) as conn:  # a write on its own still takes the store's lock
            return self._run(conn, sql, params)

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Rows of one query."""
        return self.execute(sql, params).fetchall()

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """First row of one query, or None."""
        return self.execute(sql, params).fetchone()

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Any]:
        with self._pool.connection() as conn:
            self._local.conn = conn
            try:
                conn.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                if write:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._lock_key])
                    self.file.sourced.clear()  # another process may have added sources since (in_process.py)
                yield conn
            except BaseException:
                self._local.conn = None
                with _quiet():
                    conn.execute("ROLLBACK")
                raise
            else:
                self._local.conn = None
                try:
                    conn.execute("COMMIT")
                except psycopg.Error as exc:
                    raise _store_error(exc, "COMMIT", self.location) from exc

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise StateError(f"{self.location} was opened read_only=True; open it without read_only to write")

    @contextmanager
    def write(self) -> Iterator[object]:
        """A write transaction under the store's advisory lock; nested calls join the outer one."""
        self._refuse_read_only()
        self._check_open()
        depth = getattr(self._local, "write_depth", 0)
        if depth:
            self._local.write_depth = depth + 1
            try:
                yield self._local.conn
            finally:
                self._local.write_depth = depth
            return
        if getattr(self._local, "conn", None) is not None:
            raise StateError("a write cannot start inside a read transaction of the same thread")
        with self.file.write_lock:  # this process's writers wait here, not on pooled connections
            self._local.write_depth = 1
            try:
                with self._transaction(write=True) as conn:
                    try:
                        yield conn
                        # History at commit (docs/architecture/store.md, rule 13).
                        if self.commit_hook is not None:
                            self.commit_hook.before_commit()
                    except BaseException:
                        if self.commit_hook is not None:
                            self.commit_hook.rolled_back()
                        raise
            finally:
                self._local.write_depth = 0

    def writing(self) -> bool:
        """Whether this thread is inside a write transaction (it holds the store's lock)."""
        return bool(getattr(self._local, "write_depth", 0))

    def write_one(self, sql: str, params: Params = ()) -> None:
        """One statement under the store's lock, committed on its own (or joining a transaction)."""
        self._refuse_read_only()
        self.execute(sql, params)

    @contextmanager
    def read(self) -> Iterator[object]:
        """A consistent snapshot (REPEATABLE READ, READ ONLY) for several reads, without the lock."""
        self._check_open()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn  # inside a write or read transaction already: see its state
            return
        with self._transaction(write=False) as conn:
            yield conn

    def close(self) -> None:
        """Close the pool; later calls raise StateError."""
        if self._closed:
            return
        self._closed = True
        self.file.closed()
        self._pool.close()


_READS = re.compile(r"\s*(SELECT|WITH|SHOW|VALUES)\b", re.IGNORECASE)


@contextmanager
def _quiet() -> Iterator[None]:
    try:
        yield
    except Exception:  # noqa: S110 - a rollback on a broken connection: the pool discards it
        pass


def _store_error(exc: Exception, sql: str, location: str) -> Exception:
    """A psycopg error as the store reports errors: what failed, where, never the password."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    statement = " ".join(sql.split())[:160]
    return StateError(f"PostgreSQL store {location}: {first} (in: {statement})")
