"""A thinkon chain worked over MCP (docs/architecture/engine.md, "Thinkon").

An outside agent with a real MCP client works the chain through the tools (claim
the level that acts next, read its state, plan, call, return) and the store keeps
the rules for it: a plan only in the think phase, the return in the parent's
``done`` at once, bad input refused with nothing changed. A remote worker process's
engine (``RemoteStore`` over HTTP) runs a chain the notebook owns.

Covers: store/chain.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.remote.worker import work_remotely
from fractal_nb.mcp.server import BackgroundServer, build_server
from tests.engine.chain_script import assert_chain_invariant
from tests.engine.test_runs import FAST
from tests.mcp.seed_worker import call

THINKON_TOOLS = {
    "fractal_thinkon_level",
    "fractal_thinkon_chain",
    "fractal_thinkon_plan",
    "fractal_thinkon_call",
    "fractal_thinkon_return",
}
GOAL = "Write a packing list for a weekend hike."


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore(lease_s=60) as s:
        yield s


def in_memory(store: GraphStore, scenario: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(store)) as client:
            return await scenario(client)

    return asyncio.run(main())


def parents_of(store: GraphStore, graph_id: str) -> dict[str, str | None]:
    nodes = {n["node_id"]: n for n in store.get_snapshot(graph_id)["nodes"]}

    def above(node_id: str | None) -> str | None:
        node = nodes.get(node_id or "")
        return (
            None if node is None else node_id if node["node_type"] == "question" else above(node["parent_id"])
        )

    return {i: above(n["parent_id"]) for i, n in nodes.items() if n["node_type"] == "question"}


def test_an_outside_agent_works_a_chain_through_the_tools(store: GraphStore) -> None:
    g = store.create_graph(GOAL, "explore", "autonomous", metadata={"strategy": "thinkon"})
    gid = g["graph_id"]
    items = ["List the clothes.", "List the food."]

    async def agent(client: Client) -> list[str]:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert THINKON_TOOLS <= tools
        steps: list[str] = []
        while True:
            claim = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
            node = claim["node_id"]
            if node is None:
                assert (
                    claim["graph_done"]
                    or not (await call(client, "fractal_thinkon_chain", graph_id=gid))["levels"]
                )
                return steps
            level = await call(client, "fractal_thinkon_level", graph_id=gid, node_id=node)
            if level["phase"] == "think" and level["depth"] == 0:
                plan = "\n".join(f"t{i}. {item}" for i, item in enumerate(items, 1))
                await call(
                    client, "fractal_thinkon_plan", graph_id=gid, node_id=node, todo=plan, worker_id="agent"
                )
                steps.append("plan")
            elif level["phase"] == "think":
                result = f"{level['goal'][5:-1].capitalize()}: enough for two days."
                parent = await call(
                    client,
                    "fractal_thinkon_return",
                    graph_id=gid,
                    node_id=node,
                    result=result,
                    worker_id="agent",
                )
                assert parent["parent"]["done"][-1]["result"] == result, "in the parent's done at once"
                steps.append("return")
            else:
                done_goals = [d["goal"] for d in level["done"]]
                pending = [i for i in items if i not in done_goals]
                if pending:
                    child = await call(
                        client,
                        "fractal_thinkon_call",
                        graph_id=gid,
                        node_id=node,
                        goal=pending[0],
                        worker_id="agent",
                    )
                    assert child["phase"] == "think" and child["parent_id"] == node
                    steps.append("call")
                else:
                    root = await call(
                        client,
                        "fractal_thinkon_return",
                        graph_id=gid,
                        node_id=node,
                        result="Pack the clothes and the food listed.",
                        worker_id="agent",
                    )
                    assert root["parent"] is None
                    steps.append("return")

    steps = in_memory(store, agent)
    assert steps == ["plan", "call", "return", "call", "return", "return"]
    root = store.thinkon_level(gid, g["root_node_id"])
    assert [d["goal"] for d in root["done"]] == items and root["phase"] == "returned"
    assert store.get_node(gid, g["root_node_id"])["node"]["status"] == "synthesized"
    assert_chain_invariant(store.get_events(gid)["events"], parents_of(store, gid))


def test_the_chain_tools_refuse_what_breaks_a_rule_and_change_nothing(store: GraphStore) -> None:
    g = store.create_graph(GOAL, "explore", "autonomous", metadata={"strategy": "thinkon"})
    gid, root = g["graph_id"], g["root_node_id"]

    async def scenario(client: Client) -> list[str]:
        await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
        refusals = []
        for tool, args in [
            ("fractal_thinkon_call", {"goal": "Pack.", "worker_id": "agent"}),  # no plan yet: Think first
            ("fractal_thinkon_plan", {"todo": "t1. Pack.", "worker_id": "intruder"}),  # not its claim
            ("fractal_thinkon_plan", {"todo": "   ", "worker_id": "agent"}),  # empty
            ("fractal_thinkon_return", {"result": "x", "worker_id": "agent", "outcome": "sideways"}),
            (
                "fractal_thinkon_return",
                {"result": "x", "worker_id": "agent", "outcome": "failed"},
            ),  # no reason
        ]:
            result = await client.call_tool(tool, {"graph_id": gid, "node_id": root, **args})
            assert result.is_error, tool
            refusals.append(result.content[0].text)
        return refusals

    before = store.get_events(gid)["last_event_id"]
    refusals = in_memory(store, scenario)
    assert "waits for its think" in refusals[0] and "claim it first" in refusals[1]
    assert store.get_events(gid)["last_event_id"] == before + 1, "only the claim was written"
    assert store.thinkon_level(gid, root)["todo"] is None


def test_a_remote_worker_runs_a_chain_the_notebook_owns(tmp_path: Any) -> None:
    path = tmp_path / "chain.duckdb"
    with Exploration.create(
        "Should a mid-sized city build a tram line?",
        intensity="explore",
        llm=SimulatedLLM(seed=4),
        strategy="thinkon",
        path=path,
        clock=FAST,
    ) as ex:
        server = BackgroundServer(ex.store)
        url = server.start()
        try:
            with RemoteStore(url) as remote:
                reports = work_remotely(remote, SimulatedLLM(seed=4), worker_id="far", graph_id=ex.graph_id)
        finally:
            server.stop()
        assert sum(r.answered for r in reports) >= 4
        result = ex.harvest()
        assert result.strategy == "thinkon" and not result.degraded and result.findings
        calls = ex.sql("SELECT DISTINCT worker FROM llm_calls")
        assert set(calls.worker) == {"far-1"}, "every step was the remote worker's"
        assert_chain_invariant(ex.store.get_events(ex.graph_id)["events"], parents_of(ex.store, ex.graph_id))
