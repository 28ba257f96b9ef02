"""Halts over MCP (docs/architecture/engine.md, "Halts"), with a real MCP client.

The notebook's run holds questions for the person; an outside agent lists them with their options
(``fractal_list_gates``) and answers one (``fractal_choose``), and the notebook's next run answers
it with that choice in its prompt. An agent working the graph itself halts with
``fractal_submit_halt``. Bad input is ``{"error": ...}`` and changes nothing.

Covers: store/stops.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from fractal_nb import Exploration, GraphStore
from tests.engine.test_halts import SEED, RecordingLLM
from tests.engine.test_runs import FAST
from tests.mcp.seed_worker import call
from tests.mcp.test_turn_tools import in_memory

HALT_TOOLS = {"fractal_list_gates", "fractal_choose", "fractal_submit_halt"}


def test_an_agent_answers_the_options_gate_and_the_branch_goes_on_with_the_choice() -> None:
    llm = RecordingLLM(halt_on={"depot": "ambiguity"})
    with Exploration.create(SEED, intensity="pulse", llm=llm, clock=FAST) as ex:
        assert ex.run(progress=False) == "paused"
        gid, waiting = ex.graph_id, len(ex.gates)

        async def scenario(client: Client) -> dict[str, Any]:
            listed = await call(client, "fractal_list_gates", graph_id=gid)
            first = listed["gates"][0]
            await call(client, "fractal_resume_graph", graph_id=gid)  # writes need an active graph
            chosen = await call(client, "fractal_choose", graph_id=gid, node_id=first["node_id"], choice=1)
            by_text = await call(
                client,
                "fractal_choose",
                graph_id=gid,
                node_id=listed["gates"][1]["node_id"],
                choice=listed["gates"][1]["halt"]["options"][0]["option"],
            )
            return {"listed": listed, "chosen": chosen, "by_text": by_text}

        seen = in_memory(ex.store, scenario)
        listed = seen["listed"]
        assert listed["count"] == listed["held"] == waiting >= 3 and len(ex.held()) == waiting - 2
        halt = listed["gates"][0]["halt"]
        assert (
            halt["kind"] == "ambiguity" and [set(o) for o in halt["options"]] == [{"option", "tradeoffs"}] * 2
        )
        assert (
            seen["chosen"]["status"] == "open"
            and seen["chosen"]["choice"]["text"] == halt["options"][1]["option"]
        )
        assert seen["by_text"]["choice"]["text"] == listed["gates"][1]["halt"]["options"][0]["option"]
        for rest in ex.held():
            ex.choose(rest["node_id"], 0)
        assert ex.run(progress=False) == "all_complete"
        question = listed["gates"][0]["text"]
        assert f"The person chose: {halt['options'][1]['option']}" in llm.prompts_for(question)[-1]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"choice": 7}, "out of range"),
        ({"choice": ""}, "non-empty text"),
        ({"choice": "   "}, "non-empty text"),
        ({"node_id": "ROOT", "choice": "x"}, "not held by a question to the person"),
        ({"node_id": "n-missing", "choice": "x"}, "not found"),
        ({"graph_id": "g-missing", "choice": "x"}, "not found"),
    ],
)
def test_bad_choices_over_mcp_are_refused_and_change_nothing(arguments: dict[str, Any], message: str) -> None:
    with Exploration.create(
        SEED, intensity="pulse", llm=RecordingLLM(halt_on={"depot": "ambiguity"}), clock=FAST
    ) as ex:
        ex.run(progress=False)
        gid, held = ex.graph_id, ex.held()[0]["node_id"]
        ex.store.resume_graph(gid)
        root = ex.store.get_graph(gid)["root_node_id"]
        args = {"graph_id": gid, "node_id": held, **arguments}
        args["node_id"] = root if args["node_id"] == "ROOT" else args["node_id"]
        before = ex.store.get_snapshot(gid), len(ex.events())

        async def scenario(client: Client) -> Any:
            return await client.call_tool("fractal_choose", args)

        result = in_memory(ex.store, scenario)
        assert result.is_error and message in json.loads(result.content[0].text)["error"]
        assert (ex.store.get_snapshot(gid), len(ex.events())) == before


def test_an_agent_halts_on_its_claim_and_approve_skips_what_it_holds() -> None:
    store = GraphStore()
    g = store.create_graph(SEED, "pulse", "autonomous")
    gid = g["graph_id"]
    answer = store.add_node(gid, g["root_node_id"], "answer", "Two sites are possible.")
    for text in ("Which site do you mean?", "What does the land cost?"):
        store.add_node(gid, answer["node_id"], "question", text)

    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        first = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
        second = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
        halt = {"kind": "confusion", "question": "Do you mean the north or the south site?"}
        log = [
            {
                "graph_id": gid,
                "node_id": first["node_id"],
                "role": "answer",
                "model": "agent-model",
                "prompt_tokens": 120,
                "completion_tokens": 30,
                "attempts": 1,
                "latency_s": 0.5,
                "outcome": "ok",
            }
        ]
        seen["held"] = await call(
            client,
            "fractal_submit_halt",
            graph_id=gid,
            node_id=first["node_id"],
            owner="agent",
            halt=json.dumps(halt),
            calls=json.dumps(log),
        )
        blocked = {
            "kind": "blocked",
            "question": "No land prices are published.",
            "alternatives": ["Ask the land registry.", "Compare rents instead."],
        }
        seen["blocked"] = await call(
            client,
            "fractal_submit_halt",
            graph_id=gid,
            node_id=second["node_id"],
            owner="agent",
            halt=json.dumps(blocked),
        )
        seen["approved"] = await call(client, "fractal_approve_gate", graph_id=gid)
        seen["refused"] = await client.call_tool(
            "fractal_approve_gate", {"graph_id": gid, "node_ids": [first["node_id"]]}
        )
        seen["gates"] = await call(client, "fractal_list_gates", graph_id=gid)
        seen["chosen"] = await call(
            client, "fractal_choose", graph_id=gid, node_id=first["node_id"], choice="the north site"
        )
        seen["ids"] = first["node_id"], second["node_id"]
        return seen

    seen = in_memory(store, scenario)
    held_id, blocked_id = seen["ids"]
    assert seen["held"] == {"node_id": held_id, "status": "gated", "kind": "confusion"}
    assert seen["blocked"]["status"] == "saturated"
    assert seen["approved"]["count"] == 0
    assert seen["refused"].is_error and "approving cannot release it" in seen["refused"].content[0].text
    assert seen["gates"]["held"] == 1 and seen["gates"]["gates"][0]["halt"]["kind"] == "confusion"
    assert seen["chosen"]["choice"] == {
        "kind": "confusion",
        "text": "the north site",
        "asked": "Do you mean the north or the south site?",
    }
    node = store.get_node(gid, blocked_id)["node"]
    assert node["status_reason"] == "blocked"
    assert node["metadata"]["blocked"]["alternatives"] == ["Ask the land registry.", "Compare rents instead."]
    calls = store.get_llm_calls(gid, held_id)
    events = [e["kind"] for e in store.get_events(gid)["events"] if e["node_id"] == held_id]
    assert events[-3:] == ["claimed", "held", "chosen"]
    assert calls["count"] == 1, "the halt's call log landed with it"
