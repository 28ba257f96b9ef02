"""``fractal-nb payload FILE NODE``: one node's whole record, read-only (issue 42, point 7).

Covers: cli/inspection.py, exploration/exploration.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from fractal_nb.cli.main import main
from tests.test_cli import console_script


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("payload") / "one.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(progress=False)
        ex.harvest()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def a_seed_question(path: Path) -> tuple[str, dict[str, object]]:
    with Exploration.open(path, read_only=True) as ex:
        nodes = ex.nodes()
        node_id = str(nodes.query("node_type == 'question' and depth == 1")["node_id"].iloc[0])
        return node_id, ex.payload(node_id)


def test_payload_prints_the_nodes_row_claims_children_and_calls(
    harvested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(harvested)
    node_id, record = a_seed_question(harvested)
    assert main(["payload", str(harvested), node_id]) == EXIT_OK
    out = capsys.readouterr().out
    node = record["node"]
    assert isinstance(node, dict)
    assert out.startswith(f"question {node_id} [{node['status']}]")
    assert str(node["text"]) in out
    for title in ("Metadata:", "Claims:", "Citations:", "Children:", "Links:", "Model calls:", "Kept:"):
        assert f"\n{title}" in out
    claims = node["metadata"]["claims"]  # type: ignore[index]
    assert claims and f"{claims[0]['kind']}: {claims[0]['text']}" in out
    calls = record["llm_calls"]
    assert isinstance(calls, list) and {c["role"] for c in calls} >= {"answer"}
    assert all(c["node_id"] == node_id for c in calls)
    assert "tokens" in out and " answer " in out
    children = record["children"]
    assert isinstance(children, list) and children[0]["node_id"] in out
    assert "no prompt or reply is kept per node" in out
    assert digest(harvested) == before  # read, never written


def test_payload_json_is_the_facades_record(harvested: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node_id, record = a_seed_question(harvested)
    assert main(["payload", str(harvested), node_id, "--json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert document == json.loads(json.dumps(record, default=str))
    assert set(document) >= {"node", "children", "links", "evidence", "sub_questions", "llm_calls", "kept"}


def test_an_unknown_node_exits_1_and_an_empty_one_2_nothing_written(
    harvested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(harvested)
    assert main(["payload", str(harvested), "n-0000000000000000"]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("fractal-nb: error:") and "n-0000000000000000" in err
    assert "not found" in err
    with pytest.raises(SystemExit) as info:
        main(["payload", str(harvested), " "])
    assert info.value.code == EXIT_USAGE
    assert "NODE must be a non-empty string id" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["payload", str(harvested)])  # NODE missing
    assert info.value.code == EXIT_USAGE
    assert digest(harvested) == before


def test_the_console_script_prints_a_payload(harvested: Path, tmp_path: Path) -> None:
    node_id, _ = a_seed_question(harvested)
    done = subprocess.run(
        [*console_script(), "payload", str(harvested), node_id, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["node"]["node_id"] == node_id
