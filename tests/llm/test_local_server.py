"""LocalModelServer's process: started, waited for, reported dead with its log, stopped.

These run a server process of their own (a few lines of ``http.server`` that answer
``/health`` and die or hang as told), so they need no ``[local]`` extra: what is
tested is how a real process that dies, at start or on its first completion, is
reported (``tests/llm/test_local_model.py`` does it with llama.cpp's server too).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from fractal_nb import Exploration, InvalidInputError, LLMTimeoutError, LLMUnavailableError
from fractal_nb.llm.local_server import LocalModelServer
from fractal_nb.llm.schemas import LeafAnswer

STAND_IN = """
import os, signal, sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer

BEHAVIOUR = sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        if BEHAVIOUR in ("hangs", "stubborn"):
            threading.Event().wait()  # never replies
        print("ggml_backend_amx_mul_mat: the fault a crashing server logs last", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if BEHAVIOUR == "exits":
    sys.exit("error: failed to load model 'not-a-model.gguf'")
if BEHAVIOUR == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if BEHAVIOUR == "silent":
    sys.stdin.read()  # never listens: waits for its parent to go
print("listening", flush=True)
HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class StandInServer(LocalModelServer):
    """LocalModelServer running the stand-in above: ``dies`` on its first completion, ``exits`` at
    start, stays ``silent``, ``hangs`` on a completion, or does and ignores SIGTERM (``stubborn``)."""

    stop_grace_s = 0.5

    def __init__(self, folder: Path, behaviour: str, **options: Any) -> None:
        super().__init__(**options)
        self.script = folder / "stand_in_server.py"
        self.script.write_text(STAND_IN)
        self.behaviour = behaviour

    def command(self) -> list[str]:
        return [sys.executable, str(self.script), str(self.port), self.behaviour]


def _gone(pid: int | None) -> bool:
    return pid is not None and (not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie")


def test_a_server_that_dies_on_its_first_completion_is_reported_dead_with_its_log(tmp_path: Path) -> None:
    with StandInServer(tmp_path, "dies") as server, server.llm() as llm:
        assert server.death() is None, "it answers /health: running"
        with pytest.raises(LLMUnavailableError) as raised:
            llm.complete([{"role": "user", "content": "Why?"}], LeafAnswer)
    message = str(raised.value)
    assert message.startswith("the local model server died (exit -9, signal SIGKILL)"), message
    assert "ggml_backend_amx_mul_mat: the fault a crashing server logs last" in message
    assert str(server.log_path) in message
    assert "cannot reach" not in message and "connection refused" not in message


def test_a_run_on_a_server_that_dies_pauses_saying_it_died(tmp_path: Path) -> None:
    with (
        StandInServer(tmp_path, "dies") as server,
        server.llm() as llm,
        Exploration.create(
            "Why do cities grow?", intensity="pulse", llm=llm, path=tmp_path / "dead.duckdb"
        ) as ex,
    ):
        status = ex.run(progress=False)
        reason = ex.store.get_graph(ex.graph_id)["status_reason"]
        errors = " ".join(str(e) for e in ex.llm_calls()["error"].dropna())
    assert status in ("seed_failed", "model_unavailable")
    for said in (reason, errors):
        assert "the local model server died (exit -9, signal SIGKILL)" in said, said
        assert "ggml_backend_amx_mul_mat" in said and "cannot reach" not in said


def test_a_server_that_exits_at_start_is_reported_dead_with_its_log(tmp_path: Path) -> None:
    server = StandInServer(tmp_path, "exits")
    with pytest.raises(LLMUnavailableError) as raised:
        server.start()
    message = str(raised.value)
    assert message.startswith("the local model server died (exit 1)"), message
    assert "error: failed to load model 'not-a-model.gguf'" in message
    assert _gone(server.pid)
    assert repr(server).endswith("(stopped)>")


def test_a_server_that_never_answers_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    server = StandInServer(tmp_path, "silent", startup_timeout_s=0.5)
    with pytest.raises(LLMUnavailableError, match=r"did not answer within 0.5 s; the end of its log"):
        server.start()
    assert _gone(server.pid), "the server that never answered was left running"
    assert server.death() == f"the local model server was stopped (its log: {server.log_path})"


def test_a_death_whose_log_is_gone_still_says_it_died(tmp_path: Path) -> None:
    with StandInServer(tmp_path, "dies") as server, server.llm() as llm:
        assert server.log_path is not None
        server.log_path.unlink()
        with pytest.raises(
            LLMUnavailableError, match=r"died \(exit -9, signal SIGKILL\); its log .* cannot be"
        ):
            llm.complete([{"role": "user", "content": "Why?"}], LeafAnswer)


def test_stop_ends_the_server_and_a_stopped_server_is_not_called_dead(tmp_path: Path) -> None:
    with StandInServer(tmp_path, "dies") as server:
        pid = server.pid
        assert not _gone(pid) and repr(server).startswith("<LocalModelServer gemma-3-270m http://127.0.0.1:")
    assert _gone(pid)
    assert (server.death() or "").startswith("the local model server was stopped")
    server.stop()  # again: nothing to do


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_threads_must_be_a_positive_integer(threads: Any) -> None:
    with pytest.raises(InvalidInputError, match="threads must be an integer >= 1"):
        LocalModelServer(threads=threads)


def test_a_live_server_that_fails_a_call_is_not_called_dead(tmp_path: Path) -> None:
    with StandInServer(tmp_path, "hangs") as server, server.llm(timeout=0.5, max_retries=0) as llm:
        with pytest.raises(LLMTimeoutError, match="timed out"):
            llm.complete([{"role": "user", "content": "Why?"}], LeafAnswer)
        assert server.death() is None


def test_stop_kills_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    with StandInServer(tmp_path, "stubborn") as server:
        pid = server.pid
    assert _gone(pid)
    assert server.death() is not None and "stopped" in (server.death() or "")


def test_a_server_never_started_is_neither_running_nor_dead() -> None:
    server = LocalModelServer()
    assert server.pid is None and server.death() is None and repr(server).endswith("(stopped)>")
    server.stop()  # nothing to stop
