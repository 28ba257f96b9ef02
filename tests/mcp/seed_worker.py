"""The seed-000 worker loop as an MCP client: claim → answer → sub-questions or synthesis → cascade."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp import Client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool; its JSON result (an ``{"error": ...}`` result raises)."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    if result.is_error and not text.startswith("{"):  # refused by the SDK (schema), not by the store
        raise RuntimeError(f"{tool}: {text}")
    value: dict[str, Any] = json.loads(text)
    if result.is_error:
        raise RuntimeError(f"{tool}: {value.get('error', value)}")
    return value


async def seed_worker(
    client: Client, graph_id: str, worker: str, *, fanout: int, max_depth: int, claimed: list[str]
) -> None:
    """Work the graph until ``fractal_claim_work`` says graph_done (the seed's termination rule)."""
    while True:
        claim = await call(client, "fractal_claim_work", graph_id=graph_id, worker_id=worker)
        node = claim["node_id"]
        if node is None:
            if claim["graph_done"]:
                return
            await asyncio.sleep(0.02)  # others hold claims that may add work
            continue
        claimed.append(node)
        answer = await call(
            client,
            "fractal_add_node",
            graph_id=graph_id,
            parent_id=node,
            node_type="answer",
            text=f"{worker} answers: {claim['text']}",
            owner=worker,
        )
        if claim["depth"] + 1 < max_depth:
            for i in range(fanout):
                await call(
                    client,
                    "fractal_add_node",
                    graph_id=graph_id,
                    parent_id=answer["node_id"],
                    node_type="question",
                    text=f"{claim['text']} / part {i}",
                    metadata=json.dumps({"proxy_signal": "qualifiers"}),
                )
        else:
            await call(
                client,
                "fractal_synthesize_node",
                graph_id=graph_id,
                node_id=node,
                synthesis_text=f"leaf: {claim['text']}",
            )
        while True:  # cascade: synthesize what became ready, deepest first
            ready = await call(client, "fractal_get_ready_to_synthesize", graph_id=graph_id)
            if not ready["count"]:
                break
            for question in ready["ready_nodes"]:
                result = await client.call_tool(
                    "fractal_synthesize_node",
                    {
                        "graph_id": graph_id,
                        "node_id": question["node_id"],
                        "synthesis_text": f"{worker} sums up {question['text']}",
                    },
                )
                if result.is_error:  # another worker got there first: the seed says skip it
                    break
