"""Every tool over the SDK's in-memory transport; refusals are errors that change nothing.

Covers: mcp/server.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from fractal_nb import GraphStore
from fractal_nb.mcp.server import build_server
from tests.mcp.seed_worker import call
from tests.mcp.test_halt_tools import HALT_TOOLS
from tests.mcp.test_read_tools import READ_TOOLS
from tests.mcp.test_source_tools import SOURCE_TOOLS
from tests.mcp.test_thinkon_tools import THINKON_TOOLS
from tests.mcp.test_turn_tools import TURN_TOOLS

CONTRACT = {
    "fractal_create_graph",
    "fractal_resume_graph",
    "fractal_update_graph_status",
    "fractal_delete_graph",
    "fractal_add_node",
    "fractal_update_node",
    "fractal_mark_saturated",
    "fractal_claim_work",
    "fractal_synthesize_node",
    "fractal_get_snapshot",
    "fractal_get_branch",
    "fractal_get_open_questions",
    "fractal_query_convergence",
    "fractal_query_contradictions",
    "fractal_get_saturation_status",
    "fractal_get_claimable_work",
    "fractal_get_ready_to_synthesize",
}
EXTRA = {"fractal_recover_stuck", "fractal_approve_gate", "fractal_prune_branch"}
WORKER_SUPPORT = {
    "fractal_get_graph",
    "fractal_list_graphs",
    "fractal_get_context",
    "fractal_submit_answer",
    "fractal_get_synthesis_inputs",
    "fractal_release_claim",
    "fractal_record_llm_calls",
    "fractal_claim_synthesis",
    "fractal_submit_synthesis",
    "fractal_release_synthesis",
    "fractal_heartbeat",
}


@pytest.fixture
def store() -> Iterator[GraphStore]:
    with GraphStore(lease_s=60) as s:
        yield s


def run(store: GraphStore, scenario: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(store)) as client:
            return await scenario(client)

    return asyncio.run(main())


def test_the_tools_are_the_contract_and_describe_themselves(store: GraphStore) -> None:
    async def scenario(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = run(store, scenario)
    assert {t.name for t in tools} == (
        CONTRACT
        | EXTRA
        | WORKER_SUPPORT
        | TURN_TOOLS
        | SOURCE_TOOLS
        | HALT_TOOLS
        | THINKON_TOOLS
        | READ_TOOLS
    )
    for tool in tools:
        assert tool.description and len(tool.description) > 30, tool.name
        for name, spec in tool.input_schema["properties"].items():
            assert spec.get("description"), f"{tool.name}.{name} has no description"
    add_node = next(t for t in tools if t.name == "fractal_add_node")
    assert add_node.input_schema["properties"]["metadata"]["type"] == "string"


def test_every_tool_does_what_the_store_does(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        g = await call(
            client,
            "fractal_create_graph",
            seed="Why do tides turn?",
            intensity="explore",
            checkpoint_mode="depth:2",
            metadata=json.dumps({"origin": "mcp"}),
        )
        gid, root = g["graph_id"], g["root_node_id"]
        seen: dict[str, Any] = {"create": g}
        # the seed phase answers the root directly; workers claim the questions below it
        answer = await call(
            client, "fractal_add_node", graph_id=gid, parent_id=root, node_type="answer", text="The moon."
        )
        q1 = await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=answer["node_id"],
            node_type="question",
            text="Which moon?",
            metadata='{"proxy_signal": "assumptions"}',
        )
        q2 = await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=answer["node_id"],
            node_type="question",
            text="How strong?",
        )
        seen["open"] = await call(client, "fractal_get_open_questions", graph_id=gid)
        seen["claimable"] = await call(client, "fractal_get_claimable_work", graph_id=gid, worker_id="w2")
        c1 = await call(client, "fractal_claim_work", graph_id=gid, worker_id="w2")
        a1 = await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=c1["node_id"],
            node_type="answer",
            text="Ours.",
            owner="w2",
        )
        deep = await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=a1["node_id"],
            node_type="question",
            text="Gated at depth 2?",
        )
        seen["gated_status"] = deep["status"]
        seen["approve"] = await call(client, "fractal_approve_gate", graph_id=gid, node_ids=[deep["node_id"]])
        seen["prune"] = await call(client, "fractal_prune_branch", graph_id=gid, node_id=deep["node_id"])
        seen["update"] = await call(
            client,
            "fractal_update_node",
            graph_id=gid,
            node_id=a1["node_id"],
            metadata=json.dumps({"convergence_with": [answer["node_id"]], "convergence_insight": "gravity"}),
        )
        seen["convergence"] = await call(client, "fractal_query_convergence", graph_id=gid)
        await call(
            client,
            "fractal_update_node",
            graph_id=gid,
            node_id=a1["node_id"],
            metadata=json.dumps(
                {"contradiction_with": [answer["node_id"]], "contradiction_tension": "which body"}
            ),
        )
        seen["contradictions"] = await call(client, "fractal_query_contradictions", graph_id=gid)
        seen["ready"] = await call(client, "fractal_get_ready_to_synthesize", graph_id=gid)
        seen["synth1"] = await call(
            client,
            "fractal_synthesize_node",
            graph_id=gid,
            node_id=c1["node_id"],
            synthesis_text="Our moon pulls the sea.",
        )
        c2 = await call(client, "fractal_claim_work", graph_id=gid, worker_id="w3")
        seen["recover"] = await call(
            client, "fractal_recover_stuck", graph_id=gid, older_than_s=0, worker_id="w3"
        )
        seen["saturate"] = await call(
            client, "fractal_mark_saturated", graph_id=gid, node_id=c2["node_id"], reason="derivable"
        )
        seen["ready_root"] = await call(client, "fractal_get_ready_to_synthesize", graph_id=gid)
        await call(
            client, "fractal_synthesize_node", graph_id=gid, node_id=root, synthesis_text="Tides: moon."
        )
        seen["saturation"] = await call(client, "fractal_get_saturation_status", graph_id=gid)
        seen["branch"] = await call(client, "fractal_get_branch", graph_id=gid, node_id=q1["node_id"])
        seen["paused"] = await call(
            client, "fractal_update_graph_status", graph_id=gid, status="paused", reason="lunch"
        )
        seen["resume"] = await call(client, "fractal_resume_graph", graph_id=gid)
        seen["snapshot"] = await call(client, "fractal_get_snapshot", graph_id=gid)
        seen["q2"] = q2
        seen["delete"] = await call(client, "fractal_delete_graph", graph_id=gid)
        return seen

    seen = run(store, scenario)
    assert seen["create"]["budget"]["max_depth"] == 4 and seen["create"]["checkpoint_mode"] == "depth:2"
    assert seen["open"]["count"] == 2 and seen["claimable"]["count"] == 2
    assert seen["gated_status"] == "gated" and seen["approve"]["count"] == 1
    assert seen["prune"]["reason"] == "pruned"
    assert seen["update"]["edges_created"] == 1 and seen["convergence"]["count"] == 1
    assert seen["convergence"]["convergence_points"][0]["insight"] == "gravity"
    assert seen["contradictions"]["contradictions"][0]["tension"] == "which body"
    assert seen["ready"]["count"] == 1 and seen["synth1"]["status"] == "synthesized"
    assert seen["recover"]["count"] == 1 and seen["saturate"]["status"] == "saturated"
    assert [n["node_id"] for n in seen["ready_root"]["ready_nodes"]] == [seen["snapshot"]["root_node_id"]]
    assert seen["saturation"]["all_complete"] is True
    assert seen["branch"]["root"] != seen["q2"]["node_id"]
    assert seen["paused"]["status"] == "paused" and seen["resume"]["status"] == "active"
    snapshot = seen["snapshot"]
    assert snapshot["metadata"] == {"origin": "mcp", "status_reason": "resumed"}
    assert {e["edge_type"] for e in snapshot["edges"]} == {"parent_child", "convergence", "contradiction"}
    assert seen["delete"]["graph_id"] == snapshot["graph_id"]
    assert store.list_graphs()["count"] == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("fractal_create_graph", {"seed": "Why?", "intensity": "huge"}, "invalid intensity"),
        ("fractal_create_graph", {"seed": "Why?", "checkpoint_mode": "depth:0"}, "depth"),
        ("fractal_add_node", {"parent_id": "n-missing", "node_type": "answer", "text": "x"}, "not found"),
        (
            "fractal_add_node",
            {"parent_id": "ROOT", "node_type": "answer", "text": "x", "metadata": "{not json"},
            "metadata",
        ),
        ("fractal_add_node", {"parent_id": "ROOT", "node_type": "essay", "text": "x"}, "node_type"),
        ("fractal_update_node", {"node_id": "ROOT", "metadata": "[1, 2]"}, "metadata"),
        ("fractal_mark_saturated", {"node_id": "ROOT", "reason": "bored"}, "reason"),
        ("fractal_synthesize_node", {"node_id": "ROOT", "synthesis_text": "too early"}, "answer"),
        ("fractal_update_graph_status", {"status": "sleeping"}, "status"),
        ("fractal_get_snapshot", {"graph_id": "g-missing"}, "not found"),
    ],
)
def test_refusals_are_errors_that_change_nothing(
    store: GraphStore, tool: str, arguments: dict[str, Any], message: str
) -> None:
    g = store.create_graph("Why?", "pulse", "autonomous")
    before = store.get_snapshot(g["graph_id"]), store.get_events(g["graph_id"])["last_event_id"]
    arguments = {
        "graph_id": g["graph_id"],
        **{k: (g["root_node_id"] if v == "ROOT" else v) for k, v in arguments.items()},
    }

    async def scenario(client: Client) -> Any:
        refused = await client.call_tool(tool, arguments)
        alive = await call(client, "fractal_get_open_questions", graph_id=g["graph_id"])
        return refused, alive

    refused, alive = run(store, scenario)
    assert refused.is_error
    error = json.loads(refused.content[0].text)
    assert message in error["error"] and error["error_type"].endswith("Error")
    assert alive["count"] == 1, "the server still answers"
    assert (store.get_snapshot(g["graph_id"]), store.get_events(g["graph_id"])["last_event_id"]) == before
    assert store.list_graphs()["count"] == 1


def test_malformed_arguments_are_rejected_by_the_schema(store: GraphStore) -> None:
    async def scenario(client: Client) -> Any:
        wrong_type = await client.call_tool("fractal_claim_work", {"graph_id": 5, "worker_id": "w"})
        missing = await client.call_tool("fractal_add_node", {"graph_id": "g-x"})
        unknown = await client.call_tool("fractal_explode", {})
        return wrong_type, missing, unknown

    for result in run(store, scenario):
        assert result.is_error
    assert store.list_graphs()["count"] == 0


async def two_questions(client: Client, answer: str) -> tuple[str, str, str]:
    """A river graph: the root answered with ``answer``, two sub-questions under it; (graph, root, answer)."""
    g = await call(client, "fractal_create_graph", seed="Why do rivers meander?", intensity="explore")
    gid, root = g["graph_id"], g["root_node_id"]
    ans = await call(
        client, "fractal_add_node", graph_id=gid, parent_id=root, node_type="answer", text=answer
    )
    for text in ("Why does flow bend?", "Why do banks erode?"):
        await call(
            client,
            "fractal_add_node",
            graph_id=gid,
            parent_id=ans["node_id"],
            node_type="question",
            text=text,
        )
    return gid, root, ans["node_id"]


async def answer_both_leaves(client: Client, graph_id: str, **flags: Any) -> list[dict[str, Any]]:
    """Claim and answer two_questions' leaves as "agent", each write with claim_next (and ``flags``)."""
    written = []
    for text in ("Inertia.", "Erosion."):
        claim = await call(client, "fractal_claim_work", graph_id=graph_id, worker_id="agent")
        written.append(
            await call(
                client,
                "fractal_submit_answer",
                graph_id=graph_id,
                node_id=claim["node_id"],
                owner="agent",
                text=text,
                claim_next=True,
                **flags,
            )
        )
    return written


def test_the_reference_fields_saturation_and_boundaries_over_mcp(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        gid, root, _answer = await two_questions(client, "Flow and banks.")
        first = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
        seen["leaf"] = await call(
            client,
            "fractal_submit_answer",
            graph_id=gid,
            node_id=first["node_id"],
            owner="agent",
            text="Inertia carries water outward.",
            saturation="actionable",
        )
        leaf_answer = seen["leaf"]["answer"]["node_id"]
        second = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent")
        seen["second"] = await call(
            client,
            "fractal_submit_answer",
            graph_id=gid,
            node_id=second["node_id"],
            owner="agent",
            text="Outer banks erode.",
            boundary=json.dumps(
                {"text": "What do inertia and erosion share?", "converging_with": leaf_answer}
            ),
        )
        seen["noop"] = await call(client, "fractal_update_node", graph_id=gid, node_id=root, metadata="{}")
        seen["saturation"] = await call(client, "fractal_get_saturation_status", graph_id=gid)
        await call(client, "fractal_update_graph_status", graph_id=gid, status="paused", reason="a look")
        seen["graph"] = await call(client, "fractal_get_snapshot", graph_id=gid)
        seen["first"] = first
        return seen

    seen = run(store, scenario)
    assert seen["leaf"]["status"] == "saturated" and seen["leaf"]["status_reason"] == "actionable"
    boundary = next(n for n in seen["graph"]["nodes"] if n["node_id"] == seen["second"]["boundary"])
    assert boundary["metadata"] == {
        "boundary": True,
        "converging_nodes": [seen["second"]["answer"]["node_id"], seen["leaf"]["answer"]["node_id"]],
    }
    assert seen["noop"]["edges_created"] == 0
    branch = next(b for b in seen["saturation"]["branches"] if b["node_id"] == seen["first"]["node_id"])
    assert branch["saturated"] and branch["saturation_reason"] == "actionable"
    assert branch["open_questions"] == 0
    assert seen["graph"]["metadata"]["status_reason"] == "a look"
    leaf = next(n for n in seen["graph"]["nodes"] if n["node_id"] == seen["first"]["node_id"])
    assert leaf["metadata"]["saturation_reason"] == "actionable" and "synthesis" in leaf["metadata"]


def test_an_outside_agent_climbs_the_cascade_with_claim_next(store: GraphStore) -> None:
    """The seed-000 loop without asking the whole graph what is ready: each write that finishes a
    question's last sub-question hands that question's synthesis to the writer (claim_next)."""

    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        gid, root, _answer = await two_questions(client, "Two causes.")
        seen["leaves"] = await answer_both_leaves(client, gid)
        seen["other"] = await call(client, "fractal_claim_synthesis", graph_id=gid, worker_id="other")
        seen["root"] = await call(
            client,
            "fractal_submit_synthesis",
            graph_id=gid,
            node_id=root,
            worker_id="agent",
            synthesis_text="Inertia bends the flow; erosion follows it.",
            claim_next=True,
        )
        seen["refused"] = await client.call_tool(
            "fractal_submit_answer",
            {"graph_id": gid, "node_id": root, "text": "x", "claim_next": "yes"},
        )
        seen["graph_id"], seen["root_id"] = gid, root
        return seen

    seen = run(store, scenario)
    first, last = seen["leaves"]
    assert first["next_synthesis"]["node_id"] is None, "a sub-question still open: nothing above is ready"
    assert last["next_synthesis"]["node_id"] == seen["root_id"] and last["next_synthesis"]["depth"] == 0
    assert seen["other"]["node_id"] is None, "claimed with the last leaf: no one else is handed it"
    assert seen["root"]["status"] == "synthesized" and seen["root"]["next_synthesis"]["node_id"] is None
    assert seen["refused"].is_error, "claim_next is a boolean (the schema is strict)"
    assert store.get_graph(seen["graph_id"])["status"] == "active"


def test_an_outside_agent_claims_with_the_context_in_one_call(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        gid, _root, _answer = await two_questions(client, "Flow and banks.")
        claim = await call(client, "fractal_claim_work", graph_id=gid, worker_id="agent", with_context=True)
        context = await call(client, "fractal_get_context", graph_id=gid, node_id=claim["node_id"])
        refused = await client.call_tool(
            "fractal_claim_work", {"graph_id": gid, "worker_id": "other", "with_context": "true"}
        )
        return {"claim": claim, "context": context, "refused": refused, "graph_id": gid}

    seen = run(store, scenario)
    assert seen["claim"]["context"] == seen["context"]
    assert [s["text"] for s in seen["claim"]["context"]["siblings"]] == ["Why do banks erode?"]
    assert seen["refused"].is_error, "with_context is a boolean (the schema is strict)"
    claimed = store.get_events(seen["graph_id"])["events"]
    assert [e["actor"] for e in claimed if e["kind"] == "claimed"] == ["agent"], "the refusal claimed nothing"


def test_an_outside_agent_climbs_with_each_synthesis_inputs(store: GraphStore) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        gid, root, _answer = await two_questions(client, "Two causes.")
        written = await answer_both_leaves(client, gid, with_inputs=True)
        inputs = await call(client, "fractal_get_synthesis_inputs", graph_id=gid, node_id=root)
        refused = await client.call_tool(
            "fractal_claim_synthesis", {"graph_id": gid, "worker_id": "other", "with_inputs": 1}
        )
        return {"written": written, "inputs": inputs, "refused": refused, "root": root}

    seen = run(store, scenario)
    first, last = (w["next_synthesis"] for w in seen["written"])
    assert first["node_id"] is None and "inputs" not in first
    assert last["node_id"] == seen["root"] and last["inputs"] == seen["inputs"]
    assert [s["text"] for s in last["inputs"]["sub_questions"]] == [
        "Why does flow bend?",
        "Why do banks erode?",
    ]
    assert seen["refused"].is_error, "with_inputs is a boolean (the schema is strict)"
