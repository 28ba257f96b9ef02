"""``Exploration.recover()``: a question the model failed on opens again, and a run finishes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fractal_nb import Exploration, SimulatedLLM, StateError


def failed_seed(ex: Exploration) -> str:
    """Seed the graph and mark one seed question failed, as a model failing on it would leave it."""
    ex.step(1)
    nodes = ex.nodes()
    seed = str(nodes.query("node_type == 'question' and depth == 1").iloc[0]["node_id"])
    ex.store.mark_error(ex.graph_id, seed, "LLMOutputError: no valid LeafAnswer in 2 attempts")
    return seed


def status(ex: Exploration, node_id: str) -> str:
    return str(ex.inspect(node_id)["node"]["status"])


def test_recover_reopens_a_failed_question_and_a_run_then_reaches_the_root() -> None:
    with Exploration.create("Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=3)) as ex:
        seed = failed_seed(ex)
        ex.run(progress=False)
        assert status(ex, seed) == "error", "a run leaves a failed question failed"
        assert ex.nodes().query("depth == 0").iloc[0]["status"] != "synthesized", "it blocks the root"
        assert ex.recover() == {"graph_id": ex.graph_id, "recovered": [seed], "count": 1}
        assert status(ex, seed) == "open"
        ex.run(progress=False)
        assert ex.nodes().query("depth == 0").iloc[0]["status"] == "synthesized"
        result = ex.harvest(finish=True)
        assert result.status == "completed" and not result.degraded
        assert "failed" not in set(ex.gaps().get("kind", []))


def test_recover_is_refused_on_a_finished_graph_and_a_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "failed.duckdb"
    with Exploration.create(
        "Why do cities grow?", intensity="pulse", llm=SimulatedLLM(seed=3), path=path
    ) as ex:
        seed = failed_seed(ex)
    with Exploration.open(path, read_only=True) as reader:
        with pytest.raises(StateError, match="read_only=True"):
            reader.recover()
    with Exploration.open(path, llm=SimulatedLLM(seed=3)) as ex:
        assert status(ex, seed) == "error", "the refusal changed nothing"
        ex.harvest(finish=True)
        events = len(ex.events())
        with pytest.raises(StateError, match="terminal"):
            ex.recover()
        assert len(ex.events()) == events
