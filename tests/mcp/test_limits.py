"""The store's bounds over a real MCP client on 127.0.0.1, and the sizes HTTP carries (issue 37).

An answer past the sub-question bound, or a node past its children's, is refused
over MCP as in the store, nothing written. A reply over the SDK client's 1 MiB SSE
event limit reaches a client of the SSE era (the server answers in JSON).
A source at the store's limit (5,000,000 characters, whatever they are) travels in
one request; a larger request is refused with an error that names the limit.

Covers: mcp/server.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from fractal_nb import GraphStore, InvalidInputError
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.server import MAX_REQUEST_BYTES, BackgroundServer
from fractal_nb.store.sources import MAX_SOURCE_CHARS
from fractal_nb.vocabulary import MAX_CHILDREN, MAX_SUB_QUESTIONS
from tests.conftest import make_tree

MODES = ["auto", "legacy"]  # 2026-07-28 (JSON replies already), and the SSE era before it
MIB = 1 << 20


@dataclass
class Served:
    store: GraphStore
    url: str
    graph_id: str
    root_answer: str
    claimed: str  # a seed question claimed by w1


@pytest.fixture
def served() -> Iterator[Served]:
    with GraphStore() as store:
        tree = make_tree(store, seeds=3)
        claimed = store.claim_work(tree.graph_id, "w1", holder=None)["node_id"]
        assert claimed is not None
        server = BackgroundServer(store)
        try:
            url = server.start()
            yield Served(store, url, tree.graph_id, tree.root_answer, claimed)
        finally:
            server.stop()


def call_tool(url: str, mode: str, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any], int]:
    """One tool call: (is_error, the JSON result, the size of its text); a JSON-RPC error raises MCPError."""

    async def scenario() -> tuple[bool, dict[str, Any], int]:
        async with Client(url, mode=mode) as client:
            try:
                result = await client.call_tool(tool, arguments)
            except MCPError as exc:  # raised out here, not inside the session's task group
                refused = exc
            else:
                refused = None
        if refused is not None:
            raise refused
        text = result.content[0].text
        return bool(result.is_error), json.loads(text), len(text)

    return asyncio.run(scenario())


def graph_state(served: Served) -> tuple[Any, ...]:
    return served.store.get_snapshot(served.graph_id), served.store.get_events(served.graph_id)["events"]


def refused(served: Served, mode: str, tool: str, **arguments: Any) -> str:
    """``tool`` called on the served graph: refused as bad input with nothing written; its message."""
    before = graph_state(served)
    failed, value, _ = call_tool(served.url, mode, tool, graph_id=served.graph_id, **arguments)
    assert failed and value["error_type"] == "InvalidInputError"
    assert graph_state(served) == before
    return str(value["error"])


@pytest.mark.parametrize("mode", MODES)
def test_an_answer_past_the_bound_is_refused_over_mcp_and_nothing_is_written(
    served: Served, mode: str
) -> None:
    error = refused(
        served,
        mode,
        "fractal_submit_answer",
        node_id=served.claimed,
        owner="w1",
        text="An answer.",
        sub_questions=json.dumps([f"Which part {i} matters?" for i in range(10_000)]),
    )
    assert f"sub_questions holds 10,000 questions; an answer asks at most {MAX_SUB_QUESTIONS}" in error


@pytest.mark.parametrize("mode", MODES)
def test_a_node_past_its_children_bound_is_refused_over_mcp(served: Served, mode: str) -> None:
    with served.store.batch():
        for i in range(MAX_CHILDREN - 3):
            served.store.add_node(served.graph_id, served.root_answer, "question", f"Seed question {i + 3}?")
    error = refused(
        served,
        mode,
        "fractal_add_node",
        parent_id=served.root_answer,
        node_type="question",
        text="One seed question too many?",
    )
    assert f"has {MAX_CHILDREN} children; 1 more would pass the limit of {MAX_CHILDREN} per node" in error


def test_a_reply_over_the_clients_sse_limit_reaches_a_client_of_the_sse_era(served: Served) -> None:
    """A client at 2026-07-28 got its replies in JSON already; one before it got them as SSE events."""
    line = "The tide turns twice a day. " * 60_000  # one line of 1.7 MB: past the SDK client's 1 MiB event
    served.store.add_source_text(served.graph_id, "tides.txt", line)
    failed, value, size = call_tool(
        served.url,
        "legacy",
        "fractal_read_source",
        graph_id=served.graph_id,
        source="tides.txt",
        line_start=1,
        line_end=1,
    )
    assert not failed and value["lines"] == [line] and size > MIB


def test_a_source_at_the_store_limit_travels_over_mcp_whatever_its_characters(served: Served) -> None:
    text = "\x01" * MAX_SOURCE_CHARS  # six bytes each as JSON (\u0001): the largest request a source makes
    failed, value, _ = call_tool(
        served.url, "auto", "fractal_add_source_text", graph_id=served.graph_id, name="bells.txt", text=text
    )
    assert not failed and value["name"] == "bells.txt"
    assert served.store.read_source(served.graph_id, "bells.txt", 1, 1)["lines"] == [text]


@pytest.mark.parametrize("mode", MODES)
def test_a_request_over_the_limit_is_refused_with_an_error_that_names_it(served: Served, mode: str) -> None:
    text = "x" * (MAX_REQUEST_BYTES + 1)
    with pytest.raises(
        MCPError, match=rf"the request is [\d,]+ bytes; this server reads at most {MAX_REQUEST_BYTES:,}"
    ):
        call_tool(
            served.url, mode, "fractal_add_source_text", graph_id=served.graph_id, name="big.txt", text=text
        )
    with (
        RemoteStore(served.url) as remote,
        pytest.raises(InvalidInputError, match=f"at most {MAX_REQUEST_BYTES:,}"),
    ):
        remote.add_source_text(served.graph_id, "big.txt", text)
    assert served.store.list_sources(served.graph_id) == []
