"""No network, ever: every connection offline and locked; a file that is not a store refused unchanged.

Covers: store/duckdb_file.py.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from fractal_nb import GraphStore, InvalidInputError

pytestmark = pytest.mark.duckdb_only  # DuckDB's own settings and files; PostgreSQL's: test_postgres

OFFLINE = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "enable_external_access": False,
    "lock_configuration": True,
}


def settings_of(store: GraphStore) -> dict[str, object]:
    row = store._db.fetchone("SELECT " + ", ".join(f"current_setting('{name}')" for name in OFFLINE))
    assert row is not None
    return dict(zip(OFFLINE, row, strict=True))


def test_every_connection_the_store_opens_is_offline_and_locked(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    with GraphStore() as memory, GraphStore(path) as writer:
        writer.create_graph("Why?", "pulse", "autonomous")
        stores = [memory, writer]
        assert [settings_of(s) for s in stores] == [OFFLINE, OFFLINE]
        for store in stores:
            with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
                store._db.execute("SET autoinstall_known_extensions = true")
            with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
                store._db.execute("SET autoload_known_extensions = true")
    with GraphStore(path, read_only=True) as reader:
        assert settings_of(reader) == OFFLINE
        assert reader.list_graphs()["count"] == 1


def _sqlite(path: Path) -> None:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE orders (id INTEGER, total REAL)")
        con.execute("INSERT INTO orders VALUES (1, 9.5)")
    con.close()


def _foreign_duckdb(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
        con.execute("INSERT INTO customers VALUES (1, 'Ada')")


FOREIGN: list[tuple[str, Callable[[Path], None], str]] = [
    ("sqlite", _sqlite, "is a SQLite database, not a fractal_nb store"),
    ("text", lambda p: p.write_text("id,name\n1,Ada\n"), "is a text file, not a fractal_nb store"),
    ("empty", lambda p: p.write_bytes(b""), "is an empty file, not a fractal_nb store"),
    (
        "png",
        lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256))),
        r"a file of another format \(it starts with bytes 89 50 4e 47 0d 0a 1a 0a\)",
    ),
    ("duckdb", _foreign_duckdb, r"is not a fractal_nb store: it holds other tables \(customers\)"),
]


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
@pytest.mark.parametrize(("kind", "make", "message"), FOREIGN, ids=[f[0] for f in FOREIGN])
def test_a_file_that_is_not_a_store_is_refused_clearly_and_left_as_it_was(
    tmp_path: Path, kind: str, make: Callable[[Path], None], message: str, read_only: bool
) -> None:
    path = tmp_path / f"data.{kind}"
    make(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InvalidInputError, match=message) as refused:
        GraphStore(path, read_only=read_only)
    text = str(refused.value)
    assert str(path) in text and "fractal_nb store" in text
    assert "extension" not in text and "download" not in text, "nothing was fetched or asked for"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no file was created beside it"


def test_a_sqlite_file_is_refused_before_duckdb_opens_it(tmp_path: Path) -> None:
    """DuckDB opening a SQLite file wants its sqlite extension: it must never get that far."""
    path = tmp_path / "app.db"
    _sqlite(path)
    with pytest.raises(InvalidInputError) as refused:
        GraphStore(path)
    assert refused.value.__cause__ is None and refused.value.__context__ is None
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT id, total FROM orders").fetchall() == [(1, 9.5)]
    con.close()


def test_an_empty_duckdb_database_opens_read_write_but_not_read_only(tmp_path: Path) -> None:
    path = tmp_path / "fresh.duckdb"
    duckdb.connect(str(path)).close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InvalidInputError, match="an empty DuckDB database, not a fractal_nb store"):
        GraphStore(path, read_only=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    with GraphStore(path) as store:
        assert store.list_graphs()["count"] == 0


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (42, "the store's path must be a file path .* not int: 42"),
        (b"store.duckdb", "the store's path must be a file path"),
        ("   ", "the store's path must be a file path"),
        ("a\x00b.duckdb", "NUL character"),
    ],
    ids=["int", "bytes", "blank", "nul"],
)
def test_a_path_that_is_not_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for read_only in (False, True):
        with pytest.raises(InvalidInputError, match=message):
            GraphStore(path, read_only=read_only)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_folder_or_a_file_as_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InvalidInputError, match="is a directory; give a file inside it"):
        GraphStore(tmp_path)
    with pytest.raises(InvalidInputError, match="notes.txt is a file, not a folder"):
        GraphStore(tmp_path / "notes.txt" / "store.duckdb")
    with pytest.raises(InvalidInputError, match="read_only must be True or False, not 'yes'"):
        GraphStore(tmp_path / "new.duckdb", read_only="yes")  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
