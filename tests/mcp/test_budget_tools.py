"""``budget_exhausted`` over MCP: ``fractal_resume_graph`` refuses it, ``fractal_new_budget`` goes on.

Seed 001: terminal states are terminal.

docs/mcp.md and docs/architecture/store.md, "The graph contract": an outside agent's resume of
a graph its budget stopped is refused, naming the way on, and changes nothing; the new budget is
a turn of kind ``budget`` the notebook's run then works, through the SDK's client in memory and
through ``RemoteStore`` (a real MCP client over HTTP) alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from fractal_nb import Exploration, InvalidTransitionError, SimulatedLLM, StateError
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.server import build_server
from tests.engine.test_runs import FAST
from tests.mcp.seed_worker import call

SEED = "Why do some cities grow faster than others?"


def test_an_agent_cannot_resume_a_spent_graph_and_its_new_budget_is_a_turn() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=3), clock=FAST) as ex:
        assert ex.run(progress=False, max_tokens=1_000) == "budget_exhausted"
        gid, events = ex.graph_id, len(ex.events())

        async def agent(client: Client) -> dict[str, Any]:
            seen: dict[str, Any] = {}
            for name, tool, arguments in (
                ("resume", "fractal_resume_graph", {}),
                ("active", "fractal_update_graph_status", {"status": "active"}),
                ("spent", "fractal_new_budget", {"limits": '{"max_tokens": 1000}'}),
                ("bad", "fractal_new_budget", {"limits": '{"tokens": 5}'}),
            ):
                result = await client.call_tool(tool, {"graph_id": gid, **arguments})
                assert result.is_error, name
                seen[name] = result.content[0].text
            seen["before"] = len((await call(client, "fractal_get_snapshot", graph_id=gid))["nodes"])
            seen["budget"] = await call(
                client, "fractal_new_budget", graph_id=gid, limits='{"max_tokens": 10000000}'
            )
            return seen

        async def main() -> dict[str, Any]:
            async with Client(build_server(ex.store)) as client:
                return await agent(client)

        seen = asyncio.run(main())
        assert "terminal for a resume" in seen["resume"] and "fractal_new_budget" in seen["resume"]
        assert "'budget_exhausted' to 'active'" in seen["active"] and "fractal_new_budget" in seen["active"]
        assert "the new budget is spent already (token budget of 1,000 reached" in seen["spent"]
        assert "unknown key 'tokens'" in seen["bad"]
        assert seen["budget"]["turn"] == 2 and seen["budget"]["kind"] == "budget"
        assert seen["budget"]["arguments"] == {"limits": {"max_tokens": 10_000_000}}
        assert len(ex.events()) > events and ex.status == "active"
        # The notebook runs the turn under the new limits, kept with the graph.
        assert ex.store.get_graph(gid)["metadata"]["limits"]["max_tokens"] == 10_000_000
        assert ex.run(progress=False) == "all_complete"
        assert ex.harvest().status == "completed"
        assert [(t, s) for t, s in zip(ex.turns()["kind"], ex.turns()["status"], strict=True)] == [
            ("seed", "budget_exhausted"),
            ("budget", "completed"),
        ]


def test_remote_store_refuses_the_resume_and_opens_the_new_budget(tmp_path: Any) -> None:
    with Exploration.create(
        SEED, intensity="explore", llm=SimulatedLLM(seed=4), clock=FAST, path=tmp_path / "r.duckdb"
    ) as ex:
        assert ex.run(1, progress=False) == "budget_exhausted"  # one worker: the circuit breaker
        gid, events = ex.graph_id, len(ex.events())
        url = ex.serve_mcp()
        try:
            with RemoteStore(url) as remote:
                with pytest.raises(InvalidTransitionError, match="terminal for a resume.*fractal_new_budget"):
                    remote.resume_graph(gid)
                with pytest.raises(StateError, match="is 'budget_exhausted'.*new_budget"):
                    remote.add_node(gid, ex.store.get_graph(gid)["root_node_id"], "answer", "x")
                assert len(ex.events()) == events, "nothing written"
                opened = remote.new_budget(gid, {})  # the same limits: each run has its own breaker
                turns = remote.list_turns(gid)
        finally:
            ex.stop_mcp()
        assert opened["kind"] == "budget" and opened["turn"] == 2
        assert [(t["kind"], t["status"]) for t in turns] == [("seed", "budget_exhausted"), ("budget", None)]
        assert ex.status == "active"
        with pytest.raises(
            StateError, match="is 'active': a new budget opens a turn only on a 'budget_exhausted'"
        ):
            ex.new_budget(max_tokens=10**9)
