"""Time travel and forks from the notebook: ``ex.at(e)``, ``ex.fork(at=...)``, ``lineage()``, ``family()``.

docs/architecture/store.md, "History and forks". The state at an event is compared row by row with the
frames ``nodes()`` / ``edges()`` gave when that event was the graph's last.

Covers: exploration/frames.py, store/replay.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from fractal_nb import Exploration, GraphStore, InvalidInputError, NotFoundError, SimulatedLLM, StateError
from fractal_nb.exploration.history import GraphAt
from tests.conftest import Backend

pytestmark = pytest.mark.both_backends


def last_event(ex: Exploration) -> int:
    return int(ex.store.get_events(ex.graph_id)["last_event_id"])


def observe(ex: Exploration) -> tuple[int, pd.DataFrame, pd.DataFrame, str]:
    return last_event(ex), ex.nodes(), ex.edges(), ex.status


@pytest.fixture
def ex(backend: Backend) -> Any:
    llm = SimulatedLLM(seed=4, link_rate=0.6, failure_rate=0.15)
    with Exploration.create("Why do cities grow?", intensity="explore", llm=llm, path=backend.lasting) as ex:
        yield ex


def test_at_every_observed_point_equals_what_nodes_and_edges_gave(ex: Exploration) -> None:
    seen = [observe(ex)]
    for _ in range(4):
        ex.step(2)
        seen.append(observe(ex))
    ex.run(max_workers=4, progress=False)  # threads
    seen.append(observe(ex))
    ex.harvest(finish=True)
    seen.append(observe(ex))
    assert seen[-1][3] == "completed" and len(seen[-1][1]) > 20
    assert (seen[-1][2]["edge_type"] != "parent_child").any(), "the run made no links to replay"
    for event, nodes, edges, status in seen:
        state = ex.at(event)
        assert isinstance(state, GraphAt) and state.event_id == event and state.status == status
        assert repr(state).startswith(
            f"<GraphAt {ex.graph_id} at event {event}: {status}, {len(nodes)} nodes"
        )
        assert_frame_equal(state.nodes(), nodes)
        assert_frame_equal(state.edges(), edges)


def test_every_event_of_a_run_replays_and_the_graph_only_grows(ex: Exploration) -> None:
    ex.run(max_workers=3, progress=False)
    events = ex.events()["event_id"].tolist()
    sizes = [len(ex.at(int(e)).nodes()) for e in events]
    assert sizes == sorted(sizes) and sizes[0] == 1 and sizes[-1] == len(ex.nodes())


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (-1, "from 1"),
        (0, "from 1"),
        (True, "not True"),
        ("3", "not '3'"),
        (2.0, "not 2.0"),
        (None, "not None"),
        (10**6, "past the last event"),
    ],
)
def test_at_refuses_a_bad_event_id(ex: Exploration, bad: object, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        ex.at(bad)  # type: ignore[arg-type]


def test_at_refuses_another_graphs_event(backend: Backend) -> None:
    path = backend.lasting
    with Exploration.create("First?", intensity="pulse", llm=SimulatedLLM(), path=path) as first:
        with Exploration.create("Second?", intensity="pulse", llm=SimulatedLLM(), path=path) as second:
            second.run(progress=False)
            first.run(progress=False)
            theirs = int(second.events()["event_id"].iloc[-1])
            with pytest.raises(InvalidInputError, match=f"graph {second.graph_id}'s, not one of graph"):
                first.at(theirs)


def test_fork_holds_the_state_at_the_event_and_neither_graph_moves_the_other(backend: Backend) -> None:
    path = backend.lasting
    with Exploration.create(
        "Why do cities grow?", intensity="explore", llm=SimulatedLLM(seed=2), path=path
    ) as ex:
        ex.step(4)
        at, nodes, edges, _ = observe(ex)
        source_rows = table_rows(ex)
        fork = ex.fork(at=at)
        try:
            assert table_rows(ex) == source_rows, "the fork changed its source"
            same_as(fork, nodes, edges)
            assert fork.lineage()[["graph_id", "forked_from", "forked_at"]].values.tolist() == [
                [ex.graph_id, None, pd.NA],
                [fork.graph_id, ex.graph_id, at],
            ]
            ex.run(max_workers=3, progress=False)  # later work on the source
            same_as(fork, nodes, edges)
            fork_rows, source_done = table_rows(fork), table_rows(ex)
            fork.run(max_workers=3, progress=False)  # and on the fork
            assert table_rows(ex) == source_done
            assert table_rows(fork) != fork_rows  # the fork worked on
            family = Exploration.family(path)
            assert family["graph_id"].tolist() == [ex.graph_id, fork.graph_id]
            assert list(family.columns) == [
                "graph_id",
                "forked_from",
                "forked_at",
                "seed",
                "status",
                "created",
            ]
        finally:
            fork.close()


def test_fork_accepts_a_head(ex: Exploration) -> None:
    ex.step(3)
    at = last_event(ex)
    head = pd.DataFrame([{"turn": 1, "head_event": at}]).iloc[0]  # a heads() row
    for where in ({"head_event": at}, head):
        fork = ex.fork(at=where)
        try:
            assert fork.lineage()["forked_at"].iloc[-1] == at
        finally:
            fork.close()


@pytest.mark.parametrize("bad", ["12", 1.5, True, {"turn": 2}, [3]])
def test_fork_refuses_a_bad_point_and_creates_nothing(ex: Exploration, backend: Backend, bad: object) -> None:
    before = Exploration.graphs(backend.lasting)
    with pytest.raises(InvalidInputError, match="at must be an event id"):
        ex.fork(at=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="past the last event"):
        ex.fork(at=10**9)
    assert_frame_equal(Exploration.graphs(backend.lasting), before)


def test_a_fork_of_a_fork_is_in_the_family_and_in_memory_works(backend: Backend, tmp_path: Path) -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), path=backend.target) as ex:
        ex.run(progress=False)
        child = ex.fork(at=last_event(ex))
        grandchild = child.fork(at=last_event(child))
        lineage = grandchild.lineage()
        assert lineage["graph_id"].tolist() == [ex.graph_id, child.graph_id, grandchild.graph_id]
        assert lineage["forked_from"].tolist() == [None, ex.graph_id, child.graph_id]
        same_as(grandchild, ex.nodes(), ex.edges())
    with pytest.raises(InvalidInputError, match="no such file"):
        Exploration.family(tmp_path / "none.duckdb")


# -- helpers ---------------------------------------------------------------------------


def same_as(fork: Exploration, nodes: pd.DataFrame, edges: pd.DataFrame) -> None:
    """The fork's frames equal the source's at the fork point, ids mapped, claims open again."""
    mine = fork.nodes()
    ids = dict(zip(nodes["node_id"], mine["node_id"], strict=True))
    expected = nodes.copy()
    for column in ("node_id", "parent_id", "branch_id", "inherited_from"):
        expected[column] = expected[column].map(lambda v: ids.get(v, v) if isinstance(v, str) else v)
    claimed = expected["status"] == "claimed"
    expected.loc[claimed, "status"] = "open"
    expected["claimed_at"] = expected["claimed_at"].where(~claimed, pd.NaT)
    for column in [c for c in expected.columns if c.startswith("meta_")]:  # ids inside metadata
        expected[column] = expected[column].map(lambda v: remapped(v, ids))
    assert_frame_equal(mine, expected)
    theirs = edges.copy()
    for column in ("from_node", "to_node"):
        theirs[column] = theirs[column].map(ids)
    assert_frame_equal(fork.edges(), theirs)


def remapped(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [remapped(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: remapped(v, ids) for k, v in value.items()}
    return value


def table_rows(ex: Exploration) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the graph in every table the store keeps for it."""
    db = ex.store._db  # noqa: SLF001 - the test reads the tables as they are
    tables = (
        "graphs",
        "nodes",
        "edges",
        "events",
        "llm_calls",
        "node_history",
        "graph_history",
        "history_baselines",
        "turns",
        "depth_allowances",
    )
    return {  # in Python's order: PostgreSQL has no ORDER BY ALL
        table: sorted(db.fetchall(f"SELECT * FROM {table} WHERE graph_id = ?", [ex.graph_id]), key=repr)
        for table in tables
    }


@pytest.mark.duckdb_only  # a DuckDB file from before history
def test_an_older_file_gets_a_baseline_and_says_where_history_starts(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(progress=False)
        graph_id, last, nodes, edges = ex.graph_id, last_event(ex), ex.nodes(), ex.edges()
    with duckdb.connect(str(path)) as con:  # the file as a version without history left it
        for table in ("node_history", "graph_history", "history_baselines", "lineage", "fork_nodes"):
            con.execute(f"DROP TABLE {table}")
    with GraphStore(path, read_only=True) as reader, pytest.raises(StateError, match="has no history yet"):
        reader.get_state_at(graph_id, last)
    with Exploration.open(path, graph_id, llm=SimulatedLLM()) as ex:
        assert_frame_equal(ex.at(last).nodes(), nodes)
        assert_frame_equal(ex.at(last).edges(), edges)
        with pytest.raises(StateError, match=f"history starts at event {last}"):
            ex.at(last - 1)
        with pytest.raises(NotFoundError):
            ex.store.get_state_at("g-none", last)


def test_at_and_fork_take_a_head_row_or_a_dataframe_cell(ex: Exploration) -> None:
    """What a notebook holds: a heads() row, or an event id straight from a DataFrame (a numpy integer)."""
    ex.run(progress=False)
    ex.harvest(finish=True)  # the fixture's model fails now and then: a run may stop paused
    head = ex.heads().iloc[0]
    cell = ex.events()["event_id"].max()  # numpy.int64
    assert not isinstance(cell, int)
    assert ex.at(head).event_id == ex.at(cell).event_id == int(cell) == int(head["head_event"])
    fork = ex.fork(at=cell)
    try:
        assert fork.lineage()["forked_at"].iloc[-1] == int(cell)
    finally:
        fork.close()
    with pytest.raises(InvalidInputError, match="event_id must be an event id"):
        ex.at({"turn": 1})  # type: ignore[arg-type]


@pytest.mark.duckdb_only  # a DuckDB file's read-only open beside another reader
def test_family_reads_a_file_read_only_as_graphs_does(tmp_path: Path) -> None:
    path = tmp_path / "family.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.fork(at=last_event(ex)).close()
        expected = Exploration.family(path)
    before = path.read_bytes()
    with GraphStore(path, read_only=True):  # another reader holds it: only read-only opens join
        assert_frame_equal(Exploration.family(path, read_only=True), expected)
    assert path.read_bytes() == before
    with pytest.raises(InvalidInputError, match="read_only must be"):
        Exploration.family(path, read_only="yes")  # type: ignore[arg-type]


def test_a_heartbeat_after_a_claim_keeps_the_links_and_calls_of_that_event(ex: Exploration) -> None:
    """A lease renewal rewrites the claimed node's image at the last event; that event's watermark stays."""
    ex.step(3)
    ex.store.claim_work(ex.graph_id, "w1")
    at = last_event(ex)
    edges, calls = ex.edges(), len(ex.llm_calls())
    assert ex.store.heartbeat(ex.store.holder["holder_id"])["renewed"] == 1
    assert_frame_equal(ex.at(at).edges(), edges)
    fork = ex.fork(at=at)
    try:
        assert len(fork.llm_calls()) == calls > 0
    finally:
        fork.close()
