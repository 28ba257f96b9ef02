"""Collect garbage after each MCP test, so a socket a client or server leaves open fails that test."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

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
        "fractal_nb.cli",
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
        "fractal_nb.cli",
        "worker",
        "--mcp-url",
        url,
        "--worker-id",
        worker_id,
        "--threads",
        str(threads),
        *llm_options,
    ]
