"""The ``fractal-nb`` command line: demo, run, errors, help, and the installed console script.

Covers: cli/main.py, cli/parser.py, cli/option_checks.py, cli/exit_codes.py, cli/running.py,
cli/copying.py, cli/serving.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_CODES, EXIT_ERROR, EXIT_MODEL, EXIT_OK, EXIT_STOPPED, EXIT_USAGE
from fractal_nb.cli.main import main
from fractal_nb.cli.parser import DEMO_DB, DEMO_SEED, build_parser
from fractal_nb.errors import StateError
from tests.local_port import free_port

SUBCOMMANDS = [
    "run",
    "demo",
    "resume",
    "harvest",
    "serve-mcp",
    "worker",
    "report",
    "events",
    "edges",
    "tree",
    "export",
    "heads",
    "turns",
    "state",
    "sources",
    "payload",
    "ask",
    "fork",
    "copy",  # tests/store/test_copy.py
    "seed",  # tests/test_cli_seed.py
]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def check_completed(path: Path, seed: str) -> None:
    """The file holds one completed, fully synthesized exploration of ``seed``."""
    with Exploration.open(path, llm=SimulatedLLM()) as ex:
        assert ex.status == "completed"
        nodes = ex.nodes()
        questions = nodes[nodes["node_type"] == "question"]
        root = questions[questions["depth"] == 0].iloc[0]
        assert root["text"] == seed and root["status"] == "synthesized"
        assert set(questions["status"]) <= {"synthesized", "saturated"}
        assert (questions["depth"] == 1).sum() >= 3
        assert len(ex.llm_calls()) > 0


def test_demo_runs_offline_into_a_duckdb_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--db", "demo.duckdb", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert f"Seed: {DEMO_SEED}" in out
    assert "Summary:" in out and "[simulated]" in out
    assert "demo.duckdb" in out and "DEGRADED" not in out
    calls = r"(\d+) model calls \(\1 accepted, 0 corrected, 0 rejected, 0 failed, \d+ discarded\)"
    assert re.search(calls, out)
    assert "fractal" not in err  # --quiet: no progress bar
    assert (tmp_path / "demo.duckdb").is_file()
    check_completed(tmp_path / "demo.duckdb", DEMO_SEED)


def test_demo_explores_a_question_of_ones_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = "How can a small bakery increase its profits?"
    assert main(["demo", question, "--intensity", "pulse", "--db", "bakery.duckdb", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"Seed: {question}" in out and "the small bakery's profits" in out  # the simulator reads it
    check_completed(tmp_path / "bakery.duckdb", question)


def test_demo_refuses_an_empty_question_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "  ", "--db", "empty.duckdb"])
    assert exit_.value.code == 2 and "DEMO" in capsys.readouterr().err
    assert not (tmp_path / "empty.duckdb").exists()


def test_run_explores_the_given_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = "Why do bees dance?"
    assert main(["run", seed, "--intensity", "pulse", "--db", "bees.duckdb", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"Seed: {seed}" in out and "Summary:" in out and "is completed in bees.duckdb" in out
    check_completed(tmp_path / "bees.duckdb", seed)
    with GraphStore(tmp_path / "bees.duckdb") as store:
        [graph] = store.list_graphs()["graphs"]
        snapshot = store.get_snapshot(graph["graph_id"])
        assert snapshot["intensity"] == "pulse"
        assert max(n["depth"] for n in snapshot["nodes"]) <= 1  # pulse: max_depth 2


def test_a_finished_run_reopens_with_exploration_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--db", "again.duckdb", "--quiet"]) == 0
    assert "Exploration.open('again.duckdb'" in capsys.readouterr().out  # what the CLI advises
    with Exploration.open(tmp_path / "again.duckdb", llm=SimulatedLLM()) as ex:
        assert ex.status == "completed"
        assert ex.nodes().query("depth == 0 and node_type == 'question'")["status"].tolist() == [
            "synthesized"
        ]
        result = ex.harvest()  # a finished graph is summarised as it stands
        assert result.status == "completed" and result.seed == DEMO_SEED
        assert result.synthesis_chain and result.synthesis_chain[0].depth == 0
        with pytest.raises(StateError, match="finished"):
            ex.run(progress=False)


def test_run_with_one_worker_and_a_seed_value(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "Why?", "--intensity", "pulse", "--workers", "1", "--seed-value", "3", "--quiet"]
    assert main([*args, "--db", "a.duckdb"]) == 0
    first = capsys.readouterr().out
    assert main([*args, "--db", "b.duckdb"]) == 0
    second = capsys.readouterr().out
    assert "SimulatedLLM(seed=3" in first

    # One worker and one seed repeat exactly (ids and file names aside).
    def strip(text: str) -> list[str]:  # "This run:" holds its wall time
        return [
            line
            for line in text.splitlines()
            if "graph g-" not in line
            and "Exploration.open" not in line
            and not line.startswith(("This run:", "See it again:"))
        ]

    assert strip(first) == strip(second)


def test_the_default_database_is_created_in_the_working_directory(tmp_path: Path) -> None:
    assert main(["run", "Why is the sea salty?", "--intensity", "pulse", "--quiet"]) == 0
    assert (tmp_path / "exploration.duckdb").is_file()
    assert not (tmp_path / DEMO_DB).exists()


def test_a_second_run_adds_a_graph_to_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for seed in ("First?", "Second?"):
        assert main(["run", seed, "--intensity", "pulse", "--db", "x.duckdb", "--quiet"]) == 0
    capsys.readouterr()
    with GraphStore(tmp_path / "x.duckdb") as store:
        seeds = sorted(g["seed"] for g in store.list_graphs()["graphs"])
    assert seeds == ["First?", "Second?"]
    with pytest.raises(ValueError, match="2 graphs"):  # open() needs to be told which
        Exploration.open(tmp_path / "x.duckdb", llm=SimulatedLLM())


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "Why?", "--intensity", "extreme"],
        ["demo", "--intensity", "PULSE"],
        ["run"],
        [],
        ["fly"],
        ["run", "Why?", "--llm", "gpt"],
        ["run", "Why?", "--workers", "many"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: fractal-nb" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "Why?", "--workers", "0"],
        ["run", "Why?", "--checkpoint", "depth:x"],
        ["run", "Why?", "--checkpoint", "sometimes"],
        ["run", "Why?", "--checkpoint", "depth:99999999999999999999"],
        ["run", "Why?", "--checkpoint", "depth:2"],  # pulse has levels 0-1
        ["demo", "--checkpoint", "depth:4"],  # explore has levels 0-3
        ["run", "Why?", "--db", "no/such/folder/x.duckdb"],
        ["run", "Why?", "--llm", "openai"],  # no model named anywhere
        ["resume", "--db", "absent.duckdb"],
        ["harvest", "--db", "absent.duckdb"],
        ["resume", "--db", "x.duckdb", "--workers", "-1"],
        ["worker", "--mcp-url", "ftp://127.0.0.1/mcp"],
        ["worker", "--mcp-url", "http://127.0.0.1:1/mcp", "--threads", "0"],
        ["serve-mcp", "--db", "x.duckdb", "--http", "--port", "70000"],
        ["run", "Why?", "--llm", "openai", "--model", "m", "--max-concurrency", "0"],
        ["run", "Why?", "--llm", "openai", "--model", "m", "--timeout", "-1"],
        # issue 24: each of these used to exit 1 or 3, or leave a file
        ["run", "", "--db", "a.duckdb"],
        ["run", "   ", "--db", "a.duckdb"],
        ["run", "Why\x00?", "--db", "a.duckdb"],
        ["run", "x" * 100_001, "--db", "a.duckdb"],
        ["run", "Why?", "--max-wall-s", "inf", "--db", "a.duckdb"],
        ["run", "Why?", "--db", "."],
        ["demo", "--checkpoint", "depth:0"],
        ["serve-mcp", "--db", "s.duckdb", "--http", "--host", "999.1.1.1"],
        ["serve-mcp", "--db", "s.duckdb", "--host", "my host"],
        ["serve-mcp", "--db", "."],
        ["worker", "--mcp-url", "http://127.0.0.1:1/mcp", "--graph-id", ""],
        ["resume", "--db", "."],
        ["harvest", "--db", "x.duckdb", "--graph-id", "g" * 301],
        ["run", "Why?", "--llm", "openai", "--model", "m", "--base-url", "not-a-url", "--db", "b.duckdb"],
        ["run", "Why?", "--llm", "openai", "--model", "m", "--base-url", "http://127.0.0.1:99999/v1"],
        ["worker", "--mcp-url", "http://"],
        ["worker", "--mcp-url", "http://127.0.0.1:1/mcp", "--worker-id", ""],
        # issue 37: a raw OSError (or DuckDB's error, a file left) for a name too long; an empty token
        ["run", "Why?", "--db", "x" * 300 + ".duckdb"],
        ["run", "Why?", "--db", "x" * 253],  # no room for DuckDB's log, x….wal, beside it
        ["serve-mcp", "--db", "d" * 300 + "/s.duckdb"],
        ["tree", "x" * 300],
        ["worker", "--mcp-url", "http://127.0.0.1:1/mcp", "--token", ""],
        ["worker", "--mcp-url", "http://127.0.0.1:1/mcp", "--token", " "],
    ],
)
def test_bad_options_exit_2_before_any_file_is_opened(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("FRACTAL_NB_MODEL", "OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as info:
        main([*argv, "--quiet"] if argv[0] in ("run", "demo") else argv)
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage: fractal-nb" in err and "error:" in err
    assert list(tmp_path.iterdir()) == []  # no store file, no empty file, nothing


def test_version_and_the_exit_code_table_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"fractal-nb {version('fractal-nb')}"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out
    for code in EXIT_CODES:
        assert f"  {code}  " in out
    shell_doc = (Path(__file__).resolve().parents[1] / "docs" / "shell.md").read_text()
    for code, text in EXIT_CODES.items():
        assert f"| {code} | {text} |" in shell_doc, f"docs/shell.md's exit-code table lacks {code}"


def test_openai_options_reach_the_model() -> None:
    from fractal_nb.cli.option_checks import model_named

    args = build_parser().parse_args(
        [
            "run",
            "Why?",
            "--llm",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:1/v1",
            "--seed-value",
            "11",
            "--timeout",
            "5",
            "--max-concurrency",
            "2",
        ]
    )
    with model_named(args) as llm:  # type: ignore[attr-defined]
        assert (llm.seed, llm.max_concurrency, llm._client.timeout) == (11, 2, 5.0)
    args = build_parser().parse_args(
        ["run", "Why?", "--llm", "openai", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"]
    )
    with model_named(args) as llm:  # type: ignore[attr-defined]
        assert (llm.seed, llm.max_concurrency) == (None, 1)  # a server on this machine: one slot


def test_openai_without_a_model_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("FRACTAL_NB_MODEL", "OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as info:
        main(["run", "Why?", "--llm", "openai", "--db", "o.duckdb", "--quiet"])
    assert info.value.code == EXIT_USAGE
    assert "FRACTAL_NB_MODEL" in capsys.readouterr().err


def test_another_applications_duckdb_file_is_refused_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    with duckdb.connect(str(tmp_path / "sales.duckdb")) as con:
        con.execute("CREATE TABLE orders (id INTEGER)")
    before = (tmp_path / "sales.duckdb").read_bytes()
    assert main(["run", "Why?", "--db", "sales.duckdb", "--quiet"]) == EXIT_ERROR
    assert "holds other tables (orders)" in capsys.readouterr().err
    assert (tmp_path / "sales.duckdb").read_bytes() == before


def test_a_model_that_is_down_exits_3_with_the_graph_paused_and_resume_runs_it_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    code = main(
        [
            "run",
            "Why do rivers bend?",
            "--llm",
            "openai",
            "--model",
            "m",
            "--base-url",
            url,
            "--db",
            "down.duckdb",
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == EXIT_MODEL
    assert "Run: model_unavailable" in out and "is paused in down.duckdb" in out
    assert f"cannot reach the model server at {url}" in out and "connection refused" in out
    assert "Nothing was harvested" in out and "fractal-nb resume down.duckdb --graph-id" in out
    with GraphStore(tmp_path / "down.duckdb") as store:
        [graph] = store.list_graphs()["graphs"]
        assert graph["status"] == "paused" and "connection refused" in graph["status_reason"]
    # The model is back (here: the simulator): the same graph runs on to the end.
    assert main(["resume", "--db", "down.duckdb", "--quiet"]) == EXIT_OK
    assert f"graph {graph['graph_id']} is completed" in capsys.readouterr().out
    check_completed(tmp_path / "down.duckdb", "Why do rivers bend?")


def test_gates_exit_4_unharvested_and_resume_approve_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "Why?", "--checkpoint", "depth:1", "--db", "g.duckdb", "--quiet"]) == EXIT_STOPPED
    out = capsys.readouterr().out
    assert "Run: paused" in out and "gated question(s) await approval" in out and "--approve" in out
    # The file as the inspection commands take it (issue 42, point 8): FILE, or --db FILE.
    assert main(["resume", "g.duckdb", "--approve", "--quiet"]) == EXIT_OK
    assert "Approved" in capsys.readouterr().out


def test_a_budget_cut_run_exits_4_with_its_gaps(capsys: pytest.CaptureFixture[str]) -> None:
    # One explore worker stops at max_depth x 3 = 12 nodes (the circuit breaker): a budget.
    assert main(["demo", "--workers", "1", "--db", "cut.duckdb", "--quiet"]) == EXIT_STOPPED
    out = capsys.readouterr().out
    assert "Run: budget_exhausted" in out and "unexplored (budget_exhausted: circuit breaker)" in out
    assert "This run: budget_exhausted (circuit breaker): " in out


def test_harvest_finishes_a_paused_graph_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "Why?", "--checkpoint", "depth:1", "--db", "h.duckdb", "--quiet"])
    capsys.readouterr()
    assert main(["harvest", "--db", "h.duckdb"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Run: harvested" in out and "is completed" in out and "unexplored" in out
    assert main(["harvest", "h.duckdb"]) == EXIT_OK  # FILE as report takes it: the result, read back
    assert "Run: harvested" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["resume", "harvest", "fork", "serve-mcp", "ask"])
def test_a_command_that_writes_a_file_says_it_needs_one_and_writes_nothing(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, *(["Why?"] if command == "ask" else ["--head", "1"] if command == "fork" else [])]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"fractal-nb {command} FILE (or --db FILE)" in err
    assert not list(tmp_path.iterdir())


HOLDER = textwrap.dedent("""
    import sys
    from fractal_nb import GraphStore
    store = GraphStore(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    store.close()
""")


def test_a_file_locked_by_another_process_exits_1_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "held.duckdb"
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
        assert main(["run", "Why?", "--db", str(path), "--quiet"]) == EXIT_ERROR
        out, err = capsys.readouterr()
        assert err.startswith("fractal-nb: error:")
        assert f"process {child.pid}" in err
        assert "Summary:" not in out
    finally:
        child.communicate("\n", timeout=60)
    assert child.returncode == 0
    # Once the holder is gone the same file works.
    assert main(["run", "Why?", "--intensity", "pulse", "--db", str(path), "--quiet"]) == EXIT_OK


# --- help: docs are tests ------------------------------------------------------------------


def subparsers() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {name: sub for name, sub in action.choices.items()}  # type: ignore[attr-defined]


def test_the_subcommands_are_the_ones_tested_here() -> None:
    assert sorted(subparsers()) == sorted(SUBCOMMANDS)


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fractal-nb")
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {c.dest: c.help for c in action._choices_actions}
    for name in SUBCOMMANDS:
        assert helps.get(name), f"subcommand {name} has no help text"
        assert name in out and helps[name] in out


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fractal-nb {command}")
    sub = subparsers()[command]
    assert sub.description  # type: ignore[attr-defined]
    for action in sub._actions:  # type: ignore[attr-defined]
        if action.dest == "help":
            continue
        assert action.help, f"{command}: {action.dest} has no help text"
        flag = action.option_strings[-1] if action.option_strings else action.dest
        assert flag in out
    if command in ("run", "demo"):
        for flag in ("--intensity", "--db", "--quiet", "--workers", "--checkpoint"):
            assert flag in out


def test_a_worker_without_a_server_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["worker", "--mcp-url", f"http://127.0.0.1:{port}/mcp"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the MCP server" in err and str(port) in err
    assert "connection refused" in err and "TaskGroup" not in err


def test_a_worker_whose_model_is_down_exits_3_and_gives_its_claims_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fractal_nb.mcp.server import BackgroundServer

    model_url = f"http://127.0.0.1:{free_port()}/v1"
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), path=tmp_path / "w.duckdb") as ex:
        ex.step(1)  # the seed phase here; the worker's model is down
        server = BackgroundServer(ex.store)
        url = server.start()
        try:
            code = main(
                [
                    "worker",
                    "--mcp-url",
                    url,
                    "--threads",
                    "2",
                    "--llm",
                    "openai",
                    "--model",
                    "m",
                    "--base-url",
                    model_url,
                ]
            )
        finally:
            server.stop()
        out, err = capsys.readouterr()
        assert code == EXIT_MODEL, (out, err)
        assert f"model unavailable: cannot reach the model server at {model_url}" in err
        assert "connection refused" in err and "exit: model_unavailable" in out
        questions = ex.nodes().query("node_type == 'question' and depth == 1")
        assert set(questions["status"]) == {"open"}, "every claim given back"
        assert "meta_failures" not in questions or questions["meta_failures"].fillna(0).eq(0).all()


def test_a_worker_on_a_server_of_several_graphs_asks_for_the_graph_id_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fractal_nb.mcp.server import BackgroundServer

    with Exploration.create("First?", intensity="pulse", llm=SimulatedLLM()) as ex:
        ex.store.create_graph("Second?", "pulse", "autonomous")
        server = BackgroundServer(ex.store)
        url = server.start()
        try:
            assert main(["worker", "--mcp-url", url]) == EXIT_ERROR
        finally:
            server.stop()
    err = capsys.readouterr().err
    assert "holds 2 active graphs" in err and "pass --graph-id" in err and "graph_id" not in err


def test_serve_mcp_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve-mcp"])
    assert info.value.code == 2 and "--db" in capsys.readouterr().err


# --- the installed console script ----------------------------------------------------------


def console_script() -> list[str]:
    venv_script = Path(sys.executable).with_name("fractal-nb")
    if venv_script.exists():
        return [str(venv_script)]
    found = shutil.which("fractal-nb")
    return [found] if found else [sys.executable, "-m", "fractal_nb.cli.main"]


def test_the_console_script_runs_the_demo(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FRACTAL_NB_"))}
    done = subprocess.run(
        [*console_script(), "demo", "--quiet", "--db", "script.duckdb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"Seed: {DEMO_SEED}" in done.stdout and "Summary:" in done.stdout
    assert (tmp_path / "script.duckdb").is_file()
    check_completed(tmp_path / "script.duckdb", DEMO_SEED)


def test_the_module_runs_with_python_dash_m(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fractal_nb.cli.main", "run", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: fractal-nb run")


# --- issue 24: a shell that answers at once and speaks its own language ------------------------


def test_the_shell_loads_no_heavy_module_for_help_version_or_a_usage_error(tmp_path: Path) -> None:
    probe = textwrap.dedent("""
        import sys
        from fractal_nb.cli.main import main
        try:
            main(sys.argv[1:])
        except SystemExit:
            pass
        heavy = ("openai", "pandas", "duckdb", "networkx", "pydantic", "tqdm")
        print(sorted(m for m in heavy if m in sys.modules))
    """)
    for argv in (
        ["--help"],
        ["--version"],
        ["run", "Why?", "--workers", "0"],
        ["serve-mcp", "--db", "."],
        ["tree", "missing.duckdb"],
        ["export", "missing.duckdb", "--to", "out.txt"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "[]", (argv, done.stdout)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_as_db_says_it_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs.duckdb").mkdir()
    for argv in (["run", "Why?"], ["demo"], ["resume"], ["harvest"], ["serve-mcp"]):
        with pytest.raises(SystemExit) as info:
            main([*argv, "--db", "runs.duckdb"])
        assert info.value.code == EXIT_USAGE
        err = capsys.readouterr().err
        assert "--db runs.duckdb: is a directory" in err and "no such file" not in err
    assert list((tmp_path / "runs.duckdb").iterdir()) == []


def test_a_file_of_several_graphs_asks_for_the_graph_id_flag(capsys: pytest.CaptureFixture[str]) -> None:
    for seed in ("First?", "Second?"):
        assert main(["run", seed, "--intensity", "pulse", "--db", "two.duckdb", "--quiet"]) == EXIT_OK
    capsys.readouterr()
    for command in ("resume", "harvest"):
        assert main([command, "--db", "two.duckdb"]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert "holds 2 explorations" in err and "'First?'" in err and "pass --graph-id" in err
        assert "graph_id" not in err  # the Python parameter's name is not the shell's
    GraphStore(Path("empty.duckdb")).close()
    assert main(["harvest", "--db", "empty.duckdb"]) == EXIT_ERROR
    assert "--db empty.duckdb holds no exploration" in capsys.readouterr().err


def test_serve_mcp_on_an_address_in_use_exits_1_before_the_file_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve-mcp", "--db", "s.duckdb", "--http", "--port", str(port)])
    assert code == EXIT_ERROR  # not uvicorn's 3, which means "the model failed" here
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_printed_counts_are_the_call_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--db", "demo.duckdb", "--quiet"]) == EXIT_OK
    out = capsys.readouterr().out
    [run_line] = [line for line in out.splitlines() if line.startswith("This run:")]
    assert "model call" not in run_line and "tokens" not in run_line  # one line counts the spend
    [ledger] = [line for line in out.splitlines() if "model calls" in line]
    found = re.search(
        r"^([\d,]+) model calls .* ([\d,]+) requests, ([\d,]+) tokens \(([\d,]+) prompt", ledger
    )
    assert found, ledger
    calls, requests, tokens, prompt = (int(g.replace(",", "")) for g in found.groups())
    with Exploration.open(tmp_path / "demo.duckdb", llm=SimulatedLLM()) as ex:
        log = ex.llm_calls()
        usage = ex.usage()
    assert (
        (calls, tokens)
        == (usage["calls"], usage["tokens"])
        == (len(log), int(log["prompt_tokens"].sum() + log["completion_tokens"].sum()))
    )
    assert (requests, prompt) == (int(log["attempts"].sum()), int(log["prompt_tokens"].sum()))


def test_a_run_stopped_at_its_gates_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "Why?", "--checkpoint", "depth:1", "--db", "g.duckdb", "--quiet"]) == EXIT_STOPPED
    [run_line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("This run:")]
    assert "every question it made waits at a gate, so no worker started" in run_line
    assert "0 worker(s)" not in run_line


def test_printed_findings_carry_no_digest(capsys: pytest.CaptureFixture[str]) -> None:
    seed = "Should a mid-sized coastal city with an ageing population build a tram line or expand its buses?"
    assert len(seed) > 80  # the simulator cuts a long seed where it quotes it
    assert main(["run", seed, "--intensity", "pulse", "--db", "f.duckdb", "--quiet"]) == EXIT_OK
    out = capsys.readouterr().out
    findings = out.split("Findings:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert findings and all(line.startswith("  - [simulated] finding") for line in findings)
    assert not any(re.search(r"#[0-9a-f]{6}", line) for line in findings), findings


class FixableBackend(SimulatedLLM):
    """A model backend with a bug in its answers: a failure inside the engine sets the graph to error."""

    def complete(self, messages, schema):  # type: ignore[no-untyped-def]
        if getattr(schema, "role", "") == "answer":
            raise RuntimeError("backend bug")
        return super().complete(messages, schema)


def test_resume_goes_on_with_a_graph_an_engine_failure_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Exploration.create(
        "Why?", intensity="pulse", llm=FixableBackend(), path=tmp_path / "e.duckdb"
    ) as ex:
        assert ex.run(progress=False) == "error"  # every worker crashed on the bug: no worker could go on
        assert ex.status == "error"
    # The backend is fixed (here: the simulator): an explicit resume runs it to the end.
    assert main(["resume", "--db", "e.duckdb", "--quiet"]) == EXIT_OK
    assert "is completed in e.duckdb" in capsys.readouterr().out
    check_completed(tmp_path / "e.duckdb", "Why?")


def test_resume_of_a_finished_graph_points_to_the_harvest_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "Why?", "--intensity", "pulse", "--db", "done.duckdb", "--quiet"]) == EXIT_OK
    capsys.readouterr()
    assert main(["resume", "--db", "done.duckdb", "--quiet"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "is completed: nothing is left to run" in err and "`fractal-nb harvest done.duckdb" in err
    assert "harvest()" not in err


def test_a_base_url_from_the_environment_is_checked_under_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "not-a-url")
    with pytest.raises(SystemExit) as info:
        main(["run", "Why?", "--llm", "openai", "--model", "m", "--db", "b.duckdb", "--quiet"])
    assert info.value.code == EXIT_USAGE
    assert "$OPENAI_BASE_URL must be an http:// or https:// URL with a host" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_resume_refuses_a_budget_exhausted_graph_and_a_new_budget_goes_on_as_a_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Seed 001: budget_exhausted is terminal for resume; going on is a new turn with a new budget.
    with Exploration.create(
        "Why do cities grow?", intensity="explore", llm=SimulatedLLM(seed=4), path=tmp_path / "b.duckdb"
    ) as ex:
        assert ex.run(progress=False, max_tokens=8_000) == "budget_exhausted"
        events = len(ex.events())
    for refused in (["resume", "--db", "b.duckdb", "--quiet"], ["resume", "--db", "b.duckdb", "--approve"]):
        assert main(refused) == EXIT_ERROR
        err = capsys.readouterr().err
        assert "is budget_exhausted (token budget of 8,000 reached" in err and "terminal for resume" in err
        assert "--new-budget [--max-tokens N] [--max-wall-s S]" in err
    assert main(["resume", "--db", "b.duckdb", "--new-budget", "--quiet"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "the new budget is spent already (token budget of 8,000 reached" in err
    with Exploration.open(tmp_path / "b.duckdb", read_only=True) as ex:
        assert ex.status == "budget_exhausted" and len(ex.events()) == events, "nothing written"
    assert main(["resume", "--db", "b.duckdb", "--max-tokens", "1000000000", "--quiet"]) == EXIT_OK
    assert "Turn 2: a new budget (budget(limits={'max_tokens': 1000000000" in capsys.readouterr().out
    assert main(["turns", "b.duckdb", "--json"]) == EXIT_OK
    turns = json.loads(capsys.readouterr().out)["turns"]
    assert [(t["kind"], t["status"]) for t in turns] == [
        ("seed", "budget_exhausted"),
        ("budget", "completed"),
    ]
    check_completed(tmp_path / "b.duckdb", "Why do cities grow?")


def test_resume_names_the_new_budget_option_from_the_installed_command(tmp_path: Path) -> None:
    with Exploration.create(
        "Why?", intensity="explore", llm=SimulatedLLM(seed=4), path=tmp_path / "c.duckdb"
    ) as ex:
        assert ex.run(1, progress=False) == "budget_exhausted"  # one worker: the circuit breaker
    command = [sys.executable, "-m", "fractal_nb.cli.main", "resume", "--db", "c.duckdb", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == EXIT_ERROR and "(circuit breaker): it is terminal for resume" in done.stderr
    assert "--new-budget" in done.stderr
    going_on = subprocess.run(
        [*command, "--new-budget"], capture_output=True, text=True, check=False, timeout=120
    )
    assert going_on.returncode in (EXIT_OK, EXIT_STOPPED), going_on.stderr
    assert "Turn 2: a new budget (budget(limits={}))." in going_on.stdout
