"""Inspecting a file another process serves: ``fractal-nb report FILE`` reads through its MCP server,
found from ``FILE.mcp.json`` without retyping the URL (issue 42, point 7).

Covers: mcp/announce.py, cli/serving.py, mcp/server.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.exit_codes import EXIT_ERROR, EXIT_OK
from fractal_nb.cli.main import main
from fractal_nb.mcp.announce import announcement_path
from fractal_nb.store import open_store
from tests.local_port import free_port, listening
from tests.mcp.conftest import serve_mcp_command, wait_until
from tests.test_cli_inspect import HOLDER

SEED = "Why do cities grow?"


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("served") / "one.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(progress=False)
        ex.harvest()
    return path


def shell(*argv: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """``fractal-nb ARGV`` as typed, in its own process (FRACTAL_NB_TOKEN set only when given)."""
    env = {k: v for k, v in os.environ.items() if k != "FRACTAL_NB_TOKEN"}
    if token is not None:
        env["FRACTAL_NB_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "fractal_nb.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@contextmanager
def serving(path: Path, *options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``fractal-nb serve-mcp --db PATH --http`` in its own process, once it listens and says where."""
    port = free_port()
    server = subprocess.Popen(
        serve_mcp_command(path, port, *options), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    sidecar = announcement_path(path)
    assert sidecar is not None
    try:
        alive = lambda: server.poll() is None  # noqa: E731
        # Only the file: once it says where, the server listens there (written when the sockets are bound).
        wait_until(sidecar.exists, "the server to say where it listens", alive=alive)
        assert listening(port)
        yield server, f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_report_reads_a_served_file_through_its_mcp_server(harvested: Path, tmp_path: Path) -> None:
    path = tmp_path / "served.duckdb"
    path.write_bytes(harvested.read_bytes())
    with Exploration.open(path, read_only=True) as ex:
        report, graph_id = ex.report().strip(), ex.graph_id
        node = str(ex.nodes().query("node_type == 'question' and depth == 1")["node_id"].iloc[0])
    sidecar = Path(f"{path}.mcp.json")
    with serving(path) as (server, url):
        said = json.loads(sidecar.read_text())
        assert said["url"] == url and said["pid"] == server.pid and said["token_required"] is False
        assert said["host"] == socket.gethostname() and "token" not in said
        done = shell("report", str(path))
        assert done.returncode == EXIT_OK, done.stderr
        assert done.stdout.strip() == report
        assert (
            f"in use by process {server.pid}, which serves it over MCP: reading through {url}" in done.stderr
        )
        done = shell("tree", str(path), "--json")
        assert done.returncode == EXIT_OK and json.loads(done.stdout)["graph_id"] == graph_id
        done = shell("payload", str(path), node, "--graph-id", graph_id)
        assert done.returncode == EXIT_OK and done.stdout.startswith(f"question {node} ")
        done = shell("payload", str(path), "n-0000000000000000")  # the server's refusal, as the shell's
        assert done.returncode == EXIT_ERROR and "n-0000000000000000" in done.stderr
        done = shell("edges", str(path))  # no read tool: the lock, as before
        assert done.returncode == EXIT_ERROR and f"in use by process {server.pid}" in done.stderr
    assert not sidecar.exists(), "the server withdraws FILE.mcp.json when it stops"
    assert shell("tree", str(path)).returncode == EXIT_OK  # the file itself, once free


def test_a_served_file_with_a_token_needs_it(harvested: Path, tmp_path: Path) -> None:
    path = tmp_path / "guarded.duckdb"
    path.write_bytes(harvested.read_bytes())
    with serving(path, "--token", "s3cret-token") as (server, _url):
        assert json.loads(Path(f"{path}.mcp.json").read_text())["token_required"] is True
        assert "s3cret-token" not in Path(f"{path}.mcp.json").read_text()
        done = shell("state", str(path))
        assert done.returncode == EXIT_ERROR and f"in use by process {server.pid}" in done.stderr
        assert "401 Unauthorized" in done.stderr and "--token or FRACTAL_NB_TOKEN" in done.stderr
        assert done.stdout == ""
        assert shell("state", str(path), token="s3cret-token").returncode == EXIT_OK
        done = shell("turns", str(path), "--token", "s3cret-token", "--json")
        assert done.returncode == EXIT_OK and json.loads(done.stdout)["turns"][0]["turn"] == 1


def test_an_announcement_not_from_the_holder_is_ignored(
    harvested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "held.duckdb"
    path.write_bytes(harvested.read_bytes())
    port = free_port()  # nothing listens there
    stale = {
        "url": f"http://127.0.0.1:{port}/mcp",
        "pid": 1,
        "host": socket.gethostname(),
        "token_required": False,
    }
    Path(f"{path}.mcp.json").write_text(json.dumps(stale))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert main(["report", str(path)]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert f"in use by process {child.pid}" in err and "reading through" not in err
        # Said by the holder, but its server does not answer: the lock, saying so.
        Path(f"{path}.mcp.json").write_text(json.dumps({**stale, "pid": child.pid}))
        assert main(["report", str(path)]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert f"in use by process {child.pid}" in err and "did not answer" in err
        # Said by the holder, but off this machine's loopback: never followed (the file is anyone's to
        # write; a reader would send its token there).
        for elsewhere in ("http://203.0.113.7:8765/mcp", "http://example.org/mcp", "file:///etc/passwd"):
            Path(f"{path}.mcp.json").write_text(json.dumps({**stale, "pid": child.pid, "url": elsewhere}))
            assert main(["report", str(path)]) == EXIT_ERROR
            err = capsys.readouterr().err
            assert f"in use by process {child.pid}" in err and "203.0.113.7" not in err, err
            assert "reading through" not in err and "did not answer" not in err
    finally:
        child.communicate("\n", timeout=60)


def test_serve_mcp_in_a_notebook_says_where_and_withdraws_it(tmp_path: Path) -> None:
    path = tmp_path / "notebook.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        url = ex.serve_mcp()
        said = json.loads(Path(f"{path}.mcp.json").read_text())
        assert said["url"] == url and said["pid"] == os.getpid()
        ex.stop_mcp()
        assert not Path(f"{path}.mcp.json").exists()
        ex.serve_mcp()
    assert not Path(f"{path}.mcp.json").exists()  # close() stops the server and withdraws it
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM()) as ex:  # in memory: no file
        ex.serve_mcp()
        ex.stop_mcp()


def test_serve_mcp_returns_once_it_has_said_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ex.serve_mcp()`` returns after FILE.mcp.json is written, not as soon as uvicorn listens.

    uvicorn's ``started`` comes just before the announcement; a slow write (here it waits, up to
    a second, for ``serve_mcp()`` to return) once let a caller read the file before it was there.
    """
    from fractal_nb.mcp import server as mcp_server

    returned = threading.Event()
    real = mcp_server.announce

    def announce(db: Any, url: str, *, token_required: bool) -> Path | None:
        returned.wait(1.0)  # on the code before, serve_mcp() returned meanwhile
        return real(db, url, token_required=token_required)

    monkeypatch.setattr(mcp_server, "announce", announce)
    path = tmp_path / "slow.duckdb"
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        url = ex.serve_mcp()
        there = Path(f"{path}.mcp.json").exists()
        returned.set()
        assert there and json.loads(Path(f"{path}.mcp.json").read_text())["url"] == url


def test_serve_mcp_says_where_only_once_it_listens(
    harvested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The announcement is written when the sockets are bound: at that moment the port answers."""
    import asyncio

    import uvicorn

    from fractal_nb.mcp import server as mcp_server

    port = free_port()
    said: list[bool] = []
    real = mcp_server.announce

    def announce(db: Any, url: str, *, token_required: bool) -> Path | None:
        said.append(listening(port))
        return real(db, url, token_required=token_required)

    monkeypatch.setattr(mcp_server, "announce", announce)
    path = tmp_path / "bound.duckdb"
    path.write_bytes(harvested.read_bytes())
    url = f"http://127.0.0.1:{port}/mcp"
    with open_store(path) as store:
        app = mcp_server.build_server(store).streamable_http_app()
        server = mcp_server.AnnouncingServer(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"),
            db=path,
            token_required=False,
        )
        announced: list[Path | None] = []

        async def start_and_stop() -> None:
            serving = asyncio.create_task(server.serve())
            while not server.started and not serving.done():  # a condition, not a timing
                await asyncio.sleep(0.01)
            announced.append(server.announcement)
            server.should_exit = True
            await serving

        asyncio.run(start_and_stop())
    assert said == [True] and announced == [announcement_path(path)] and server.url == url
    assert server.announcement is None and not Path(f"{path}.mcp.json").exists()  # withdrawn at shutdown
