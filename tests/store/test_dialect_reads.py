"""The whole-graph reads written in each engine's SQL give the same result on both.

The snapshot (store/snapshot.py), the view's question items (store/question_items.py),
the live feed (store/queries.py) and a worker's context (store/context.py) are one
statement per dialect where DuckDB and PostgreSQL differ. Here the same rows (a graph
grown in DuckDB, copied row for row into a PostgreSQL schema) are read by both, and the
results compared: the snapshot's text byte for byte, the rest value for value. On each
backend alone, the database's fold of the question items equals the Python fold.

Covers: store/dialect.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fractal_nb import GraphStore
from fractal_nb.store.dialect import Dialect
from fractal_nb.store.rows import iso
from fractal_nb.store.snapshot import iso_sql, micros_sql
from tests.graph_builder import run_shaped_graph
from tests.store.test_snapshot_sql import assert_same
from tests.views.failing_graph import failing_graph
from tests.views.test_question_items import assert_same_folds

_COPIED = ("graphs", "nodes", "edges", "events", "turns", "depth_allowances")
# DuckDB writes a control character's escape in upper-case hex (\u001F), PostgreSQL in lower
_ESCAPE = re.compile(r"\\u00[0-9A-F]{2}")


def outside_client_graph(store: GraphStore) -> str:
    """Notes, links, long text, supports, tracks, odd weak marks and hostile text an outside client wrote."""
    g = store.create_graph("[simulated] Why do tides turn? \x01 \u2028 é中😀", "explore", "autonomous")
    gid, root = g["graph_id"], g["root_node_id"]
    first = store.add_answer(gid, root, "x" * 2500, sub_questions=["Why the moon?", 'Why "twice" \\?'])
    moon, twice = (q["node_id"] for q in first["sub_questions"])
    a_moon = store.submit_answer(gid, moon, "Its mass.\n\ttab \x1f")["answer"]["node_id"]
    a_twice = store.submit_answer(gid, twice, "Two bulges.")["answer"]["node_id"]
    store.update_node(gid, a_moon, {"convergence_with": [a_twice], "convergence_insight": "same cause"})
    store.update_node(gid, a_twice, {"contradiction_with": [a_moon], "contradiction_tension": "not so"})
    store.add_note(gid, moon, "<b>A person</b> says: by river.")
    store.update_node(gid, moon, {"weak": [{"node_id": "n-1", "reason": "budget_exhausted"}, 7, {}]})
    store.update_node(
        gid,
        twice,
        {
            "weak": "not a list",
            "synthesis": "ü" * 2001,
            "track": {"name": "cost"},
            "synthesis_failed": "true",
        },
    )
    store.update_node(gid, a_twice, {"support": "unsupported", "nested": {"n": [1, 2.5, -3e-7, None]}})
    store.update_node(gid, a_moon, {"support": "supported"})
    return gid


def test_the_databases_fold_is_the_python_fold(fresh_store: GraphStore) -> None:
    assert_same_folds(fresh_store, failing_graph(fresh_store)["graph_id"])
    assert_same_folds(fresh_store, outside_client_graph(fresh_store))
    assert_same_folds(fresh_store, run_shaped_graph(fresh_store, 60))
    only_root = fresh_store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
    assert_same_folds(fresh_store, only_root)


def test_a_kept_snapshot_is_written_again_where_rows_changed(fresh_store: GraphStore) -> None:
    gid = outside_client_graph(fresh_store)
    assert_same(fresh_store, gid)
    nodes = fresh_store.get_snapshot(gid)["nodes"]
    answers = [n["node_id"] for n in nodes if n["node_type"] == "answer"]
    fresh_store.update_node(gid, answers[-1], {"convergence_with": [answers[0]], "note": "\u00e9 \x02"})
    fresh_store.add_note(gid, nodes[0]["node_id"], "A later note.")
    before = len(fresh_store.get_snapshot(gid)["edges"])
    assert_same(fresh_store, gid)
    assert len(fresh_store.get_snapshot(gid)["nodes"]) == len(nodes) + 1 and before > 3


@pytest.fixture
def both(pg_server: str) -> Iterator[tuple[GraphStore, GraphStore]]:
    """A DuckDB store and a store on a new PostgreSQL schema (dropped after)."""
    import psycopg  # noqa: PLC0415 - the [postgres] extra (pg_server skips without it)

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg_server else "?"
    try:
        with GraphStore() as duck, GraphStore(f"{pg_server}{sep}options=-csearch_path%3D{schema}") as pg:
            yield duck, pg
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def copy_rows(duck: GraphStore, url: str, schema: str) -> None:
    """Every row of the graphs' tables, from the DuckDB store into the PostgreSQL schema, as they are."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url) as conn:
        conn.execute(f"SET search_path = {schema}")
        for table in _COPIED:
            cursor = duck._db.execute(f"SELECT * FROM {table}")
            columns = [d[0] for d in cursor.description]  # type: ignore[attr-defined]
            rows = cursor.fetchall()
            if rows:
                marks = ", ".join("%s" for _ in columns)
                conn.cursor().executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
                )


def test_postgresqls_texts_read_the_same_rows_as_duckdbs(
    both: tuple[GraphStore, GraphStore], pg_server: str
) -> None:
    duck, pg = both
    graphs = [failing_graph(duck)["graph_id"], outside_client_graph(duck), run_shaped_graph(duck, 80)]
    graphs.append(duck.create_graph("Why?", "pulse", "autonomous")["graph_id"])
    schema = pg._db.fetchone("SELECT current_schema()")
    assert schema is not None
    copy_rows(duck, pg_server, schema[0])
    for gid in duck.list_graphs()["graphs"]:
        gid = gid["graph_id"]
        text = duck.get_snapshot_text(gid)
        assert pg.get_snapshot_text(gid) == _ESCAPE.sub(lambda m: m.group(0).lower(), text)
        assert pg.get_snapshot(gid) == duck.get_snapshot(gid)
        items, pg_items = duck.get_question_items(gid), pg.get_question_items(gid)
        parsed: list[dict[str, Any]] = [
            {**i, "questions": json.loads(i["questions"]), "links": json.loads(i["links"])}
            for i in (items, pg_items)
        ]
        assert parsed[1] == parsed[0]
        assert [list(q) for q in parsed[1]["questions"]] == [list(q) for q in parsed[0]["questions"]]
        assert pg.get_changes(gid) == duck.get_changes(gid)
        assert pg.carries_evidence(gid) == duck.carries_evidence(gid)
        for node in duck.get_snapshot(gid)["nodes"]:
            if node["node_type"] == "question":
                nid = node["node_id"]
                assert pg.get_context(gid, nid) == duck.get_context(gid, nid)
    assert len(graphs) == 4


@pytest.fixture(scope="module")
def pg_connection(pg_server: str) -> Iterator[Any]:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(pg_server, autocommit=True) as conn:
        yield conn


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False, allow_infinity=False))
def test_the_timestamps_sql_is_isoformat_on_postgresql(pg_connection: Any, seconds: float) -> None:
    pg = Dialect.POSTGRESQL
    micros = f"SELECT {micros_sql('x', pg)} AS u FROM (SELECT %s::float8 AS x) AS t"
    row = pg_connection.execute(f"SELECT {iso_sql('u', pg)} FROM ({micros}) AS m", [seconds]).fetchone()
    assert row is not None and row[0] == iso(seconds)
