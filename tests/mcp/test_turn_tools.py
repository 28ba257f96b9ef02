"""Turns, heads, history and forks over MCP (docs/architecture/store.md, "Turns and heads", "History and
forks").

An outside agent takes a turn with a real MCP client while the notebook's ``Exploration``, in the
process that serves the file (as ``ex.serve_mcp()`` does), runs and harvests it into a new head.
Every tool refuses bad input with ``{"error": ...}`` and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mcp import Client

from fractal_nb import Exploration, GraphStore, SimulatedLLM
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.server import build_server
from tests.mcp.seed_worker import call

SEED = "Why do cities grow?"
FOLLOW_UP = "What stops a city from growing?"
TURN_TOOLS = {
    "fractal_ask",
    "fractal_deepen",
    "fractal_redecompose",
    "fractal_add_note",
    "fractal_new_budget",
    "fractal_list_turns",
    "fractal_list_heads",
    "fractal_get_state_at",
    "fractal_fork_graph",
    "fractal_get_lineage",
}


def harvested(path: Path | None = None) -> Exploration:
    ex = Exploration.create(SEED, intensity="pulse", llm=SimulatedLLM(seed=1), path=path)
    assert ex.run(progress=False) == "all_complete"
    assert ex.harvest().status == "completed"
    return ex


@pytest.fixture
def ex() -> Iterator[Exploration]:
    with harvested() as exploration:
        yield exploration


def in_memory(store: GraphStore, scenario: Any) -> Any:
    """Run ``scenario(client)`` against the store's server over the SDK's in-memory transport."""

    async def main() -> Any:
        async with Client(build_server(store)) as client:
            return await scenario(client)

    return asyncio.run(main())


def seed_questions(ex: Exploration) -> list[str]:
    nodes = ex.nodes()
    return list(nodes.query("node_type == 'question' and depth == 1")["node_id"])


def test_the_turn_tools_are_served_and_describe_themselves(ex: Exploration) -> None:
    async def scenario(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in in_memory(ex.store, scenario)}
    assert TURN_TOOLS <= set(tools)
    assert "fractal_widen" not in tools, "widen's questions come from the notebook's model"
    for name in TURN_TOOLS:
        assert len(tools[name].description or "") > 60, name
    assert tools["fractal_deepen"].input_schema["properties"]["levels"]["type"] == "integer"
    assert tools["fractal_ask"].input_schema["required"] == ["graph_id", "question"]


def test_each_turn_tool_does_what_the_store_does(ex: Exploration) -> None:
    gid = ex.graph_id
    first, second, third = seed_questions(ex)[:3]
    head = ex.store.list_heads(gid)[0]

    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["turns"] = await call(client, "fractal_list_turns", graph_id=gid)
        seen["heads"] = await call(client, "fractal_list_heads", graph_id=gid)
        seen["ask"] = await call(client, "fractal_ask", graph_id=gid, question=FOLLOW_UP)
        seen["note"] = await call(client, "fractal_add_note", graph_id=gid, node_id=first, text="Ports.")
        seen["deepen"] = await call(client, "fractal_deepen", graph_id=gid, node_id=second, levels=1)
        seen["redo"] = await call(client, "fractal_redecompose", graph_id=gid, node_id=third, hint="Costs.")
        seen["open"] = await call(client, "fractal_list_turns", graph_id=gid)
        seen["at"] = await call(client, "fractal_get_state_at", graph_id=gid, event_id=head["head_event"])
        return seen

    seen = in_memory(ex.store, scenario)
    assert seen["heads"]["heads"] == json.loads(json.dumps(ex.store.list_heads(gid)))
    assert [t["turn"] for t in seen["turns"]["turns"]] == [1]
    assert seen["ask"]["turn"] == 2 and seen["ask"]["kind"] == "ask" and len(seen["ask"]["created"]) == 1
    asked = ex.store.get_node(gid, seen["ask"]["created"][0])["node"]
    assert asked["text"] == FOLLOW_UP and asked["status"] == "open"
    assert [seen[k]["turn"] for k in ("note", "deepen", "redo")] == [2, 2, 2], "they join the open turn"
    assert seen["redo"]["reopened"] == [third]
    assert ex.status == "active", "a completed graph goes back to active for the turn"
    opened = seen["open"]["turns"][-1]
    assert (opened["turn"], opened["head_event"]) == (2, None)
    assert [r["kind"] for r in opened["requests"]] == ["ask", "note", "deepen", "redecompose"]
    at = ex.at(head["head_event"])
    assert seen["at"]["event_id"] == head["head_event"] and seen["at"]["status"] == "completed"
    assert [n["node_id"] for n in seen["at"]["nodes"]] == list(at.nodes()["node_id"])
    assert seen["at"]["nodes"] == json.loads(json.dumps(list(at.node_records)))


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("fractal_ask", {"question": "  "}, "question"),
        ("fractal_ask", {"question": "SEED_TEXT"}, "asked already"),
        ("fractal_ask", {"question": "Where?", "under": "n-missing"}, "not found"),
        ("fractal_ask", {"question": "Where?", "under": "../x"}, "not found"),
        ("fractal_deepen", {"node_id": "SEED_Q", "levels": 0}, "levels"),
        ("fractal_deepen", {"node_id": "SEED_Q", "levels": 9}, "levels"),
        ("fractal_deepen", {"node_id": "ROOT_ANSWER"}, "needs a question"),
        ("fractal_redecompose", {"node_id": "ROOT"}, "root"),
        ("fractal_redecompose", {"node_id": "n-missing"}, "not found"),
        ("fractal_add_note", {"node_id": "SEED_Q", "text": ""}, "text"),
        ("fractal_add_note", {"node_id": "ROOT_ANSWER", "text": "x"}, "needs a question"),
        ("fractal_list_turns", {"graph_id": "g-missing"}, "not found"),
        ("fractal_list_heads", {"graph_id": "g-missing"}, "not found"),
        ("fractal_get_state_at", {"event_id": 0}, "event_id"),
        ("fractal_get_state_at", {"event_id": 10**9}, "past the last event"),
        ("fractal_get_state_at", {"graph_id": "OTHER", "event_id": "HEAD"}, "not one of graph"),
        ("fractal_fork_graph", {"at_event": -1}, "event_id"),
        ("fractal_fork_graph", {"at_event": 10**9}, "past the last event"),
        ("fractal_fork_graph", {"graph_id": "g-missing", "at_event": 1}, "not found"),
        ("fractal_get_lineage", {"graph_id": "g-missing"}, "not found"),
    ],
)
def test_turn_refusals_are_errors_that_change_nothing(
    ex: Exploration, tool: str, arguments: dict[str, Any], message: str
) -> None:
    store, gid = ex.store, ex.graph_id
    other = store.create_graph("Why do rivers bend?", "pulse")  # a graph beside it, in the same store
    nodes = ex.nodes()
    seed_q = seed_questions(ex)[0]
    places = {
        "ROOT": ex.store.get_graph(gid)["root_node_id"],
        "ROOT_ANSWER": nodes.query("node_type == 'answer' and depth == 0")["node_id"].iloc[0],
        "SEED_Q": seed_q,
        "SEED_TEXT": nodes.set_index("node_id").loc[seed_q, "text"],
        "OTHER": other["graph_id"],
        "HEAD": store.list_heads(gid)[-1]["head_event"],
    }
    arguments = {"graph_id": gid, **{k: places.get(v, v) for k, v in arguments.items()}}

    def state() -> Any:
        return (
            [store.get_snapshot(g["graph_id"]) for g in store.list_graphs()["graphs"]],
            store.list_turns(gid),
            store.list_family(),
            store.get_events(gid)["last_event_id"],
        )

    before = state()

    async def scenario(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    refused = in_memory(store, scenario)
    assert refused.is_error
    error = json.loads(refused.content[0].text)
    assert message in error["error"] and error["error_type"].endswith("Error"), error
    assert state() == before
    assert ex.status == "completed"


@pytest.mark.parametrize("value", [True, "1", 1.0, 1.5, None])
def test_an_event_or_level_that_is_no_whole_number_is_refused_by_the_schema(
    ex: Exploration, value: Any
) -> None:
    gid = ex.graph_id
    seed_q = seed_questions(ex)[0]
    before = ex.store.list_family(), ex.store.list_turns(gid), ex.store.get_events(gid)["last_event_id"]

    async def scenario(client: Client) -> list[Any]:
        return [
            await client.call_tool("fractal_get_state_at", {"graph_id": gid, "event_id": value}),
            await client.call_tool("fractal_fork_graph", {"graph_id": gid, "at_event": value}),
            await client.call_tool("fractal_deepen", {"graph_id": gid, "node_id": seed_q, "levels": value}),
        ]

    for result in in_memory(ex.store, scenario):
        assert result.is_error and "validation error" in result.content[0].text
    assert (
        ex.store.list_family(),
        ex.store.list_turns(gid),
        ex.store.get_events(gid)["last_event_id"],
    ) == before


def test_an_outside_agent_takes_a_turn_that_the_notebook_harvests_into_a_head(tmp_path: Path) -> None:
    """A real MCP client over HTTP asks a follow-up; the notebook (the server's process) runs and
    harvests it; the client then lists the new head and reads the state at the old one."""
    with harvested(tmp_path / "served.duckdb") as ex:
        gid = ex.graph_id
        url = ex.serve_mcp()
        try:

            async def agent_asks() -> dict[str, Any]:
                async with Client(url) as client:
                    heads = await call(client, "fractal_list_heads", graph_id=gid)
                    assert [h["turn"] for h in heads["heads"]] == [1]
                    asked = await call(client, "fractal_ask", graph_id=gid, question=FOLLOW_UP)
                    return {"head": heads["heads"][0], "asked": asked}

            first = asyncio.run(agent_asks())
            new_id = first["asked"]["created"][0]
            # The notebook watches: the turn is open and the graph active again.
            assert ex.status == "active"
            assert ex.turns()["head_event"].isna().tolist() == [False, True]
            assert ex.run(progress=False) == "all_complete"
            result = ex.harvest()
            assert result.status == "completed"
            assert ex.store.get_node(gid, new_id)["node"]["status"] in ("synthesized", "saturated")

            async def agent_lists() -> dict[str, Any]:
                async with Client(url) as client:
                    return {
                        "heads": await call(client, "fractal_list_heads", graph_id=gid),
                        "then": await call(
                            client,
                            "fractal_get_state_at",
                            graph_id=gid,
                            event_id=first["head"]["head_event"],
                        ),
                    }

            later = asyncio.run(agent_lists())
        finally:
            ex.stop_mcp()
        heads = later["heads"]["heads"]
        assert [h["turn"] for h in heads] == [1, 2]
        current = heads[-1]
        assert current["kind"] == "ask" and current["status"] == "completed"
        assert current["head_event"] > first["head"]["head_event"]
        assert current["requests"][0]["arguments"]["question"] == FOLLOW_UP
        assert (
            current["root_synthesis"] and current["root_synthesis"] == ex.heads()["root_synthesis"].iloc[-1]
        )
        assert list(ex.heads()["head_event"]) == [h["head_event"] for h in heads]
        then = later["then"]
        assert new_id not in {n["node_id"] for n in then["nodes"]}, "the old head is as it was"
        assert len(then["nodes"]) == len(ex.at(first["head"]["head_event"]).nodes())


def test_a_fork_over_mcp_leaves_the_source_unchanged(tmp_path: Path) -> None:
    """RemoteStore (a real MCP client over HTTP) forks at the head and takes a turn on the fork."""
    with harvested(tmp_path / "forked.duckdb") as ex:
        gid = ex.graph_id
        nodes, edges, events = ex.nodes(), ex.edges(), ex.events()
        turns = ex.store.list_turns(gid)
        head = turns[-1]["head_event"]
        url = ex.serve_mcp()
        try:
            with RemoteStore(url) as remote:
                fork = remote.fork_graph(gid, head)
                assert (fork["forked_from"], fork["forked_at"]) == (gid, head)
                step = remote.ask(fork["graph_id"], FOLLOW_UP)
                family = remote.get_lineage(gid)
                fork_turns = remote.list_turns(fork["graph_id"])
                source_turns = remote.list_turns(gid)
        finally:
            ex.stop_mcp()
        assert [g["graph_id"] for g in family] == [gid, fork["graph_id"]]
        assert step["turn"] == 2 and [t["head_event"] for t in fork_turns] == [head, None]
        assert source_turns == json.loads(json.dumps(turns))
        assert ex.status == "completed"
        pd.testing.assert_frame_equal(ex.nodes(), nodes)
        pd.testing.assert_frame_equal(ex.edges(), edges)
        pd.testing.assert_frame_equal(ex.events(), events)
        forked = ex.store.get_snapshot(fork["graph_id"])
        assert FOLLOW_UP in {n["text"] for n in forked["nodes"]}
        assert FOLLOW_UP not in set(ex.nodes()["text"])


def test_an_agents_question_while_the_notebook_runs_joins_the_open_turn(tmp_path: Path) -> None:
    """Rule 24: the run lock is the notebook's; a request over MCP during its run joins the turn."""
    during = "Which city grew fastest?"
    with harvested(tmp_path / "running.duckdb") as ex:
        gid = ex.graph_id
        url = ex.serve_mcp()
        try:
            with RemoteStore(url) as agent:
                agent.ask(gid, FOLLOW_UP)
                asked: list[dict[str, Any]] = []

                def ask_once(record: object) -> None:  # from a worker thread, once a node is written
                    if not asked:
                        asked.append(dict(agent.ask(gid, during)))

                assert ex.run(progress=False, on_step=ask_once) == "all_complete"
                ex.harvest()
                heads = agent.list_heads(gid)
        finally:
            ex.stop_mcp()
        assert asked and asked[0]["turn"] == 2, "joined the open turn"
        assert [h["turn"] for h in heads] == [1, 2]
        assert [r["arguments"]["question"] for r in heads[-1]["requests"]] == [FOLLOW_UP, during]
        questions = ex.nodes().query("node_type == 'question'").set_index("text")
        assert questions.loc[during, "status"] in ("synthesized", "saturated"), "worked in the same run"
