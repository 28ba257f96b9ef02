"""The SQL dialects the store speaks: the rules are written once, a statement per engine where they differ.

Every step keeps its statements beside its rules (docs/architecture/store.md, "Dialects").
A statement both engines read alike is a plain string; one they do not is a
:class:`Per`, which holds each engine's text, and the step picks its text once,
when it is built, from its connection's :class:`Dialect`. Placeholders are ``?``
in every text: the PostgreSQL connection turns them into its own.

>>> NOW = Per(duckdb="SELECT epoch(now())", postgresql="SELECT extract(epoch FROM now())")
>>> NOW(Dialect.POSTGRESQL)
'SELECT extract(epoch FROM now())'
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from ..arguments import is_database_url


class Dialect(StrEnum):
    """The engine a store's connection speaks to."""

    DUCKDB = "duckdb"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True, slots=True)
class Per:
    """One statement (or a fragment of one) written for each dialect: the engines differ on it."""

    duckdb: str
    postgresql: str

    def __call__(self, dialect: Dialect) -> str:
        """The statement's text in ``dialect``."""
        text: str = getattr(self, Dialect(dialect).value)
        return text


assert {f.name for f in fields(Per)} == {d.value for d in Dialect}, "a Per names every dialect"

Sql = str | Per  # a statement: the same text on every engine, or one per dialect


def pick(statement: Sql, dialect: Dialect) -> str:
    """The text of ``statement`` in ``dialect`` (a plain string is every dialect's).

    >>> pick("SELECT 1", Dialect.DUCKDB)
    'SELECT 1'
    """
    return statement if isinstance(statement, str) else statement(dialect)


def json_text(dialect: Dialect, column: str, *keys: str) -> str:
    """SQL reading the JSON text ``column`` at ``keys`` as a string (NULL where absent).

    >>> json_text(Dialect.DUCKDB, "metadata", "track", "name")
    "json_extract_string(metadata, '$.track.name')"
    >>> json_text(Dialect.POSTGRESQL, "metadata", "track")
    "(metadata::jsonb #>> '{track}')"
    """
    if dialect is Dialect.DUCKDB:
        return f"json_extract_string({column}, '$.{'.'.join(keys)}')"
    return f"({column}::jsonb #>> '{{{','.join(keys)}}}')"


def json_has(dialect: Dialect, column: str, key: str) -> str:
    """SQL true where the JSON object text ``column`` has the top-level ``key``.

    >>> json_has(Dialect.POSTGRESQL, "metadata", "track")
    "jsonb_exists(metadata::jsonb, 'track')"
    """
    if dialect is Dialect.DUCKDB:
        return f"json_exists({column}, '$.{key}')"
    return f"jsonb_exists({column}::jsonb, '{key}')"


def dialect_of(target: object) -> Dialect:
    """The dialect of the store ``target`` names: a ``postgresql://`` URL, else a DuckDB file (or memory).

    >>> dialect_of("postgresql://alice@db.example/research"), dialect_of("tram.duckdb")
    (<Dialect.POSTGRESQL: 'postgresql'>, <Dialect.DUCKDB: 'duckdb'>)
    """
    return Dialect.POSTGRESQL if is_database_url(target) else Dialect.DUCKDB


def json_value(dialect: Dialect, column: str, key: str) -> str:
    """SQL for the JSON text of the top-level ``key`` of the JSON object text ``column`` (NULL where absent).

    The value stays JSON (a string keeps its quotes), and reaches Python as text on both engines.

    >>> json_value(Dialect.DUCKDB, "metadata", "weak")
    "json_extract(metadata, '$.weak')"
    >>> json_value(Dialect.POSTGRESQL, "metadata", "weak")
    "((metadata::jsonb -> 'weak')::text)"
    """
    if dialect is Dialect.DUCKDB:
        return f"json_extract({column}, '$.{key}')"
    return f"(({column}::jsonb -> '{key}')::text)"


def json_true(dialect: Dialect, column: str, key: str) -> str:
    """SQL true where the top-level ``key`` of the JSON object text ``column`` is JSON ``true``, else false.

    Any other value (``"true"``, 1, absent) is false, never NULL.

    >>> json_true(Dialect.DUCKDB, "metadata", "synthesis_failed")
    "coalesce(json_extract(metadata, '$.synthesis_failed') = 'true'::JSON, false)"
    >>> json_true(Dialect.POSTGRESQL, "metadata", "synthesis_failed")
    "coalesce((metadata::jsonb -> 'synthesis_failed') = 'true'::jsonb, false)"
    """
    if dialect is Dialect.DUCKDB:
        return f"coalesce(json_extract({column}, '$.{key}') = 'true'::JSON, false)"
    return f"coalesce(({column}::jsonb -> '{key}') = 'true'::jsonb, false)"


def split_sql(script: str) -> list[str]:
    r"""The statements of a schema script: ``--`` comments dropped, split at ``;``.

    >>> split_sql("CREATE TABLE a (x INT); -- a note\nCREATE TABLE b (y INT);")
    ['CREATE TABLE a (x INT)', 'CREATE TABLE b (y INT)']
    """
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
