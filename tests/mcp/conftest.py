"""MCP tests: garbage collected after each (a socket left open fails it), command lines, waiting."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _collect_after() -> Iterator[None]:
    yield
    gc.collect()


def serve_mcp_command(db: object, port: int, *options: str) -> list[str]:
    """``fractal-nb serve-mcp --db DB --http --port PORT [OPTIONS]`` as a subprocess runs it."""
    return [
        sys.executable,
        "-m",
        "fractal_nb.cli.main",
        "serve-mcp",
        "--db",
        str(db),
        "--http",
        "--port",
        str(port),
        *options,
    ]


def worker_command(url: str, worker_id: str, threads: int, *llm_options: str) -> list[str]:
    """``fractal-nb worker --mcp-url URL --worker-id ID --threads N [LLM OPTIONS]``, for a subprocess."""
    return [
        sys.executable,
        "-m",
        "fractal_nb.cli.main",
        "worker",
        "--mcp-url",
        url,
        "--worker-id",
        worker_id,
        "--threads",
        str(threads),
        *llm_options,
    ]


def wait_until(
    condition: Callable[[], Any],
    what: str,
    *,
    alive: Callable[[], bool] = lambda: True,
    timeout_s: float = 30.0,
) -> Any:
    """Poll ``condition`` until it is truthy and return it; fail naming ``what`` at the deadline,
    or at once when ``alive`` says the other side died."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert alive(), f"gave up waiting for {what}: the process exited"
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return value
