"""The ledger's ``refused_usage`` (issue 37): usage figures a server reported that no completion can
have, kept as it sent them; checked like every text of a row; NULL in the rows of older files, which
gain the column when opened for writing and read as they are when opened read-only.

Covers: store/llm_log.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from fractal_nb.errors import InvalidInputError
from fractal_nb.store import GraphStore
from tests.conftest import Backend
from tests.store.test_bad_input import call_row

SENT = json.dumps([{"prompt_tokens": 10**12, "completion_tokens": -(10**6)}])


def row(graph_id: str, **changes: Any) -> dict[str, Any]:
    """A ledger row of the graph, no node (test_bad_input's row, with these changes)."""
    return call_row(graph_id, **changes)


def test_the_figures_a_server_sent_are_kept_with_the_row(backend: Backend) -> None:
    with backend.open() as store:
        gid = store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
        store.record_llm_calls([row(gid, refused_usage=SENT, tokens_estimated=True), row(gid)])
        calls = store.get_llm_calls(gid)["calls"]
    assert [c["refused_usage"] for c in calls] == [SENT, None]


@pytest.mark.parametrize("bad", [12, "", "x" * 2001, "a\x00b", ["list"]])
def test_refused_usage_that_is_no_short_text_is_refused_and_nothing_lands(
    backend: Backend, bad: object
) -> None:
    with backend.open() as store:
        gid = store.create_graph("Why?", "pulse", "autonomous")["graph_id"]
        with pytest.raises(InvalidInputError, match=r"calls\[1\]\.refused_usage must be text of 1 to 2,000"):
            store.record_llm_calls([row(gid), row(gid, refused_usage=bad)])
        assert store.get_llm_calls(gid)["count"] == 0


@pytest.mark.duckdb_only  # a DuckDB file of an older schema
def test_a_file_older_than_the_column_reads_null_and_gains_it_when_written(tmp_path: Path) -> None:
    path = tmp_path / "old-ledger.duckdb"
    with GraphStore(path) as store:
        gid = store.create_graph("An old ledger", "pulse", "autonomous")["graph_id"]
        store.record_llm_calls([row(gid)])
    with duckdb.connect(str(path)) as con:  # as files made before the column
        con.execute("ALTER TABLE llm_calls DROP COLUMN refused_usage")
    with GraphStore(path, read_only=True) as store:  # read as it is: the column reads NULL
        assert [c["refused_usage"] for c in store.get_llm_calls(gid)["calls"]] == [None]
    with GraphStore(path) as store:  # opened for writing: migrated, the old row says nothing
        store.record_llm_calls([row(gid, refused_usage=SENT)])
        assert [c["refused_usage"] for c in store.get_llm_calls(gid)["calls"]] == [None, SENT]
        assert store.llm_spend(gid)[0]["prompt_tokens"] == 240
