"""Shared fixtures: a store on each backend, a clock tests can move, a small graph builder.

The store tests (tests/store/) run on DuckDB and on PostgreSQL: a test that takes the
``backend`` fixture (``fresh_store`` and ``tree`` do) runs once per backend there, and
elsewhere only where marked ``both_backends``. The PostgreSQL runs need a server
(tests/pg_cluster.py starts a throwaway one); without one they skip, naming what to
install, and under CI they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import GraphStore
from tests import pg_cluster
from tests.extras import ci_requires_extras

BACKENDS = ("duckdb", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    both = "/tests/store/" in str(metafunc.definition.path) or metafunc.definition.get_closest_marker(
        "both_backends"
    )
    if metafunc.definition.get_closest_marker("postgresql_only"):
        metafunc.parametrize("backend", BACKENDS[1:], indirect=True)
        return
    only = metafunc.definition.get_closest_marker("duckdb_only")
    metafunc.parametrize("backend", BACKENDS if both and not only else BACKENDS[:1], indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server's URL: ``FRACTAL_NB_TEST_PG``, else a throwaway cluster for the session."""
    try:
        import psycopg  # noqa: F401, PLC0415 - the [postgres] extra
    except ImportError:
        (pytest.fail if ci_requires_extras() else pytest.skip)(pg_cluster.INSTALL_HINT)
    given = os.environ.get("FRACTAL_NB_TEST_PG")
    if given:
        yield given
        return
    if pg_cluster.binaries() is None:
        (pytest.fail if ci_requires_extras() else pytest.skip)(pg_cluster.INSTALL_HINT)
    cluster = pg_cluster.start()
    try:
        yield cluster.url
    finally:
        pg_cluster.stop(cluster.folder)


@dataclass
class Backend:
    """Where a test's store lives: DuckDB (memory, or a file in ``tmp_path``) or a new PostgreSQL schema."""

    name: str
    file: Path  # the DuckDB file a test that needs one uses
    url: str | None = None  # the PostgreSQL schema's URL

    @property
    def target(self) -> str | None:
        """The store a test opens: memory on DuckDB, the schema on PostgreSQL."""
        return self.url

    @property
    def lasting(self) -> str:
        """A store other processes and later opens see: the file on DuckDB, the schema on PostgreSQL."""
        return self.url or str(self.file)

    def open(self, target: str | None = None, **kw: Any) -> GraphStore:
        return GraphStore(target if target is not None else self.target, **kw)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "duckdb":
        yield Backend("duckdb", tmp_path / "store.duckdb")
        return
    import psycopg  # noqa: PLC0415 - the [postgres] extra (pg_server skips without it)

    server: str = request.getfixturevalue("pg_server")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in server else "?"
    try:
        yield Backend(
            "postgresql", tmp_path / "store.duckdb", f"{server}{sep}options=-csearch_path%3D{schema}"
        )
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


class FakeClock:
    """A clock that moves only when told to (leases, timestamps)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fresh_store(backend: Backend, clock: FakeClock) -> Iterator[GraphStore]:
    with backend.open(clock=clock, lease_s=60) as store:
        yield store


@dataclass
class Tree:
    """A graph with the root answered and seed questions hung under that answer."""

    store: GraphStore
    graph_id: str
    root: str
    root_answer: str
    seeds: list[str]

    def answer(self, question: str, text: str = "an answer", **kw: Any) -> str:
        return self.store.add_node(self.graph_id, question, "answer", text, **kw)["node_id"]

    def ask(self, parent: str, text: str = "a question", **kw: Any) -> str:
        return self.store.add_node(self.graph_id, parent, "question", text, **kw)["node_id"]

    def node(self, node_id: str) -> dict[str, Any]:
        nodes = self.store.get_snapshot(self.graph_id)["nodes"]
        return next(n for n in nodes if n["node_id"] == node_id)

    def status(self, node_id: str) -> str:
        return str(self.node(node_id)["status"])


def make_tree(
    store: GraphStore, intensity: str = "explore", checkpoint: str = "autonomous", seeds: int = 3
) -> Tree:
    g = store.create_graph("What makes a city grow?", intensity, checkpoint)
    gid, root = g["graph_id"], g["root_node_id"]
    ans = store.add_node(gid, root, "answer", "Seed decomposition.")["node_id"]
    qs = [store.add_node(gid, ans, "question", f"Seed question {i}")["node_id"] for i in range(seeds)]
    return Tree(store, gid, root, ans, qs)


@pytest.fixture
def tree(fresh_store: GraphStore) -> Tree:
    return make_tree(fresh_store)
