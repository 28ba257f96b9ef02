"""Each statement written per dialect takes the same arguments in both; placeholders translate exactly.

Covers: store/dialect.py.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import fractal_nb.store
from fractal_nb.store.dialect import Dialect, Per, dialect_of, pick


def _placeholders(sql: str) -> int:
    """``?`` outside quotes: the arguments a statement takes."""
    count, quote = 0, None
    for ch in sql:
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            count += 1
    return count


def _pers() -> list[tuple[str, Per]]:
    found = []
    for info in pkgutil.iter_modules(fractal_nb.store.__path__):
        if info.name == "postgres":
            continue  # the [postgres] extra; it holds no Per
        module = importlib.import_module(f"fractal_nb.store.{info.name}")
        found += [
            (f"{info.name}.{name}", value) for name, value in vars(module).items() if isinstance(value, Per)
        ]
    return found


def test_the_store_writes_statements_per_dialect() -> None:
    assert _pers(), "no statement is written per dialect: the PostgreSQL texts are missing"


@pytest.mark.parametrize(("name", "statement"), _pers(), ids=[n for n, _ in _pers()])
def test_a_statement_takes_the_same_arguments_in_each_dialect(name: str, statement: Per) -> None:
    counts = {d.value: _placeholders(statement(d)) for d in Dialect}
    assert len(set(counts.values())) == 1, f"{name}: {counts}"
    assert all(statement(d).strip() for d in Dialect)


def test_a_plain_text_is_every_dialects_and_a_per_is_its_own() -> None:
    both = Per(duckdb="SELECT 1", postgresql="SELECT 2")
    assert [pick("SELECT 0", d) for d in Dialect] == ["SELECT 0", "SELECT 0"]
    assert [pick(both, d) for d in Dialect] == ["SELECT 1", "SELECT 2"]


@pytest.mark.parametrize(
    ("target", "dialect"),
    [
        ("postgresql://u@h/db", Dialect.POSTGRESQL),
        ("POSTGRES://u@h/db", Dialect.POSTGRESQL),
        ("postgresql.duckdb", Dialect.DUCKDB),
        ("postgresql:/x", Dialect.DUCKDB),
        (None, Dialect.DUCKDB),
    ],
)
def test_the_target_names_the_dialect(target: object, dialect: Dialect) -> None:
    assert dialect_of(target) is dialect


def test_placeholders_become_psycopgs_outside_quotes_only() -> None:
    postgres = pytest.importorskip("fractal_nb.store.postgres", reason="pip install -e '.[postgres]'")
    sql = "SELECT '?', \"a?\", ? FROM t WHERE x LIKE 'tool:%' AND y = ? AND z = 'it''s ?'"
    assert postgres.to_pyformat(sql) == (
        "SELECT '?', \"a?\", %s FROM t WHERE x LIKE 'tool:%%' AND y = %s AND z = 'it''s ?'"
    )
