"""``fractal-nb report | events | edges | tree | export``: read-only commands on a fixture file.

Covers: cli/inspection.py, cli/inspection_help.py, cli/parser.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from fractal_nb.cli.inspection import COMMANDS
from fractal_nb.cli.inspection_help import INSPECTION_HELP
from fractal_nb.cli.main import main
from fractal_nb.cli.parser import EXPORT_TABLES
from fractal_nb.exploration.graph_sql import TABLES
from tests.test_cli import console_script

SEED = "Why do cities grow?"


@pytest.fixture(scope="module")
def fixture_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One harvested exploration with a pruned seed question."""
    path = tmp_path_factory.mktemp("inspect") / "one.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.step(2)
        seeds = ex.nodes().query("node_type == 'question' and depth == 1 and status == 'open'")
        ex.prune(str(seeds["node_id"].iloc[0]))
        ex.run(progress=False)
        ex.harvest()
    return path


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def opened(path: Path) -> Exploration:
    return Exploration.open(path, llm=SimulatedLLM(), read_only=True)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_report_prints_the_result_as_it_stands(
    fixture_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["report", str(fixture_file)], capsys)
    assert code == EXIT_OK
    with opened(fixture_file) as ex:
        assert out.strip() == ex.report().strip()
        expected = ex.preview().to_dict()
    assert out.startswith(f"### {SEED}") and "**Gaps**" in out
    code, out, _ = run(["report", str(fixture_file), "--json"], capsys)
    assert code == EXIT_OK
    document = json.loads(out)
    assert document["status"] == "completed" and document["seed"] == SEED
    assert document["gaps"] == expected["gaps"] and document["node_count"] == expected["node_count"]


def test_events_prints_the_log_and_since_cuts_it(
    fixture_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with opened(fixture_file) as ex:
        events = ex.events()
    code, out, _ = run(["events", str(fixture_file)], capsys)
    assert code == EXIT_OK
    lines = out.strip().splitlines()
    assert lines[0].split()[:5] == ["event_id", "created_at", "kind", "node_id", "actor"]
    assert len(lines) == 1 + len(events)
    assert "graph_created" in lines[1] and "graph_status_changed" in out
    middle = int(events["event_id"].iloc[len(events) // 2])
    code, out, _ = run(["events", str(fixture_file), "--since", str(middle), "--json"], capsys)
    assert code == EXIT_OK
    ids = [e["event_id"] for e in json.loads(out)["events"]]
    assert ids == [i for i in events["event_id"].tolist() if i > middle]
    code, out, _ = run(["events", str(fixture_file), "--since", str(events["event_id"].max())], capsys)
    assert code == EXIT_OK and out.strip() == "(no events)"


def test_edges_prints_every_edge(fixture_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with opened(fixture_file) as ex:
        edges = ex.edges()
    code, out, _ = run(["edges", str(fixture_file), "--json"], capsys)
    assert code == EXIT_OK
    listed = json.loads(out)["edges"]
    assert [(e["from_node"], e["to_node"], e["edge_type"]) for e in listed] == list(
        edges[["from_node", "to_node", "edge_type"]].itertuples(index=False, name=None)
    )
    code, out, _ = run(["edges", str(fixture_file)], capsys)
    assert code == EXIT_OK and len(out.strip().splitlines()) == 1 + len(edges)
    assert "parent_child" in out


def test_tree_indents_each_question_by_level_with_its_status(
    fixture_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with opened(fixture_file) as ex:
        questions = ex.nodes().query("node_type == 'question'")
    code, out, _ = run(["tree", str(fixture_file)], capsys)
    assert code == EXIT_OK
    lines = out.rstrip("\n").splitlines()
    assert len(lines) == len(questions)
    for line in lines:
        node_id = line.rsplit("(", 1)[1].rstrip(")")
        row = questions[questions["node_id"] == node_id].iloc[0]
        indent = len(line) - len(line.lstrip(" "))
        assert indent == 2 * row["depth"]
        assert line.lstrip().startswith(f"[{row['status']}")
    assert lines[0] == f"[synthesized] {SEED}  ({questions['node_id'].iloc[0]})"
    assert "[saturated: pruned]" in out
    code, out, _ = run(["tree", str(fixture_file), "--json"], capsys)
    document = json.loads(out)

    def count(items: list[dict[str, object]]) -> int:
        return sum(1 + count(item["children"]) for item in items)  # type: ignore[arg-type]

    assert count(document["tree"]) == len(questions) and document["tree"][0]["text"] == SEED


def test_export_writes_markdown_html_and_parquet(
    fixture_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(fixture_file)
    with opened(fixture_file) as ex:
        nodes, events, report = ex.nodes(), ex.events(), ex.report()
    code, out, _ = run(["export", str(fixture_file), "--to", "out.md"], capsys)
    assert code == EXIT_OK and out.startswith("wrote out.md")
    assert (tmp_path / "out.md").read_text().strip() == report.strip()
    code, out, _ = run(["export", str(fixture_file), "--to", "out.html", "--json"], capsys)
    assert code == EXIT_OK and json.loads(out)["format"] == "html"
    page = (tmp_path / "out.html").read_text()
    assert page.lower().startswith("<!doctype html>") and "Why do cities grow" in page
    code, out, _ = run(["export", str(fixture_file), "--to", "nodes.parquet"], capsys)
    assert code == EXIT_OK and "the nodes table as Parquet" in out
    table = pd.read_parquet(tmp_path / "nodes.parquet")
    assert table["node_id"].tolist() == nodes["node_id"].tolist()
    assert json.loads(table["metadata"].iloc[0])["synthesis"]  # metadata kept whole, as JSON text
    code, out, _ = run(["export", str(fixture_file), "--to", "events.parquet", "--table", "events"], capsys)
    assert code == EXIT_OK
    assert pd.read_parquet(tmp_path / "events.parquet")["event_id"].tolist() == events["event_id"].tolist()
    assert digest(fixture_file) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "missing.duckdb"],
        ["tree", "."],
        ["events", "{file}", "--since", "-1"],
        ["events", "{file}", "--since", "x"],
        ["edges", "{file}", "--graph-id", " "],
        ["export", "{file}", "--to", "out.txt"],
        ["export", "{file}", "--to", "{file}"],
        ["export", "{file}", "--to", "no/such/dir/out.md"],
        ["export", "{file}", "--to", "."],
        ["export", "{file}", "--to", "out.parquet", "--table", "secrets"],
        ["export", "{file}"],
        ["tree"],
    ],
)
def test_usage_errors_exit_2_before_the_file_is_opened(
    fixture_file: Path, tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(fixture_file.read_bytes())
    before = digest(copy)
    with pytest.raises(SystemExit) as info:
        main([arg.format(file=copy) for arg in argv])
    assert info.value.code == EXIT_USAGE
    assert "usage: fractal-nb" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.duckdb"]  # no WAL, no output
    assert digest(copy) == before


def test_a_file_of_several_graphs_needs_the_graph_id_listing_them(
    fixture_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.duckdb"
    path.write_bytes(fixture_file.read_bytes())
    with Exploration.create("Why do rivers meander?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        second = ex.graph_id
    first = str(Exploration.graphs(path)["graph_id"].iloc[0])
    before = digest(path)
    for command in INSPECTION_HELP:
        extra = {"export": ["--to", "x.md"], "payload": ["n-0000000000000000"]}.get(command, [])
        with pytest.raises(SystemExit) as info:
            main([command, str(path), *extra])
        assert info.value.code == EXIT_USAGE
        err = capsys.readouterr().err
        assert "holds 2 explorations; pass --graph-id" in err
        assert first in err and second in err and "Why do rivers meander?" in err
    code, out, _ = run(["tree", str(path), "--graph-id", second], capsys)
    assert code == EXIT_OK and out.strip().endswith(")") and "Why do rivers meander?" in out
    code, out, _ = run(["report", str(path), "--graph-id", second, "--json"], capsys)
    assert code == EXIT_OK and json.loads(out)["status"] == "active"  # an active graph: read, not harvested
    assert "the root is not synthesized yet" in json.loads(out)["summary"]
    code, _, err = run(["tree", str(path), "--graph-id", "g-nope"], capsys)
    assert code == EXIT_ERROR and "g-nope" in err
    assert digest(path) == before


HOLDER = textwrap.dedent("""
    import sys
    from fractal_nb import GraphStore
    store = GraphStore(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    store.close()
""")


def test_a_file_another_process_writes_exits_1_naming_it_and_the_way_round(
    fixture_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "held.duckdb"
    path.write_bytes(fixture_file.read_bytes())
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready", (
            child.stderr.read() if child.stderr else ""
        )
        for command in INSPECTION_HELP:
            extra = {"export": ["--to", "x.md"], "payload": ["n-0000000000000000"]}.get(command, [])
            code, out, err = run([command, str(path), *extra], capsys)
            assert code == EXIT_ERROR and out == ""
            assert err.startswith("fractal-nb: error:")
            assert f"is in use by process {child.pid}" in err
            for way in ("fractal-nb serve-mcp", "ex.serve_mcp()", "fractal_get_snapshot", "ex.sql"):
                assert way in err
        assert not (tmp_path / "x.md").exists()
    finally:
        child.communicate("\n", timeout=60)
    assert child.returncode == 0
    assert main(["tree", str(path)]) == EXIT_OK  # once the holder is gone


def test_the_console_script_prints_json(fixture_file: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*console_script(), "tree", str(fixture_file), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tree"][0]["text"] == SEED


def test_a_reader_that_leaves_early_gets_no_traceback(fixture_file: Path, tmp_path: Path) -> None:
    """``fractal-nb tree FILE | head -1``: the pipe closes before the tree is written."""
    with subprocess.Popen(
        [*console_script(), "tree", str(fixture_file)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # closed before the command has imported anything: its first write fails
        err = child.stderr.read()
        assert child.wait(timeout=300) == EXIT_OK
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_the_commands_and_tables_agree_with_their_modules() -> None:
    assert list(COMMANDS) == list(INSPECTION_HELP)
    assert EXPORT_TABLES == tuple(TABLES)
    readme = (Path(__file__).parent.parent / "docs" / "shell.md").read_text()
    for command in INSPECTION_HELP:
        assert f"fractal-nb {command} " in readme


def test_the_way_round_a_held_file_reads_the_same_nodes_through_its_mcp_server(
    fixture_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fractal_nb.mcp.remote import RemoteStore
    from tests.local_port import free_port, listening
    from tests.mcp.conftest import wait_until

    path = tmp_path / "served.duckdb"
    path.write_bytes(fixture_file.read_bytes())
    with opened(path) as ex:
        graph_id, nodes = ex.graph_id, ex.nodes()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fractal_nb.cli.main",
            "serve-mcp",
            "--db",
            str(path),
            "--http",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        started = server.stderr.readline()  # printed once the file is open, just before it listens
        assert "MCP over HTTP at" in started, started + server.stderr.read()
        wait_until(lambda: listening(port), "the server to listen", alive=lambda: server.poll() is None)
        code, out, err = run(["edges", str(path)], capsys)  # no read tool: the lock and the way round
        assert code == EXIT_ERROR and f"process {server.pid}" in err and "fractal_get_snapshot" in err
        code, out, err = run(
            ["tree", str(path)], capsys
        )  # read through the server (tests/test_cli_served.py)
        assert code == EXIT_OK and f"process {server.pid}, which serves it over MCP" in err
        with RemoteStore(f"http://127.0.0.1:{port}/mcp") as remote:
            snapshot = remote.get_snapshot(graph_id)
        assert [n["node_id"] for n in snapshot["nodes"]] == nodes["node_id"].tolist()
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_model_text_reaches_the_terminal_without_its_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fractal_nb import GraphStore

    path = tmp_path / "escapes.duckdb"
    with GraphStore(path) as store:
        graph = store.create_graph("Why \x1b[2Jdo cities grow?", "pulse", "autonomous")
        answer = store.add_node(graph["graph_id"], graph["root_node_id"], "answer", "Trade.")
        store.add_node(graph["graph_id"], answer["node_id"], "question", "Which \x1b]0;owned\x07trade?")
    for command in ("tree", "report", "events"):
        code, out, _ = run([command, str(path)], capsys)
        assert code == EXIT_OK and "\x1b" not in out and "\x07" not in out
    code, out, _ = run(["tree", str(path)], capsys)
    assert "Which \N{REPLACEMENT CHARACTER}]0;owned\N{REPLACEMENT CHARACTER}trade?" in out
    code, out, _ = run(["tree", str(path), "--json"], capsys)
    assert json.loads(out)["tree"][0]["children"][0]["text"] == "Which \x1b]0;owned\x07trade?"


@pytest.mark.parametrize("target", ["/proc/out.md", "/proc/out.html", "/proc/out.parquet"])
def test_an_export_that_cannot_be_written_exits_1_saying_so(
    fixture_file: Path, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["export", str(fixture_file), "--to", target], capsys)
    assert code == EXIT_ERROR and out == ""
    assert err.startswith("fractal-nb: error: cannot write") and target in err
