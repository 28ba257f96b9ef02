"""Bad input gets a clear error and changes nothing, for every operation of the contract.

Covers: checks.py, errors.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fractal_nb import FractalError, GraphStore, InvalidInputError, NotFoundError, StateError
from tests.conftest import Backend, Tree

Call = Callable[[GraphStore, Tree], Any]

BAD_CALLS: list[tuple[str, Call, type[FractalError], str]] = [
    ("blank seed", lambda s, t: s.create_graph("  ", "pulse", "autonomous"), InvalidInputError, "seed"),
    ("seed not text", lambda s, t: s.create_graph(42, "pulse", "autonomous"), InvalidInputError, "seed"),
    ("depth:-1", lambda s, t: s.create_graph("x", "pulse", "depth:-1"), InvalidInputError, "depth:N"),
    ("graph id int", lambda s, t: s.get_snapshot(7), InvalidInputError, "graph_id"),
    ("graph id empty", lambda s, t: s.resume_graph(""), InvalidInputError, "graph_id"),
    ("unknown graph", lambda s, t: s.delete_graph("g-unknown"), NotFoundError, "g-unknown"),
    ("status bad", lambda s, t: s.update_graph_status(t.graph_id, "done"), InvalidInputError, "paused"),
    (
        "reason not text",
        lambda s, t: s.update_graph_status(t.graph_id, "paused", reason=3),
        InvalidInputError,
        "reason",
    ),
    ("parent None", lambda s, t: s.add_node(t.graph_id, None, "answer", "x"), InvalidInputError, "parent_id"),
    ("text empty", lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", ""), InvalidInputError, "text"),
    (
        "owner int",
        lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", "x", owner=5),
        InvalidInputError,
        "owner",
    ),
    (
        "answer under answer",
        lambda s, t: s.add_node(t.graph_id, t.root_answer, "answer", "x"),
        InvalidInputError,
        "answer's children are questions",
    ),
    (
        "node from other graph",
        lambda s, t: s.add_node(
            s.create_graph("other", "pulse", "autonomous")["graph_id"], t.seeds[0], "answer", "x"
        ),
        NotFoundError,
        "not found in graph",
    ),
    (
        "empty graph metadata",
        lambda s, t: s.update_graph_metadata(t.graph_id, {}),
        InvalidInputError,
        "empty",
    ),
    (
        "links not list",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], {"convergence_with": "n-1"}),
        InvalidInputError,
        "list of node ids",
    ),
    (
        "link to self",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], {"contradiction_with": [t.seeds[0]]}),
        InvalidInputError,
        "itself",
    ),
    (
        "insight not text",
        lambda s, t: s.update_node(
            t.graph_id, t.seeds[0], {"convergence_with": [t.seeds[1]], "convergence_insight": 1}
        ),
        InvalidInputError,
        "convergence_insight",
    ),
    (
        "reason bad",
        lambda s, t: s.mark_saturated(t.graph_id, t.seeds[0], "done"),
        InvalidInputError,
        "semantic_overlap",
    ),
    ("worker empty", lambda s, t: s.claim_work(t.graph_id, ""), InvalidInputError, "worker_id"),
    ("worker None", lambda s, t: s.claim_work(t.graph_id, None), InvalidInputError, "worker_id"),
    (
        "synthesis blank",
        lambda s, t: s.synthesize_node(t.graph_id, t.root, " "),
        InvalidInputError,
        "synthesis_text",
    ),
    (
        "synthesize answer",
        lambda s, t: s.synthesize_node(t.graph_id, t.root_answer, "x"),
        InvalidInputError,
        "is an answer",
    ),
    ("approve not list", lambda s, t: s.approve_gate(t.graph_id, "n-1"), InvalidInputError, "list"),
    ("approve open node", lambda s, t: s.approve_gate(t.graph_id, [t.seeds[0]]), StateError, "not gated"),
    ("recover negative", lambda s, t: s.recover_stuck(t.graph_id, -1), InvalidInputError, "older_than_s"),
    (
        "error on answer",
        lambda s, t: s.mark_error(t.graph_id, t.root_answer, "boom"),
        InvalidInputError,
        "needs a question",
    ),
    ("events since bad", lambda s, t: s.get_events(t.graph_id, since=-1), InvalidInputError, "since"),
    (
        "claimable worker int",
        lambda s, t: s.get_claimable_work(t.graph_id, 3),
        InvalidInputError,
        "worker_id",
    ),
    ("branch unknown", lambda s, t: s.get_branch(t.graph_id, "n-x"), NotFoundError, "n-x"),
    # The edges a first attack found (issue "Safe at the edges").
    ("prune the root", lambda s, t: s.prune_branch(t.graph_id, t.root), InvalidInputError, "is the root"),
    (
        "prune the root's answer",
        lambda s, t: s.prune_branch(t.graph_id, t.root_answer),
        InvalidInputError,
        "root's answer",
    ),
    (
        "saturate the root",
        lambda s, t: s.mark_saturated(t.graph_id, t.root, "actionable"),
        InvalidInputError,
        "is the root",
    ),
    (
        "metadata 50k deep",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], _nested(50_000)),
        InvalidInputError,
        "nested more than 32",
    ),
    (
        "metadata JSON 50k deep",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], '{"a":' * 50_000 + "1" + "}" * 50_000),
        InvalidInputError,
        "nested",
    ),
    (
        "metadata 33 deep",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], _nested(33)),
        InvalidInputError,
        "nested more than 32",
    ),
    (
        "metadata too big",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], {"x": "y" * 1_000_001}),
        InvalidInputError,
        "limit is 1,000,000",
    ),
    (
        "NUL in text",
        lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", "a\x00b"),
        InvalidInputError,
        "NUL",
    ),
    ("NUL in an id", lambda s, t: s.claim_work(t.graph_id, "w\x00"), InvalidInputError, "NUL"),
    # Metadata refuses NUL as text fields do, in keys and strings at any depth (issue 37).
    (
        "NUL in a metadata string",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], {"note": "a\x00b"}),
        InvalidInputError,
        r"metadata\['note'\] contains a NUL character \(\\x00\); send text without it",
    ),
    (
        "NUL in a nested metadata key",
        lambda s, t: s.update_node(t.graph_id, t.seeds[0], {"notes": [{"a\x00": 1}]}),
        InvalidInputError,
        r"metadata\['notes'\]\[0\] has a key with a NUL character",
    ),
    (
        "NUL in metadata as JSON",
        lambda s, t: s.update_graph_metadata(t.graph_id, '{"k": ["ok", "\\u0000"]}'),
        InvalidInputError,
        r"metadata\['k'\]\[1\] contains a NUL character",
    ),
    (
        "NUL in a new graph's metadata",
        lambda s, t: s.create_graph("x", "pulse", "autonomous", metadata={"k\x00": "v"}),
        InvalidInputError,
        "has a key with a NUL character",
    ),
    (
        "NUL in a node's metadata",
        lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", "x", metadata={"k": {"j": "\x00"}}),
        InvalidInputError,
        r"metadata\['k'\]\['j'\] contains a NUL character",
    ),
    (
        "NUL in a sub-question's metadata",
        lambda s, t: s.add_answer(
            t.graph_id, t.seeds[0], "x", sub_questions=[{"text": "Why?", "metadata": {"why": "\x00"}}]
        ),
        InvalidInputError,
        "contains a NUL character",
    ),
    (
        "text too long",
        lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", "x" * 100_001),
        InvalidInputError,
        "limit is 100,000",
    ),
    (
        "50 MB text",
        lambda s, t: s.add_node(t.graph_id, t.seeds[0], "answer", "x" * 50_000_000),
        InvalidInputError,
        "limit is 100,000",
    ),
    ("id too long", lambda s, t: s.get_node(t.graph_id, "n-" + "0" * 400), InvalidInputError, "at most 300"),
    (
        "depth:huge",
        lambda s, t: s.create_graph("x", "explore", "depth:99999999999999999999"),
        InvalidInputError,
        "depth:N",
    ),
    (
        "depth:N beyond the levels",
        lambda s, t: s.create_graph("x", "pulse", "depth:2"),
        InvalidInputError,
        "would never gate.*N may be 1-1",
    ),
    (
        "depth:4 on explore",
        lambda s, t: s.create_graph("x", "explore", "depth:4"),
        InvalidInputError,
        "depths 0-3",
    ),
]


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("name", "call", "error", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_is_refused_and_changes_nothing(
    tree: Tree, name: str, call: Call, error: type[FractalError], message: str
) -> None:
    store = tree.store
    before = store.get_snapshot(tree.graph_id)
    last_event = store.get_events(tree.graph_id)["last_event_id"]
    graphs = store.list_graphs()["count"]
    with pytest.raises(error, match=message):
        call(store, tree)
    assert store.get_snapshot(tree.graph_id) == before
    assert store.get_events(tree.graph_id)["last_event_id"] == last_event
    assert store.list_graphs()["count"] == graphs or name == "node from other graph"


def test_store_options_are_checked(backend: Backend) -> None:
    for lease_s in (0, -1, "60"):
        with pytest.raises(InvalidInputError, match="lease_s"):
            backend.open(lease_s=lease_s)


@pytest.mark.duckdb_only  # a DuckDB file's path and its read-only open
def test_duckdb_paths_are_checked(tmp_path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        GraphStore(tmp_path / "missing-folder" / "x.duckdb")
    with pytest.raises(InvalidInputError, match="needs a path"):
        GraphStore(read_only=True)
    with pytest.raises(InvalidInputError, match="does not exist"):
        GraphStore(tmp_path / "absent.duckdb", read_only=True)
    # issue 37: DuckDB's log, <name>.wal, could not be made beside it: its error, and a file left
    with pytest.raises(InvalidInputError, match="the store's path: the file name .* at most 251 fit here"):
        GraphStore(tmp_path / ("x" * 253))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.duckdb_only  # PostgreSQL's twin: test_postgres (a schema holding another application's tables)
def test_a_file_that_is_not_a_store_is_refused(tmp_path) -> None:
    import duckdb

    path = tmp_path / "other.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(InvalidInputError, match="an empty DuckDB database, not a fractal_nb store"):
        GraphStore(path, read_only=True)


@pytest.mark.duckdb_only
def test_another_applications_duckdb_file_is_refused_unchanged(tmp_path) -> None:
    import hashlib

    import duckdb

    path = tmp_path / "sales.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
        con.execute("INSERT INTO customers VALUES (1, 'Ada')")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InvalidInputError, match=r"not a fractal_nb store: it holds other tables \(customers"):
        GraphStore(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    with duckdb.connect(str(path)) as con:
        assert [r[0] for r in con.execute("SHOW TABLES").fetchall()] == ["customers"]
    # A table named like ours in a file without the store's own table is not ours either.
    lookalike = tmp_path / "lookalike.duckdb"
    with duckdb.connect(str(lookalike)) as con:
        con.execute("CREATE TABLE nodes (id INTEGER)")
    with pytest.raises(InvalidInputError, match="not a fractal_nb store"):
        GraphStore(lookalike)


@pytest.mark.duckdb_only  # a DuckDB file of an older schema
def test_a_store_file_of_schema_1_gains_the_holder_column(tmp_path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    with GraphStore(path) as store:
        g = store.create_graph("An old file", "pulse", "autonomous")
    with duckdb.connect(str(path)) as con:  # as schema 1 left it
        con.execute("ALTER TABLE nodes DROP COLUMN holder")
        con.execute("DROP TABLE holders")
        con.execute("DROP TABLE synthesis_claims")
        con.execute("UPDATE store_info SET value = '1' WHERE key = 'schema_version'")
    with GraphStore(path) as store:
        assert store.get_graph(g["graph_id"])["seed"] == "An old file"
        answer = store.add_node(g["graph_id"], g["root_node_id"], "answer", "Yes.")["node_id"]
        store.add_node(g["graph_id"], answer, "question", "Why?")
        assert store.claim_work(g["graph_id"], "w1")["node_id"] is not None


# -- the ledger: spend rows from outside (MCP's fractal_record_llm_calls) ---------------------------


def _call_row(tree: Tree, **changes: Any) -> dict[str, Any]:
    return call_row(tree.graph_id, **{"node_id": tree.seeds[0], **changes})


def call_row(graph_id: str, /, **changes: Any) -> dict[str, Any]:
    """A valid ledger row of the graph (``record_llm_calls``), with ``changes`` over it."""
    row: dict[str, Any] = {
        "graph_id": graph_id,
        "node_id": None,
        "worker": "w1",
        "role": "answer",
        "model": "m",
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "attempts": 1,
        "latency_s": 0.5,
        "outcome": "ok",
    }
    return {**row, **changes}


BAD_LEDGER_ROWS: list[tuple[str, Callable[[Tree], Any], str]] = [
    ("not objects", lambda t: [1, 2, 3], r"calls\[0\] must be an object with graph_id"),
    ("not a list", lambda t: {"calls": []}, "calls must be a list"),
    ("role hack", lambda t: [_call_row(t, role="hack")], "role 'hack' is not a role; roles: seed, answer"),
    ("unknown graph", lambda t: [_call_row(t, graph_id="g-unknown")], "graph 'g-unknown' not found"),
    (
        "node of no graph",
        lambda t: [_call_row(t, node_id="n-0000000000000000")],
        "node\\(s\\) 'n-0000000000000000' that are not in graph",
    ),
    ("-1000000 tokens", lambda t: [_call_row(t, prompt_tokens=-1_000_000)], "prompt_tokens must be a whole"),
    ("-10**12 tokens", lambda t: [_call_row(t, completion_tokens=-(10**12))], "completion_tokens must be"),
    ("10**12 tokens", lambda t: [_call_row(t, prompt_tokens=10**12)], "from 0 to 10,000,000"),
    ("tokens as text", lambda t: [_call_row(t, prompt_tokens="5")], "prompt_tokens must be a whole"),
    ("tokens as bool", lambda t: [_call_row(t, attempts=True)], "attempts must be a whole"),
    ("latency nan", lambda t: [_call_row(t, latency_s=float("nan"))], "latency_s must be seconds"),
    ("model too long", lambda t: [_call_row(t, model="m" * 501)], "model must be text of 1 to 500"),
    ("error too long", lambda t: [_call_row(t, error="e" * 2001)], "error must be text of 1 to 2,000"),
    ("worker not text", lambda t: [_call_row(t, worker=5)], "worker"),
    ("unknown field", lambda t: [_call_row(t, cost=3.0)], "unknown field\\(s\\) cost"),
    ("missing field", lambda t: [{"graph_id": t.graph_id}], "lacks role, model"),
    ("outcome bad", lambda t: [_call_row(t, outcome="free")], "outcome 'free' is invalid"),
    ("one bad row of two", lambda t: [_call_row(t), _call_row(t, prompt_tokens=-1)], r"calls\[1\]"),
    ("too many rows", lambda t: [_call_row(t)] * 1_001, "at most 1,000"),
]


@pytest.mark.parametrize(("name", "rows", "message"), BAD_LEDGER_ROWS, ids=[c[0] for c in BAD_LEDGER_ROWS])
def test_a_bad_spend_row_is_refused_and_records_nothing(
    tree: Tree, name: str, rows: Callable[[Tree], Any], message: str
) -> None:
    store = tree.store
    with pytest.raises(InvalidInputError, match=message):
        store.record_llm_calls(rows(tree))
    assert store.get_llm_calls(tree.graph_id)["count"] == 0 and store.llm_spend(tree.graph_id) == []
    assert (
        store.record_llm_calls([_call_row(tree), _call_row(tree, node_id=None, tokens_estimated=True)]) == 2
    )
    rows_kept = store.get_llm_calls(tree.graph_id)["calls"]
    assert [r["tokens_estimated"] for r in rows_kept] == [False, True]


def test_the_ledgers_roles_are_the_engines() -> None:
    from fractal_nb.llm.schemas import SCHEMAS, role_of
    from fractal_nb.store.llm_log import ROLES
    from fractal_nb.vocabulary import TOOL_NAMES

    # Every schema's role, and a row per tool call a model makes (docs/architecture/engine.md, "Tool calls").
    tools = {f"tool:{name}" for name in (*TOOL_NAMES, "unknown")}
    assert {role_of(s) for s in SCHEMAS} | tools == set(ROLES)


def test_bad_spend_rows_over_mcp_are_clear_errors_that_record_nothing(tree: Tree) -> None:
    import asyncio
    import json

    from mcp import Client

    from fractal_nb.mcp.server import build_server

    store = tree.store
    refusals = {
        "[1, 2, 3]": "must be an object",
        json.dumps([_call_row(tree, role="hack")]): "role 'hack' is not a role",
        json.dumps([_call_row(tree, graph_id="g-unknown")]): "not found",
        json.dumps([_call_row(tree, prompt_tokens=-1_000_000)]): "prompt_tokens must be a whole number",
        json.dumps([_call_row(tree, prompt_tokens=-(10**12))]): "prompt_tokens must be a whole number",
    }

    async def scenario() -> list[Any]:
        async with Client(build_server(store)) as client:
            return [await client.call_tool("fractal_record_llm_calls", {"calls": c}) for c in refusals]

    for result, message in zip(asyncio.run(scenario()), refusals.values(), strict=True):
        assert result.is_error
        error = json.loads(result.content[0].text)
        assert message in error["error"] and error["error_type"] == "InvalidInputError", error
    assert store.get_llm_calls(tree.graph_id)["count"] == 0


def test_nul_in_metadata_over_mcp_is_a_clear_error_that_changes_nothing(tree: Tree) -> None:
    """Metadata refuses NUL over MCP as the API does, escaped in the JSON the tools take (issue 37)."""
    import asyncio
    import json

    from mcp import Client

    from fractal_nb.mcp.server import build_server

    store = tree.store
    before = store.get_snapshot(tree.graph_id)
    graphs = store.list_graphs()["count"]
    calls = {
        "fractal_update_node": {
            "graph_id": tree.graph_id,
            "node_id": tree.seeds[0],
            "metadata": '{"a": "\\u0000"}',
        },
        "fractal_create_graph": {
            "seed": "Why?",
            "intensity": "pulse",
            "metadata": json.dumps({"k\x00": "v"}),
        },
    }

    async def scenario() -> list[Any]:
        async with Client(build_server(store)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls.items()]

    for result in asyncio.run(scenario()):
        assert result.is_error
        error = json.loads(result.content[0].text)
        assert "NUL character" in error["error"] and error["error_type"] == "InvalidInputError", error
    assert store.get_snapshot(tree.graph_id) == before and store.list_graphs()["count"] == graphs


@pytest.mark.duckdb_only  # a DuckDB file of an older schema
def test_a_store_file_without_the_estimated_column_gains_it(tmp_path) -> None:
    import duckdb

    path = tmp_path / "old-ledger.duckdb"
    with GraphStore(path) as store:
        g = store.create_graph("An old ledger", "pulse", "autonomous")
        row = {
            "graph_id": g["graph_id"],
            "node_id": None,
            "worker": None,
            "role": "seed",
            "model": "m",
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "attempts": 1,
            "latency_s": 0.1,
            "outcome": "ok",
        }
        store.record_llm_calls([row])
    with duckdb.connect(str(path)) as con:  # as files before the column left it
        con.execute("ALTER TABLE llm_calls DROP COLUMN tokens_estimated")
    for read_only in (True, False):  # as it is, then migrated: its rows say nothing about estimates
        with GraphStore(path, read_only=read_only) as store:
            assert [c["tokens_estimated"] for c in store.get_llm_calls(g["graph_id"])["calls"]] == [None]
            assert store.llm_spend(g["graph_id"])[0]["prompt_tokens"] == 10
