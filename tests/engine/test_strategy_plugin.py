"""A strategy plugs in from outside the package: one module and one registry line (parts_strategy.py).

Covers: engine/seeding.py, engine/strategies/fractal.py, engine/strategies/part.py,
exploration/comparison.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fractal_nb import Exploration, InvalidInputError, SimulatedLLM, compare
from fractal_nb.engine.strategies import strategy_names, strategy_part
from tests.engine import parts_strategy
from tests.engine.test_runs import FAST

QUESTION = "Why do rivers flood and how do dams help?"


def test_a_registered_strategy_grows_its_own_seed_and_finishes_as_fractal(tmp_path: Path) -> None:
    path = tmp_path / "parts.duckdb"
    with Exploration.create(
        QUESTION, path=path, intensity="pulse", llm=SimulatedLLM(), strategy="parts", clock=FAST
    ) as ex:
        assert ex.run(progress=False) == "all_complete"
        seeds = ex.nodes().query("depth == 1 and node_type == 'question'")
        assert list(seeds.text) == ["Why do rivers flood?", "How do dams help?"]
        assert list(ex.llm_calls().role).count("seed") == 0, "its seed made no model call"
        result = ex.harvest()
        assert result.strategy == "parts" and not result.degraded, result.degraded_reasons
        assert result.synthesis_chain and result.synthesis_chain[0].depth == 0
    with Exploration.open(path, llm=SimulatedLLM()) as again:  # the file names it; the registry finds it
        assert again.harvest().strategy == "parts"


def test_the_registry_lists_it_and_refuses_a_name_it_does_not_hold() -> None:
    assert strategy_part("parts") is parts_strategy.PART
    assert strategy_names()[:4] == ("fractal", "tracks", "thinkon", "single")
    with pytest.raises(InvalidInputError, match="invalid strategy 'sideways'; valid values: fractal, parts"):
        Exploration.create(QUESTION, llm=SimulatedLLM(), strategy="sideways")


def test_compare_runs_it_beside_the_built_in_ones() -> None:
    comparison = compare(QUESTION, ["fractal", "parts"], llm=SimulatedLLM())
    assert list(comparison.frame.strategy) == ["fractal", "parts"]
    assert comparison.results["parts"].strategy == "parts" and comparison.results["parts"].findings
    with pytest.raises(InvalidInputError, match="invalid strategy 'sideways'"):
        compare(QUESTION, ["fractal", "sideways"], llm=SimulatedLLM())
