"""The read tools over MCP HTTP: what ``fractal-nb report | state | events | heads | turns | tree |
payload`` print, as JSON and text, read through a real client (issue 42, point 7).

Covers: mcp/reads.py, mcp/tool_shape.py.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import pytest

from fractal_nb import Exploration, NotFoundError, SimulatedLLM
from fractal_nb.cli.inspection import COMMANDS
from fractal_nb.mcp.reads import READS
from fractal_nb.mcp.remote import RemoteStore

READ_TOOLS = {f"fractal_{c}" for c in ("report", "state", "events", "heads", "turns", "tree", "payload")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Exploration, str]]:
    path = tmp_path_factory.mktemp("reads") / "served.duckdb"
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.run(progress=False)
        ex.harvest()
        yield ex, ex.serve_mcp()


def local(ex: Exploration, command: str, **options: Any) -> Any:
    """What the shell's command gives for the same graph, as JSON travels."""
    args = argparse.Namespace(since=options.get("since", 0), at=options.get("at"), node=options.get("node"))
    shown = COMMANDS[command](ex, args)
    return json.loads(json.dumps(shown.document, ensure_ascii=False, default=str)), shown.text


def test_every_read_tool_returns_what_the_command_prints(served: tuple[Exploration, str]) -> None:
    ex, url = served
    gid = ex.graph_id
    node = str(ex.nodes().query("node_type == 'question' and depth == 1")["node_id"].iloc[0])
    head_event = int(ex.heads()["head_event"].iloc[-1])
    asked: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "report": ({}, {}),
        "state": ({}, {}),
        "events": ({"since": 3}, {"since": 3}),
        "heads": ({"at_event": head_event}, {"at": head_event}),
        "turns": ({}, {}),
        "tree": ({"at_event": head_event}, {"at": head_event}),
        "payload": ({"node_id": node}, {"node": node}),
    }
    assert {f"fractal_{c}" for c in asked} == {r.name for r in READS} == READ_TOOLS
    before = ex.events()["event_id"].max()
    with RemoteStore(url) as remote:
        for command, (arguments, options) in asked.items():
            value = remote.call(f"fractal_{command}", graph_id=gid, **arguments)
            document, text = local(ex, command, **options)
            assert value == {"graph_id": gid, "command": command, "document": document, "text": text}, command
    assert ex.events()["event_id"].max() == before  # read: no event written


def test_the_payload_tool_holds_the_node_and_its_calls(served: tuple[Exploration, str]) -> None:
    ex, url = served
    node = str(ex.nodes().query("node_type == 'question' and depth == 1")["node_id"].iloc[0])
    with RemoteStore(url) as remote:
        record = remote.call("fractal_payload", graph_id=ex.graph_id, node_id=node)["document"]
    assert record["node"]["node_id"] == node and record["node"]["metadata"]["claims"]
    assert {c["role"] for c in record["llm_calls"]} >= {"answer"}
    assert "no prompt or reply is kept per node" in record["kept"]


def test_a_refused_read_names_what_is_wrong(served: tuple[Exploration, str]) -> None:
    ex, url = served
    with RemoteStore(url) as remote:
        with pytest.raises(NotFoundError, match="n-0000000000000000"):
            remote.call("fractal_payload", graph_id=ex.graph_id, node_id="n-0000000000000000")
        with pytest.raises(NotFoundError, match="g-nope"):
            remote.call("fractal_report", graph_id="g-nope")
        with pytest.raises(Exception, match="999999"):  # an event outside the graph's history
            remote.call("fractal_tree", graph_id=ex.graph_id, at_event=999999)
        with pytest.raises(Exception, match="(?i)integer|int"):  # the schema refuses "2"
            remote.call("fractal_events", graph_id=ex.graph_id, since="2")
