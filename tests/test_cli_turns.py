"""``fractal-nb heads | turns`` and ``--at EVENT`` (tree, edges, export): read-only, on a fixture file.

docs/architecture/facade.md, "Inspecting a file": each command asks the read-only facade; ``--at`` hands
tree, edges and export the state at that event (``ex.at``). Usage errors exit 2 before the file is
opened; an event outside the graph's history exits 1 with the store's message.

Covers: cli/inspection.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from fractal_nb.cli.main import main
from fractal_nb.exploration.graph_sql import TABLES, GraphRows
from tests.test_cli import console_script
from tests.test_cli_inspect import _in_tmp, digest, opened, run  # noqa: F401 - _in_tmp: autouse

SEED = "Why do cities grow?"
FOLLOW_UP = "What stops a city from growing?"


@pytest.fixture(scope="module")
def turns_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two heads (the seed, a follow-up) and a third turn open (a note, not yet harvested)."""
    path = tmp_path_factory.mktemp("turns") / "turns.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=4), path=path) as ex:
        assert ex.run(progress=False) == "all_complete"
        ex.harvest()
        ex.ask(FOLLOW_UP)
        assert ex.run(progress=False) == "all_complete"
        ex.harvest()
        seed_question = ex.nodes().query("node_type == 'question' and depth == 1")["node_id"].iloc[0]
        ex.note(str(seed_question), "The harbour silted up in 1700.")
    return path


def first_head(path: Path) -> int:
    with opened(path) as ex:
        return int(ex.heads()["head_event"].iloc[0])


def test_heads_prints_one_row_per_head_the_current_last(
    turns_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(turns_file)
    with opened(turns_file) as ex:
        heads = ex.heads()
    code, out, _ = run(["heads", str(turns_file)], capsys)
    assert code == EXIT_OK
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["turn", "head_event", "kind", "status"]
    assert len(lines) == 1 + len(heads) == 3
    assert lines[2].split()[:4] == ["2", str(heads["head_event"].iloc[1]), "ask", "completed"]
    assert FOLLOW_UP[:20] in lines[2]
    code, out, _ = run(["heads", str(turns_file), "--json"], capsys)
    assert code == EXIT_OK
    listed = json.loads(out)["heads"]
    assert [(h["turn"], h["head_event"], h["kind"]) for h in listed] == list(
        heads[["turn", "head_event", "kind"]].itertuples(index=False, name=None)
    )
    assert listed[-1]["root_synthesis"] == heads["root_synthesis"].iloc[-1] and listed[-1]["root_synthesis"]
    assert digest(turns_file) == before, "read-only"


def test_turns_prints_every_turn_the_open_one_last(
    turns_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["turns", str(turns_file)], capsys)
    assert code == EXIT_OK
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["turn", "kind", "asked"] and len(lines) == 4
    assert lines[1].split()[:2] == ["1", "seed"] and lines[3].split()[:2] == ["3", "note"]
    code, out, _ = run(["turns", str(turns_file), "--json"], capsys)
    turns = json.loads(out)["turns"]
    assert [(t["turn"], t["kind"]) for t in turns] == [(1, "seed"), (2, "ask"), (3, "note")]
    assert turns[-1]["head_event"] is None and isinstance(turns[1]["head_event"], int)
    assert lines[2].split()[-3:] == [str(turns[1]["head_event"]), "completed", str(turns[1]["tokens"])]
    assert "ask(question='What stops a city from growing?')" == turns[1]["asked"]


def test_tree_and_edges_at_a_head_show_the_graph_as_it_was(
    turns_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = first_head(turns_file)
    with opened(turns_file) as ex:
        then = ex.at(event)
        questions_then = then.nodes().query("node_type == 'question'")
        edges_then = then.edges()
        questions_now = ex.nodes().query("node_type == 'question'")
    assert len(questions_now) > len(questions_then), "the follow-up came later"
    code, out, _ = run(["tree", str(turns_file), "--at", str(event)], capsys)
    assert code == EXIT_OK
    lines = out.rstrip("\n").splitlines()
    assert [line.rsplit("(", 1)[1].rstrip(")") for line in lines] == list(questions_then["node_id"])
    assert FOLLOW_UP not in out and "[synthesized] " + SEED in out
    code, out, _ = run(["tree", str(turns_file), "--at", str(event), "--json"], capsys)
    document = json.loads(out)
    assert document["event_id"] == event and document["tree"][0]["text"] == SEED
    code, out, _ = run(["edges", str(turns_file), "--at", str(event), "--json"], capsys)
    assert code == EXIT_OK
    listed = json.loads(out)
    assert listed["event_id"] == event
    assert [(e["from_node"], e["to_node"], e["edge_type"]) for e in listed["edges"]] == list(
        edges_then[["from_node", "to_node", "edge_type"]].itertuples(index=False, name=None)
    )
    code, now, _ = run(["edges", str(turns_file), "--json"], capsys)
    assert len(json.loads(now)["edges"]) > len(listed["edges"])


@pytest.mark.parametrize("table", ["nodes", "edges", "gaps"])
def test_export_at_writes_a_table_as_it_was(
    turns_file: Path, tmp_path: Path, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    event = first_head(turns_file)
    out = tmp_path / f"{table}.parquet"
    code, printed, _ = run(
        ["export", str(turns_file), "--at", str(event), "--table", table, "--to", str(out), "--json"], capsys
    )
    assert code == EXIT_OK
    assert json.loads(printed)["event_id"] == event
    written = pd.read_parquet(out)
    with opened(turns_file) as ex:
        now = TABLES[table](GraphRows(ex))
        then = ex.at(event)
    if table == "nodes":
        assert list(written["node_id"]) == list(then.nodes()["node_id"])
        assert list(written.columns) == list(now.columns), "the same table as export without --at"
        assert len(now) > len(written)
    elif table == "edges":
        assert list(written["to_node"]) == list(then.edges()["to_node"])
    else:
        assert set(written["node_id"]) <= set(then.nodes()["node_id"])


@pytest.mark.parametrize(
    "argv",
    [
        ["tree", "{file}", "--at", "-1"],
        ["tree", "{file}", "--at", "0"],
        ["edges", "{file}", "--at", "seven"],
        ["edges", "{file}", "--at", "1.5"],
        ["turns"],
        ["export", "{file}", "--at", "3", "--to", "out.md"],
        ["export", "{file}", "--at", "3", "--to", "out.html"],
        ["export", "{file}", "--at", "3", "--table", "events", "--to", "out.parquet"],
        ["heads", "missing.duckdb"],
    ],
)
def test_usage_errors_exit_2_before_the_file_is_opened(
    turns_file: Path, tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(turns_file.read_bytes())
    before = digest(copy)
    with pytest.raises(SystemExit) as info:
        main([arg.format(file=copy) for arg in argv])
    assert info.value.code == EXIT_USAGE
    assert "usage: fractal-nb" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.duckdb"]  # no WAL, no output
    assert digest(copy) == before


@pytest.mark.parametrize("command", ["tree", "edges", "export"])
def test_an_event_outside_the_history_exits_1_with_the_stores_message(
    turns_file: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(turns_file)
    extra = ["--to", str(tmp_path / "late.parquet")] if command == "export" else []
    code, out, err = run([command, str(turns_file), "--at", "1000000", *extra], capsys)
    assert code == EXIT_ERROR and out == ""
    assert "fractal-nb: error: event 1000000 is past the last event of graph" in err
    assert not (tmp_path / "late.parquet").exists()
    assert digest(turns_file) == before


def test_the_console_script_lists_heads_and_the_tree_at_one(turns_file: Path, tmp_path: Path) -> None:
    event = first_head(turns_file)
    heads = subprocess.run(
        [*console_script(), "heads", str(turns_file), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert heads.returncode == 0, heads.stderr
    assert [h["turn"] for h in json.loads(heads.stdout)["heads"]] == [1, 2]
    tree = subprocess.run(
        [*console_script(), "tree", str(turns_file), "--at", str(event)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tree.returncode == 0, tree.stderr
    assert SEED in tree.stdout and FOLLOW_UP not in tree.stdout


def test_events_heads_and_turns_at_an_event_show_the_rows_written_by_then(
    turns_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    at = first_head(turns_file)
    before = digest(turns_file)
    code, out, _ = run(["events", str(turns_file), "--at", str(at), "--json"], capsys)
    assert code == EXIT_OK
    events = json.loads(out)["events"]
    assert max(e["event_id"] for e in events) == at
    code, out, _ = run(["heads", str(turns_file), "--at", str(at), "--json"], capsys)
    assert code == EXIT_OK and [h["turn"] for h in json.loads(out)["heads"]] == [1]
    with opened(turns_file) as ex:
        asked_at = int(ex.turns()["started_event"].iloc[1])
    code, out, _ = run(["turns", str(turns_file), "--at", str(asked_at), "--json"], capsys)
    turns = json.loads(out)["turns"]
    assert code == EXIT_OK and [t["turn"] for t in turns] == [1, 2]
    assert turns[1]["head_event"] is None, "turn 2's head came after that event"
    code, _, err = run(["heads", str(turns_file), "--at", "999999"], capsys)
    assert code == EXIT_ERROR and "999999" in err
    assert digest(turns_file) == before
