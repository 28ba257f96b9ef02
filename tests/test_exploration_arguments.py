"""Exploration.create() and open() check every argument before the file is opened: a refused call
leaves no file behind (issue 24, "a bad call changes nothing").

Covers: arguments.py, exploration/exploration.py, exploration/opening.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
from fractal_nb.arguments import check_bind_host, check_store_path
from fractal_nb.vocabulary import MAX_TEXT_CHARS

SEED = "Why do cities grow?"

BAD_CHECKPOINTS = [
    "depth:2",  # pulse has questions at depths 0-1 only
    "depth:0",
    "depth:-1",
    "depth:x",
    "depth:1.5",
    "depth:",
    "DEPTH:1",
    " depth:1",
    "sometimes",
    "",
]


def refused_create(tmp_path: Path, **given: object) -> InvalidInputError:
    """Create with ``given`` over good defaults; it must be refused and leave the folder empty."""
    arguments: dict[str, object] = {
        "seed": SEED,
        "intensity": "pulse",
        "llm": SimulatedLLM(),
        "path": tmp_path / "x.duckdb",
        **given,
    }
    with pytest.raises(InvalidInputError) as info:
        Exploration.create(**arguments)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused create left a file"
    return info.value


@pytest.mark.parametrize("checkpoint", BAD_CHECKPOINTS)
def test_a_bad_checkpoint_creates_no_file(tmp_path: Path, checkpoint: str) -> None:
    assert "checkpoint" in str(refused_create(tmp_path, checkpoint=checkpoint))


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"seed": "Why\x00?"}, "NUL"),
        ({"seed": "x" * (MAX_TEXT_CHARS + 1)}, "100,001 characters"),
        ({"seed": "   "}, "seed"),
        ({"seed": 42}, "seed"),
        ({"seed": "Why \ud800?"}, "seed"),
        ({"intensity": "extreme"}, "intensity"),
        ({"max_wall_s": float("inf")}, "max_wall_s must be a finite number"),
        ({"node_timeout_s": float("inf")}, "node_timeout_s"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_cost": 2.0}, "price table"),
        ({"max_cost": float("inf"), "prices": {"m": (1.0, 2.0)}}, "max_cost"),
        ({"llm": "gpt"}, "llm must be a model"),
        ({"clock": 5}, "clock must be a Clock"),
        ({"path": 5}, "path must be a file path"),
        ({"path": b"x.duckdb"}, "path must be a file path"),
    ],
)
def test_a_bad_argument_creates_no_file(tmp_path: Path, given: dict[str, object], named: str) -> None:
    assert named in str(refused_create(tmp_path, **given))


def test_a_directory_or_a_missing_folder_is_named_for_what_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    with pytest.raises(InvalidInputError, match="is a directory; give a file inside it"):
        Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=folder)
    with pytest.raises(InvalidInputError, match="is a directory"):
        Exploration.open(folder, llm=SimulatedLLM())
    with pytest.raises(InvalidInputError, match="folder .*absent does not exist"):
        Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=tmp_path / "absent" / "x.duckdb")
    afile = tmp_path / "notes.txt"
    afile.write_text("a file")
    with pytest.raises(InvalidInputError, match="is a file, not a folder"):
        Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=afile / "x.duckdb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "runs"]
    assert list(folder.iterdir()) == []


def test_a_name_the_file_system_cannot_hold_is_refused_before_any_file(tmp_path: Path) -> None:
    """Over-long names used to escape as a raw OSError, or as DuckDB's error once its log could not
    be made beside the store, a file left behind (issue 37)."""
    cases = {
        "x" * 300 + ".duckdb": r"the file name 'x{30}'… is 307 bytes; at most 251 fit here",
        "x" * 253: r"is 253 bytes; at most 251 fit here \(.*255 per name, and '\.wal' is added beside it\)",
        "d" * 300
        + "/x.duckdb": r"the folder name 'd{30}'… is 300 bytes; this file system allows at most 255",
        "/".join(["d" * 200] * 25)
        + "/x.duckdb": r"bytes long as a full path; this file system allows paths under",
        "\ud800.duckdb": "has characters no file name can hold",
    }
    for name, message in cases.items():
        with pytest.raises(InvalidInputError, match=message):
            Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=tmp_path / name)
        with pytest.raises(InvalidInputError, match=message):
            Exploration.open(tmp_path / name, llm=SimulatedLLM())
        with pytest.raises(InvalidInputError, match=message):
            check_store_path(tmp_path / name, "--db")
    assert list(tmp_path.iterdir()) == []
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=tmp_path / ("x" * 251)) as ex:
        assert ex.run(progress=False) == "all_complete", "the longest name that fits works"


def test_open_checks_its_arguments_before_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        graph_id = ex.graph_id
    before = path.read_bytes()
    for bad, named in [(5, "graph_id"), ("", "graph_id"), ("g" * 301, "graph_id")]:
        with pytest.raises(InvalidInputError, match=named):
            Exploration.open(path, bad, llm=SimulatedLLM())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="clock"):
        Exploration.open(path, graph_id, llm=SimulatedLLM(), clock="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no exploration file"):
        Exploration.open(tmp_path / "absent.duckdb", llm=SimulatedLLM())
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]


def test_graphs_lists_a_files_explorations(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    for seed in ("First?", "Second?"):
        Exploration.create(seed, intensity="pulse", llm=SimulatedLLM(), path=path).close()
    graphs = Exploration.graphs(path)
    assert list(graphs.columns) == ["graph_id", "seed", "intensity", "status"]
    assert graphs["seed"].tolist() == ["First?", "Second?"] and set(graphs["status"]) == {"active"}
    with pytest.raises(InvalidInputError, match="2 graphs"):
        Exploration.open(path, llm=SimulatedLLM())
    with Exploration.open(path, graphs["graph_id"][1], llm=SimulatedLLM()) as ex:
        assert ex.status == "active"
    with pytest.raises(InvalidInputError, match="no such file"):
        Exploration.graphs(tmp_path / "absent.duckdb")


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "[::1]", "localhost", "my-host.example.org"])
def test_bind_hosts_of_the_right_form_pass(host: str) -> None:
    assert check_bind_host(host) == host


@pytest.mark.parametrize(
    ("host", "named"),
    [
        ("999.1.1.1", "not an IPv4 address"),
        ("1.2.3", "not an IPv4 address"),
        ("::g", "not an IPv6 address"),
        ("my host", "neither an IP address nor a host name"),
        ("-bad.example", "neither"),
        ("a" * 64 + ".example", "neither"),
        ("", "must be an IP address or a host name"),
        (None, "must be an IP address or a host name"),
    ],
)
def test_bind_hosts_of_the_wrong_form_are_refused_without_a_lookup(host: object, named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        check_bind_host(host, "--host")


def test_store_paths_name_the_argument_as_the_caller_spells_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="^--db .*: no such file$"):
        check_store_path(tmp_path / "absent.duckdb", "--db", must_exist=True)
    with pytest.raises(InvalidInputError, match="^--db contains a NUL character"):
        check_store_path("a\x00b", "--db")
    assert check_store_path(str(tmp_path / "new.duckdb")) == tmp_path / "new.duckdb"
    with pytest.raises(InvalidInputError, match="is not a regular file"):
        check_store_path("/dev/null", "--db")
    with pytest.raises(InvalidInputError, match="must be a file path, not ''"):
        check_store_path("", "--db")


def test_serve_mcp_refuses_a_host_or_port_of_the_wrong_form_before_building_a_server() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM()) as ex:
        for given, named in [
            ({"host": "999.1.1.1"}, "not an IPv4 address"),
            ({"host": "my host"}, "neither an IP address"),
            ({"port": 70000}, "port must be an integer 0-65535"),
            ({"port": "8765"}, "port must be an integer"),
        ]:
            with pytest.raises(InvalidInputError, match=named):
                ex.serve_mcp(**given)  # type: ignore[arg-type]
            assert ex.mcp_token is None
