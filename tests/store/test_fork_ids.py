"""A fork's id rewrite (store/lineage.py moved_ids): one rule in Python for every engine.

The rule it replaces was DuckDB SQL (regexp_extract_all, then list_reduce over replace());
the Python rule must give the same text, so forks read the same on DuckDB and PostgreSQL.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from fractal_nb.store.lineage import moved_ids
from fractal_nb.vocabulary import NODE_ID_PATTERN

OLD, OTHER, KEPT = "n-00000000000000aa", "n-0123456789abcdef", "n-ffffffffffffffff"
NEW = {OLD: "n-1111111111111111", OTHER: "n-2222222222222222"}

# The rule DuckDB ran before: the ids found in the text that the map names, each replaced everywhere.
_DUCKDB_RULE = f"""
    WITH m(old, new) AS (SELECT * FROM (VALUES {", ".join("(?, ?)" for _ in NEW)}) AS pairs(old, new)),
    found AS (SELECT DISTINCT unnest(regexp_extract_all(?, '{NODE_ID_PATTERN}')) AS old),
    pairs AS (SELECT list(found.old || '|' || m.new) AS pairs FROM found JOIN m USING (old))
    SELECT coalesce(list_reduce(pairs,
        lambda acc, pair: replace(acc, split_part(pair, '|', 1), split_part(pair, '|', 2)), ?), ?)
    FROM pairs
"""


def duckdb_rule(text: str) -> str:
    params = [v for pair in NEW.items() for v in pair] + [text, text, text]
    row = duckdb.connect().execute(_DUCKDB_RULE, params).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"cites": [OLD]},
        {"convergence_with": [OLD, OTHER], "converging_nodes": [OTHER, OLD, KEPT]},
        {"text": f"see {OLD}, then {OTHER}; not {KEPT}", "nested": {"from": OLD, "list": [[OTHER]]}},
        {"glued": f"{OLD}{OTHER}x", "prefix": f"x{OLD}", "upper": OLD.upper()},
        {"saturation_reason": "pruned", "n": 3},
    ],
)
def test_the_python_rewrite_gives_what_duckdb_gave(metadata: dict[str, object]) -> None:
    text = json.dumps(metadata)
    assert moved_ids(text, NEW) == duckdb_rule(text)


def test_ids_the_map_does_not_name_are_kept() -> None:
    text = json.dumps({"cites": [KEPT, OLD]})
    assert json.loads(moved_ids(text, NEW)) == {"cites": [KEPT, NEW[OLD]]}
    assert moved_ids(text, {}) == text
