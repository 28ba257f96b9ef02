"""One tool table makes both the MCP tools and RemoteStore: each row fits the store method it names.

Covers: mcp/remote/store.py.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

from fractal_nb.errors import InvalidInputError
from fractal_nb.mcp.reads import READS
from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.server import build_server
from fractal_nb.mcp.tools import TOOLS, Param, Wire
from fractal_nb.store import GraphStore, Store, WorkerStore


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_each_row_names_a_store_method_and_its_parameters(tool) -> None:  # type: ignore[no-untyped-def]
    signature = inspect.signature(getattr(Store, tool.method))
    params = [p for p in signature.parameters.values() if p.name != "self"]
    carried = [p.arg for p in tool.params]
    assert set(carried) <= {p.name for p in params}
    # Every parameter the tool leaves out has a default the store keeps.
    left_out = [p for p in params if p.name not in carried]
    assert all(p.default is not inspect.Parameter.empty for p in left_out), left_out
    assert len({p.name for p in tool.params}) == len(tool.params)


def test_the_server_serves_exactly_the_table() -> None:
    with GraphStore() as store:
        tools = asyncio.run(build_server(store).list_tools())
    assert [t.name for t in tools] == [t.name for t in TOOLS] + [r.name for r in READS]
    by_name = {t.name: t for t in tools}
    for row in TOOLS:
        schema = by_name[row.name].input_schema
        assert list(schema["properties"]) == [p.name for p in row.params]
        assert sorted(schema.get("required", [])) == sorted(p.name for p in row.params if p.default is ...)
        assert by_name[row.name].description == row.doc


def test_remote_store_has_every_tool_with_the_store_signature() -> None:
    for row in TOOLS:
        remote, contract = getattr(RemoteStore, row.method), getattr(Store, row.method)
        assert inspect.signature(remote) == inspect.signature(contract), row.method


def test_both_stores_have_what_a_worker_uses() -> None:
    members = [
        name
        for name in dir(WorkerStore)
        if not name.startswith("_") and callable(getattr(WorkerStore, name, None))
    ]
    assert len(members) >= 15
    for name in members:
        assert callable(getattr(GraphStore, name)), name
        assert callable(getattr(RemoteStore, name)), name
    assert set(WorkerStore.__annotations__) == {"holder", "lease_s"}


@pytest.mark.parametrize(
    ("param", "value", "wire_value", "decoded"),
    [
        (Param("metadata", str, Wire.JSON_OBJECT, ""), {"a": 1}, '{"a": 1}', '{"a": 1}'),
        (Param("metadata", str, Wire.JSON_OBJECT, ""), None, "", None),
        (Param("metadata", str, Wire.JSON_OBJECT), "", "", ""),  # required: the store refuses it
        (Param("calls", str, Wire.JSON_LIST, "[]"), None, "[]", []),
        (Param("skip", str, Wire.JSON_LIST, "[]"), ["n-1"], '["n-1"]', ["n-1"]),
        (Param("worker_id", str, Wire.OPTIONAL_TEXT, ""), None, "", None),
        (Param("holder", str, Wire.HOLDER, ""), None, "", None),
        (Param("findings", str, Wire.OPTIONAL_JSON_LIST, ""), None, "", None),  # none: not an empty list
        (Param("findings", str, Wire.OPTIONAL_JSON_LIST, ""), [], "[]", []),
        (Param("findings", str, Wire.OPTIONAL_JSON_LIST, ""), [{"a": 1}], '[{"a": 1}]', [{"a": 1}]),
        (Param("failed", bool), False, False, False),
    ],
)
def test_parameters_travel_there_and_back(
    param: Param, value: object, wire_value: object, decoded: object
) -> None:
    assert param.encode(value) == wire_value
    assert param.decode(wire_value) == decoded


def test_a_list_parameter_that_is_not_a_list_is_refused() -> None:
    param = Param("calls", str, Wire.JSON_LIST, "[]")
    with pytest.raises(InvalidInputError, match="calls must be a JSON list"):
        param.decode('{"a": 1}')
    with pytest.raises(InvalidInputError, match="calls must be a JSON list: "):
        param.decode("[1,")
