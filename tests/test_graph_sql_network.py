"""``ex.sql`` opens no connection, whatever the query names (docs/architecture/facade.md, "Inspecting a
file").

The queries run in a child process in a network namespace of its own (``unshare -n``)
under ``strace -e connect``: every connect() the process attempts is in the trace, and
none may be made (a query that names ``read_parquet('https://…')`` made DuckDB's default
connection look up its extension host and ask it for httpfs).

Covers: store/frame_sql.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
from tests.extras import ci_requires_extras

REMOTE_QUERIES = [
    "SELECT * FROM read_parquet('https://example.com/a.parquet')",
    "SELECT * FROM read_csv('http://example.com/a.csv')",
    "SELECT * FROM iceberg_scan('s3://bucket/table')",
    "SELECT * FROM sqlite_scan('other.db', 'nodes')",
    "SELECT * FROM 'https://example.com/b.csv'",
    "SELECT * FROM nodes, read_json('https://example.com/c.json')",
]

CHILD = textwrap.dedent(
    """
    import json, sys
    from fractal_nb import Exploration, InvalidInputError, SimulatedLLM
    refused = []
    with Exploration.open(sys.argv[1], llm=SimulatedLLM(), read_only=True) as ex:
        for query in json.loads(sys.argv[2]):
            try:
                ex.sql(query)
            except InvalidInputError as exc:
                refused.append(str(exc))
        count = int(ex.sql("SELECT count(*) AS n FROM nodes")["n"].iloc[0])
    print(json.dumps({"refused": refused, "nodes": count}))
    """
)


def traced_child_command(trace: Path) -> list[str]:
    """unshare -n strace …, or a skip naming what to install (a failure under CI)."""
    missing = [tool for tool in ("strace", "unshare") if shutil.which(tool) is None]
    why = ""
    if missing:
        why = f"{' and '.join(missing)} missing: apt-get install strace util-linux"
    elif os.geteuid() != 0:
        why = "unshare -n needs root (CI runs as root)"
    if why:
        if ci_requires_extras():
            pytest.fail(f"CI requires the network trace: {why}")
        pytest.skip(why)
    return ["unshare", "-n", "strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace), sys.executable]


def test_no_query_of_ex_sql_attempts_a_connection(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    with Exploration.create("Why do rivers meander?", intensity="pulse", llm=SimulatedLLM(), path=path) as ex:
        ex.step(1)
    trace = tmp_path / "connect.trace"
    import json

    done = subprocess.run(
        [*traced_child_command(trace), "-c", CHILD, str(path), json.dumps(REMOTE_QUERIES)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["refused"]) == len(REMOTE_QUERIES)
    assert all("files, extensions" in message or "failed" in message for message in result["refused"])
    assert result["nodes"] > 1
    # Unix sockets aside (none is opened either, but libc may probe nscd), no connect() at all.
    attempts = [line for line in trace.read_text().splitlines() if "connect(" in line]
    assert [line for line in attempts if "AF_UNIX" not in line] == []


@pytest.mark.parametrize("query", REMOTE_QUERIES)
def test_a_remote_or_extension_query_is_refused_as_off(tmp_path: Path, query: str) -> None:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(), path=tmp_path / "g.duckdb") as ex:
        with pytest.raises(
            InvalidInputError, match="files, extensions, other databases and settings are off"
        ):
            ex.sql(query)
