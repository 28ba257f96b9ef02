"""``fractal-nb seed`` and a worker on an unseeded graph (issue 42, the shell as a newcomer meets it).

A graph made over MCP has only its root; workers never seed, so a worker there
used to claim nothing and exit 0 after a minute. ``seed`` writes the root's plan
and stops; a worker on a root alone says so and exits 1, changing nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_ERROR, EXIT_MODEL, EXIT_OK
from fractal_nb.cli.main import main
from fractal_nb.store import open_store
from tests.local_port import free_port


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def made_over_mcp(path: str) -> str:
    """A graph as ``fractal_create_graph`` makes it: its root, nothing else."""
    with open_store(path) as store:
        return str(store.create_graph("Why do rivers flood?", "pulse", "autonomous")["graph_id"])


def questions(path: str, graph_id: str) -> list[tuple[int, str]]:
    with Exploration.open(path, graph_id, llm=SimulatedLLM()) as ex:
        rows = ex.nodes().query("node_type == 'question'")
        return sorted(zip(rows["depth"], rows["status"], strict=True))


def test_seed_then_workers_elsewhere_finish_the_graph(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["seed", "Why do cities grow?", "--db", "s.duckdb", "--intensity", "pulse"]) == EXIT_OK
    out = capsys.readouterr().out
    (graph_id,) = Exploration.graphs("s.duckdb")["graph_id"]
    assert f"{graph_id} in s.duckdb is seeded: " in out and "no worker ran" in out
    assert f"fractal-nb worker --db s.duckdb --graph-id {graph_id}" in out
    seeded = questions("s.duckdb", graph_id)
    assert seeded[0] == (0, "answered") and len(seeded) >= 4, "the root's plan and its questions, no more"
    assert {status for depth, status in seeded if depth == 1} == {"open"}
    # Seeding again changes nothing and says so.
    assert main(["seed", "--db", "s.duckdb"]) == EXIT_OK
    assert "is seeded already" in capsys.readouterr().out
    assert questions("s.duckdb", graph_id) == seeded
    # The command it printed works the graph to its end.
    assert main(["worker", "--db", "s.duckdb", "--graph-id", graph_id, "--threads", "2"]) == EXIT_OK
    assert "exit: graph_done" in capsys.readouterr().out
    assert {status for depth, status in questions("s.duckdb", graph_id) if depth >= 1} <= {
        "synthesized",
        "saturated",
    }


def test_a_worker_on_a_graph_with_only_its_root_says_so_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    graph_id = made_over_mcp("m.duckdb")
    before = questions("m.duckdb", graph_id)
    assert main(["worker", "--db", "m.duckdb", "--graph-id", graph_id]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert f"graph {graph_id} holds only its root: nothing is seeded for workers to claim" in err
    assert f"fractal-nb seed --db FILE --graph-id {graph_id}" in err
    assert questions("m.duckdb", graph_id) == before == [(0, "open")]
    # Seeded, the same worker command works it.
    assert main(["seed", "--db", "m.duckdb", "--graph-id", graph_id]) == EXIT_OK
    assert main(["worker", "--db", "m.duckdb", "--graph-id", graph_id]) == EXIT_OK


def test_a_seed_the_model_fails_leaves_the_root_open_and_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    graph_id = made_over_mcp("f.duckdb")
    down = f"http://127.0.0.1:{free_port()}/v1"
    options = ["--llm", "openai", "--model", "m", "--base-url", down]
    assert main(["seed", "--db", "f.duckdb", *options]) == EXIT_MODEL
    out, err = capsys.readouterr()
    assert "the seed phase failed" in err and f"fractal-nb seed --db f.duckdb --graph-id {graph_id}" in out
    assert questions("f.duckdb", graph_id) == [(0, "open")]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["seed", "Why?", "--db", "x.duckdb", "--graph-id", "g-1"], "SEED makes a new graph"),
        (["seed", "--db", "missing.duckdb"], "missing.duckdb"),
        (["seed", "   ", "--db", "x.duckdb"], "SEED"),
        (["seed", "Why?", "--db", "x.duckdb", "--checkpoint", "depth:9"], "depth"),
    ],
)
def test_bad_seed_options_are_usage_errors_that_write_nothing(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and said in capsys.readouterr().err
    assert not Path("x.duckdb").exists() and not Path("missing.duckdb").exists()
