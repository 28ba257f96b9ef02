"""Copying graphs between stores (store/copy.py; docs/architecture/store.md, "Moving between stores").

A rich exploration (a simulated run with a deepened branch, a follow-up turn, a fork, sources,
a failed call, cache rows, history) is built once in a DuckDB file; each test copies it into the
backend's store (a DuckDB file, or a PostgreSQL schema) and back into a new DuckDB file, and
compares every table of the store row by row.

Covers: store/database.py, store/graph_store.py, cli/copying.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, InvalidInputError, NotFoundError, SimulatedLLM, Snippet, StateError
from fractal_nb.store import Store, copy_graphs, open_store
from fractal_nb.store.copy import CACHE_TABLE, GRAPH_TABLES, NOT_COPIED
from fractal_nb.store.database import OWN_TABLES
from tests.conftest import Backend

SEED = "Why do cities grow?"
LLM = SimulatedLLM(seed=3)


class Rich:
    """The source: its file, its two graphs (the origin, then its fork) and an event in the middle."""

    def __init__(self, path: Path, origin: str, fork: str, middle: int) -> None:
        self.path, self.origin, self.fork, self.middle = path, origin, fork, middle
        self.graphs = [origin, fork]


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Rich:
    path = tmp_path_factory.mktemp("copy") / "rich.duckdb"
    with Exploration.create(
        SEED, intensity="pulse", llm=LLM, path=path, sources=Snippet("Ports came first.", name="ports")
    ) as ex:
        ex.run(progress=False)
        ex.harvest()
        question = ex.nodes().query("depth == 1 and node_type == 'question'")["node_id"].iloc[0]
        ex.deepen(question)
        ex.run(progress=False)
        ex.harvest()
        ex.ask("What part does the climate play?")
        ex.add_sources(Snippet("Rivers feed trade.\n\nTrade feeds towns.", name="rivers"))
        ex.run(progress=False)
        ex.harvest()
        events = ex.events()["event_id"].tolist()
        middle = int(events[len(events) // 2])
        with ex.fork(at=middle) as fork:
            fork.run(progress=False)
            fork.harvest()
            fork_id = fork.graph_id
        ex.store.record_llm_call(
            graph_id=ex.graph_id,
            node_id=question,
            worker="w-1",
            role="answer",
            model="sim",
            prompt_tokens=12,
            completion_tokens=0,
            attempts=3,
            latency_s=0.25,
            outcome="error",
            error="the server timed out",
        )
        ex.store.cache_put("key-1", model="sim", role="answer", response={"answer": "Trade."})
        return Rich(path, ex.graph_id, fork_id, middle)


def db_of(store: Store) -> Any:
    return store._db  # type: ignore[attr-defined]


def table_rows(store: Store, table: str, graph_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``table`` (of ``graph_ids``; None: all) as {column: value}, in a fixed order."""
    db = db_of(store)
    columns = [
        c
        for (c,) in db.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
            "AND table_schema = current_schema() AND table_name = ? ORDER BY column_name",
            [table],
        )
    ]
    assert columns, table
    where = "" if graph_ids is None else f" WHERE graph_id IN ({', '.join('?' for _ in graph_ids)})"
    rows = db.fetchall(f"SELECT {', '.join(columns)} FROM {table}{where}", graph_ids or [])
    return sorted((dict(zip(columns, row, strict=True)) for row in rows), key=repr)


def every_row(store: Store) -> dict[str, list[dict[str, Any]]]:
    return {table: table_rows(store, table) for table in sorted(OWN_TABLES)}


def assert_same_graphs(source: Store, copy: Store, graph_ids: list[str]) -> None:
    """Every table, row by row: the graphs' rows, the cache, and what a copy leaves behind."""
    assert set(GRAPH_TABLES) | {CACHE_TABLE} | NOT_COPIED == OWN_TABLES
    for table in GRAPH_TABLES:
        rows = table_rows(source, table, graph_ids)
        assert table_rows(copy, table, graph_ids) == rows, table
    assert table_rows(copy, CACHE_TABLE) == table_rows(source, CACHE_TABLE)
    assert table_rows(copy, "synthesis_claims") == table_rows(source, "synthesis_claims", graph_ids) == []
    theirs = {row["holder_id"] for row in table_rows(source, "holders")}
    assert not theirs & {row["holder_id"] for row in table_rows(copy, "holders")}  # holders stay


def test_every_table_row_by_row_there_and_back(rich: Rich, backend: Backend, tmp_path: Path) -> None:
    back = tmp_path / "back.duckdb"
    copied = copy_graphs(rich.path, backend.lasting)
    assert copied["graph_ids"] == rich.graphs  # the origin, then its fork
    assert copied["rows"]["nodes"] > 20 and copied["rows"]["node_history"] > copied["rows"]["nodes"]
    assert copy_graphs(backend.lasting, back)["rows"] == copied["rows"]
    with (
        open_store(rich.path, read_only=True) as source,
        open_store(backend.lasting, read_only=True) as there,
        open_store(back, read_only=True) as returned,
    ):
        assert table_rows(source, "lineage") == [
            {**table_rows(source, "lineage")[0], "graph_id": rich.fork, "forked_from": rich.origin}
        ]
        assert any(row["outcome"] == "error" for row in table_rows(source, "llm_calls", [rich.origin]))
        assert all(table_rows(source, table, rich.graphs) for table in GRAPH_TABLES)
        assert table_rows(source, CACHE_TABLE)
        for copy in (there, returned):
            assert_same_graphs(source, copy, rich.graphs)
            assert copy.list_family() == source.list_family()
            for graph_id in rich.graphs:
                assert copy.get_snapshot(graph_id) == source.get_snapshot(graph_id)
                assert copy.list_turns(graph_id) == source.list_turns(graph_id)
            assert copy.get_state_at(rich.origin, rich.middle) == source.get_state_at(
                rich.origin, rich.middle
            )


def test_the_copy_runs_on_at_the_destination(rich: Rich, backend: Backend) -> None:
    copy_graphs(rich.path, backend.lasting)
    with open_store(rich.path, read_only=True) as source:
        before = every_row(source)
        calls = table_rows(source, "llm_calls", rich.graphs)
        nodes = table_rows(source, "nodes", rich.graphs)
    with Exploration.open(backend.lasting, rich.origin, llm=LLM) as ex:
        ex.ask("What part does the water supply play?")
        assert ex.run(progress=False) == "all_complete"
        ex.harvest()
        assert ex.heads()["turn"].tolist() == [1, 2, 3, 4]
        fresh = ex.nodes()[~ex.nodes()["node_id"].isin({n["node_id"] for n in nodes})]
        assert len(fresh) > 1
        # The sequences went past every copied id: new ids sort after the old ones.
        assert fresh["seq"].min() > max(n["seq"] for n in nodes)
        assert ex.events()["event_id"].iloc[-1] > max(e["event_id"] for e in before["events"])
        made = [c["call_id"] for c in table_rows(ex.store, "llm_calls", [rich.origin]) if c not in calls]
        assert made and min(made) > max(c["call_id"] for c in calls)
        forked = ex.fork(at=rich.middle)  # history copied: a fork at an event before the copy
        forked.close()
    with open_store(rich.path, read_only=True) as source:
        assert every_row(source) == before  # the source was only read


def test_one_graph_then_the_other_into_the_same_store(rich: Rich, backend: Backend) -> None:
    """A fork copied alone keeps its lineage row; its origin may follow (their events interleave)."""
    assert copy_graphs(rich.path, backend.lasting, [rich.fork])["graph_ids"] == [rich.fork]
    with open_store(backend.lasting) as there:
        assert [g["graph_id"] for g in there.list_family()] == [rich.fork]
        assert there.list_family()[0]["forked_from"] == rich.origin
    copy_graphs(rich.path, backend.lasting, [rich.origin, rich.origin])
    with open_store(rich.path, read_only=True) as source, open_store(backend.lasting) as there:
        assert_same_graphs(source, there, rich.graphs)
        assert there.list_family() == source.list_family()


def test_a_graph_copied_twice_is_refused_and_changes_nothing(rich: Rich, backend: Backend) -> None:
    copy_graphs(rich.path, backend.lasting, [rich.origin])
    with open_store(rich.path, read_only=True) as source, open_store(backend.lasting) as there:
        before = every_row(there)
        with pytest.raises(InvalidInputError, match=f"already holds graph {rich.origin}.*delete it there"):
            source.copy_to(there, [rich.fork, rich.origin])
        assert every_row(there) == before
        there.delete_graph(rich.origin)  # the way out: deleted there, it copies again
        source.copy_to(there, [rich.origin])
        assert_same_graphs(source, there, [rich.origin])


def test_events_of_another_store_that_overlap_are_refused(rich: Rich, backend: Backend) -> None:
    with open_store(backend.lasting) as there, open_store(rich.path, read_only=True) as source:
        there.create_graph("A question of this store", "pulse")  # its events are 1, 2, ...: the copy's too
        before = every_row(there)
        with pytest.raises(InvalidInputError, match="already holds event 1 .* do not overlap"):
            source.copy_to(there, None)
        assert every_row(there) == before


def test_refusals_name_the_way_out_and_write_nothing(rich: Rich, backend: Backend, tmp_path: Path) -> None:
    with open_store(backend.lasting) as there:
        there.create_graph("Already here", "pulse")
        before = every_row(there)
        with open_store(rich.path, read_only=True) as source:
            with pytest.raises(NotFoundError, match=f"graph 'g-nope' not found in .*{rich.origin}"):
                source.copy_to(there, [rich.origin, "g-nope"])
            for bad in ("g-1", [], [1], {"g": 1}):
                with pytest.raises(InvalidInputError, match="graph_ids"):
                    source.copy_to(there, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="a store opened in this process"):
                source.copy_to(object(), None)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="the same store"):
                there.copy_to(there, None)
        claimed = tmp_path / "claimed.duckdb"
        with open_store(claimed) as busy:
            graph = busy.create_graph("A busy question", "pulse")
            answer = busy.add_node(graph["graph_id"], graph["root_node_id"], "answer", "Because.")
            busy.add_node(graph["graph_id"], answer["node_id"], "question", "Why so?")
            question = busy.claim_work(graph["graph_id"], "w-1")["node_id"]
            with pytest.raises(StateError, match=f"1 claim.*{question}.*Exploration.pause"):
                busy.copy_to(there, None)
        assert every_row(there) == before
    with open_store(backend.lasting, read_only=True) as reading, open_store(rich.path) as source:
        with pytest.raises(StateError, match="read_only=True; open it without read_only to copy"):
            source.copy_to(reading, None)
    with open_store(backend.lasting, read_only=True) as there:
        assert every_row(there) == before


def test_a_refused_copy_leaves_no_new_file(rich: Rich, tmp_path: Path) -> None:
    new = tmp_path / "new.duckdb"
    with pytest.raises(NotFoundError):
        copy_graphs(rich.path, new, ["g-nope"])
    assert not new.exists() and not (tmp_path / "new.duckdb.wal").exists()
    with pytest.raises(InvalidInputError, match="no such file"):
        copy_graphs(tmp_path / "none.duckdb", new)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fractal_nb.cli.main", "copy", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=120,
    )


@pytest.mark.postgresql_only
def test_the_shell_copies_duckdb_to_postgresql_and_back(rich: Rich, backend: Backend, tmp_path: Path) -> None:
    assert backend.url is not None
    there = cli(str(rich.path), backend.url)
    assert there.returncode == 0, there.stderr
    assert f"Copied 2 graphs ({rich.origin}, {rich.fork})" in there.stdout
    back = tmp_path / "back.duckdb"
    returned = cli(backend.url, str(back), "--graph-id", rich.fork)
    assert returned.returncode == 0, returned.stderr
    assert f"Copied 1 graph ({rich.fork}) from postgresql://" in returned.stdout
    again = cli(str(rich.path), backend.url, "--graph-id", rich.origin)
    assert again.returncode == 1
    assert f"already holds graph {rich.origin}" in again.stderr
    missing = cli(str(tmp_path / "none.duckdb"), str(back))
    assert missing.returncode == 2 and "SRC" in missing.stderr
    with open_store(rich.path, read_only=True) as source, open_store(back, read_only=True) as copy:
        assert_same_graphs(source, copy, [rich.fork])
        event = source.get_events(rich.fork)["events"][3]["event_id"]
        assert copy.get_state_at(rich.fork, event) == source.get_state_at(rich.fork, event)


def test_an_empty_source_has_nothing_to_copy(backend: Backend, tmp_path: Path) -> None:
    open_store(tmp_path / "empty.duckdb").close()
    with pytest.raises(NotFoundError, match="holds no graph to copy"):
        copy_graphs(tmp_path / "empty.duckdb", backend.lasting)


def test_a_source_without_a_later_table_copies_the_tables_it_has(backend: Backend, tmp_path: Path) -> None:
    """A file an older version wrote, opened read-only (not migrated): what it has is copied."""
    old = tmp_path / "old.duckdb"
    with open_store(old) as store:
        graph_id = store.create_graph("An old question", "pulse")["graph_id"]  # no model call: no calls
        db_of(store).execute("DROP TABLE depth_allowances")
    copied = copy_graphs(old, backend.lasting)
    assert "depth_allowances" not in copied["rows"] and copied["rows"]["llm_calls"] == 0
    with open_store(old, read_only=True) as source, open_store(backend.lasting) as there:
        for table in set(GRAPH_TABLES) - {"depth_allowances"}:
            assert table_rows(there, table, [graph_id]) == table_rows(source, table, [graph_id]), table
        assert there.get_snapshot(graph_id) == source.get_snapshot(graph_id)


def test_a_destination_without_a_column_the_source_has_is_refused(rich: Rich, backend: Backend) -> None:
    with open_store(backend.lasting) as there:
        db_of(there).execute("ALTER TABLE sources DROP COLUMN location")
        before = every_row(there)
        with open_store(rich.path, read_only=True) as source:
            with pytest.raises(StateError, match='table sources has no column "location".*migrates on open'):
                source.copy_to(there, None)
        assert every_row(there) == before


def test_a_node_id_the_destination_holds_under_another_graph_is_refused(rich: Rich, backend: Backend) -> None:
    copy_graphs(rich.path, backend.lasting, [rich.origin])
    with open_store(backend.lasting) as there, open_store(rich.path, read_only=True) as source:
        for table in GRAPH_TABLES:  # the same nodes, now under another graph id
            db_of(there).execute(f"UPDATE {table} SET graph_id = 'g-other' WHERE graph_id = ?", [rich.origin])
        db_of(there).execute("DELETE FROM events WHERE graph_id = 'g-other'")
        before = every_row(there)
        with pytest.raises(InvalidInputError, match=r"already holds node n-.* \(of graph g-other\)"):
            source.copy_to(there, [rich.origin])
        assert every_row(there) == before
