"""Config profiles and ``run --strategy --sources`` (issue 42, point 7: the control plane).

A profile names once the model, endpoint, budgets and defaults a person would
retype per command; what is typed wins, and a bad profile is a usage error that
writes nothing.

Covers: cli/profiles.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_MODEL, EXIT_OK, EXIT_USAGE
from fractal_nb.cli.main import main
from tests.local_port import free_port

PROFILES = """
[profiles.lab]
llm = "simulated"
seed_value = 3
intensity = "pulse"
workers = 1
db = "lab.duckdb"

[profiles.down]
llm = "openai"
model = "qwen"
base_url = "{down}"
"""


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FRACTAL_NB_PROFILE", raising=False)
    path = tmp_path / "config.toml"
    path.write_text(PROFILES.format(down=f"http://127.0.0.1:{free_port()}/v1"))
    monkeypatch.setenv("FRACTAL_NB_CONFIG", str(path))
    return path


def only_graph(path: str) -> Exploration:
    return Exploration.open(path, llm=SimulatedLLM(), read_only=True)


def test_a_profile_fills_what_is_not_typed_and_what_is_typed_wins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", "lab", "run", "Why do cities grow?", "--quiet"]) == EXIT_OK
    assert "SimulatedLLM(seed=3" in capsys.readouterr().out
    with only_graph("lab.duckdb") as ex:
        assert ex.store.get_graph(ex.graph_id)["intensity"] == "pulse"
    # Typed after the command: the typed intensity and file win over the profile's.
    assert main(
        ["run", "Why?", "--profile=lab", "--intensity", "explore", "--db", "typed.duckdb", "--quiet"]
    ) in (
        EXIT_OK,
        4,  # one worker may stop at its node ceiling: a budget's stop
    )
    with only_graph("typed.duckdb") as ex:
        assert ex.store.get_graph(ex.graph_id)["intensity"] == "explore"
    # A typed FILE wins over the profile's db too: the result read back is typed.duckdb's.
    assert main(["--profile", "lab", "harvest", "typed.duckdb"]) in (EXIT_OK, 4)
    assert "in typed.duckdb" in capsys.readouterr().out


def test_the_environment_names_the_profile_and_its_endpoint_is_the_one_called(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    monkeypatch.setenv("FRACTAL_NB_PROFILE", "down")
    assert main(["run", "Why?", "--intensity", "pulse", "--db", "d.duckdb", "--quiet"]) == EXIT_MODEL
    out = capsys.readouterr().out
    base_url = config.read_text().split('base_url = "')[1].split('"')[0]
    assert f"cannot reach the model server at {base_url}" in out and "model='qwen'" in out


def test_a_key_a_command_does_not_take_is_left_out_for_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", "lab", "run", "Why?", "--quiet"]) == EXIT_OK
    capsys.readouterr()
    assert main(["--profile", "lab", "state", "lab.duckdb"]) == EXIT_OK  # takes no --llm, --db or --workers
    assert "Line of work:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("profiles", "argv", "said"),
    [
        (
            PROFILES,
            ["--profile", "nowhere", "run", "Why?"],
            "holds no [profiles.nowhere] table; its profiles: down, lab",
        ),
        ('[profiles.x]\ncolour = "red"\n', ["--profile", "x", "run", "Why?"], "'colour' in"),
        (
            "[profiles.x]\nworkers = [1, 2]\n",
            ["--profile", "x", "run", "Why?"],
            "must be a string or a number",
        ),
        (
            '[profiles.x]\nllm = "oracle"\n',
            ["--profile", "x", "run", "Why?"],
            "--llm: invalid choice: 'oracle'",
        ),
        ("[profiles.x]\nworkers = 0\n", ["--profile", "x", "run", "Why?"], "--workers"),
        ("not = = toml", ["--profile", "x", "run", "Why?"], "is not a TOML file"),
        (PROFILES, ["--profile", "run", "Why?"], "holds no [profiles.run] table"),
        (PROFILES, ["run", "Why?", "--profile"], "--profile needs a profile's name"),
    ],
)
def test_a_bad_profile_is_a_usage_error_that_writes_nothing(
    profiles: str, argv: list[str], said: str, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(profiles.replace("{down}", "http://127.0.0.1:9/v1"))
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_USAGE and said in capsys.readouterr().err
    assert not list(Path().glob("*.duckdb"))


def test_no_profiles_file_is_said_with_where_it_was_looked_for(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.unlink()
    with pytest.raises(SystemExit):
        main(["--profile", "lab", "run", "Why?"])
    assert f"no profiles file at {config}" in capsys.readouterr().err


def test_run_takes_a_strategy_and_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "claims.md").write_text(
        "# Claims\n\nA claim is atomic: one UPDATE picks the node and marks it claimed in one statement.\n"
    )
    argv = ["run", "How does a claim stay atomic?", "--intensity", "pulse", "--quiet"]
    assert main([*argv, "--strategy", "tracks", "--sources", str(notes), "--db", "t.duckdb"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "notes/claims.md" in out, out
    with only_graph("t.duckdb") as ex:
        assert ex.state().strategy == "tracks" and list(ex.sources()["name"]) == ["notes/claims.md"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--sources", "missing", "--db", "m.duckdb"])
    assert (
        info.value.code == EXIT_USAGE
        and "--sources missing: no such file or folder" in capsys.readouterr().err
    )
    assert not Path("m.duckdb").exists()


def test_run_takes_a_preset_and_names_its_citations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tmp_path / "pkg"
    (code / "store").mkdir(parents=True)
    (code / "store" / "claim.py").write_text(
        '"""The claim step."""\n\n\ndef claim_question(db):\n'
        '    return db.execute("UPDATE nodes SET status = 1")\n'
    )
    argv = ["run", "How does a claim stay atomic?", "--intensity", "pulse", "--quiet", "--sources", str(code)]
    assert main([*argv, "--preset", "architecture", "--db", "p.duckdb"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "[pkg/store/claim.py:L" in out, out
    with only_graph("p.duckdb") as ex:
        assert ex.state().strategy == "tracks"
        assert ex.store.get_graph(ex.graph_id)["metadata"]["preset"] == "architecture"
    for bad, said in (
        (["--preset", "architecture", "--strategy", "fractal"], "--strategy fractal takes no preset"),
        (["--preset", "archi"], "invalid choice: 'archi'"),
    ):
        with pytest.raises(SystemExit) as info:
            main([*argv, *bad, "--db", "m.duckdb"])
        assert info.value.code == EXIT_USAGE and said in capsys.readouterr().err
        assert not Path("m.duckdb").exists()
