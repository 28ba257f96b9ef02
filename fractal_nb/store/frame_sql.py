"""One read-only ``SELECT`` over given frames, on a private in-memory DuckDB database (``ex.sql``'s engine).

docs/architecture/facade.md, "Inspecting a file": the analyst's query never runs on the
store's connection, and nothing it names can open a file or a connection. The
database is opened first, with the store's network rule (rule 12: no extension
install or load, no file or network access, configuration locked) and Python
variables kept out of reach; the query is parsed, checked and its tables named
*on that database*, never on DuckDB's default connection, which would install
the extension a ``read_parquet('https://…')`` asks for (a lookup of DuckDB's
extension host, then an HTTP request). Only the tables the query names are
built, as views typed by ``declared``; the database is gone when the call
returns. The facade's ``exploration/graph_sql.py`` says which tables there are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import duckdb
import pandas as pd

from ..errors import InvalidInputError
from .duckdb_file import NO_NETWORK

# Python variables of the calling code are never tables (DuckDB's replacement scans).
PRIVATE: Mapping[str, bool] = MappingProxyType({**NO_NETWORK, "python_enable_replacements": False})
SqlParams = Sequence[Any] | Mapping[str, Any] | None
FrameSource = Callable[[str], pd.DataFrame]
"""Given a table's name, its frame (called only for the tables a query names)."""


def select_frames(
    query: str,
    params: SqlParams,
    *,
    tables: Sequence[str],
    frame: FrameSource,
    declared: Mapping[str, Mapping[str, str]],
    json_columns: Sequence[str] = (),
) -> pd.DataFrame:
    """Run ``query`` (one SELECT) over the frames of ``tables``; the result as a DataFrame.

    ``declared`` gives, per table, the SQL type of columns a frame cannot carry
    (all None, NaN-padded integers); ``json_columns`` hold JSON text, typed JSON
    in the query. A query that is not one ``SELECT`` (or ``WITH … SELECT``),
    that names a file, an extension or another database, or that fails, raises
    :class:`~fractal_nb.InvalidInputError` saying what is allowed.

    >>> frames = {"t": pd.DataFrame({"a": [1, 2]})}
    >>> select_frames("SELECT max(a) AS m FROM T", None, tables=["t"], frame=frames.__getitem__, declared={})
       m
    0  2
    >>> select_frames("SELECT * FROM read_csv('https://example.com/a.csv')", None, tables=["t"],
    ...               frame=frames.__getitem__, declared={})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    fractal_nb.errors.InvalidInputError: ex.sql reads only this graph's tables (t): files, ...
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError(f"query must be the text of one SELECT, not {query!r}")
    if params is not None and (isinstance(params, str | bytes) or not isinstance(params, Sequence | Mapping)):
        raise InvalidInputError(
            f"params must be a list of values for ? placeholders, a dict for $name ones, or None, "
            f"not {params!r}"
        )
    names = ", ".join(tables)
    with duckdb.connect(":memory:", config={**PRIVATE}) as conn:
        try:
            _check_statement(conn, query, names)
            for name in sorted(_named_tables(conn, query, tables)):
                rows = frame(name)
                conn.register(f"{name}_rows", rows)
                typed = [f"{c}::JSON AS {c}" for c in json_columns if c in rows.columns]
                types = declared.get(name, {})
                typed += [f"{c}::{types[c]} AS {c}" for c in rows.columns if c in types]
                replace = f" REPLACE ({', '.join(typed)})" if typed else ""
                conn.execute(f"CREATE VIEW {name} AS SELECT *{replace} FROM {name}_rows")
            return conn.execute(query, params).df()
        except duckdb.Error as exc:
            raise _refusal(exc, names) from None


def _named_tables(conn: duckdb.DuckDBPyConnection, query: str, tables: Sequence[str]) -> set[str]:
    """The tables the query mentions, lower-cased as SQL compares them (``Nodes`` is ``nodes``).

    A miss is only a missing table: the query then fails. DuckDB cannot name the
    tables of a query with ``?`` or ``$name`` parameters before they are bound: then all.
    """
    try:
        return {name.lower() for name in conn.get_table_names(query)} & set(tables)
    except duckdb.BinderException:
        return set(tables)


def _refusal(exc: duckdb.Error, names: str) -> InvalidInputError:
    """What a failed query is told: a file, an extension or a setting is off; anything else failed."""
    if isinstance(exc, duckdb.PermissionException) or (
        isinstance(exc, duckdb.CatalogException) and "extension" in str(exc)
    ):
        return InvalidInputError(
            f"ex.sql reads only this graph's tables ({names}): files, extensions, other "
            f"databases and settings are off ({exc})"
        )
    return InvalidInputError(f"the query failed: {exc}\nIts tables: {names}")


def _check_statement(conn: duckdb.DuckDBPyConnection, query: str, names: str) -> None:
    """One SELECT statement, or a refusal saying what is allowed."""
    try:
        statements = conn.extract_statements(query)
    except duckdb.Error as exc:
        raise InvalidInputError(f"the query does not parse: {exc}") from None
    if len(statements) != 1:
        raise InvalidInputError(f"ex.sql runs one statement at a time, not {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise InvalidInputError(
            f"ex.sql only reads: one SELECT (or WITH … SELECT) over {names}, not "
            f"{kind.name}; the graph changes through the Exploration's methods"
        )
