"""The summary is the root's synthesis, everywhere a result is shown (issue 42, seed 001).

"The root node's synthesis IS the final summary": built bottom-up, never a digest a
harvest call writes over the graph. The result, ``report()``, the exported page, the
panel's Result tab and the shell's ``report`` all lead with it; the harvest's call adds
findings (each with the node it rests on) and gaps, and no summary of its own.

Covers: engine/result_of.py, engine/phases.py, llm/schemas.py.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fractal_nb import Exploration, SimulatedLLM
from fractal_nb.cli.main import main
from fractal_nb.errors import LLMOutputError
from fractal_nb.llm.protocol import Message
from fractal_nb.llm.schemas import HarvestFindings
from tests.engine.test_runs import FAST

SEED = "Why do some cities grow faster than others?"


def root_synthesis(ex: Exploration) -> str:
    """The root question's synthesis as the graph keeps it."""
    nodes = ex.nodes()
    root = nodes[(nodes.node_type == "question") & (nodes.depth == 0)].iloc[0]
    return str(ex.store.get_synthesis_inputs(ex.graph_id, root.node_id)["node"]["metadata"]["synthesis"])


def test_every_face_leads_with_the_root_synthesis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cities.duckdb"
    with Exploration.create(SEED, path=path, intensity="pulse", llm=SimulatedLLM(), clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        root = root_synthesis(ex)
        assert result.summary == root and result.synthesis_chain[0].synthesis == root
        assert result.findings and all(f["node_id"].startswith("n-") for f in result.findings)
        assert f"\n{root}\n" in ex.report().replace("\\", "")  # right after the status lines
        assert f"<p>{html.escape(root)}</p>" in result._repr_html_()
        assert html.escape(root) in ex.render_html()
        view = ex.view()
        view._show_result(ex.preview())
        assert f"<p>{html.escape(root)}</p>" in view.result.value
        view.close()
    # Read back from the file, with no model: the same summary, in Python and in the shell.
    with Exploration.open(path, read_only=True) as again:
        assert again.harvest().summary == again.preview().summary == root
    assert main(["report", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"] == root


class NoHarvest:
    """The simulator, but a harvest call it cannot answer (a model's output refused every time)."""

    model = "simulated-no-harvest"

    def __init__(self) -> None:
        self.simulated = SimulatedLLM()

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        if schema is HarvestFindings:
            raise LLMOutputError("findings: none: name what the synthesis chain found")
        return self.simulated.complete(messages, schema)


def test_a_failed_harvest_call_costs_the_findings_not_the_summary() -> None:
    """The harvest call's failure leaves the root's synthesis as the summary, and says what is missing."""
    with Exploration.create(SEED, intensity="pulse", llm=NoHarvest(), clock=FAST) as ex:
        ex.run(progress=False)
        result = ex.harvest()
        assert result.summary == root_synthesis(ex) and result.findings == []
        assert result.degraded and any("no findings were drawn" in r for r in result.degraded_reasons)
        assert any(g.startswith("harvest call failed") for g in result.gaps)


class RepeatedGaps(NoHarvest):
    """The simulator, its harvest naming each of its gaps five times (a small model did so)."""

    def complete(self, messages: list[Message], schema: type[BaseModel]) -> dict[str, Any]:
        reply = self.simulated.complete(messages, schema)
        if schema is HarvestFindings:
            reply["gaps"] = ["Whether the second line pays for itself.", "Who rides at night."] * 5
        return reply


def test_a_gap_the_harvest_names_again_and_again_is_one_gap() -> None:
    with Exploration.create(SEED, intensity="pulse", llm=RepeatedGaps(), clock=FAST) as ex:
        ex.run(progress=False)
        gaps = ex.harvest().gaps
    assert gaps.count("Whether the second line pays for itself.") == gaps.count("Who rides at night.") == 1


def test_only_the_roots_synthesis_is_asked_as_the_conclusion_and_judged_against_the_seed() -> None:
    """Through the real openai client: the marker of prompts/conclusion.txt is in the root's request alone."""
    from fractal_nb.prompts import render
    from tests.engine.test_openai_runs import role_responder
    from tests.llm.fake_openai import FakeOpenAI

    marker = render("conclusion")
    with (
        FakeOpenAI(responder=role_responder()) as server,
        Exploration.create(SEED, intensity="explore", llm=server.llm(), clock=FAST) as ex,
    ):
        assert ex.run(progress=False) == "all_complete"
        root = root_synthesis(ex)
    prompts = [
        m["content"]
        for body in server.requests
        for m in body["messages"]
        if m["role"] == "user" and "Syntheses of its sub-questions" in m["content"]
    ]
    marked = [p for p in prompts if marker in p]
    assert len(prompts) > 1 and len(marked) == 1 and f"Question: {SEED}" in marked[0]
    assert {"city", "grow"} & {w[:4] for w in root.lower().replace("cities", "city").split()}
