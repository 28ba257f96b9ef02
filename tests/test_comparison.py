"""``compare()``: one question, each strategy, side by side (docs/architecture/facade.md, "Comparing
strategies").
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from pydantic import BaseModel

from fractal_nb import Comparison, Exploration, GraphStore, SimulatedLLM, Table, compare
from fractal_nb.errors import InvalidInputError
from fractal_nb.exploration.comparison import COLUMNS, DEFAULT_MAX_TOKENS, STRATEGIES
from fractal_nb.llm.protocol import Message, estimate_tokens, messages_tokens, report_usage
from fractal_nb.llm.schemas import SCHEMAS, Eval, Think
from fractal_nb.vocabulary import Intensity
from tests.engine.test_openai_runs import first_user, schema_name
from tests.llm.fake_openai import FakeOpenAI

QUESTION = "Should a mid-sized city build a tram line?"
NOTES = """# Tram lines in mid-sized cities
A tram line costs about 30 million euros per kilometre to build.
Ridership decides whether a tram line pays off within thirty years.
Cities that built tram lines saw property values rise along the route.
Construction closes streets for two years and hurts small shops.
"""


def ledger(path: Path, graph_id: str) -> Any:
    with Exploration.open(path, graph_id, read_only=True) as ex:
        return ex.llm_calls()


def test_each_strategy_runs_once_and_its_row_reads_its_graph(tmp_path: Path) -> None:
    path = tmp_path / "compare.duckdb"
    found = compare(QUESTION, llm=SimulatedLLM(), judge=SimulatedLLM(seed=1), path=path)
    frame = found.frame
    assert list(frame.columns) == list(COLUMNS) and list(frame.strategy) == list(STRATEGIES)
    by = frame.set_index("strategy")
    assert by.loc["single", "calls"] == 1 and by.loc["single", "nodes"] == 2, "one call: the baseline"
    assert (by.calls[["fractal", "thinkon", "tracks"]] > 1).all()
    assert set(found.results) == set(STRATEGIES) and all(
        r.status == "completed" for r in found.results.values()
    )
    assert by.coverage.between(1, 5).all() and by.support.between(1, 5).all()
    for row in frame.itertuples():
        calls = ledger(path, row.graph_id)
        judged = calls[calls.role == "judge"]
        assert len(judged) == 1, "the judge's call is on the graph's ledger"
        assert row.calls == len(calls[(calls.role != "judge") & ~calls.role.str.startswith("tool:")])
        assert row.tokens == int((calls.prompt_tokens + calls.completion_tokens)[calls.role != "judge"].sum())
        assert row.findings == len(found.results[row.strategy].findings)
    assert found.results["thinkon"].strategy == "thinkon" and found.results["single"].strategy == "single"
    page = found._repr_html_()
    assert "<table" in page and "thinkon" in page


def test_bad_arguments_are_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "never.duckdb"
    for kwargs, match in [
        ({"strategies": ["fractal", "pondering"]}, "strategy"),
        ({"strategies": ["fractal", "fractal"]}, "at most once"),
        ({"strategies": []}, "non-empty"),
        ({"strategies": "fractal"}, "non-empty list"),
        ({"cache": "record"}, "pass path"),
        ({"cache": "sometimes", "path": path}, "cache must be"),
        ({"llm": None}, "llm is needed"),
        ({"judge": "gpt"}, "complete"),
        ({"intensity": "huge"}, "intensity"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": "lots"}, "max_tokens"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            compare(QUESTION, **{"llm": SimulatedLLM(), **kwargs})
    with pytest.raises(InvalidInputError, match="question"):
        compare("   ", llm=SimulatedLLM())
    assert not path.exists(), "nothing was created"


def test_a_recorded_comparison_replays_offline(tmp_path: Path) -> None:
    path = tmp_path / "recorded.duckdb"
    recorded = compare(
        QUESTION, llm=SimulatedLLM(seed=3), path=path, cache="record", judge=SimulatedLLM(seed=1)
    )
    recorded_bytes = path.read_bytes()
    again = compare(QUESTION, llm=None, path=path, cache="replay", judge=None)
    assert again.replayed and not recorded.replayed
    # Every column but the new graphs' ids, the spend and time of runs that paid no model, and the judge's.
    keep = [c for c in COLUMNS if c not in ("graph_id", "tokens", "cost", "wall_s", "coverage", "support")]
    assert again.frame[keep].equals(recorded.frame[keep]), "the same runs, from the file's cache"
    for name in STRATEGIES:
        assert again.results[name].summary == recorded.results[name].summary
        assert [f["finding"] for f in again.results[name].findings] == [
            f["finding"] for f in recorded.results[name].findings
        ]
    # A replay reads the file and writes nothing (issue 38: each added four graphs): called again, the
    # same rows, and the file holds the recorded graphs alone, byte for byte as the recording left it.
    once_more = compare(QUESTION, llm=None, path=path, cache="replay", judge=None)
    same = [c for c in COLUMNS if c not in ("graph_id", "wall_s")]
    assert once_more.frame[same].equals(again.frame[same])
    assert Exploration.graphs(path, read_only=True)["graph_id"].tolist() == recorded.frame.graph_id.tolist()
    assert path.read_bytes() == recorded_bytes
    assert "no model was called" in again._repr_html_()
    # Nothing recorded, nothing to replay: refused, and no file is made.
    missing = tmp_path / "never-recorded.duckdb"
    with pytest.raises(InvalidInputError, match="cache='replay' answers from the completions recorded in"):
        compare(QUESTION, llm=None, path=missing, cache="replay")
    assert not missing.exists()


def test_a_replay_reads_a_table_source_from_the_file(tmp_path: Path) -> None:
    """The replay's runs are in memory, where the file's table is not: it is read from the file."""
    path = tmp_path / "tables.duckdb"
    GraphStore(path).close()
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE notes (line VARCHAR)")
        con.executemany("INSERT INTO notes VALUES (?)", [[line] for line in NOTES.splitlines()[1:]])
    recorded = compare(
        QUESTION,
        ["single", "tracks"],
        llm=SimulatedLLM(),
        path=path,
        cache="record",
        sources=[Table("notes")],
    )
    recorded_bytes = path.read_bytes()
    again = compare(
        QUESTION, ["single", "tracks"], llm=None, path=path, cache="replay", sources=[Table("notes")]
    )
    keep = ["strategy", "status", "degraded", "stopped", "calls", "nodes", "findings", "supported_findings"]
    assert again.frame[keep].equals(recorded.frame[keep])
    assert again.frame.set_index("strategy").loc["single", "supported_findings"] >= 1, "cites the table"
    assert path.read_bytes() == recorded_bytes


def test_with_sources_findings_rest_on_verified_lines(tmp_path: Path) -> None:
    notes = tmp_path / "trams.md"
    notes.write_text(NOTES, encoding="utf-8")
    found = compare(QUESTION, ["single", "tracks"], llm=SimulatedLLM(), sources=notes)
    by = found.frame.set_index("strategy")
    assert by.loc["single", "supported_findings"] >= 1 and by.loc["tracks", "supported_findings"] >= 1
    assert all(f["citations"] for f in found.results["single"].findings if f["support"] == "supported")


def test_the_plot_draws_a_panel_per_measure_and_says_how_to_install_matplotlib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = compare(QUESTION, ["single", "thinkon"], llm=SimulatedLLM(), judge=SimulatedLLM())
    figure = found.plot()
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == [
        "model calls",
        "tokens",
        "wall time (s)",
        "findings (supported darker)",
        "gaps",
        "judge: coverage / support (1-5)",
    ]
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["single", "thinkon"]
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(InvalidInputError, match=r"fractal-nb\[notebook\]"):
        found.plot()
    assert isinstance(found, Comparison)


def every_role(body: dict[str, Any]) -> dict[str, Any]:
    """A fake server's model: the simulator's reply to the prompt it is sent, for any schema."""
    schema = next(s for s in SCHEMAS if s.__name__ == schema_name(body))
    return SimulatedLLM(seed=2).complete([{"role": "user", "content": first_user(body)}], schema)


def test_a_comparison_through_a_local_openai_compatible_server() -> None:
    with FakeOpenAI("llama_cpp", responder=every_role) as server:
        found = compare(
            QUESTION, llm=server.llm(timeout=5.0, max_retries=1), judge=server.llm(timeout=5.0, max_retries=0)
        )
    by = found.frame.set_index("strategy")
    # Only the tracks run is degraded: without sources its findings are uncited (seed 003).
    assert (by.status == "completed").all() and list(by.index[by.degraded]) == ["tracks"]
    assert by.loc["single", "calls"] == 1 and by.coverage.notna().all()
    asked = {schema_name(r) for r in server.requests}
    assert {"SingleAnswer", "Think", "Eval", "Judgement", "SeedPlan", "TrackPlan"} <= asked


class NeverReturns(SimulatedLLM):
    """A chain's model that never returns: each Think plans, each Eval calls one more new sub-goal."""

    WORDS = (
        "river budget tram ridership property shops streets council voters bonds traffic rails depot".split()
    )

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        if schema is Think:
            return self._report(messages, {"type": "TODO", "description": "Work through each part in turn."})
        if schema is Eval:
            words = random.Random(len(str(messages))).sample(self.WORDS, 6)
            return self._report(messages, {"type": "CALL", "description": " ".join(words).capitalize() + "."})
        return super().complete(messages, schema)

    def _report(self, messages: list[Message], reply: dict[str, Any]) -> dict[str, Any]:
        report_usage(messages_tokens(messages), estimate_tokens(json.dumps(reply)))
        return reply


def test_each_strategy_runs_under_a_default_budget_and_its_row_says_where_it_stopped() -> None:
    # Issue 37: a chain whose model never returned spent 500 calls and 1.7M tokens of a pulse comparison.
    found = compare(QUESTION, ["fractal", "thinkon"], llm=NeverReturns(seed=2))
    by = found.frame.set_index("strategy")
    default = DEFAULT_MAX_TOKENS[Intensity.PULSE]
    assert (by.budget == default).all()
    assert pd.isna(by.loc["fractal", "stopped"]) and by.loc["fractal", "status"] == "completed"
    assert by.loc["thinkon", "tokens"] >= default and by.loc["thinkon", "calls"] < 200
    assert by.loc["thinkon", "stopped"] == (
        f"budget_exhausted: token budget of {default:,} reached ({by.loc['thinkon', 'tokens']:,} spent)"
    )
    assert found.stopped_at_budget() == ["thinkon"] and found.results["thinkon"].degraded
    assert "Stopped at the token budget:</b> thinkon" in found._repr_html_()


def test_the_caller_raises_the_budget_or_lifts_it() -> None:
    raised = compare(QUESTION, ["single", "thinkon"], llm=NeverReturns(seed=2), max_tokens=150_000)
    by = raised.frame.set_index("strategy")
    assert (by.budget == 150_000).all() and by.loc["thinkon", "tokens"] >= 150_000
    assert raised.stopped_at_budget() == ["thinkon"]
    lifted = compare(QUESTION, ["single"], llm=SimulatedLLM(), max_tokens=None)
    assert lifted.frame.budget.isna().all() and not lifted.stopped_at_budget()
    deep = compare(QUESTION, ["single"], llm=SimulatedLLM(), intensity="deep")
    assert deep.frame.budget.tolist() == [DEFAULT_MAX_TOKENS[Intensity.DEEP]]
