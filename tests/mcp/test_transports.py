"""The server over real transports: stdio and HTTP from the CLI, HTTP in-process, 4 concurrent workers.

Covers: mcp/remote/worker.py, mcp/server.py, cli/serving.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
import pandas as pd
import psutil
import pytest
from mcp import Client, StdioServerParameters

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.mcp.reads import READS
from fractal_nb.mcp.server import BackgroundServer
from fractal_nb.mcp.tools import TOOLS
from tests.local_port import free_port, listening
from tests.mcp.conftest import serve_mcp_command, wait_until, worker_command
from tests.mcp.seed_worker import call, seed_worker


def test_stdio_from_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "stdio.duckdb"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fractal_nb.cli.main", "serve-mcp", "--db", str(db)],
        env=dict(os.environ),
    )

    async def scenario() -> tuple[int, dict[str, Any], dict[str, Any]]:
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            g = await call(client, "fractal_create_graph", seed="Why do tides turn?", intensity="pulse")
            open_questions = await call(client, "fractal_get_open_questions", graph_id=g["graph_id"])
            return len(tools), g, open_questions

    count, g, open_questions = asyncio.run(scenario())
    assert count == len(TOOLS) + len(READS) == 56 + 7 and open_questions["count"] == 1
    with GraphStore(db, read_only=True) as store:  # the server process has exited: the file is ours
        assert store.get_graph(g["graph_id"])["seed"] == "Why do tides turn?"


def test_http_from_the_cli_binds_loopback(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        serve_mcp_command(tmp_path / "http.duckdb", port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until(lambda: listening(port), "the server to listen", alive=lambda: server.poll() is None)

        async def scenario() -> dict[str, Any]:
            async with Client(url) as client:
                return await call(client, "fractal_create_graph", seed="Why?", intensity="pulse")

        assert asyncio.run(scenario())["status"] == "active"
        bound = {
            c.laddr.ip
            for c in psutil.Process(server.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        }
        assert bound == {"127.0.0.1"}, "HTTP binds loopback unless --host says otherwise"
    finally:
        server.terminate()
        server.wait(timeout=20)
        if server.stdout:
            server.stdout.close()


def test_in_kernel_server_starts_serves_and_stops(tmp_path: Path) -> None:
    with Exploration.create(
        "Why do tides turn?", intensity="pulse", llm=SimulatedLLM(), path=tmp_path / "kernel.duckdb"
    ) as ex:
        url = ex.serve_mcp(port=0)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert ex.serve_mcp() == url, "a second call returns the running server"

        async def scenario() -> dict[str, Any]:
            async with Client(url) as client:
                return await call(client, "fractal_get_snapshot", graph_id=ex.graph_id)

        assert asyncio.run(scenario())["graph_id"] == ex.graph_id
        ex.stop_mcp()
        port = int(url.split(":")[2].split("/")[0])
        with pytest.raises(OSError):
            urllib.request.urlopen(url, timeout=2)
        assert not any(t.name == "fractal-nb mcp" for t in threading.enumerate())
        again = ex.serve_mcp(port=port)  # restartable on the same port
        assert again == url
    assert not any(t.name == "fractal-nb mcp" for t in threading.enumerate()), "close() stops it"


def test_four_concurrent_mcp_workers_share_one_graph(tmp_path: Path) -> None:
    """Four real clients run the seed-000 loop over HTTP until graph_done: each question claimed once."""
    with GraphStore(tmp_path / "shared.duckdb", lease_s=120) as store:
        g = store.create_graph("How do four agents split a question?", "explore", "autonomous")
        gid = g["graph_id"]
        answer = store.add_node(gid, g["root_node_id"], "answer", "Into seed questions.")
        for i in range(5):
            store.add_node(gid, answer["node_id"], "question", f"Seed question {i}")
        server = BackgroundServer(store)
        url = server.start()
        claimed: list[str] = []
        try:

            async def scenario() -> None:
                async def one(name: str) -> None:
                    async with Client(url) as client:
                        await seed_worker(client, gid, name, fanout=2, max_depth=3, claimed=claimed)

                await asyncio.gather(*(one(f"mcp-worker-{i}") for i in range(4)))

            asyncio.run(scenario())
            assert store.get_ready_to_synthesize(gid)["count"] == 0, "the cascade reached the root"
        finally:
            server.stop()
        snapshot = store.get_snapshot(gid)
        questions = [n for n in snapshot["nodes"] if n["node_type"] == "question"]
        assert len(questions) == 1 + 5 + 5 * 2, "root, 5 seed questions, 2 sub-questions each"
        assert Counter(claimed) == Counter({q["node_id"]: 1 for q in questions if q["depth"] > 0}), (
            "every question claimed exactly once"
        )
        claims = [e for e in store.get_events(gid)["events"] if e["kind"] == "claimed"]
        assert len(claims) == len(questions) - 1
        assert len({e["actor"] for e in claims}) > 1, "the work was shared"
        assert all(q["status"] == "synthesized" for q in questions), "root included"
        assert snapshot["nodes"][0]["metadata"]["synthesis"].startswith("mcp-worker-")


def test_worker_processes_complete_a_graph_the_notebook_owns(tmp_path: Path) -> None:
    """Two `fractal-nb worker` processes (4 threads each) work a graph served from this process.

    Each thread stops after max_depth × 3 = 12 nodes (the seed's circuit breaker),
    so 8 threads have room for the ~40-60 questions this graph grows to.
    """
    with Exploration.create(
        "Why do cities grow?", intensity="explore", llm=SimulatedLLM(seed=2), path=tmp_path / "owned.duckdb"
    ) as ex:
        ex.step(1)  # the seed phase, here; the work phase over MCP
        url = ex.serve_mcp()
        workers = [
            subprocess.Popen(
                worker_command(url, f"proc{i}", 4, "--llm", "simulated", "--seed-value", "2"),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(2)
        ]
        outputs = [w.communicate(timeout=300)[0] for w in workers]
        assert [w.returncode for w in workers] == [0, 0], outputs
        exits = re.findall(r"exit: (\w+)", "".join(outputs))
        assert len(exits) == 8 and set(exits) <= {"graph_done", "circuit_breaker", "no_work_after_retries"}, (
            outputs
        )
        nodes = ex.nodes()
        questions = nodes[nodes.node_type == "question"]
        assert set(questions.status) <= {"synthesized", "saturated"}, outputs  # saturated: a worker's verdict
        assert questions.query("depth == 0").iloc[0]["status"] == "synthesized", (
            "root included: the cascade ran remotely",
            outputs,
        )
        events = ex.events()
        claims = events.query("kind == 'claimed'")
        assert not unexplained_reclaims(events), ("no question claimed twice", unexplained_reclaims(events))
        assert {actor.split("-")[0] for actor in claims.actor} == {"proc0", "proc1"}
        calls = ex.llm_calls()
        assert len(calls) > len(questions) and set(calls.outcome) <= {"ok", "discarded"}, "call logs landed"
        # Discarded: a synthesis refused because a boundary question landed at or below its question
        # meanwhile (a new open sub-question, or a reopened synthesis below it).
        discarded = calls[calls.outcome == "discarded"]
        parent = dict(zip(nodes.node_id, nodes.parent_id, strict=True))
        boundaries = nodes[nodes.get("meta_boundary", False).eq(True)]["node_id"]
        touched = set()
        for node in [*ex.events().query("kind == 'reopened'")["node_id"], *boundaries]:
            while node is not None and node == node:  # up to the root (NaN above it)
                touched.add(node)
                node = parent.get(node)
        assert set(discarded.role) <= {"synthesize"} and set(discarded.node_id) <= touched, discarded
        assert ex.harvest().status == "completed"


def test_a_remote_refusal_raises_the_local_error_type(tmp_path: Path) -> None:
    from fractal_nb import NotFoundError
    from fractal_nb.mcp.remote import RemoteStore

    with GraphStore(tmp_path / "r.duckdb") as store:
        g = store.create_graph("Why?", "pulse", "autonomous")
        server = BackgroundServer(store)
        url = server.start()
        try:
            with RemoteStore(url) as remote:
                with pytest.raises(NotFoundError, match="n-missing"):
                    remote.get_context(g["graph_id"], "n-missing")
                assert remote.get_graph(g["graph_id"])["seed"] == "Why?"
        finally:
            server.stop()


def test_the_server_keeps_idle_connections_longer_than_clients_do(tmp_path: Path) -> None:
    """A worker backing off reuses its pooled connection just before the client's pool would
    drop it; a server closing idle connections as early sends "connection closed" to that call
    (a 64-client run lost a worker so). The server's keep-alive outlasts the client's."""
    with GraphStore(tmp_path / "keep.duckdb") as store:
        server = BackgroundServer(store)
        client_expiry = httpx2.Limits().keepalive_expiry  # what the MCP SDK's http client keeps
        assert client_expiry is not None
        assert server._server.config.timeout_keep_alive >= 2 * client_expiry


def unexplained_reclaims(events: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """The events of each question claimed again with no reason: a double claim.

    A claim may be taken again only once it is given back (released or recovered) or its
    lease ran out with no heartbeat (docs/architecture/store.md, rule 5; the claim names whose
    lease it was): anything else is two workers on one question.
    """
    found = []
    for _, mine in events[events.node_id.notna()].groupby("node_id"):
        held = False
        for event in mine.sort_values("event_id").to_dict("records"):
            if event["kind"] == "claimed":
                if held and "lease_expired_for" not in event["payload"]:
                    found.append(mine.to_dict("records"))
                    break
                held = True
            elif event["kind"] in ("released", "recovered"):
                held = False
    return found
