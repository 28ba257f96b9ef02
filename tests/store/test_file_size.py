"""The file on disk (issue 42): a small graph takes a small file, and older files open as they were.

DuckDB gives each table at least one block; at its default 256 KiB blocks an
eight-node pulse graph took 3.8 MB. New files are made with 16 KiB blocks
(docs/store.md, "The file on disk"); a file keeps the block size it was made with.

Covers: store/duckdb_file.py.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.store.duckdb_file import FILE_BLOCK_SIZE

SMALL_GRAPH_MOST_BYTES = 600 * 1024  # measured: 300 KiB for the pulse below (3.8 MB with 256 KiB blocks)


def block_size(path: Path) -> int:
    with duckdb.connect(str(path), read_only=True) as db:
        (row,) = db.sql("SELECT block_size FROM pragma_database_size()").fetchall()
    return int(row[0])


def explored(path: Path) -> int:
    with Exploration.create("Why?", intensity="pulse", llm=SimulatedLLM(seed=1), path=path) as ex:
        ex.run(1, progress=False)
        ex.harvest()
        return len(ex.nodes())


def test_a_small_graph_takes_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "small.duckdb"
    assert explored(path) >= 8
    assert block_size(path) == FILE_BLOCK_SIZE
    assert path.stat().st_size <= SMALL_GRAPH_MOST_BYTES, path.stat().st_size


def test_a_file_made_with_duckdbs_default_blocks_keeps_them_and_works(tmp_path: Path) -> None:
    path = tmp_path / "older.duckdb"
    duckdb.connect(str(path), config={"default_block_size": "262144"}).close()  # as files were made before
    assert explored(path) >= 8
    assert block_size(path) == 262144
    with Exploration.open(path, llm=SimulatedLLM(), read_only=True) as ex:
        assert ex.status == "completed"
