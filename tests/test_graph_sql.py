"""``Exploration.sql``: one SELECT over this graph's tables, read-only, on a database of its own.

Covers: llm/read_only.py, store/frame_sql.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
from fractal_nb.errors import StateError
from fractal_nb.exploration.graph_sql import TABLES


@pytest.fixture(scope="module")
def two_graphs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A file of two explorations: the first harvested with a pruned branch, the second only created."""
    path = tmp_path_factory.mktemp("sql") / "two.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.step(2)
        seeds = ex.nodes().query("node_type == 'question' and depth == 1 and status == 'open'")
        ex.prune(str(seeds["node_id"].iloc[0]))
        ex.run(progress=False)
        ex.harvest()
        first = ex.graph_id
    with Exploration.create("Why do rivers meander?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        second = ex.graph_id
    return path, first, second


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_table_holds_this_graphs_rows_as_the_facade_lists_them(
    two_graphs: tuple[Path, str, str],
) -> None:
    path, first, _ = two_graphs
    with Exploration.open(path, first, llm=SimulatedLLM(), read_only=True) as ex:
        assert (
            ex.sql("SELECT node_id FROM nodes ORDER BY seq")["node_id"].tolist()
            == ex.nodes()["node_id"].tolist()
        )
        assert len(ex.sql("SELECT * FROM edges")) == len(ex.edges()) > 0
        assert ex.sql("SELECT event_id FROM events")["event_id"].tolist() == ex.events()["event_id"].tolist()
        assert (
            ex.sql("SELECT call_id FROM llm_calls")["call_id"].tolist() == ex.llm_calls()["call_id"].tolist()
        )
        gaps = ex.sql("SELECT * FROM gaps")
        pd.testing.assert_frame_equal(gaps, ex.gaps(), check_dtype=False)
        assert "pruned" in set(gaps["kind"])
        # metadata and payload are JSON: the synthesis reads with ->>
        syntheses = ex.sql(
            "SELECT node_id, metadata->>'synthesis' AS synthesis FROM nodes "
            "WHERE status = 'synthesized' ORDER BY depth, seq"
        )
        assert dict(zip(syntheses["node_id"], syntheses["synthesis"], strict=True)) == dict(
            zip(ex.syntheses()["node_id"], ex.syntheses()["synthesis"], strict=True)
        )
        kinds = ex.sql("SELECT payload->>'seed' AS seed FROM events WHERE kind = 'graph_created'")
        assert kinds["seed"].tolist() == ["Why do cities grow?"]
        assert str(ex.sql("SELECT created_at FROM nodes LIMIT 1")["created_at"].dtype).startswith(
            "datetime64"
        )


def test_another_graph_of_the_file_is_never_read(two_graphs: tuple[Path, str, str]) -> None:
    path, first, second = two_graphs
    with Exploration.open(path, second, llm=SimulatedLLM(), read_only=True) as ex:
        assert ex.sql("SELECT DISTINCT graph_id FROM nodes")["graph_id"].tolist() == [second]
        with Exploration.open(path, first, llm=SimulatedLLM(), read_only=True) as other:
            theirs = other.nodes()["node_id"].tolist()
        assert len(ex.sql("SELECT * FROM nodes WHERE node_id IN (SELECT unnest(?))", [theirs])) == 0
        assert ex.sql("SELECT count(*) AS n FROM events")["n"].iloc[0] == len(ex.events())
        assert len(ex.sql("SELECT * FROM llm_calls")) == 0


REFUSED = [
    "INSERT INTO nodes (node_id) VALUES ('n-x')",
    "UPDATE nodes SET status = 'open'",
    "DELETE FROM events",
    "CREATE TABLE mine AS SELECT * FROM nodes",
    "DROP VIEW nodes",
    "ATTACH '{path}' AS store",
    "ATTACH '{path}' AS store (READ_ONLY)",
    "COPY nodes TO '{out}'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "PRAGMA database_list",
    "SELECT 1; SELECT 2",
    "SELECT * FROM read_csv('{csv}')",
    "SELECT * FROM read_parquet('{out}')",
    "SELECT * FROM '{csv}'",
    "SELECT * FROM read_text('{path}')",
    "SELECT * FROM secret_frame",
    "SELECT * FROM not_a_table",
    "SELEC oops",
    "",
]


@pytest.mark.parametrize("query", REFUSED)
def test_writes_files_extensions_and_other_databases_are_refused_the_file_unchanged(
    two_graphs: tuple[Path, str, str], tmp_path: Path, query: str
) -> None:
    path, first, _ = two_graphs
    csv = tmp_path / "local.csv"
    csv.write_text("a,b\n1,2\n")
    secret_frame = pd.DataFrame({"a": [1]})  # a Python variable is no table
    before = digest(path)
    with Exploration.open(path, first, llm=SimulatedLLM(), read_only=True) as ex:
        nodes = ex.nodes()
        with pytest.raises(InvalidInputError) as info:
            ex.sql(query.format(path=path, out=tmp_path / "out.parquet", csv=csv))
        message = str(info.value)
        assert any(
            word in message
            for word in ("only reads", "one statement", "one SELECT", "failed", "does not parse", "files")
        )
        pd.testing.assert_frame_equal(ex.nodes(), nodes)
    assert digest(path) == before
    assert not (tmp_path / "out.parquet").exists()
    assert len(secret_frame) == 1


def test_params_fill_placeholders_and_bad_ones_are_refused(two_graphs: tuple[Path, str, str]) -> None:
    path, first, _ = two_graphs
    with Exploration.open(path, first, llm=SimulatedLLM(), read_only=True) as ex:
        assert ex.sql("SELECT text FROM nodes WHERE depth = ? AND node_type = 'question'", [0])[
            "text"
        ].tolist() == ["Why do cities grow?"]
        assert ex.sql("SELECT text FROM nodes WHERE depth = $d AND node_type = 'question'", {"d": 0})[
            "text"
        ].tolist() == ["Why do cities grow?"]
        for bad in ("0", 0, {1, 2}):
            with pytest.raises(InvalidInputError, match="params must be"):
                ex.sql("SELECT 1", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="query must be"):
            ex.sql(None)  # type: ignore[arg-type]


def test_empty_tables_keep_their_columns() -> None:
    with Exploration.create("Why is the sky blue?", intensity="pulse", llm=SimulatedLLM()) as ex:
        assert ex.sql("SELECT role, prompt_tokens FROM llm_calls").empty
        assert ex.sql("SELECT from_node, metadata FROM edges").empty
        assert ex.sql("SELECT kind, detail FROM gaps").to_dict("records") == ex.gaps()[
            ["kind", "detail"]
        ].to_dict("records")
        assert ex.sql("SELECT count(*) AS n FROM nodes")["n"].iloc[0] == 1


def test_the_tables_are_the_documented_ones() -> None:
    assert list(TABLES) == ["nodes", "edges", "events", "llm_calls", "gaps", "turns", "heads"]
    readme = (Path(__file__).parent.parent / "docs" / "notebook.md").read_text()
    for name in TABLES:
        assert f"`{name}`" in readme


def test_a_read_only_exploration_refuses_every_write_before_the_model(
    two_graphs: tuple[Path, str, str],
) -> None:
    path, first, second = two_graphs
    before = digest(path)
    with Exploration.open(path, second, llm=SimulatedLLM(), read_only=True) as ex:
        root = ex.nodes()["node_id"].iloc[0]
        for call in (
            lambda: ex.run(progress=False),
            lambda: ex.step(),
            lambda: ex.approve(),
            lambda: ex.prune(root),
            lambda: ex.harvest(finish=True),
        ):
            with pytest.raises(StateError, match="read_only=True"):
                call()
        assert ex.sql("SELECT count(*) AS n FROM llm_calls")["n"].iloc[0] == 0
        assert ex.status == "active"
    with Exploration.open(path, first, llm=SimulatedLLM(), read_only=True) as ex:
        assert ex.harvest().status == "completed"  # a completed graph is read back
    assert digest(path) == before
    with pytest.raises(InvalidInputError, match="read_only must be"):
        Exploration.open(path, first, llm=SimulatedLLM(), read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="read_only must be"):
        Exploration.graphs(path, read_only=1)  # type: ignore[arg-type]
    assert Exploration.graphs(path, read_only=True)["graph_id"].tolist() == [first, second]


def test_a_file_is_read_without_a_model_and_a_run_says_to_pass_one(
    two_graphs: tuple[Path, str, str],
) -> None:
    """Reading needs no model (issue 38: open(path, read_only=True) asked for llm= all the same)."""
    path, first, second = two_graphs
    before = digest(path)
    with Exploration.open(path, first, read_only=True) as ex:
        assert ex.harvest().status == "completed" and len(ex.nodes()) > 1
        assert ex.sql("SELECT count(*) AS n FROM llm_calls")["n"].iloc[0] > 0
    with Exploration.open(path, second, read_only=True) as ex:
        for call in (lambda: ex.run(progress=False), lambda: ex.step(), lambda: ex.ask("What about ports?")):
            with pytest.raises(StateError, match=r"read_only=True.*Exploration\.open\(path, llm=\.\.\.\)"):
                call()
        with pytest.raises(StateError, match=r"without a model.*Exploration\.open\(path, llm=\.\.\.\)"):
            ex.llm.complete([], BaseModel)  # never asked by the facade; refuses if it is
        assert repr(ex.llm) == "ReadOnlyLLM()"
    # Opening to write still needs the model, and says so; the file is as it was.
    with pytest.raises(InvalidInputError, match=r"llm is needed.*read_only=True reads it without"):
        Exploration.open(path, second)
    assert digest(path) == before


def test_columns_keep_the_store_types_whatever_the_rows_hold() -> None:
    """A nullable integer stays an integer and an all-None column keeps its type (not DOUBLE or "NULL")."""
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM()) as ex:
        ex.run(progress=False)
        ex.harvest()
        types = (
            "typeof(superseded_turn) AS turn, typeof(inherited_from) AS inherited, "
            "typeof(branch_id) AS branch"
        )
        before = ex.sql(f"SELECT DISTINCT {types} FROM nodes").to_dict("records")
        ex.redecompose(str(ex.nodes().query("depth == 1")["node_id"].iloc[0]))
        after = ex.sql(f"SELECT DISTINCT {types} FROM nodes").to_dict("records")
        superseded = ex.sql("SELECT superseded_turn FROM nodes WHERE superseded_turn IS NOT NULL")
        calls = ex.sql("SELECT DISTINCT typeof(error) AS error FROM llm_calls").to_dict("records")
    expected = [{"turn": "BIGINT", "inherited": "VARCHAR", "branch": "VARCHAR"}]
    assert before == expected
    assert after == expected
    assert superseded["superseded_turn"].tolist() == [2]
    assert str(superseded["superseded_turn"].dtype) == "int64"
    assert calls == [{"error": "VARCHAR"}]


def records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """Rows with None for every missing value (NaN in SQL's float columns, None in the facade's)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")  # type: ignore[return-value]


def test_turns_and_heads_are_tables_as_the_facade_lists_them() -> None:
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM()) as ex:
        ex.run(progress=False)
        ex.harvest()
        ex.ask("What about the rivers?")  # turn 2 open: no head yet
        turns = ex.sql("SELECT * FROM turns ORDER BY turn")
        heads = ex.sql("SELECT * FROM heads ORDER BY turn")
        assert records(turns) == records(ex.turns())
        assert records(heads) == records(ex.heads())
        types = ex.sql(
            "SELECT typeof(head_event) AS head, typeof(cost) AS cost FROM turns WHERE turn = 2"
        ).to_dict("records")
        assert types == [{"head": "BIGINT", "cost": "DOUBLE"}]
        per_turn = ex.sql(
            "SELECT t.turn, count(n.node_id) AS asked FROM turns t "
            "LEFT JOIN nodes n ON (n.metadata->>'turn')::INT = t.turn GROUP BY ALL ORDER BY ALL"
        )
        assert per_turn.to_dict("records") == [{"turn": 1, "asked": 0}, {"turn": 2, "asked": 1}]


def test_table_names_are_case_blind_as_sql_is() -> None:
    from fractal_nb import Exploration, SimulatedLLM

    ex = Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM())
    assert ex.sql("SELECT count(*) AS n FROM Nodes")["n"].tolist() == [1]
    assert ex.sql("SELECT count(*) AS n FROM NODES n JOIN Events e USING (node_id)")["n"].iloc[0] >= 1
